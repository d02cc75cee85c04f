"""`kubectl dra ...` (the kubectl-dra plugin installed with the kit) through a real `kubectl` against the
local control plane: `kubectl plugin list` finds it, and `kubectl dra explain|snapshot|what-if|validate`
print what the matching `labkit` commands print, honouring --kubeconfig, --context, KUBECONFIG, -n and -o.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from labkit.api import load
from labkit.cluster.backends.kind.preflight import find_tool
from tests.paths import REPO
from tests.scenario_gen import pod_settled

pytestmark = [pytest.mark.local, pytest.mark.slow]

ROOT = REPO
BIN = Path(sys.executable).parent  # where the kit's console scripts (labkit, kubectl-dra) are installed

WORKLOAD = """
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: one-gpu, namespace: default}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly: {deviceClassName: gpu.nvidia.com}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: huge-gpu, namespace: default}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly:
          deviceClassName: gpu.nvidia.com
          selectors:
          - cel: {expression: "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('100Gi')) >= 0"}
---
apiVersion: v1
kind: Pod
metadata: {name: runs, namespace: default}
spec:
  nodeSelector: {kubernetes.io/hostname: t4-0}
  containers: [{name: c, image: busybox, resources: {claims: [{name: gpu}]}}]
  resourceClaims: [{name: gpu, resourceClaimTemplateName: one-gpu}]
---
apiVersion: v1
kind: Pod
metadata: {name: waits, namespace: default}
spec:
  containers: [{name: c, image: busybox, resources: {claims: [{name: gpu}]}}]
  resourceClaims: [{name: gpu, resourceClaimTemplateName: huge-gpu}]
"""

NEW = """
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: t4}
spec:
  devices:
    requests:
    - name: gpu
      exactly:
        deviceClassName: gpu.nvidia.com
        selectors:
        - cel: {expression: "device.attributes['gpu.nvidia.com'].productName == 'Tesla T4'"}
---
apiVersion: v1
kind: Pod
metadata: {name: new-t4}
spec:
  containers: [{name: c, image: busybox, resources: {claims: [{name: gpu}]}}]
  resourceClaims: [{name: gpu, resourceClaimName: t4}]
"""

BAD = """
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: bad, namespace: default}
spec:
  devices:
    requests:
    - name: GPU
      exactly: {deviceClassName: gpu.nvidia.com, allocationMode: All, count: 2}
"""


@pytest.fixture(scope="module")
def cluster(local_workshop):
    """The local lane's workshop cluster (tests/conftest.py) running WORKLOAD (removed after the module)."""
    c = local_workshop
    c.apply(WORKLOAD)
    assert c.wait(until=lambda x: all(pod_settled(x.get("Pod", n)) for n in ("runs", "waits")), timeout=120)
    return c


@pytest.fixture(scope="module")
def kubectl() -> str:
    path = find_tool("kubectl")
    assert path, "no kubectl (make test puts the cached one of the pinned version on PATH)"
    return path


def env(**extra: str) -> dict[str, str]:
    """PATH with the kit's scripts first (as after `pip install dra-labkit` in an active venv)."""
    out = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    out["PATH"] = f"{BIN}{os.pathsep}{out.get('PATH', '')}"
    return {**out, **extra}


def run(*argv: str, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), capture_output=True, text=True, cwd=ROOT, env=env(**extra))


def test_kubectl_plugin_list_finds_it(kubectl):
    out = run(kubectl, "plugin", "list")
    assert f"{BIN / 'kubectl-dra'}" in out.stdout.splitlines(), out.stdout + out.stderr
    assert "kubectl-dra" not in out.stderr, out.stderr  # no warning about it (shadowing, not executable)


def test_explain_matches_labkit(cluster, kubectl):
    kc = str(cluster.kubeconfig)
    for pod, first in (("runs", "Pod default/runs is Running on node t4-0"),
                       ("waits", "Pod default/waits is Pending: ")):
        want = run(str(BIN / "labkit"), "explain", "pod", f"default/{pod}", "--kubeconfig", kc)
        assert want.returncode == 0 and want.stdout.startswith(first), want.stdout + want.stderr
        for argv in (["explain", "pod", f"default/{pod}", "--kubeconfig", kc],
                     ["explain", "pod", pod, "-n", "default", "--kubeconfig", kc]):
            got = run(kubectl, "dra", *argv)
            assert (got.returncode, got.stdout) == (0, want.stdout), got.stderr
    # KUBECONFIG, as kubectl itself reads it
    got = run(kubectl, "dra", "explain", "pod", "default/runs", KUBECONFIG=kc)
    assert got.returncode == 0 and got.stdout.startswith("Pod default/runs is Running"), got.stderr
    # a pod named with another namespace than -n's
    got = run(kubectl, "dra", "explain", "pod", "team-a/runs", "-n", "default", "--kubeconfig", kc)
    assert got.returncode == 2 and got.stdout == ""
    assert got.stderr.strip() == ("kubectl dra: 'team-a/runs' names namespace 'team-a' but -n says 'default'; "
                                  "give one of them")


