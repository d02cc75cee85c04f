"""Tests of one area: labkit.model: cluster profiles and the clusters/ folder."""
