"""Issue 14 against a real API server: attach to a `local` cluster through the kubeconfig it writes,
snapshot it, ask the what-if sim about new pods, then apply the same pods to the real cluster: the
sim's answer (node, devices, or Pending and why) must equal what kube-scheduler did.

    LABKIT_WHATIF_EXAMPLES=30 pytest -m local tests/local/test_cluster_attach_local.py

The agreement count is printed and written to test-artifacts/whatif-vs-local.json; a disagreement
leaves its dump and scenario in test-artifacts/whatif-vs-local/.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from labkit.api.load import read_documents
from labkit.cli import main
from labkit.cluster import ClusterError, NotFound, connect
from labkit.cluster.report import normalize_report, simulate_report
from tests.paths import REPO
from tests.scenario_gen import Scenario, claims_caught_up, generate, pod_settled

pytestmark = [pytest.mark.local, pytest.mark.slow]

N = int(os.environ.get("LABKIT_WHATIF_EXAMPLES", "12"))
ARTIFACTS = REPO / "test-artifacts"


@pytest.fixture(scope="module")
def local(local_workshop):
    """The local lane's workshop cluster (tests/conftest.py)."""
    return local_workshop


@pytest.fixture(scope="module")
def live(local):
    c = connect("kubeconfig", kubeconfig=local.kubeconfig)
    yield c
    c.down()


def _apply_settled(cluster: Any, sc: Scenario, real: bool) -> None:
    if sc.setup:
        cluster.apply(sc.setup)
    for pod in sc.pods:
        cluster.apply(pod)
        name = pod["metadata"]["name"]
        if real:
            assert cluster.wait(until=lambda c, n=name: pod_settled(c.get("Pod", n)), timeout=90), name
        else:
            cluster.wait()
    if real:
        assert cluster.wait(until=claims_caught_up, timeout=120), "claims did not catch up with the pods"


def _cleanup(cluster: Any) -> None:
    for kind in ("Pod", "ResourceClaim", "ResourceClaimTemplate"):
        for obj in reversed(cluster.list(kind)):
            with contextlib.suppress(NotFound):
                cluster.delete(kind, obj["metadata"]["name"], obj["metadata"]["namespace"])
    assert cluster.wait(until=lambda c: not c.list("ResourceClaim") and not c.list("Pod"), timeout=120)


def test_attach_reads_the_local_cluster(local, live):
    assert live.server_version.startswith("v1.37")
    assert [n.name for n in live.profile.nodes] == [n.name for n in local.profile.nodes]
    assert {s["spec"]["pool"]["name"] for s in live.list("ResourceSlice")} == {"dgx-a100-0", "t4-0", "t4-1"}
    assert [c["metadata"]["name"] for c in live.list("DeviceClass")] == [
        c["metadata"]["name"] for c in local.list("DeviceClass")]
    assert live.get("Node", "t4-0")["metadata"]["name"] == "t4-0"
    with pytest.raises(NotFound, match='Pod "nope" not found in namespace default'):
        live.get("Pod", "nope")
    with pytest.raises(ClusterError, match="apply refused: the kubeconfig cluster .* is attached read-only; "
                                           r"connect\('kubeconfig', ..., read_only=False\)"):
        live.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x"}})
    with pytest.raises(ClusterError, match="delete refused"):
        live.delete("Node", "t4-0")
    assert local.get("Node", "t4-0")  # nothing was deleted


