"""Tests of one area: issue 41: inputs, files, processes, credentials, terminals, fuzzing."""
