"""API-server defaulting for resource.k8s.io/v1 objects (what a stored object would contain).

Only ``resource.k8s.io/v1`` objects are touched; everything else is returned as an unchanged copy.
"""

from __future__ import annotations

from typing import Any

from labkit.api.load import copy_of

__all__ = ["with_defaults"]

_V1 = "resource.k8s.io/v1"


def _default_request_fields(req: Any) -> None:
    """ExactDeviceRequest / DeviceSubRequest: allocationMode ExactCount, count 1, operator Equal."""
    if not isinstance(req, dict):
        return
    if not req.get("allocationMode"):
        req["allocationMode"] = "ExactCount"
    if req.get("allocationMode") == "ExactCount" and not req.get("count"):
        req["count"] = 1
    _default_tolerations(req.get("tolerations"))


def _default_tolerations(tolerations: Any) -> None:
    if not isinstance(tolerations, list):
        return
    for tol in tolerations:
        if isinstance(tol, dict) and not tol.get("operator"):
            tol["operator"] = "Equal"


def _default_device_claim(spec: Any) -> None:
    if not isinstance(spec, dict) or not isinstance(spec.get("devices"), dict):
        return
    requests = spec["devices"].get("requests")
    if not isinstance(requests, list):
        return
    for request in requests:
        if not isinstance(request, dict):
            continue
        _default_request_fields(request.get("exactly"))
        subs = request.get("firstAvailable")
        if isinstance(subs, list):
            for sub in subs:
                _default_request_fields(sub)


def _zero_quantities(counters: Any) -> None:
    """A capacity or counter entry without a value: the API server stores the zero quantity."""
    if isinstance(counters, dict):
        for entry in counters.values():
            if isinstance(entry, dict) and entry.get("value") is None:
                entry["value"] = "0"


def _default_slice(spec: Any) -> None:
    if not isinstance(spec, dict):
        return
    if isinstance(spec.get("pool"), dict) and spec["pool"].get("generation") is None:
        spec["pool"]["generation"] = 0
    for counter_set in spec.get("sharedCounters") or []:
        if isinstance(counter_set, dict):
            _zero_quantities(counter_set.get("counters"))
    for device in spec.get("devices") or []:
        if not isinstance(device, dict):
            continue
        _zero_quantities(device.get("capacity"))
        for consumed in device.get("consumesCounters") or []:
            if isinstance(consumed, dict):
                _zero_quantities(consumed.get("counters"))


def with_defaults(obj: dict[str, Any], *, copy: bool = True) -> dict[str, Any]:
    """A deep copy of ``obj`` with the defaults the API server would apply on create
    (``copy=False``: ``obj`` itself, defaulted in place - for objects the caller just made)."""
    out = copy_of(obj) if copy else obj
    if not isinstance(out, dict) or out.get("apiVersion") != _V1:
        return out
    kind = out.get("kind")
    spec = out.get("spec")
    if kind == "ResourceClaim":
        _default_device_claim(spec)
    elif kind == "ResourceClaimTemplate" and isinstance(spec, dict):
        _default_device_claim(spec.get("spec"))
    elif kind == "ResourceSlice":
        _default_slice(spec)
    elif kind == "DeviceTaintRule" and isinstance(spec, dict):
        pass  # nothing defaulted in v1 besides what the server sets (timeAdded)
    return out