def test_whatif_agrees_with_the_real_scheduler(local, live, tmp_path):
    """Generated scenarios: state = scenario 2i placed on the real cluster, what-if = scenario 2i+1."""
    agree, total, failures, pending_checked = 0, 0, [], 0
    for i in range(N):
        state_sc, new_sc = generate(100 + 2 * i, "workshop"), generate(101 + 2 * i, "workshop")
        _apply_settled(local, state_sc, real=True)
        dump = tmp_path / f"dump-{i}.yaml"
        assert main(["snapshot", "--kubeconfig", str(local.kubeconfig), "-o", str(dump)]) == 0
        whatif = connect("sim", state=dump, progress=False)
        _apply_settled(whatif, new_sc, real=False)
        predicted = normalize_report(simulate_report(whatif))
        _apply_settled(local, new_sc, real=True)
        real = normalize_report(simulate_report(local))
        total += 1
        if predicted == real:
            agree += 1
        else:
            out = ARTIFACTS / "whatif-vs-local"
            out.mkdir(parents=True, exist_ok=True)
            (out / f"{i}-dump.yaml").write_text(dump.read_text())
            (out / f"{i}-new.yaml").write_text(new_sc.to_yaml())
            failures.append(f"scenario {i}: state seed {state_sc.seed}, new seed {new_sc.seed}: see {out}")
        # explain on a real Pending pod names the same cause as the what-if sim
        for p in new_sc.pods:
            name = p["metadata"]["name"]
            real_pod = local.get("Pod", name)
            if real_pod["spec"].get("nodeName"):
                continue
            sim_text = whatif.explain(name)
            live_text = live.explain(name)
            cond = next(c for c in real_pod["status"]["conditions"] if c["type"] == "PodScheduled")
            assert live_text.splitlines()[0] == sim_text.splitlines()[0], (live_text, sim_text)
            # the same cause, word for word: kube-scheduler's FitError message
            assert sim_text.splitlines()[0] == f"Pod default/{name} is Pending: {cond['message']}", (sim_text, cond)
            assert f"  kube-scheduler says: Unschedulable: {cond['message']}" in live_text
            pending_checked += 1
        _cleanup(local)
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / "whatif-vs-local.json").write_text(json.dumps(
        {"agree": agree, "scenarios": total, "pendingExplained": pending_checked}, indent=1))
    print(f"what-if vs kube-scheduler: {agree}/{total} scenarios agree; {pending_checked} Pending pods explained alike")
    assert not failures, "\n".join(failures)
    assert total == N and pending_checked > 0


def test_explain_and_snapshot_cli(local, tmp_path, capsys):
    sc = generate(7, "workshop")
    _apply_settled(local, sc, real=True)
    try:
        pending = [p["metadata"]["name"] for p in local.list("Pod") if not p["spec"].get("nodeName")]
        running = [p["metadata"]["name"] for p in local.list("Pod") if p["spec"].get("nodeName")]
        assert main(["explain", "pod", f"default/{running[0]}", "--kubeconfig", str(local.kubeconfig)]) == 0
        out = capsys.readouterr().out
        assert out.startswith(f"Pod default/{running[0]} is Running on node ")
        if pending:
            assert main(["explain", "pod", pending[0], "--kubeconfig", str(local.kubeconfig)]) == 0
            out = capsys.readouterr().out
            assert out.startswith(f"Pod default/{pending[0]} is Pending: ") and "kube-scheduler says" in out
            # describe: the same explanation, plus the real scheduler's condition and events
            assert main(["describe", "pod", pending[0], "--kubeconfig", str(local.kubeconfig)]) == 0
            out = capsys.readouterr().out
            assert out.startswith(f"Name:         {pending[0]}\nNamespace:    default\nNode:         <none>\n")
            assert "PodScheduled  False" in out and "kube-scheduler says" in out
            assert re.search(r"\nEvents:\n.*\n  Warning +FailedScheduling +(x\d+ +)?default-scheduler", out), out
        assert main(["describe", "pod", running[0], "--kubeconfig", str(local.kubeconfig)]) == 0
        out = capsys.readouterr().out
        node = local.get("Pod", running[0])["spec"]["nodeName"]
        assert out.startswith(f"Name:         {running[0]}\nNamespace:    default\nNode:         {node}\n")
        dump = tmp_path / "d.yaml"
        assert main(["snapshot", "--kubeconfig", str(local.kubeconfig), "-o", str(dump)]) == 0
        docs = [d for d in read_documents(dump) if d is not None]  # read as Kubernetes reads YAML
        assert all(d["apiVersion"] and d["kind"] for d in docs)
        assert {d["kind"] for d in docs} >= {"Namespace", "Node", "DeviceClass", "ResourceSlice", "Pod",
                                            "ResourceClaim", "ResourceClaimTemplate"}
        assert not any("managedFields" in d["metadata"] for d in docs)
        # what `kubectl get pods -A -o yaml` returns, item by item (the API server's own JSON)
        raw = local.kube.request("GET", "/api/v1/pods")["items"]
        assert [d for d in docs if d["kind"] == "Pod"] == [
            {"apiVersion": "v1", "kind": "Pod", **{k: v for k, v in p.items() if k not in ("apiVersion", "kind")},
             "metadata": {k: v for k, v in p["metadata"].items() if k != "managedFields"}}
            for p in sorted(raw, key=lambda p: (p["metadata"]["namespace"], p["metadata"]["name"]))]
    finally:
        _cleanup(local)


