"""The sim's API checks see stored Namespaces: admin access needs the namespace label, as on a real API server."""

from __future__ import annotations

import pytest

from labkit.cel.validation import validate
from labkit.cluster import ClusterError, connect

CLAIM = """apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: monitor, namespace: NS}
spec:
  devices:
    requests:
    - name: all
      exactly: {deviceClassName: gpu.nvidia.com, allocationMode: All, adminAccess: true}
"""


def test_admin_access_needs_the_namespace_label():
    c = connect("sim", "tiny", progress=False)
    with pytest.raises(ClusterError, match="admin-access: true` label on the containing namespace"):
        c.apply(CLAIM.replace("NS", "default"))
    c.apply({"apiVersion": "v1", "kind": "Namespace",
             "metadata": {"name": "monitoring", "labels": {"resource.kubernetes.io/admin-access": "true"}}})
    stored = c.apply(CLAIM.replace("NS", "monitoring"))
    assert stored[0]["metadata"]["namespace"] == "monitoring"


def test_existing_objects_are_context_not_validated():
    bad_existing = {"apiVersion": "v1", "kind": "Namespace",
                    "metadata": {"name": "ops", "labels": {"resource.kubernetes.io/admin-access": "true"}},
                    "spec": {"nonsense": 1}}
    import yaml

    claim = yaml.safe_load(CLAIM.replace("NS", "ops"))
    assert validate([claim], existing=[bad_existing]) == []
    assert validate([claim]) == [], "without the Namespace in view the label cannot be checked"
