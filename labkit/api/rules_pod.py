"""Pod-side DRA rules: ``spec.resourceClaims`` and containers' ``resources.claims``.

Also applied to the pod template of Deployments and Jobs. Extended resources such as
``nvidia.com/gpu`` in limits are fine and not checked here.
"""

from __future__ import annotations

from typing import Any

from labkit.api import names
from labkit.api.problem import Sink, as_dict, as_list, show

__all__ = ["check_pod_spec"]

_CONTAINER_LISTS = ("initContainers", "containers", "ephemeralContainers")


def check_pod_spec(sink: Sink, path: str, spec: Any) -> None:
    spec = as_dict(spec)
    claim_names: list[str] = []
    seen: set[str] = set()
    for i, entry in enumerate(as_list(spec.get("resourceClaims"))):
        entry = as_dict(entry)
        epath = f"{path}.resourceClaims[{i}]"
        name = entry.get("name")
        if not name:
            sink.required(f"{epath}.name", "containers refer to the claim by this name")
        elif isinstance(name, str):
            sink.names(f"{epath}.name", name, names.dns_label(name))
            if name in seen:
                sink.duplicate(f"{epath}.name", name)
            seen.add(name)
            claim_names.append(name)
        sources = [f for f in ("resourceClaimName", "resourceClaimTemplateName") if entry.get(f)]
        if not sources:
            sink.invalid(epath, {k: v for k, v in entry.items() if k != "name"},
                         "must specify one of: `resourceClaimName`, `resourceClaimTemplateName` "
                         "(a shared ResourceClaim, or a template for one claim per pod)")
        elif len(sources) > 1:
            sink.invalid(epath, {k: entry[k] for k in sources},
                         "at most one of `resourceClaimName` or `resourceClaimTemplateName` may be specified")
        for fld in sources:
            value = entry[fld]
            if isinstance(value, str):
                sink.names(f"{epath}.{fld}", value, names.dns_subdomain(value))
    for group in _CONTAINER_LISTS:
        for i, container in enumerate(as_list(spec.get(group))):
            claims = as_list(as_dict(as_dict(container).get("resources")).get("claims"))
            referenced: set[str] = set()  # "claim" (all its requests) or "claim/request"
            for j, claim in enumerate(claims):
                claim = as_dict(claim)
                cpath = f"{path}.{group}[{i}].resources.claims[{j}]"
                name = claim.get("name")
                if not name:
                    sink.required(f"{cpath}.name")
                    continue
                if name not in claim_names:
                    have = f": {', '.join(sorted(claim_names))}" if claim_names else " which is empty"
                    sink.add(cpath, f"Not found: {show(name)}: must be one of the names in "
                                    f"pod.spec.resourceClaims{have}")
                # as the API server: a claim referenced whole covers all its requests, so any later
                # reference to it repeats it, and so does a whole reference after one of its requests
                name, request = str(name), str(claim.get("request") or "")
                key = f"{name}/{request}" if request else name
                if name in referenced:
                    sink.duplicate(cpath, name)
                    continue
                if key in referenced:
                    sink.duplicate(cpath, key)
                elif not request and any(k.startswith(f"{name}/") for k in referenced):
                    sink.duplicate(cpath, name)
                referenced.add(key)
                if request:
                    sink.names(f"{cpath}.request", request, names.dns_label(request))
