"""Clusters that outlive the command that started them: one run dir per backend and profile.

`labkit cluster up --backend kind|local --profile P` leaves the cluster running and records it in
``<run root>/<backend>-<P>/state.json`` (run root: ``$LABKIT_RUN_DIR``, default
``~/.cache/dra-labkit/run``). `labkit cluster status` and `connect(backend, P)` from any other
process read that file: `connect` then attaches to the running cluster instead of starting a
second one, and its `down()` removes only what that session applied, leaving the cluster up.
`labkit cluster down` removes the cluster and its run dir.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from labkit.cluster.base import ClusterError

STATE_FILE = "state.json"
#: `labkit cluster status`: no such cluster is running
EXIT_NOT_RUNNING = 3


def cache_dir() -> Path:
    """Where LabKit keeps what it builds or downloads (binaries, images, run state), for every backend."""
    return Path(os.environ.get("LABKIT_CACHE") or Path.home() / ".cache" / "dra-labkit")


def run_root() -> Path:
    return Path(os.environ.get("LABKIT_RUN_DIR") or cache_dir() / "run")


def run_dir(backend: str, profile_name: str) -> Path:
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "-", profile_name).strip("-") or "profile"
    return run_root() / f"{backend}-{safe}"


def fingerprint(profile: Any) -> str:
    """Content hash of a ClusterProfile: a same-named profile with other nodes is another cluster."""
    import dataclasses

    data = dataclasses.asdict(profile) if dataclasses.is_dataclass(profile) else profile
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()[:16]


def read_state(backend: str, profile_name: str) -> dict[str, Any] | None:
    path = run_dir(backend, profile_name) / STATE_FILE
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def write_state(backend: str, profile_name: str, state: dict[str, Any]) -> Path:
    d = run_dir(backend, profile_name)
    d.mkdir(parents=True, exist_ok=True)
    tmp = d / (STATE_FILE + ".tmp")
    tmp.write_text(json.dumps(state, indent=2, sort_keys=True))
    tmp.replace(d / STATE_FILE)
    return d / STATE_FILE


def clear(backend: str, profile_name: str) -> None:
    shutil.rmtree(run_dir(backend, profile_name), ignore_errors=True)


def all_states() -> list[dict[str, Any]]:
    """Every recorded cluster (running or stale), sorted by run dir name."""
    root = run_root()
    out = []
    for d in sorted(root.glob("*/")) if root.is_dir() else []:
        with contextlib.suppress(OSError, ValueError):
            out.append(json.loads((d / STATE_FILE).read_text()))
    return out


def usage_lines(backend: str, profile_name: str, kubeconfig: str | Path) -> list[str]:
    """What `labkit cluster up` prints after the cluster is up: how to use it, how to stop it."""
    return [
        f"{backend} cluster of profile {profile_name} is running; it stays up after this command.",
        "Use it from a shell:",
        f"  export KUBECONFIG={kubeconfig}",
        "  kubectl get nodes",
        "  kubectl get resourceslices",
        f'From Python or a notebook: connect("{backend}", "{profile_name}") reuses it.',
        f"Stop it: labkit cluster down --backend {backend} --profile {profile_name}",
    ]


# -- what an attached session applied -------------------------------------------------------------
#: deletion order: workloads first, then what they use, cluster-wide objects last
_DELETE_ORDER = {"Deployment": 0, "Job": 0, "DaemonSet": 0, "StatefulSet": 0, "ReplicaSet": 0, "Pod": 1,
                 "ResourceClaim": 2, "ResourceClaimTemplate": 2, "ConfigMap": 3, "ServiceAccount": 3,
                 "DeviceTaintRule": 4, "DeviceClass": 4, "PriorityClass": 4, "Namespace": 5}


def remember(applied: list[tuple[str, str, str | None]], objs: Iterable[dict]) -> None:
    """Record (kind, name, namespace) of objects applied through an attached connection."""
    for o in objs:
        meta = o.get("metadata") or {}
        key = (o.get("kind", ""), meta.get("name", ""), meta.get("namespace"))
        if key[0] and key[1] and key not in applied:
            applied.append(key)


def remove_applied(cluster: Any, applied: list[tuple[str, str, str | None]], timeout: float = 120.0) -> None:
    """Delete what this session applied (workloads first) and wait until its pods are gone, so the
    next notebook on the same running cluster starts from the state `labkit cluster up` left."""
    for kind, name, ns in sorted(applied, key=lambda k: _DELETE_ORDER.get(k[0], 1)):
        with contextlib.suppress(ClusterError):
            cluster.delete(kind, name, ns)
    mine = {(k, n, ns) for k, n, ns in applied if k in ("Pod", "ResourceClaim")}

    def gone(c: Any) -> bool:
        for kind in ("Pod", "ResourceClaim"):
            for o in c.list(kind):
                meta = o["metadata"]
                if (kind, meta["name"], meta.get("namespace")) in mine or meta.get("deletionTimestamp"):
                    return False
        return True

    _poll(lambda: gone(cluster), timeout)
    applied.clear()


def _poll(pred: Callable[[], bool], timeout: float, interval: float = 0.5) -> bool:
    deadline = time.monotonic() + timeout
    while True:
        if pred():
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(interval)
