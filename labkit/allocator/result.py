"""Turning a found solution into AllocationResult dicts (Go ``encoding/json`` shape, omitempty)."""

from __future__ import annotations

from typing import Any

from labkit.allocator.core import DeviceResult, Search
from labkit.allocator.errors import AllocationError

__all__ = ["build_results"]


def _clean(d: dict[str, Any]) -> dict[str, Any]:
    """Drop empty values like Go's omitempty for string/list fields (keeps 0 and False)."""
    return {k: v for k, v in d.items() if v is not None and v != "" and v != [] and v != {}}


def _requirements(reqs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [_clean({"key": r.get("key", ""), "operator": r.get("operator", ""), "values": list(r.get("values") or [])})
            for r in reqs]


def _contains(have: list[dict[str, Any]], req: dict[str, Any]) -> bool:
    values = set(req.get("values") or [])
    return any(h.get("key") == req.get("key") and h.get("operator") == req.get("operator")
               and set(h.get("values") or []) == values for h in have)


def _node_selector(search: Search, devices: list[DeviceResult], claim: dict[str, Any]) -> dict[str, Any] | None:
    stable = search.profile.code == "stable"
    node_name = ((search.node or {}).get("metadata") or {}).get("name", "")
    fields: list[dict[str, Any]] = []
    exprs: list[dict[str, Any]] = []
    for r in devices:
        dev = r.device
        if dev.slice.per_device:
            name, selector = dev.node_name, dev.node_selector
        else:
            name, selector = dev.slice.node_name, dev.slice.node_selector
        if name or (dev.binds_to_node and search.profile.binds_to_node):
            target = name if stable else node_name
            return {"nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": [target]}]}]}
        if selector is not None:
            terms = selector.get("nodeSelectorTerms") or []
            if len(terms) == 1:
                for req in terms[0].get("matchFields") or []:
                    if not _contains(fields, req):
                        fields.append(req)
                for req in terms[0].get("matchExpressions") or []:
                    if not _contains(exprs, req):
                        exprs.append(req)
            elif len(terms) > 1:
                raise AllocationError(f"create NodeSelector for claim {(claim.get('metadata') or {}).get('name', '')}: "
                                      f"unsupported ResourceSlice.NodeSelector with {len(terms)} terms")
    if not fields and not exprs:
        return None
    return {"nodeSelectorTerms": [_clean({"matchExpressions": _requirements(exprs),
                                          "matchFields": _requirements(fields)})]}


def _device_result(search: Search, r: DeviceResult) -> dict[str, Any]:
    dev = r.device
    out: dict[str, Any] = {"request": r.rd.full_name, "driver": dev.id[0], "pool": dev.id[1], "device": dev.id[2]}
    if r.rd.admin:
        out["adminAccess"] = True
    tolerations = [_clean(dict(t)) for t in r.rd.tolerations] if search.profile.copies_tolerations else []
    if tolerations:
        out["tolerations"] = tolerations
    if search.f.DeviceBindingAndStatus:
        if dev.binding_conditions:
            out["bindingConditions"] = list(dev.binding_conditions)
        if dev.binding_failure_conditions:
            out["bindingFailureConditions"] = list(dev.binding_failure_conditions)
    if r.share_id is not None:
        out["shareID"] = r.share_id
    if r.consumed:
        out["consumedCapacity"] = {k: q.canonical() for k, q in sorted(r.consumed.items())}
    if search.profile.experimental_code and dev.slice.skip_node_operations:
        out["skipNodeOperations"] = list(dev.slice.skip_node_operations)
    return out


def _configs(search: Search, ci: int, claim: dict[str, Any]) -> list[dict[str, Any]]:
    requests = search.requests[ci]
    chosen = []
    for ri, _req in enumerate(requests):
        rd = search.req_data[(ci, ri, 0)]
        if rd.parent is not None:
            rd = search.req_data[(ci, ri, rd.selected_sub)]
        chosen.append(rd)
    config: list[dict[str, Any]] = []
    ranges: dict[str, tuple[int, int]] = {}
    for rd in chosen:
        cls = rd.class_obj
        if cls is None:
            continue
        cname = (cls.get("metadata") or {}).get("name", "")
        if cname in ranges:
            lo, hi = ranges[cname]
            for i in range(lo, hi):
                config[i]["requests"].append(rd.full_name)
            continue
        lo = len(config)
        for entry in (cls.get("spec") or {}).get("config") or []:
            config.append({"source": "FromClass", "requests": [rd.full_name], **_opaque(entry)})
        ranges[cname] = (lo, len(config))
    for entry in ((claim.get("spec") or {}).get("devices") or {}).get("config") or []:
        wanted = entry.get("requests") or []
        if not wanted:
            config.append({"source": "FromClaim", "requests": [], **_opaque(entry)})
            continue
        once = search.profile.config_v37  # before 1.37 one copy per matching request
        for ri, req in enumerate(requests):
            if req.get("name") in wanted:
                config.append({"source": "FromClaim", "requests": list(wanted), **_opaque(entry)})
                if once:
                    break
                continue
            rd = chosen[ri]
            if rd.parent is not None and rd.full_name in wanted:
                config.append({"source": "FromClaim", "requests": list(wanted), **_opaque(entry)})
                if once:
                    break
    if not search.profile.config_v37:
        return [_clean(e) if not e["requests"] else e for e in config]
    for entry in config:
        reqs = entry["requests"]
        if not reqs:
            continue
        if all(req.get("name") in reqs or (chosen[ri].parent is not None and chosen[ri].full_name in reqs)
               for ri, req in enumerate(requests)):
            entry["requests"] = []
    return [_clean(e) if not e["requests"] else e for e in config]


def _opaque(entry: dict[str, Any]) -> dict[str, Any]:
    out = {}
    if entry.get("opaque") is not None:
        out["opaque"] = entry["opaque"]
    return out


def build_results(search: Search) -> list[dict[str, Any]]:
    out = []
    for ci, claim in enumerate(search.claims):
        devices = search.results[ci]
        alloc_devices: dict[str, Any] = {}
        results = [_device_result(search, r) for r in devices]
        if results:
            alloc_devices["results"] = results
        config = _configs(search, ci, claim)
        if config:
            alloc_devices["config"] = config
        result: dict[str, Any] = {"devices": alloc_devices}
        selector = _node_selector(search, devices, claim)
        if selector is not None:
            result["nodeSelector"] = selector
        out.append(result)
    return out
