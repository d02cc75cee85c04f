"""Recognise manifests written for old DRA APIs and say what the resource.k8s.io/v1 form is."""

from __future__ import annotations

from typing import Any

from labkit.api.problem import Sink, as_dict, as_list

__all__ = ["check_legacy", "migration"]

_V1 = "resource.k8s.io/v1"
_REMOVED_KINDS = {
    "ResourceClass": "ResourceClass was removed in Kubernetes 1.31 (classic DRA); use a DeviceClass "
                     "(resource.k8s.io/v1) with CEL selectors",
    "PodSchedulingContext": "PodSchedulingContext was removed in Kubernetes 1.32 (classic DRA); the "
                            "scheduler allocates from ResourceSlices now, delete this object",
    "ResourceClaimParameters": "ResourceClaimParameters was removed in Kubernetes 1.31; put the settings "
                               "into the claim's spec.devices.config[].opaque.parameters",
    "ResourceClassParameters": "ResourceClassParameters was removed in Kubernetes 1.31; put the settings "
                               "into the DeviceClass's spec.config[].opaque.parameters",
}
_BETA_SHAPE = ("deviceClassName", "selectors", "allocationMode", "count", "adminAccess", "tolerations")


#: the structural changes from an old resource.k8s.io version to v1, per kind (what is not
#: listed kept its shape). v1alpha3 is Kubernetes 1.31-1.32, v1beta1 1.32-1.33, v1beta2 1.33.
_REQUEST_FLAT = ("move each request's deviceClassName, selectors, allocationMode, count and adminAccess "
                 "under `exactly:` (spec.devices.requests[].exactly)")
_BASIC = "remove each device's `basic:` wrapper (attributes, capacity and the other fields sit on the device)"
_MIGRATIONS: dict[str, dict[str, tuple[str, ...]]] = {
    "v1alpha3": {
        "ResourceClaim": (_REQUEST_FLAT, "drop spec.controller if set (classic DRA, removed in 1.32)"),
        "ResourceClaimTemplate": (_REQUEST_FLAT.replace("spec.devices", "spec.spec.devices"),
                                  "drop spec.spec.controller if set (classic DRA, removed in 1.32)"),
        "ResourceSlice": (_BASIC, "write each capacity as {value: QUANTITY} instead of a bare quantity"),
        "DeviceClass": ("drop spec.suitableNodes if set (classic DRA, removed in 1.32); selectors and config keep "
                        "their shape",),
    },
    "v1beta1": {
        "ResourceClaim": (_REQUEST_FLAT,),
        "ResourceClaimTemplate": (_REQUEST_FLAT.replace("spec.devices", "spec.spec.devices"),),
        "ResourceSlice": (_BASIC,),
    },
    "v1beta2": {},
}


def migration(version: str, kind: str) -> str:
    """Every structural change a ``kind`` of resource.k8s.io/``version`` needs to become v1."""
    if version not in _MIGRATIONS:
        return f"{version} is not a resource.k8s.io version LabKit knows: write the object in the v1 shape"
    changes = _MIGRATIONS[version].get(kind, ())
    return "; ".join(changes) if changes else "the fields are the same"


def check_legacy(obj: dict[str, Any], sink: Sink) -> tuple[bool, set[str]]:
    """Report old-API usage. Returns (stop: skip all other checks, paths the schema check skips)."""
    api, kind = str(obj.get("apiVersion", "")), str(obj.get("kind", ""))
    if kind in _REMOVED_KINDS:
        sink.add("kind", _REMOVED_KINDS[kind])
        return True, set()
    if api in ("resource.k8s.io/v1alpha1", "resource.k8s.io/v1alpha2"):
        sink.add("apiVersion", f"{api} was classic DRA, removed by Kubernetes 1.31; use {_V1} "
                               "(requests under spec.devices.requests[].exactly)")
        return True, set()
    if api.startswith("resource.k8s.io/") and api != _V1:
        version = api.split("/", 1)[1]
        if kind == "DeviceTaintRule" and version in ("v1alpha3", "v1beta2"):
            sink.add("apiVersion", f"LabKit reads {_V1}; DeviceTaintRule is {_V1} from Kubernetes 1.37 "
                                   f"(was {version} before): change apiVersion to {_V1}")
            return True, set()
        sink.add("apiVersion", f"{api} is not served by default (Kubernetes 1.34+ serves {_V1}); "
                               f"change apiVersion to {_V1} ({migration(version, kind)})")
        return True, set()
    if api != _V1:
        return False, set()
    skip: set[str] = set()
    spec = as_dict(obj.get("spec"))
    if kind in ("ResourceClaim", "ResourceClaimTemplate"):
        base = "spec" if kind == "ResourceClaim" else "spec.spec"
        claim_spec = spec if kind == "ResourceClaim" else as_dict(spec.get("spec"))
        for fld, msg in (
            ("resourceClassName", "resourceClassName was removed in Kubernetes 1.31 (classic DRA); name "
                                  "a DeviceClass in spec.devices.requests[].exactly.deviceClassName"),
            ("parametersRef", "parametersRef was removed in Kubernetes 1.31 (classic DRA); put settings "
                              "into spec.devices.config[].opaque.parameters or CEL selectors"),
            ("allocationMode", "spec.allocationMode (WaitForFirstConsumer/Immediate) was removed in "
                               "Kubernetes 1.31; allocation happens when a pod is scheduled"),
        ):
            if fld in claim_spec:
                sink.add(f"{base}.{fld}", msg)
                skip.add(f"{base}.{fld}")
        requests = as_list(as_dict(claim_spec.get("devices")).get("requests"))
        for i, req in enumerate(requests):
            flat = [k for k in _BETA_SHAPE if isinstance(req, dict) and k in req]
            if flat:
                path = f"{base}.devices.requests[{i}]"
                sink.add(path, "v1beta1 request fields: move deviceClassName/selectors/count/"
                               f"allocationMode under `exactly:` (found {', '.join(flat)})")
                skip.update(f"{path}.{k}" for k in flat)
    if kind == "ResourceSlice":
        for i, dev in enumerate(as_list(spec.get("devices"))):
            if isinstance(dev, dict) and "basic" in dev:
                path = f"spec.devices[{i}].basic"
                sink.add(path, "v1beta1 `basic:` wrapper: in resource.k8s.io/v1 attributes, capacity and "
                               "the other device fields sit directly on the device; remove `basic:`")
                skip.add(path)
    return False, skip
