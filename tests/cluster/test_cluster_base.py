"""The Cluster interface, backend registry and placement table."""

from __future__ import annotations

import pytest

from labkit.cluster import backends as base  # the registry (its _BACKENDS)
from labkit.cluster.backends import backend_class, connect, register_backend
from labkit.cluster.base import Cluster, ClusterError
from labkit.cluster.placements import Placement, PlacementTable, build_placements


class _Dummy(Cluster):
    backend = "dummy"

    def up(self, profile="workshop"):
        self.profile = profile
        self.downs = 0
        return self

    def down(self):
        self.downs += 1

    def apply(self, source):
        return []

    def delete(self, kind, name, namespace="default"):
        pass

    def get(self, kind, name, namespace="default"):
        return {}

    def list(self, kind, namespace=None):
        return []

    def wait(self, until=None, timeout=60.0):
        return True

    def events(self):
        return []

    def placements(self):
        return PlacementTable()

    def explain(self, pod, namespace="default"):
        return ""

    def pod_env(self, pod, namespace="default"):
        return {}


def test_register_and_connect_calls_up():
    register_backend("dummy", _Dummy)
    try:
        with connect("dummy", profile="tiny") as c:
            assert isinstance(c, _Dummy)
            assert c.profile == "tiny"
        assert c.downs == 1
    finally:
        base._BACKENDS.pop("dummy", None)


def test_unknown_backend_is_one_line_error():
    with pytest.raises(ClusterError, match="backend 'nope' is not available.*choose one of"):
        backend_class("nope")


def test_register_rejects_non_cluster():
    with pytest.raises(TypeError):
        register_backend("bad", dict)  # type: ignore[arg-type]


def _pod(name, uid, node):
    return {"metadata": {"name": name, "namespace": "default", "uid": uid}, "spec": {"nodeName": node}}


def test_build_placements_rows_text_html():
    slices = [
        {
            "spec": {
                "driver": "gpu.nvidia.com",
                "pool": {"name": "n1"},
                "devices": [{"name": "gpu-0-mig-1", "attributes": {"profile": {"string": "1g.10gb"}}}],
            }
        }
    ]
    claim = {
        "metadata": {"name": "c1", "namespace": "default"},
        "status": {
            "allocation": {
                "devices": {
                    "results": [
                        {"request": "mig", "driver": "gpu.nvidia.com", "pool": "n1", "device": "gpu-0-mig-1"}
                    ]
                }
            },
            "reservedFor": [{"resource": "pods", "name": "p1", "uid": "u1"}, {"resource": "pods", "name": "p0", "uid": "u0"}],
        },
    }
    table = build_placements([_pod("p1", "u1", "n1"), _pod("p0", "u0", "n1")], [claim], slices)
    assert [r["pod"] for r in table.rows] == ["p0", "p1"]
    assert table[0] == Placement("p0", "default", "c1", "mig", "n1", "gpu.nvidia.com", "n1", "gpu-0-mig-1", "1g.10gb")
    text = str(table)
    assert text.splitlines()[0].startswith("POD")
    assert "1g.10gb" in text
    assert "<td>gpu-0-mig-1</td>" in table._repr_html_()


def test_unreserved_claim_gives_no_rows():
    claim = {"metadata": {"name": "c"}, "status": {"allocation": {"devices": {"results": [{"device": "d"}]}}}}
    assert len(build_placements([_pod("p", "u", "n")], [claim])) == 0
    assert str(PlacementTable()) == "(no placements)"


def test_unknown_connect_options_are_refused_with_the_fix():
    with pytest.raises(ClusterError, match="no option 'kubernetes_version'.*belong to the cluster profile"):
        connect("sim", "workshop", kubernetes_version="1.34")
