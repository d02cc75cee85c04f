"""Helpers shared by the kind tests that look inside the nodes (faults, leaks, RBAC) and by
tools/reliability.py, which runs the same code at full size.

A cluster comes from `cluster()`: `connect("kind", profile)` attaches to a running cluster of that
profile (the run dir of `$LABKIT_RUN_DIR`, e.g. the e2e session's or a workshop cluster started with
`labkit cluster up --backend kind`) and only starts one when none runs.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fake_gpus.plugin.cdi import spec_path
from fake_gpus.plugin.paths import DEFAULT_CDI_DIR, DEFAULT_PLUGINS_DIR, checkpoint_path
from labkit.cluster import connect
from labkit.cluster.base import NotFound
from labkit.cluster.kind.backend import KindCluster
from labkit.cluster.kind.preflight import find_tool

ROOT = Path(__file__).resolve().parents[1]
DRIVER = "gpu.nvidia.com"
DRIVER_NS = "fake-gpus"
PLUGIN_LABEL = "app.kubernetes.io/name=fake-gpus-kubelet-plugin"
#: the profile the kind fault/RBAC tests use (a running cluster of it is reused)
PROFILE = os.environ.get("LABKIT_FAULTS_PROFILE", "workshop")
#: the cluster's name when not labkit-<profile>; make test's fault lane names its own
#: (tools/test-lanes.sh), which tools/with-kind.sh removes when a killed run left it behind
CLUSTER_NAME = os.environ.get("LABKIT_FAULTS_CLUSTER") or None


def cluster(profile: str = PROFILE, name: str | None = CLUSTER_NAME) -> KindCluster:
    kw: dict[str, Any] = {"cluster_name": name} if name else {}
    c = connect("kind", profile, **kw)
    assert isinstance(c, KindCluster)
    return c


def run(*cmd: str, timeout: float = 300, check: bool = False,
        input: str | None = None) -> subprocess.CompletedProcess[str]:
    out = subprocess.run(list(cmd), capture_output=True, text=True, timeout=timeout, input=input)
    if check and out.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} failed ({out.returncode}): {out.stderr.strip() or out.stdout.strip()}")
    return out


def docker() -> str:
    return find_tool("docker") or "docker"


def kubectl(c: KindCluster, *args: str, check: bool = True, timeout: float = 120,
            input: str | None = None) -> str:
    kc = find_tool("kubectl") or "kubectl"
    return run(kc, "--kubeconfig", str(c.kubeconfig), *args, check=check, timeout=timeout, input=input).stdout


def kjson(c: KindCluster, *args: str) -> Any:
    return json.loads(kubectl(c, *args, "-o", "json"))


def obj(c: KindCluster, kind: str, name: str, namespace: str | None = "default") -> dict[str, Any] | None:
    """One object read through the cluster's API connection (the loops poll; a kubectl process per
    read costs a Go start and a TLS handshake), None when it does not exist."""
    try:
        return c.get(kind, name, namespace)
    except NotFound:
        return None


def node_exec(node: str, *cmd: str, check: bool = True, timeout: float = 60) -> str:
    """Run a command inside a kind node container."""
    return run(docker(), "exec", node, *cmd, check=check, timeout=timeout).stdout


def node_containers(c: KindCluster) -> dict[str, str]:
    """node name -> its engine container. LabKit registers kind workers under the profile's node
    names, so the two differ; they share the node's InternalIP."""
    ips = {}
    for n in c.list("Node"):
        for a in n["status"].get("addresses", []):
            if a["type"] == "InternalIP":
                ips[a["address"]] = n["metadata"]["name"]
    ctrs = run(docker(), "ps", "--format", "{{.Names}}", "--filter",
               f"label=io.x-k8s.kind.cluster={c.cluster_name}", check=True).stdout.split()
    out = {}
    for ctr in ctrs:
        ip = run(docker(), "inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}} {{end}}", ctr,
                 check=True).stdout.split()
        for addr in ip:
            if addr in ips:
                out[ips[addr]] = ctr
    return out


def plugin_pods(c: KindCluster) -> dict[str, str]:
    """node -> name of the fake driver pod there."""
    pods = c.list("Pod", DRIVER_NS)
    return {p["spec"]["nodeName"]: p["metadata"]["name"] for p in pods
            if p["metadata"].get("labels", {}).get("app.kubernetes.io/name") == "fake-gpus-kubelet-plugin"
            and p["spec"].get("nodeName")}


def checkpoint(ctr: str, driver: str = DRIVER) -> dict[str, Any]:
    """The plugin's checkpoint on a node: claim uid -> prepared claim ({} when there is no file)."""
    path = checkpoint_path(DEFAULT_PLUGINS_DIR, driver)
    text = node_exec(ctr, "sh", "-c", f"cat {path} 2>/dev/null || true")
    return json.loads(text).get("claims", {}) if text.strip() else {}


def cdi_specs(ctr: str) -> list[str]:
    """File names in the node's CDI dir."""
    return sorted(node_exec(ctr, "sh", "-c", f"ls -1 {DEFAULT_CDI_DIR} 2>/dev/null || true").split())


def claim_spec_name(uid: str, driver: str = DRIVER) -> str:
    return spec_path(DEFAULT_CDI_DIR, driver, uid).name


def poll(cond: Callable[[], Any], timeout: float, interval: float = 1.0) -> Any:
    """cond()'s first truthy value, or None after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        got = cond()
        if got or time.monotonic() > deadline:
            return got
        time.sleep(interval)
