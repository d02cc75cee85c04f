"""Smoke test of the `local` backend on Kubernetes 1.38 (issue 42 item 8): `labkit cluster up --backend local`
with a profile of kubernetesVersion "1.38" runs the real 1.38 control plane (the release pinned in
tools/kubernetes-releases.env); the fake driver's slices are published, the real 1.38 kube-scheduler places a
pod with a claim and refuses one that asks too much, and `labkit explain` / `labkit describe` read that server.

The cluster test needs the 1.38 control plane (`make controlplane-138`: a cold build of many CPU-minutes, kept
out of `make test`, which runs the real-cluster lanes on the default version only); skipped where it is not built.
The kind node image of 1.38 (tools/kind-node/build-minor.sh) is checked without building it: its pins resolve to
the 1.38 release, and the default minor's image (its cache key) is left to tools/build-kind-node-image.sh.
What 1.38 changes for the local control plane: DynamicResourceAllocation is gone from its gates (with
`--feature-gates=DynamicResourceAllocation=true` the v1.38.0-beta.0 kube-apiserver and kube-scheduler exit with
"unrecognized feature gate: DynamicResourceAllocation", k8s.io/component-base featuregate/feature_gate.go), so
none of the kit's flags may name it: a cluster that comes up shows they do not.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from labkit.cluster import connect
from labkit.cluster.backends.local import binaries
from tests.paths import REPO
from tests.scenario_gen import pod_settled

ROOT = REPO
MINOR = "1.38"
BUILD_MINOR = ROOT / "tools/kind-node/build-minor.sh"
RELEASES = ROOT / "tools/kubernetes-releases.env"

PROFILE = """
name: tiny-138
description: one DGX A100 node on Kubernetes 1.38
kubernetesVersion: "1.38"
nodes:
  - name: node-0
    nodeProfile: dgx-a100
"""

PODS = """
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: one-gpu}
spec:
  devices:
    requests:
    - name: gpu
      exactly: {deviceClassName: gpu.nvidia.com}
---
apiVersion: v1
kind: Pod
metadata: {name: fits}
spec:
  resourceClaims: [{name: gpu, resourceClaimName: one-gpu}]
  containers:
  - name: main
    image: busybox
    resources: {claims: [{name: gpu}]}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: many-gpus}
spec:
  devices:
    requests:
    - name: gpu
      exactly: {deviceClassName: gpu.nvidia.com, count: 32}
---
apiVersion: v1
kind: Pod
metadata: {name: too-many}
spec:
  resourceClaims: [{name: gpu, resourceClaimName: many-gpus}]
  containers:
  - name: main
    image: busybox
    resources: {claims: [{name: gpu}]}
