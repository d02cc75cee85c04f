"""Tests of one area: the command line as typed: exit codes, startup, terminals, bad input."""
