"""Scenarios where kube-scheduler's scoring, not the filters, decides the node (workshop profile:
dgx-a100-0 with 8 A100s, t4-0 and t4-1 with T4s; every node 64 CPU / 512Gi)."""

from __future__ import annotations

from typing import Any

from tests import builders as b

T4 = "device.attributes['gpu.nvidia.com'].productName == 'Tesla T4'"


def template(name: str, requests: list[dict[str, Any]]) -> dict[str, Any]:
    return b.claim_template(name, requests=requests)


def pod(name: str, tmpl: str, cpu: str | None = None, affinity: dict | None = None,
        tolerations: list | None = None) -> dict[str, Any]:
    extra = {k: v for k, v in (("affinity", affinity), ("tolerations", tolerations)) if v}
    return b.pod(name, templates=tmpl, requests={"cpu": cpu} if cpu else None, **extra)


def prefer_t4() -> list[dict[str, Any]]:
    """firstAvailable: a T4, else any GPU. Only the T4 nodes satisfy the first alternative."""
    return [template("prefer-t4", [{"name": "gpu", "firstAvailable": [
        {"name": "t4", "deviceClassName": "gpu.nvidia.com", "selectors": [{"cel": {"expression": T4}}]},
        {"name": "any", "deviceClassName": "gpu.nvidia.com"}]}]),
            pod("prefer-t4", "prefer-t4")]


def spread_by_cpu() -> list[list[dict[str, Any]]]:
    """Three pods asking 20 CPUs and any GPU, applied one after the other: LeastAllocated sends
    each to an empty node."""
    return [[template(f"any-{i}", [b.request()]),
             pod(f"cpu-{i}", f"any-{i}", cpu="20")] for i in range(3)]


def preferred_node() -> list[dict[str, Any]]:
    affinity = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 50, "preference": {"matchExpressions": [
            {"key": "kubernetes.io/hostname", "operator": "In", "values": ["t4-1"]}]}}]}}
    return [template("any-gpu", [b.request()]),
            pod("likes-t4-1", "any-gpu", affinity=affinity)]