"""


def _labkit(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "labkit", *args], capture_output=True, text=True, env=env, cwd=ROOT,
                          stdin=subprocess.DEVNULL, timeout=600)


@pytest.fixture
def run_env(tmp_path, monkeypatch):
    if binaries.find(MINOR) is None:
        pytest.skip(f"the Kubernetes {MINOR} control plane is not built in {binaries.version_dir(MINOR)} "
                    f"(`make controlplane-138`, a cold build of many CPU-minutes)")
    profile = tmp_path / "tiny-138.yaml"
    profile.write_text(PROFILE)
    monkeypatch.setenv("LABKIT_RUN_DIR", str(tmp_path / "run"))
    env = {**os.environ, "LABKIT_RUN_DIR": str(tmp_path / "run")}
    yield env, str(profile)
    _labkit("cluster", "down", "--backend", "local", "--profile", str(profile), env=env)


def _pin(key: str) -> str:
    return next(line.split("=", 1)[1].strip() for line in RELEASES.read_text().splitlines() if line.startswith(f"{key}="))


def _bash(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", *args], capture_output=True, text=True, cwd=ROOT, stdin=subprocess.DEVNULL)


def test_kind_node_image_of_another_minor_resolves_its_pins_and_refuses_the_default():
    # the default minor stays tools/build-kind-node-image.sh's (its image key, hence its cache, unchanged)
    default = _bash(str(BUILD_MINOR), binaries.DEFAULT_MINOR, "--print-image")
    assert default.returncode == 1 and default.stdout == ""
    assert f"{binaries.DEFAULT_MINOR} is the default minor" in default.stderr
    assert "tools/build-kind-node-image.sh" in default.stderr
    unpinned = _bash(str(BUILD_MINOR), "1.39", "--print-image")
    assert unpinned.returncode == 1 and "no KUBE_1_39 line in tools/kubernetes-releases.env" in unpinned.stderr
    assert _bash(str(BUILD_MINOR), "latest").returncode == 2
    # the release and the Go toolchain of 1.38 come from the one place for pins
    assert _pin("KUBE_1_38").startswith("v1.38.") and _pin("GO_1_38").startswith("go1.27.")
    if binaries.find(MINOR) is None:
        return  # the image's key hashes the 1.38 control plane's wrapper module: nothing more to check without it
    before = _bash("tools/build-kind-node-image.sh", "--print-image")
    image = _bash(str(BUILD_MINOR), MINOR, "--print-image")
    assert image.returncode == 0, image.stderr
    assert image.stdout.startswith(f"labkit.local/kind-node:{_pin('KUBE_1_38')}-")
    after = _bash("tools/build-kind-node-image.sh", "--print-image")
    assert before.returncode == 0 and before.stdout == after.stdout and before.stdout != image.stdout


@pytest.mark.local
@pytest.mark.slow
def test_local_cluster_on_138_runs_the_138_control_plane(run_env):
    env, profile = run_env
    built = binaries.find(MINOR)
    assert built is not None and built.minor == MINOR
    up = _labkit("cluster", "up", "--backend", "local", "--profile", profile, env=env)
    assert up.returncode == 0, up.stderr
    kc = next(line.split("=", 1)[1] for line in up.stdout.splitlines() if "export KUBECONFIG=" in line)
    detail = _labkit("cluster", "status", "--backend", "local", "--profile", profile, "-o", "table", env=env)
    # natively, not emulating an older minor
    assert detail.returncode == 0 and f"Kubernetes {built.kubernetes_version}" in detail.stdout, detail.stdout
    assert "emulating" not in detail.stdout

    c = connect("local", profile, progress=False)
    try:
        # the server and every control-plane process are the 1.38 build's
        assert c.attached is not None and c.kube is not None
        assert c.kube.request("GET", "/version")["gitVersion"] == built.kubernetes_version
        started = {Path(g["cmdline"][0]).name: Path(g["cmdline"][0]).parent for g in c.attached["componentGroups"]}
        assert {name: started.get(name) for name in binaries.COMPONENTS} == dict.fromkeys(binaries.COMPONENTS,
                                                                                          built.bin_dir)
        assert c.wait(until=lambda x: not any(n["spec"].get("taints") for n in x.list("Node")), timeout=120)
        slices = {(s["spec"]["driver"], s["spec"]["nodeName"]) for s in c.list("ResourceSlice")}
        assert ("gpu.nvidia.com", "node-0") in slices and {node for _, node in slices} == {"node-0"}
        c.apply(PODS)
        assert c.wait(until=lambda x: x.get("Pod", "fits").get("status", {}).get("phase") == "Running"
                      and pod_settled(x.get("Pod", "too-many")), timeout=120)
        assert [(r["pod"], r["claim"], r["node"]) for r in c.placements().rows] == [("fits", "one-gpu", "node-0")]

        # explain and describe against the live 1.38 server (its version is one the kit models)
        ex = _labkit("explain", "pod", "fits", "--kubeconfig", kc, "-o", "json", env=env)
        assert ex.returncode == 0, ex.stderr
        doc = json.loads(ex.stdout)
        assert doc["verdict"]["status"] == "Scheduled" and doc["node"] == "node-0"
        assert [(c["claim"], c["state"]) for c in doc["claims"]] == [("one-gpu", "allocated")]
        ex = _labkit("explain", "pod", "too-many", "--kubeconfig", kc, "-o", "json", env=env)
        assert ex.returncode == 0, ex.stderr
        doc = json.loads(ex.stdout)
        # the verdict is the 1.38 kube-scheduler's, read from the pod's condition; the kit's 1.38 allocator agrees
        cond = next(x for x in c.get("Pod", "too-many")["status"]["conditions"] if x["type"] == "PodScheduled")
        assert doc["verdict"] == {"status": "Unschedulable", "plugin": "DynamicResources",
                                  "plugins": ["DynamicResources"], "extensionPoint": "Filter",
                                  "message": cond["message"]}
        assert [(g["nodes"], g["allocator"]["verdict"]) for g in doc["nodeGroups"]] == [(["node-0"], "unsatisfiable")]
        de = _labkit("describe", "pod", "fits", "--kubeconfig", kc, env=env)
        assert de.returncode == 0, de.stderr
        assert "Node:         node-0" in de.stdout and "gpu (claim one-gpu): allocated" in de.stdout
    finally:
        c.down()  # removes what this process applied; the cluster stays up

    down = _labkit("cluster", "down", "--backend", "local", "--profile", profile, env=env)
    assert down.returncode == 0 and "local cluster of profile tiny-138 is down" in down.stdout
