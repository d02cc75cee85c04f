"""Device taints and request tolerations (``resourceclaim.ToleratesTaint``)."""

from __future__ import annotations

__all__ = ["tolerates", "taint_prevents", "blocking_taint"]

_BLOCKING = ("NoSchedule", "NoExecute")


def tolerates(toleration: dict, taint: dict) -> bool:
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


def blocking_taint(taints: list[dict], tolerations: list[dict], every_effect: bool = False) -> dict | None:
    """The first NoSchedule/NoExecute taint no toleration covers (None and unknown effects never
    block, except with ``every_effect``: Kubernetes <= 1.35 required every taint tolerated)."""
    for taint in taints:
        if (every_effect or taint.get("effect") in _BLOCKING) and not any(tolerates(t, taint) for t in tolerations):
            return taint
    return None


def taint_prevents(taints: list[dict], tolerations: list[dict], every_effect: bool = False) -> bool:
    return bool(taints) and blocking_taint(taints, tolerations, every_effect) is not None
