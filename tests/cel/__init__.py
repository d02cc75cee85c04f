"""Tests of one area: labkit.cel: the CEL engines, cost, formats, messages, `labkit cel`, the conformance table."""
