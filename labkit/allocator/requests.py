"""Per-request data for one Allocate call (``requestData``), with the pre-pass checks."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from labkit.allocator.errors import AllocationError, kobj

__all__ = ["RequestData", "request_view"]


@dataclass(eq=False)
class RequestData:
    claim_index: int
    request_index: int
    sub_index: int
    name: str                 # request name, or subrequest name
    parent: str | None        # parent request name for a subrequest
    spec: dict[str, Any]                # ``exactly`` or the subrequest
    class_obj: dict[str, Any] | None = None
    class_name: str = ""
    mode: str = "ExactCount"
    num_devices: int = 0
    admin: bool = False
    selectors: list[str] = field(default_factory=list)
    tolerations: list[dict[str, Any]] = field(default_factory=list)
    capacity_requests: dict[str, Any] | None = None
    all_devices: list[Any] = field(default_factory=list)
    selected_sub: int = 0

    @property
    def key(self) -> tuple[int, int, int]:
        return (self.claim_index, self.request_index, self.sub_index)

    @property
    def full_name(self) -> str:
        return f"{self.parent}/{self.name}" if self.parent else self.name


def request_view(claim: dict[str, Any], ci: int, ri: int, si: int, req: dict[str, Any], sub: dict[str, Any] | None,
                 classes: dict[str, dict[str, Any]], admin_feature: bool) -> RequestData:
    """Validate one request or subrequest like ``validateDeviceRequest`` (minus the All walk)."""
    spec = sub if sub is not None else (req.get("exactly") or {})
    name = sub.get("name", "") if sub is not None else req.get("name", "")
    rd = RequestData(ci, ri, si, name, req.get("name", "") if sub is not None else None, spec)
    where = f"claim {kobj(claim)}, request {name}"
    if spec.get("derivedAttributes"):
        raise AllocationError(f"{where}: cannot handle request with derived attributes, the feature is disabled")
    selectors = spec.get("selectors") or []
    for i, sel in enumerate(selectors):
        cel = (sel or {}).get("cel")
        if cel is None:
            raise AllocationError(f"{where}, selector #{i}: CEL expression empty (unsupported selector type?)")
        rd.selectors.append(cel.get("expression", ""))
    has_admin = sub is None and "adminAccess" in spec and spec["adminAccess"] is not None
    if not admin_feature and has_admin:
        raise AllocationError(f"{where}: admin access is requested, but the feature is disabled")
    rd.admin = bool(spec.get("adminAccess")) if sub is None else False
    rd.class_name = spec.get("deviceClassName") or ""
    if not rd.class_name:
        raise AllocationError(f"{where}: missing device class name (unsupported request type?)")
    cls = classes.get(rd.class_name)
    if cls is None:
        raise AllocationError(f"{where}: could not retrieve device class {rd.class_name}: "
                              f'deviceclass.resource.k8s.io "{rd.class_name}" not found')
    rd.class_obj = cls
    rd.mode = spec.get("allocationMode") or ""
    rd.tolerations = list(spec.get("tolerations") or [])
    cap = spec.get("capacity")
    rd.capacity_requests = (cap or {}).get("requests") if cap is not None else None
    if rd.mode == "ExactCount":
        rd.num_devices = int(spec.get("count") or 0)
    elif rd.mode != "All":
        raise AllocationError(f"{where}: unsupported count mode {rd.mode}")
    return rd
