"""Builders shared by the labkit.api tests (no tests here)."""

from __future__ import annotations

import copy
from typing import Any

from labkit.cel.validation import validate  # labkit.api.validate with labkit.cel's selector checks

V1 = "resource.k8s.io/v1"


def claim(requests: list | None = None, *, constraints: list | None = None, config: list | None = None,
          name: str = "c", namespace: str = "default") -> dict:
    devices: dict[str, Any] = {"requests": requests if requests is not None else [exact()]}
    if constraints is not None:
        devices["constraints"] = constraints
    if config is not None:
        devices["config"] = config
    return {"apiVersion": V1, "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": namespace}, "spec": {"devices": devices}}


def exact(name: str = "gpu", **fields: Any) -> dict:
    body = {"deviceClassName": "gpu.nvidia.com", **fields}
    return {"name": name, "exactly": body}


def first(name: str = "gpu", subs: list | None = None) -> dict:
    return {"name": name, "firstAvailable": subs if subs is not None else [
        {"name": "big", "deviceClassName": "gpu.nvidia.com"},
        {"name": "small", "deviceClassName": "gpu.nvidia.com", "count": 2}]}


def slice_(devices: list | None = None, **spec: Any) -> dict:
    body: dict[str, Any] = {"driver": "gpu.nvidia.com", "pool": {"name": "node-1", "generation": 0,
                                                                 "resourceSliceCount": 1}}
    if "nodeName" not in spec and not any(k in spec for k in ("nodeSelector", "allNodes", "perDeviceNodeSelection")):
        body["nodeName"] = "node-1"
    body.update(spec)
    if devices is not None:
        body["devices"] = devices
    return {"apiVersion": V1, "kind": "ResourceSlice", "metadata": {"name": "s"}, "spec": body}


def device(name: str = "gpu-0", **fields: Any) -> dict:
    return {"name": name, **fields}


def messages(objs: Any, **kw: Any) -> list[str]:
    """What the API server (``labkit validate``: CEL compiled, cost estimated) says about ``objs``."""
    return [str(p) for p in validate(copy.deepcopy(objs), **kw)]


def one(objs: Any, **kw: Any) -> str:
    """The single problem; fails the test if there are none or several."""
    found = messages(objs, **kw)
    assert len(found) == 1, found
    return found[0]
