"""Tests of one area: labkit.cluster: the Cluster interface, backends tested without a real cluster (sim, kind configs, local units), kubeconfig, what-if."""
