"""A local cluster that stays up: `labkit cluster up|status|down --backend local` as typed, and
connect() from another process reusing it. Needs the control-plane binaries (make controlplane)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from labkit.cluster import connect
from labkit.cluster.backends.local import binaries
from labkit.cluster.backends.local.procs import pid_alive
from tests.paths import REPO

pytestmark = [pytest.mark.local, pytest.mark.slow]

ROOT = REPO

POD = """
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: stay-c}
spec:
  devices:
    requests:
    - name: gpu
      exactly: {deviceClassName: gpu.nvidia.com}
---
apiVersion: v1
kind: Pod
metadata: {name: stay-p}
spec:
  resourceClaims: [{name: gpu, resourceClaimName: stay-c}]
  containers:
  - name: main
    image: busybox
    resources: {claims: [{name: gpu}]}
"""


def _labkit(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "labkit", "cluster", *args], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=600)


@pytest.fixture
def run_env(tmp_path, monkeypatch):
    if binaries.find(binaries.DEFAULT_MINOR) is None:
        pytest.fail("control-plane binaries missing: run `make controlplane`")
    monkeypatch.setenv("LABKIT_RUN_DIR", str(tmp_path / "run"))
    env = {**os.environ, "LABKIT_RUN_DIR": str(tmp_path / "run")}
    yield env
    _labkit("down", "--backend", "local", "--profile", "tiny", env=env)


def test_local_cluster_stays_up_is_found_reused_and_removed(run_env):
    up = _labkit("up", "--backend", "local", "--profile", "tiny", env=run_env)
    assert up.returncode == 0, up.stderr
    kubeconfig = next(line.split("=", 1)[1] for line in up.stdout.splitlines() if "export KUBECONFIG=" in line)
    assert "kubectl get resourceslices" in up.stdout
    assert "labkit cluster down --backend local --profile tiny" in up.stdout
    assert Path(kubeconfig).is_file()

    # the command returned; another process finds the cluster (through a pipe: the JSON list)
    status = _labkit("status", env=run_env)
    assert status.returncode == 0, status.stderr
    [found] = json.loads(status.stdout)["clusters"]
    assert (found["backend"], found["profile"], found["kubeconfig"]) == ("local", "tiny", kubeconfig)
    assert json.loads(_labkit("status", "--backend", "local", "--profile", "tiny", env=run_env).stdout) == {
        "clusters": [found]}
    detail = _labkit("status", "--backend", "local", "--profile", "tiny", "-o", "table", env=run_env)
    assert detail.returncode == 0 and "Kubernetes v1.37" in detail.stdout
    pid = int(detail.stdout.split("server process pid ")[1].split()[0])
    assert pid_alive(pid) and found["pid"] == pid

    # a second `up` does not start a second cluster
    again = _labkit("up", "--backend", "local", "--profile", "tiny", env=run_env)
    assert again.returncode == 0 and f"already running (server pid {pid})" in again.stdout

    # connect() from this process attaches; its down() removes only what it applied
    c = connect("local", "tiny", progress=False)
    assert c.attached is not None and c.attached["pid"] == pid
    assert {s["spec"]["nodeName"] for s in c.list("ResourceSlice")} == {"node-0"}
    c.apply(POD)
    assert c.wait(until=lambda cl: cl.get("Pod", "stay-p").get("status", {}).get("phase") == "Running", timeout=120)
    rows = c.placements().rows
    assert [(r["pod"], r["claim"], r["node"]) for r in rows] == [("stay-p", "stay-c", "node-0")]
    assert c.pod_env("stay-p")["FAKE_GPU_0_REQUEST"] == "gpu"
    groups = [g["pid"] for g in c.attached["componentGroups"]]  # the leaders of its process groups
    c.down()
    assert pid_alive(pid)
    c2 = connect("local", "tiny", progress=False)
    assert c2.list("Pod") == [] and c2.list("ResourceClaim") == []
    c2.down()

    down = _labkit("down", "--backend", "local", "--profile", "tiny", env=run_env)
    assert down.returncode == 0 and "local cluster of profile tiny is down" in down.stdout
    assert not pid_alive(pid)
    assert not [g for g in groups if pid_alive(g)], "a control-plane or plugin process survived `down`"
    gone = _labkit("status", "--backend", "local", "--profile", "tiny", env=run_env)
    assert gone.returncode == 3 and json.loads(gone.stdout) == {"clusters": []} and "not running" in gone.stderr
    gone = _labkit("status", "--backend", "local", "--profile", "tiny", "-o", "table", env=run_env)
    assert gone.returncode == 3 and "not running" in gone.stdout
    assert not list((Path(run_env["LABKIT_RUN_DIR"])).glob("local-*"))