def test_rbac_that_forbids_listing_slices_is_one_line(local, tmp_path, capsys):
    """A ServiceAccount that may read everything but ResourceSlices."""
    local.apply([
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "no-slices", "namespace": "default"}},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "no-slices"},
         "rules": [{"apiGroups": [""], "resources": ["nodes", "pods", "namespaces", "events"], "verbs": ["get", "list"]},
                   {"apiGroups": ["resource.k8s.io"], "verbs": ["get", "list"],
                    "resources": ["deviceclasses", "resourceclaims", "resourceclaimtemplates", "devicetaintrules"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "no-slices"},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "no-slices"},
         "subjects": [{"kind": "ServiceAccount", "name": "no-slices", "namespace": "default"}]},
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "plain", "namespace": "default"},
         "spec": {"containers": [{"name": "c", "image": "busybox"}]}},
    ])
    token = local.kube.request("POST", "/api/v1/namespaces/default/serviceaccounts/no-slices/token", body={
        "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": 3600}},
    )["status"]["token"]
    kc = yaml.safe_load(Path(local.kubeconfig).read_text())
    for u in kc["users"]:
        u["user"] = {"token": token}
    path = tmp_path / "no-slices.kubeconfig"
    path.write_text(yaml.safe_dump(kc))
    restricted = connect("kubeconfig", kubeconfig=path)  # attaching works: nodes may be listed
    assert restricted.list("Node")
    for argv in (["snapshot", "--kubeconfig", str(path), "-o", str(tmp_path / "d.yaml")],
                 ["explain", "pod", "default/plain", "--kubeconfig", str(path)]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "Traceback" not in err, err
        assert "list resourceslices.resource.k8s.io: forbidden by RBAC" in err, err
        assert 'cannot list resource "resourceslices"' in err and "ask for a (Cluster)Role" in err
    assert not (tmp_path / "d.yaml").exists()
    restricted.down()
    _cleanup(local)


def test_an_emulating_server_picks_the_older_allocator_profile():
    """kube-apiserver --emulated-version=kube=1.36 (a 1.36 profile on the 1.37 binaries): attach sees
    emulationMinor in /version and explains with the 1.36 rules."""
    import dataclasses

    from labkit.cluster.explain_live import restored_sim
    from labkit.model.profiles import load_profile

    old = connect("local", dataclasses.replace(load_profile("tiny"), kubernetes_version="1.36"), progress=False,
                  build=False)
    try:
        live = connect("kubeconfig", kubeconfig=old.kubeconfig)
        assert live.server_version.startswith("v1.37") and live.emulated_version == "1.36"
        assert live.profile.kubernetes_version == "1.36"
        assert "(emulating 1.36)" in live.status()
        assert restored_sim(live).dra.kubernetes_version == "1.36"
        live.down()
    finally:
        old.down()


def test_kind_backend_reads_through_one_api_connection(local, tmp_path):
    """The kind backend's reads and deletes go over a kept-alive connection to the API server named
    in its kubeconfig (here the local control plane's): the same objects and errors kubectl gave,
    one connection for many calls, and a new one when the kubeconfig file changes."""
    import shutil

    from labkit.cluster.backends.kind.backend import KindCluster

    kind = KindCluster(state_dir=tmp_path, progress=False)
    shutil.copy(local.kubeconfig, kind.kubeconfig)
    local.apply({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "lk-api-read", "namespace": "default"}})
    names = [n["metadata"]["name"] for n in kind.list("nodes")]
    assert names == sorted(n["metadata"]["name"] for n in local.list("Node")) and names
    assert {s["kind"] for s in kind.list("ResourceSlice")} == {"ResourceSlice"}
    first = kind._api()
    assert kind.get("Node", names[0])["metadata"]["name"] == names[0]
    assert kind._api() is first  # the same connection for every call
    with pytest.raises(NotFound, match="Pod default/no-such-pod not found"):
        kind.get("Pod", "no-such-pod")
    assert kind.list("NoSuchKind") == []  # a kind the server does not serve: nothing of it exists
    kind.delete("configmap", "lk-api-read")
    assert local.wait(until=lambda c: not any(o["metadata"]["name"] == "lk-api-read" for o in c.list("ConfigMap")),
                      timeout=30)
    with pytest.raises(NotFound):
        kind.delete("ConfigMap", "lk-api-read")
    kind.kubeconfig.write_text(kind.kubeconfig.read_text())  # rewritten (an attach does that): reconnect
    os.utime(kind.kubeconfig, ns=(time.time_ns(), time.time_ns() + 1_000_000))
    assert kind.list("Node") and kind._api() is not first
    kind._close_api()
