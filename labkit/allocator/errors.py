"""Allocator errors and the small formatting helpers shared by their messages."""

from __future__ import annotations

from typing import Any

from labkit.errors import EngineError

__all__ = ["AllocationError", "kobj", "device_str", "MAX_RESULTS"]

#: resourceapi.AllocationResultsMaxSize
MAX_RESULTS = 32


class AllocationError(EngineError):
    """What upstream's ``Allocate`` returns as an error. ``node_scoped`` errors (wrapping
    ``ErrFailedAllocationOnNode``) only mean "unschedulable on this node"."""

    def __init__(self, message: str, *, node_scoped: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.node_scoped = node_scoped


def kobj(obj: dict[str, Any]) -> str:
    """``klog.KObj``: ``ns/name``, or ``name`` without namespace."""
    meta = (obj or {}).get("metadata") or {}
    ns, name = meta.get("namespace") or "", meta.get("name") or ""
    return f"{ns}/{name}" if ns else name


def device_str(device_id: tuple[str, str, str]) -> str:
    return "/".join(device_id)
