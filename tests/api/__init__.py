"""Tests of one area: labkit.api: objects, loading, defaults, validation as kube-apiserver does it, `labkit validate`."""