def test_context_picks_the_cluster(cluster, kubectl, tmp_path):
    """A kubeconfig whose current context points nowhere: --context labkit-local picks the real one."""
    kc = yaml.safe_load(Path(cluster.kubeconfig).read_text())
    kc["clusters"].append({"name": "nowhere", "cluster": {"server": "https://127.0.0.1:9"}})
    kc["contexts"].append({"name": "nowhere", "context": {"cluster": "nowhere", "user": kc["contexts"][0]["context"]["user"]}})
    kc["current-context"] = "nowhere"
    path = tmp_path / "two.kubeconfig"
    path.write_text(yaml.safe_dump(kc))
    got = run(kubectl, "dra", "explain", "pod", "default/runs", "--kubeconfig", str(path), "--context", "labkit-local")
    assert got.returncode == 0 and got.stdout.startswith("Pod default/runs is Running"), got.stderr
    bad = run(kubectl, "dra", "explain", "pod", "default/runs", "--kubeconfig", str(path))
    assert bad.returncode != 0 and len(bad.stderr.strip().splitlines()) == 1, bad.stderr
    assert "Traceback" not in bad.stderr


def _stable(objs: list[dict[str, Any]]) -> list[tuple[str, str, str, str]]:
    """What two snapshots a moment apart share: every object's identity and spec (Node status moves)."""
    return sorted((o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"],
                   json.dumps(o.get("spec"), sort_keys=True)) for o in objs)


def test_snapshot_matches_labkit(cluster, kubectl, tmp_path):
    kc = str(cluster.kubeconfig)
    want = run(str(BIN / "labkit"), "snapshot", "--kubeconfig", kc, "-o", "-")
    assert want.returncode == 0, want.stderr
    got = run(kubectl, "dra", "snapshot", "--kubeconfig", kc)
    assert got.returncode == 0, got.stderr
    # read as Kubernetes reads YAML (PyYAML's YAML 1.1 would turn an unquoted 0000:07:00.0 into a number)
    want_objs = load(want.stdout, default_namespace=None)
    got_objs = load(got.stdout, default_namespace=None)
    assert _stable(got_objs) == _stable(want_objs)
    assert {"Node", "ResourceSlice", "DeviceClass", "ResourceClaim", "Pod"} <= {o["kind"] for o in got_objs}
    as_json = run(kubectl, "dra", "snapshot", "--kubeconfig", kc, "-o", "json")
    assert as_json.returncode == 0, as_json.stderr
    doc = json.loads(as_json.stdout)
    assert doc["kind"] == "List" and _stable(doc["items"]) == _stable(want_objs)
    refused = run(kubectl, "dra", "snapshot", "--kubeconfig", kc, "-n", "default")
    assert refused.returncode == 2 and refused.stdout == ""
    assert refused.stderr.startswith("kubectl dra: -n: a snapshot holds the whole cluster")


def test_what_if_matches_labkit(cluster, kubectl, tmp_path):
    kc = str(cluster.kubeconfig)
    new = tmp_path / "new.yaml"
    new.write_text(NEW)
    dump = tmp_path / "dump.yaml"
    assert run(str(BIN / "labkit"), "snapshot", "--kubeconfig", kc, "-o", str(dump)).returncode == 0
    for fmt in ("json", "table"):
        want = run(str(BIN / "labkit"), "simulate", "--state", str(dump), "-f", str(new), "-o", fmt)
        assert want.returncode == 0, want.stderr
        got = run(kubectl, "dra", "what-if", "-f", str(new), "--kubeconfig", kc, *(["-o", fmt] if fmt == "json" else []))
        assert (got.returncode, got.stdout) == (0, want.stdout), got.stderr
    report = json.loads(want_json := run(kubectl, "dra", "what-if", "-f", str(new), "--kubeconfig", kc,
                                         "-o", "json").stdout)
    pods = {(p["namespace"], p["name"]): p for p in report["pods"]}
    assert pods["default", "new-t4"]["node"] in {"t4-0", "t4-1"}, want_json
    assert pods["default", "waits"]["node"] is None  # what the cluster has stays as it is
    as_yaml = run(kubectl, "dra", "what-if", "-f", str(new), "--kubeconfig", kc, "-o", "yaml")
    assert load(as_yaml.stdout, default_namespace=None) == [report]
    # -n: the objects that name no namespace go there (the cluster is left alone)
    moved = json.loads(run(kubectl, "dra", "what-if", "-f", str(new), "--kubeconfig", kc, "-n", "kube-system",
                           "-o", "json").stdout)
    assert ("kube-system", "new-t4") in {(p["namespace"], p["name"]) for p in moved["pods"]}
    assert cluster.list("ResourceClaim", namespace="kube-system") == []


def test_validate_matches_labkit(kubectl, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(BAD)
    want = run(str(BIN / "labkit"), "validate", "-f", str(bad))
    got = run(kubectl, "dra", "validate", "-f", str(bad))
    assert want.returncode == 1 and "ResourceClaim/bad: spec.devices.requests[0].name: Invalid value" in want.stdout
    assert (got.returncode, got.stdout, got.stderr) == (want.returncode, want.stdout, want.stderr)
    good = tmp_path / "good.yaml"
    good.write_text(NEW)
    ok = run(kubectl, "dra", "validate", "-f", str(good), "--kubernetes-version", "1.36")
    assert (ok.returncode, ok.stderr) == (0, "2 objects valid\n")
