"""Tests of one area: the repository itself: wheel, environment file, workflows, pre-commit, layers, types, make check."""
