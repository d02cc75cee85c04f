"""Tests of one area: fake_gpus: the catalog, slices, the kubelet plugin, deploy manifests and the Helm chart."""
