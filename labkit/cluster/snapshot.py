"""A cluster's DRA-relevant state as one multi-document YAML (`labkit snapshot`), the input of a
what-if (`labkit simulate --state`, `connect("sim", state=...)`).

The objects are those `kubectl get <kind> -A -o yaml` prints, one per document: apiVersion and kind
on each, status included, managedFields left out (as kubectl does by default).
"""

from __future__ import annotations

from typing import Any

from labkit.api import dump
from labkit.cluster.base import NotFound
from labkit.model.state import STATE_KINDS

#: kinds a cluster may not serve at all (DeviceTaintRule is alpha before 1.37): none of them, then
OPTIONAL_KINDS = frozenset({"DeviceTaintRule"})


def cluster_state(cluster: Any) -> list[dict]:
    """The objects of labkit.model.state.STATE_KINDS on `cluster`, each with apiVersion and kind."""
    out = []
    for kind, api_version in STATE_KINDS.items():
        try:
            objs = cluster.list(kind)
        except NotFound:
            if kind not in OPTIONAL_KINDS:
                raise
            continue
        for obj in objs:
            obj = {"apiVersion": obj.get("apiVersion") or api_version, "kind": obj.get("kind") or kind,
                   **{k: v for k, v in obj.items() if k not in ("apiVersion", "kind")}}
            if "managedFields" in (obj.get("metadata") or {}):
                obj["metadata"] = {k: v for k, v in obj["metadata"].items() if k != "managedFields"}
            out.append(obj)
    return out


def snapshot_yaml(cluster: Any) -> str:
    """`cluster_state(cluster)` as multi-document YAML."""
    return dump(cluster_state(cluster), "yaml")
