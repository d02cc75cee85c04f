"""What-if from a dump (`connect("sim", state=...)`, `labkit simulate --state`), the kubeconfig
backend's bad-input lines, and dumps that cannot be used. No control plane needed here; the proof
against a real API server is tests/local/test_cluster_attach_local.py."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
import yaml

from labkit.api import dump
from labkit.cli import main
from labkit.cluster import ClusterError, connect
from labkit.cluster.backends.kubeconfig import KubeconfigCluster
from labkit.cluster.explain_live import explain_pod
from labkit.cluster.report import simulate_report
from labkit.cluster.snapshot import cluster_state
from tests.scenario_gen import generate


class Attached(KubeconfigCluster):
    """What the kubeconfig backend exposes once attached (the server's /version), over another cluster's
    objects (`source`, or a fixed list `objs`); its /metrics unreadable (no feature gates known)."""

    def __init__(self, server_version: str, source=None, objs=None, emulated_version=None):
        super().__init__()
        self.server_version, self.emulated_version = server_version, emulated_version
        self._source, self._objs = source, objs

    def get(self, kind, name, namespace="default"):
        return self._source.get(kind, name, namespace)

    def list(self, kind, namespace=None):
        return [o for o in self._objs if o["kind"] == kind] if self._objs is not None else self._source.list(kind)

    def events(self):
        return self._source.events()

    def feature_gates(self):
        return {}



def _no_events(report: dict) -> dict:
    """A report without pod events: a dump carries no Events (they are not DRA state), so a
    restored cluster starts with none."""
    return {**report, "pods": [{k: v for k, v in p.items() if k != "events"} for p in report["pods"]]}


def _fill(cluster, seed: int) -> None:
    sc = generate(seed, "workshop")
    cluster.apply(sc.setup)
    for pod in sc.pods:
        cluster.apply(pod)
        cluster.wait()


@pytest.fixture(scope="module")
def busy():
    """A workshop sim with a few generated pods placed (and some Pending)."""
    c = connect("sim", "workshop", progress=False)
    _fill(c, 0)
    _fill(c, 2)
    return c


def test_state_round_trip_keeps_everything(busy, tmp_path):
    path = tmp_path / "dump.yaml"
    path.write_text(dump(cluster_state(busy), "yaml"))
    restored = connect("sim", state=path, progress=False)
    # the same placements, allocations and per-container device environments
    assert _no_events(simulate_report(restored)) == _no_events(simulate_report(busy))
    assert any(c["env"] for p in simulate_report(restored)["pods"] for c in p["containers"])
    assert str(restored.placements()) == str(busy.placements())
    # the same uids: reservedFor still points at the pods
    assert {p["metadata"]["uid"] for p in restored.list("Pod")} == {p["metadata"]["uid"] for p in busy.list("Pod")}


def test_whatif_matches_applying_to_the_original(busy):
    """New pods on the restored sim land exactly where they land on the sim the dump came from."""
    restored = connect("sim", state=cluster_state(busy), progress=False)
    original = connect("sim", state=cluster_state(busy), progress=False)  # a copy: `busy` is shared
    _fill(restored, 7)
    _fill(original, 7)
    got = simulate_report(restored)
    assert got == simulate_report(original)
    new = [p for p in got["pods"] if p["name"].startswith("g7-")]
    assert new and any(p["node"] for p in new)


def test_existing_allocations_are_respected(tmp_path, capsys):
    c = connect("sim", "workshop", progress=False)
    four = {"devices": {"requests": [{"name": "g", "exactly": {
        "deviceClassName": "gpu.nvidia.com", "count": 4,
        "selectors": [{"cel": {"expression": "device.attributes['gpu.nvidia.com'].productName == 'Tesla T4'"}}]}}]}}
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "P"},
           "spec": {"containers": [{"name": "c", "image": "x", "resources": {"claims": [{"name": "g"}]}}],
                    "resourceClaims": [{"name": "g", "resourceClaimTemplateName": "four-t4"}]}}
    tmpl = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": "four-t4"},
            "spec": {"spec": four}}
    c.apply([tmpl, {**pod, "metadata": {"name": "a"}}, {**pod, "metadata": {"name": "b"}}])
    c.wait()
    path = tmp_path / "dump.yaml"
    path.write_text(dump(cluster_state(c), "yaml"))
    new = tmp_path / "new.yaml"
    new.write_text(dump([{**pod, "metadata": {"name": "c"}}], "yaml"))
    assert main(["simulate", "--state", str(path), "-f", str(new), "-o", "json"]) == 0
    pods = {p["name"]: p for p in json.loads(capsys.readouterr().out)["pods"]}
    assert {pods["a"]["node"], pods["b"]["node"]} == {"t4-0", "t4-1"}
    # both T4 nodes' four GPUs are allocated in the dump: the new pod cannot have them
    assert pods["c"]["node"] is None and pods["c"]["reason"] == "Unschedulable"


def test_a_claim_the_controller_recorded_as_not_needed_is_ignored(tmp_path, capsys):
    """pod.status.resourceClaimStatuses naming a template entry without a resourceClaimName: the API's "generating
    a ResourceClaim was not necessary" -- the scheduler, the claim controller and kubelet skip the entry (no claim is
    created, no second status entry is added, the pod runs); a sibling entry with no status yet still gets its claim."""
    one = {"devices": {"requests": [{"name": "g", "exactly": {"deviceClassName": "gpu.nvidia.com",
                                                              "allocationMode": "ExactCount", "count": 1}}]}}
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default", "uid": "u-p"},
           "spec": {"containers": [{"name": "c", "image": "x", "resources": {"claims": [{"name": "skip"}, {"name": "g"}]}}],
                    "resourceClaims": [{"name": "skip", "resourceClaimTemplateName": "one"},
                                       {"name": "g", "resourceClaimTemplateName": "one"}]},
           "status": {"phase": "Pending", "resourceClaimStatuses": [{"name": "skip"}]}}
    tmpl = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": "one", "namespace": "default"}, "spec": {"spec": one}}
    state = [*cluster_state(connect("sim", "workshop", progress=False)), tmpl, pod]
    c = connect("sim", state=state, progress=False)
    assert c.wait()
    got = c.get("Pod", "p")
    assert got["spec"].get("nodeName") and got["status"]["phase"] == "Running"
    statuses = got["status"]["resourceClaimStatuses"]
    assert [s["name"] for s in statuses] == ["skip", "g"] and "resourceClaimName" not in statuses[0]
    claims = c.list("ResourceClaim")
    assert [cl["metadata"]["annotations"]["resource.kubernetes.io/pod-claim-name"] for cl in claims] == ["g"]
    assert "claim skip: no claim needed" in c.explain("p")
    path = tmp_path / "dump.yaml"
    path.write_text(dump(state, "yaml"))
    new = tmp_path / "new.yaml"
    new.write_text(dump([{**pod, "metadata": {"name": "q"}, "status": {}}], "yaml"))  # no status: claims for both
    assert main(["simulate", "--state", str(path), "-f", str(new), "-o", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert all(p["node"] for p in report["pods"]), report["pods"]
    assert sorted(cl["name"].rsplit("-", 1)[0] for cl in report["claims"]) == ["p-g", "q-g", "q-skip"]


def test_simulate_state_cli(busy, tmp_path, capsys):
    path = tmp_path / "dump.yaml"
    path.write_text(dump(cluster_state(busy), "yaml"))
    new = tmp_path / "new.yaml"
    new.write_text(generate(7, "workshop").to_yaml())
    assert main(["simulate", "--state", str(path), "-f", str(new), "-o", "json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert list(rep) == ["pods", "claims"]
    before = {p["name"]: p for p in _no_events(simulate_report(busy))["pods"]}
    after = {p["name"]: p for p in _no_events(rep)["pods"]}
    for name, p in before.items():  # bound pods stay exactly where they were
        if p["node"]:
            assert after[name] == p
    assert {n for n in after if n.startswith("g7-")} == {p["metadata"]["name"] for p in generate(7, "workshop").pods}


def test_kubectl_list_dump_loads(busy, tmp_path):
    """`kubectl get ... -A -o yaml` prints one `kind: List` with apiVersion/kind on every item."""
    path = tmp_path / "list.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""},
                                    "items": cluster_state(busy)}))
    restored = connect("sim", state=str(path), progress=False)
    # the same placements, allocations and per-container device environments
    assert _no_events(simulate_report(restored)) == _no_events(simulate_report(busy))
    assert any(c["env"] for p in simulate_report(restored)["pods"] for c in p["containers"])


def test_explain_from_the_restored_state_is_the_sims(busy):
    pending = [p["metadata"]["name"] for p in busy.list("Pod") if not p["spec"].get("nodeName")]
    assert pending
    for name in pending:
        assert explain_pod(busy, name).startswith(busy.explain(name))


@pytest.mark.parametrize("doc, expected", [
    ({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s", "namespace": "default"}},
     "object 2 (Service default/s): kind 'Service' (v1) is not part of the state labkit reads"),
    ({"apiVersion": "resource.k8s.io/v1beta1", "kind": "ResourceSlice", "metadata": {"name": "x"}},
     "object 2 (ResourceSlice x): apiVersion 'resource.k8s.io/v1beta1' is not read; take it as resource.k8s.io/v1 "
     "(`kubectl get resourceslices.v1.resource.k8s.io -A -o yaml`"),
    ({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}},
     "object 2 (Pod p): metadata.namespace: required; dump with `-A`"),
    # objects an API server could never have stored
    ({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"}},
     "object 2 (Pod default/p): spec: Required value: a pod needs spec.containers; fix: an API server never "
     "stores such an object"),
    ({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
      "spec": {"containers": []}}, "object 2 (Pod default/p): spec.containers: Required value"),
    ({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "cut"}},
     "object 2 (ResourceSlice cut): spec"),
    ({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
      "spec": {"containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "-1"}}}]}},
     'object 2 (Pod default/p): spec.containers[0].resources.requests[cpu]: Invalid value: "-1": must be '
     "greater than or equal to 0"),
    ({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "m"}, "status": {"allocatable": {"memory": "-1Gi"}}},
     'object 2 (Node m): status.allocatable.memory: Invalid value: "-1Gi": must be greater than or equal to 0'),
    ({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "m\u0007"}},
     'object 2 (Node "m\\a"): metadata.name: Invalid value: "m\\a"'),
])
def test_unusable_dumps_get_one_line(tmp_path, capsys, doc, expected):
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"}}
    path = tmp_path / "dump.yaml"
    path.write_text(dump([node, doc], "yaml"))
    with pytest.raises(ClusterError) as e:
        connect("sim", state=path, progress=False)
    assert expected in str(e.value) and "\n" not in str(e.value)
    new = tmp_path / "new.yaml"
    new.write_text(dump([node], "yaml"))
    assert main(["simulate", "--state", str(path), "-f", str(new)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and expected in err and "Traceback" not in err


def test_missing_dump_and_profile_mixup(tmp_path, capsys):
    new = tmp_path / "new.yaml"
    new.write_text("")
    assert main(["simulate", "--state", str(tmp_path / "nope.yaml"), "-f", str(new)]) == 2
    assert "nope.yaml: no such file; give the path of a dump" in capsys.readouterr().err
    assert main(["simulate", "--state", str(new), "--profile", "workshop", "-f", str(new)]) == 2
    assert "drop --profile" in capsys.readouterr().err


# -- kubeconfig backend: problems before any API server answers -----------------------------
def _kubeconfig(tmp_path: Path, server: str) -> Path:
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "lab",
        "clusters": [{"name": "lab", "cluster": {"server": server, "insecure-skip-tls-verify": True}}],
        "users": [{"name": "me", "user": {"token": "abc"}}],
        "contexts": [{"name": "lab", "context": {"cluster": "lab", "user": "me"}}]}))
    return path


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_missing_context_is_one_line(tmp_path, capsys):
    kc = _kubeconfig(tmp_path, "https://127.0.0.1:1")
    with pytest.raises(ClusterError, match=r"kubeconfig .*: no context 'prod'; use one of: lab$"):
        connect("kubeconfig", kubeconfig=kc, context="prod")
    assert main(["explain", "pod", "default/x", "--kubeconfig", str(kc), "--context", "prod"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no context 'prod'; use one of: lab" in err


def test_unreachable_server_is_one_line(tmp_path, capsys):
    port = _closed_port()
    kc = _kubeconfig(tmp_path, f"https://127.0.0.1:{port}")
    # the input is fine, the cluster cannot be reached: an engine error
    assert main(["snapshot", "--kubeconfig", str(kc), "-o", str(tmp_path / "d.yaml")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert f"cannot reach the API server of context lab (https://127.0.0.1:{port})" in err
    assert "check the server address in the kubeconfig" in err
    assert not (tmp_path / "d.yaml").exists()


def test_missing_kubeconfig_is_one_line(tmp_path, capsys):
    assert main(["explain", "pod", "x", "--kubeconfig", str(tmp_path / "none")]) == 3  # not found
    assert "none: no such file; pass kubeconfig=PATH (--kubeconfig) or set $KUBECONFIG" in capsys.readouterr().err


@pytest.mark.parametrize("server, minor", [("v1.34.0", "1.34"), ("v1.36.4-gke.100", "1.36"), ("v1.37.0", "1.37")])
def test_server_version_picks_the_allocator_profile(busy, server, minor):
    from labkit.cluster.explain_live import allocator_version, restored_sim

    assert allocator_version(Attached(server, busy)) == minor
    assert restored_sim(Attached(server, busy)).dra.kubernetes_version == minor


def test_an_emulated_minor_picks_its_profile(busy):
    """kube-apiserver --emulated-version=kube=1.36 answers /version with gitVersion v1.37.1 and
    emulationMinor 36 (measured on local): the 1.36 rules apply."""
    from labkit.cluster.explain_live import allocator_version

    assert allocator_version(Attached("v1.37.1", busy, emulated_version="1.36")) == "1.36"


def test_server_outside_the_modelled_versions_is_one_line(busy):
    from labkit.cluster.explain_live import explain_pod

    name = busy.list("Pod")[0]["metadata"]["name"]
    with pytest.raises(ClusterError) as e:
        explain_pod(Attached("v1.33.5", busy), name)
    from labkit.api.features import SUPPORTED_VERSIONS
    assert str(e.value).startswith(f"the cluster runs Kubernetes 1.33; labkit's allocator models 1.34-"
                                   f"{SUPPORTED_VERSIONS[-1]} only")


def test_a_pod_that_fits_now_says_the_scheduler_has_not_retried():
    """A dump where the pod blocking a Pending pod is gone (the real scheduler has not retried yet)."""
    c = connect("sim", "workshop", progress=False)
    four = {"devices": {"requests": [{"name": "g", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 4}}]}}
    c.apply({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": "four"},
             "spec": {"spec": four}})
    for name in ("a", "b"):
        c.apply({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
                 "spec": {"nodeSelector": {"kubernetes.io/hostname": "t4-0"},
                          "containers": [{"name": "c", "image": "x", "resources": {"claims": [{"name": "g"}]}}],
                          "resourceClaims": [{"name": "g", "resourceClaimTemplateName": "four"}]}})
        c.wait()
    assert c.get("Pod", "b")["spec"].get("nodeName") is None
    objs = [o for o in cluster_state(c) if not (o["kind"] in ("Pod", "ResourceClaim")
                                                 and o["metadata"]["name"].startswith("a"))]

    text = explain_pod(Attached("v1.37.0", c, objs), "b")  # a real cluster right after pod a and its claim went away
    assert text.startswith("Pod default/b is Pending, but it fits now: labkit's scheduler would place it on node "
                           "t4-0 (b-g-")
    assert "g -> t4-0/gpu-0" in text and "The real scheduler has not retried it yet" in text


def test_a_retried_scheduling_event_is_listed_once_where_it_was_last_said():
    """kube-scheduler writes the same FailedScheduling at each retry: how many retries happened before
    the question must not change the answer (kubectl dra explain and labkit explain, run one after the
    other, print the same)."""
    from labkit.cluster.explain_live import _scheduler_said

    pod = {"metadata": {"uid": "u1"}, "status": {"conditions": [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/3 nodes"}]}}

    def event(reason: str, message: str, uid: str = "u1") -> dict:
        return {"involvedObject": {"uid": uid}, "type": "Warning", "reason": reason,
                "source": {"component": "default-scheduler"}, "message": message}

    once = [event("FailedScheduling", "0/3 nodes"), event("Other", "x", uid="u2")]
    thrice = [event("FailedScheduling", "0/3 nodes"), event("Other", "x", uid="u2"),
              event("FailedScheduling", "0/3 nodes"), event("FailedScheduling", "0/3 nodes")]
    assert _scheduler_said(pod, once) == _scheduler_said(pod, thrice)
    condition, said = _scheduler_said(pod, [event("FailedScheduling", "a"), event("Retried", "b"),
                                            event("FailedScheduling", "a")])
    assert condition == {"reason": "Unschedulable", "message": "0/3 nodes"}
    assert [(e["reason"], e["message"]) for e in said] == [("Retried", "b"), ("FailedScheduling", "a")]
