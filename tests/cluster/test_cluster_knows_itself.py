"""A Cluster knows itself (issue 44 item 2): its Kubernetes version, its feature gates and whether its backend
can run here, asked through the Cluster API on every backend; `explain`, the course's environment check and the
experiments use these instead of probing a backend's internals."""

from __future__ import annotations

import pytest

from labkit.api.features import DEFAULT_VERSION, SUPPORTED_VERSIONS, resolve_gates
from labkit.cluster import NotFound, connect
from labkit.cluster.backends import backend_class
from labkit.cluster.backends.kubeconfig import KubeconfigCluster
from labkit.cluster.base import server_minor
from labkit.course import backend_table


def test_a_sim_cluster_says_its_version_and_gates_from_its_profile():
    with connect("sim", "workshop", progress=False) as c:
        assert c.kubernetes_version == c.profile.kubernetes_version == DEFAULT_VERSION
        assert c.feature_gates() == resolve_gates(DEFAULT_VERSION)[0]
    prof = {"name": "old", "kubernetesVersion": "1.35", "featureGates": {"DRAConsumableCapacity": True},
            "nodes": [{"name": "n", "nodeProfile": "t4-inference"}]}
    with connect("sim", prof, progress=False) as c:
        assert c.kubernetes_version == "1.35"
        gates = c.feature_gates()
        assert gates["DRAConsumableCapacity"] is True and gates == resolve_gates("1.35", {"DRAConsumableCapacity": True})[0]


@pytest.mark.parametrize("git, emulated, minor", [("v1.36.4-gke.100", None, "1.36"), ("v1.37.1", "1.36", "1.36"),
                                                  ("v1.33.5", None, "1.33"), ("v1.38.0-beta.0", None, "1.38")])
def test_an_attached_server_says_the_minor_it_runs_or_emulates(git, emulated, minor):
    c = KubeconfigCluster()
    c.server_version, c.emulated_version = git, emulated
    assert c.kubernetes_version == minor


def test_server_minor_reads_the_gitversions_clouds_report():
    assert [server_minor(v) for v in ("v1.37.1-gke.100", "v1.36.0+k3s1", "1.38", "v1.34.13-eks-a1b2")] == \
        ["1.37", "1.36", "1.38", "1.34"]


def test_every_backend_answers_whether_it_can_run_here():
    ok, why = backend_class("sim").available()
    assert ok and why == "embedded in Python: nothing to install"
    for name in ("local", "kind"):
        ok, why = backend_class(name).available(SUPPORTED_VERSIONS[-1])
        assert isinstance(ok, bool) and why.strip() and "\n" not in why.strip()


def test_local_says_which_binaries_are_missing(tmp_path, monkeypatch):
    monkeypatch.setenv("LABKIT_CACHE", str(tmp_path))
    monkeypatch.delenv("LABKIT_CONTROLPLANE_BIN", raising=False)
    ok, why = backend_class("local").available("1.36")
    assert not ok and why.startswith(f"no control-plane binaries for 1.36 in {tmp_path / 'controlplane' / '1.36'} (")


def test_the_course_environment_table_asks_the_backends():
    rows = {name: (runs, why) for name, runs, why in backend_table()}
    assert rows["sim"] == ("yes", "embedded in Python: nothing to install")
    for name in ("local", "kind"):
        ok, why = backend_class(name).available(DEFAULT_VERSION)
        assert rows[name] == ("yes" if ok else "no", why)


def test_find_is_get_or_none():
    with connect("sim", "tiny", progress=False) as c:
        node = c.list("Node")[0]["metadata"]["name"]
        assert c.find("Node", node, None)["metadata"]["name"] == node
        assert c.find("Pod", "no-such-pod") is None
        with pytest.raises(NotFound):
            c.get("Pod", "no-such-pod")
