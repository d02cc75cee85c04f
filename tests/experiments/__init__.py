"""Tests of one area: labkit.experiments: traces, policies, metrics, inflation, sweeps, cross-checks."""
