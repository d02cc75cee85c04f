"""Taints and tolerations, the one home for both kinds (sim and allocator alike).

One matching rule serves node taints vs pod tolerations (core/v1 ``Toleration.ToleratesTaint``)
and device taints vs request tolerations (``resourceclaim.ToleratesTaint``, a copy of the
former):

1. an empty toleration effect matches every taint effect, else the effects must be equal;
2. an empty toleration key matches every taint key, else the keys must be equal;
3. operator ``Exists`` matches every value; ``Equal`` or empty (defaulting sets ``Equal``)
   needs equal values; any other operator matches nothing.

So ``{operator: Exists}`` tolerates everything. An empty key with ``Equal`` is rejected by API
validation ("operator must be Exists when `key` is empty"); when such a toleration gets past
validation, Kubernetes compares values only (the key matches every key) and so does this.
Pod tolerations' ``Gt``/``Lt`` (gate TaintTolerationComparisonOperators, not modelled here)
match nothing, as with that gate off.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["tolerates", "taint_prevents", "blocking_taint", "untolerated_taint", "BLOCKING_EFFECTS"]

#: the effects that keep a pod off a node / a device out of an allocation
BLOCKING_EFFECTS = ("NoSchedule", "NoExecute")


def tolerates(toleration: dict[str, Any], taint: dict[str, Any]) -> bool:
    """Does one toleration tolerate one taint (node or device: the rule is the same)?"""
    effect = toleration.get("effect") or ""
    if effect and effect != (taint.get("effect") or ""):
        return False
    key = toleration.get("key") or ""
    if key and key != (taint.get("key") or ""):
        return False
    op = toleration.get("operator") or ""
    if op in ("", "Equal"):
        return (toleration.get("value") or "") == (taint.get("value") or "")
    return op == "Exists"


def blocking_taint(taints: Sequence[dict[str, Any]], tolerations: list[dict[str, Any]], every_effect: bool = False) -> dict[str, Any] | None:
    """The first NoSchedule/NoExecute taint no toleration covers (None and unknown effects never
    block, except with ``every_effect``: Kubernetes <= 1.35 required every device taint tolerated)."""
    for taint in taints:
        if (every_effect or taint.get("effect") in BLOCKING_EFFECTS) and not any(tolerates(t, taint) for t in tolerations):
            return taint
    return None


def taint_prevents(taints: Sequence[dict[str, Any]], tolerations: list[dict[str, Any]], every_effect: bool = False) -> bool:
    return bool(taints) and blocking_taint(taints, tolerations, every_effect) is not None


def untolerated_taint(pod: dict[str, Any], node: dict[str, Any]) -> dict[str, Any] | None:
    """kube-scheduler's TaintToleration filter: the node's first NoSchedule/NoExecute taint the pod
    does not tolerate (PreferNoSchedule only lowers the score)."""
    return blocking_taint((node.get("spec") or {}).get("taints") or [],
                          (pod.get("spec") or {}).get("tolerations") or [])
