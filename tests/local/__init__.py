"""Tests of one area: the tests on the real control plane (kube-apiserver, kube-scheduler ...): marker `local`."""
