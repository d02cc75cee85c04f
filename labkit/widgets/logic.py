"""What the widgets do, as plain functions (testable without a browser, usable in scripts).

- `Filter` / `RequestSpec` / `ClaimSpec` -> a real ResourceClaim or ResourceClaimTemplate
- `selector_for(filter)`: an attribute filter as the CEL a Kubernetes engineer would write
- `match_devices(...)`: which devices a class + selectors match, with CEL errors per device
- `allocate_on_cluster(...)`: run the allocator node by node, as the scheduler would
- `inventory_rows(...)`: every device, free or held by which claim
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from labkit.allocator import AllocatedState, Allocator, features_for
from labkit.api.attributes import plain_attributes
from labkit.cel import compile_selector
from labkit.cel.slices import DeviceMatch, evaluate_slices
from labkit.errors import InputError, NotFoundError
from labkit.sim.scoring import prioritized_list, prioritized_list_scoring
from labkit.topology.graph import plain_capacity


class FilterError(InputError, ValueError):
    """A filter row the widget cannot turn into CEL."""


class DeviceClassNotFound(NotFoundError, KeyError):
    """A DeviceClass name that is not in the cluster."""

    def __str__(self) -> str:  # the message, not KeyError's quoted repr
        return str(self.args[0]) if self.args else ""


OPERATORS = ("==", "!=", ">=", ">", "<=", "<", "matches", "in")


@dataclass
class Filter:
    """One attribute or capacity condition, e.g. Filter("memory", ">=", "40Gi")."""

    name: str
    op: str
    value: str
    kind: str = "auto"  # auto | string | int | bool | version | quantity

    def describe(self) -> str:
        return f"{self.name} {self.op} {self.value}"


@dataclass
class RequestSpec:
    name: str = "gpu"
    device_class: str = "gpu.nvidia.com"
    count: int = 1
    all_devices: bool = False
    filters: list[Filter] = field(default_factory=list)
    alternatives: list[RequestSpec] = field(default_factory=list)
    admin_access: bool = False


@dataclass
class ClaimSpec:
    name: str = "my-claim"
    namespace: str = "default"
    requests: list[RequestSpec] = field(default_factory=lambda: [RequestSpec()])
    match_attribute: str | None = None  # e.g. resource.kubernetes.io/pcieRoot
    distinct_attribute: str | None = None
    template: bool = False  # ResourceClaimTemplate (one claim per pod) instead of a shared claim


def _domain_and_id(name: str, driver: str) -> tuple[str, str]:
    if "/" in name:
        domain, ident = name.split("/", 1)
        return domain, ident
    return driver, name


def _literal(value: str, kind: str) -> tuple[str, str]:
    """(CEL literal, kind) for a filter value."""
    v = value.strip()
    if kind == "auto":
        if v.lower() in ("true", "false"):
            kind = "bool"
        elif v.lstrip("-").isdigit():
            kind = "int"
        elif _looks_like_quantity(v):
            kind = "quantity"
        elif v.count(".") == 2 and all(p.isdigit() for p in v.split(".")):
            kind = "version"
        else:
            kind = "string"
    if kind == "bool":
        return v.lower(), kind
    if kind == "int":
        return str(int(v)), kind
    if kind == "quantity":
        return f'quantity("{v}")', kind
    if kind == "version":
        return f'semver("{v}")', kind
    return json.dumps(v), kind


def _looks_like_quantity(v: str) -> bool:
    import re

    return bool(re.fullmatch(r"[0-9.]+(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E|m)", v))


def selector_for(f: Filter, driver: str = "gpu.nvidia.com", capacity_names: Iterable[str] = ()) -> str:
    """CEL for one filter. Quantities and versions use compareTo (they have no `>=` in Kubernetes CEL)."""
    domain, ident = _domain_and_id(f.name, driver)
    literal, kind = _literal(f.value, f.kind)
    is_capacity = kind == "quantity" or f.name in set(capacity_names)
    if is_capacity and kind != "quantity":
        literal, kind = f'quantity("{f.value.strip()}")', "quantity"
    base = f'device.{"capacity" if is_capacity else "attributes"}["{domain}"].{ident}'
    if f.op not in OPERATORS:
        raise FilterError(f"filter {f.describe()!r}: unknown operator {f.op!r}; fix: use one of {', '.join(OPERATORS)}")
    if f.op == "matches":
        return f"{base}.matches({json.dumps(f.value.strip())})"
    if f.op == "in":
        items = [_literal(x, "auto")[0] for x in f.value.split(",") if x.strip()]
        return f"{base} in [{', '.join(items)}]"
    if kind in ("quantity", "version") and f.op not in ("==", "!="):
        return f"{base}.compareTo({literal}) {f.op} 0"
    if kind in ("quantity", "version"):
        return f"{base}.compareTo({literal}) {'==' if f.op == '==' else '!='} 0"
    return f"{base} {f.op} {literal}"


def _exact(spec: RequestSpec, driver: str, capacity_names: Iterable[str]) -> dict[str, Any]:
    out: dict[str, Any] = {"deviceClassName": spec.device_class}
    selectors = [{"cel": {"expression": selector_for(f, driver, capacity_names)}} for f in spec.filters]
    if selectors:
        out["selectors"] = selectors
    if spec.all_devices:
        out["allocationMode"] = "All"
    else:
        out["allocationMode"] = "ExactCount"
        out["count"] = int(spec.count)
    if spec.admin_access:
        out["adminAccess"] = True
    return out


def build_claim(spec: ClaimSpec, *, driver: str = "gpu.nvidia.com",
                capacity_names: Iterable[str] = ("memory",)) -> dict[str, Any]:
    """The ResourceClaim (or ResourceClaimTemplate) for a ClaimSpec, as API YAML would say it."""
    capacity_names = list(capacity_names)
    requests = []
    for r in spec.requests:
        if r.alternatives:
            subs = [{"name": f"{r.name}-{i}" if not a.name or a.name == r.name else a.name,
                     **_exact(a, driver, capacity_names)} for i, a in enumerate([r, *r.alternatives])]
            requests.append({"name": r.name, "firstAvailable": subs})
        else:
            requests.append({"name": r.name, "exactly": _exact(r, driver, capacity_names)})
    devices: dict[str, Any] = {"requests": requests}
    constraints = []
    if spec.match_attribute:
        constraints.append({"matchAttribute": spec.match_attribute})
    if spec.distinct_attribute:
        constraints.append({"distinctAttribute": spec.distinct_attribute})
    if constraints:
        devices["constraints"] = constraints
    claim_spec = {"devices": devices}
    meta = {"name": spec.name, "namespace": spec.namespace}
    if spec.template:
        return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": meta,
                "spec": {"spec": claim_spec}}
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": meta, "spec": claim_spec}


def claim_from_template(obj: dict[str, Any]) -> dict[str, Any]:
    """A ResourceClaim with the template's spec (what the claim controller would create)."""
    if obj.get("kind") != "ResourceClaimTemplate":
        return obj
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": dict(obj["metadata"]), "spec": obj["spec"]["spec"]}


def iter_devices(slices: Iterable[dict]) -> Iterable[tuple[dict, dict]]:
    for s in slices:
        for d in s.get("spec", {}).get("devices") or []:
            yield s, d


def match_devices(
    expressions: list[str], slices: Iterable[dict], *, engine: str | None = None
) -> list[DeviceMatch]:
    """Evaluate ANDed selectors on every device (short-circuit on the first false, like the allocator)."""
    return evaluate_slices([compile_selector(e, engine=engine) for e in expressions], slices)


def class_expressions(classes: Iterable[dict], name: str) -> list[str]:
    for c in classes:
        if c["metadata"]["name"] == name:
            return [s["cel"]["expression"] for s in c.get("spec", {}).get("selectors") or [] if "cel" in s]
    known = ", ".join(sorted(c["metadata"]["name"] for c in classes))
    raise DeviceClassNotFound(f"DeviceClass {name!r} not found; fix: use one of {known}")


def preview(claim: dict[str, Any], classes: list[dict], slices: list[dict]) -> dict[str, tuple[int, int]]:
    """Per request (first alternative): (devices matching class + selectors, devices of that class)."""
    out: dict[str, tuple[int, int]] = {}
    claim = claim_from_template(claim)
    for r in claim["spec"]["devices"]["requests"]:
        exact = r.get("exactly") or (r.get("firstAvailable") or [{}])[0]
        cls = class_expressions(classes, exact["deviceClassName"])
        own = [s["cel"]["expression"] for s in exact.get("selectors") or []]
        of_class = sum(1 for m in match_devices(cls, slices) if m.result == "match")
        matching = sum(1 for m in match_devices(cls + own, slices) if m.result == "match")
        out[r["name"]] = (matching, of_class)
    return out


@dataclass
class Placement:
    node: str | None
    status: str
    allocation: dict[str, Any] | None
    summary: str
    devices: list[str] = field(default_factory=list)


def allocate_on_cluster(claim: dict[str, Any], classes: list[dict], slices: list[dict],
                        in_use: list[dict], nodes: list[dict], *, kubernetes_version: str = "1.37") -> Placement:
    """Where the sim scheduler would put a pod with just this claim: among the nodes that can
    allocate it, the one whose firstAvailable choices score best (Kubernetes 1.35+), else the
    first by name."""
    claim = claim_from_template(claim)
    claim.setdefault("metadata", {}).setdefault("uid", "00000000-0000-0000-0000-000000000001")
    features = features_for(kubernetes_version)
    allocator = Allocator(features, classes, slices,
                          AllocatedState.from_claims([c for c in in_use if c.get("status", {}).get("allocation")]))
    scored = prioritized_list_scoring(features, kubernetes_version) and any(
        r.get("firstAvailable") for r in ((claim.get("spec") or {}).get("devices") or {}).get("requests") or [])
    explanations = []
    best: tuple[int, str, dict] | None = None
    for node in sorted(nodes, key=lambda n: n["metadata"]["name"]):
        outcome = allocator.allocate(node, [claim])
        name = node["metadata"]["name"]
        if outcome.status == "allocated":
            alloc = outcome.allocations[0]
            score = prioritized_list([claim], [alloc]) if scored else 0
            if best is None or score > best[0]:
                best = (score, name, alloc)
            if not scored:
                break
            continue
        if outcome.status == "error":
            return Placement(None, "error", None, outcome.error or "error")
        if outcome.explanation is not None:
            explanations.append(f"{name}: {outcome.explanation.summary()}")
        else:
            explanations.append(f"{name}: cannot allocate")
    if best is not None:
        _, name, alloc = best
        devices = [r["device"] for r in alloc.get("devices", {}).get("results", [])]
        return Placement(name, "allocated", alloc, f"allocated on {name}: {', '.join(devices)}", devices)
    return Placement(None, "unsatisfiable", None, "no node can satisfy the claim\n" + "\n".join(explanations))


@dataclass
class InventoryRow:
    node: str
    driver: str
    device: str
    type: str
    model: str
    memory: str
    state: str  # free | in use by ns/name | tainted


def inventory_rows(slices: Iterable[dict], claims: Iterable[dict] = ()) -> list[InventoryRow]:
    held: dict[tuple[str, str, str], list[str]] = {}
    for c in claims:
        alloc = (c.get("status") or {}).get("allocation")
        if not alloc:
            continue
        who = f"{c['metadata'].get('namespace', 'default')}/{c['metadata']['name']}"
        for r in alloc.get("devices", {}).get("results", []):
            held.setdefault((r["driver"], r["pool"], r["device"]), []).append(who)
    rows = []
    for s, d in iter_devices(slices):
        spec = s["spec"]
        attrs = plain_attributes(d)
        caps = plain_capacity(d)
        key = (spec["driver"], spec["pool"]["name"], d["name"])
        state = "free"
        if key in held:
            state = "in use by " + ", ".join(sorted(held[key]))
        elif any(t.get("effect") in ("NoSchedule", "NoExecute") for t in d.get("taints") or []):
            state = "tainted"
        model = str(attrs.get("productName") or attrs.get("model") or "")
        if attrs.get("profile"):
            model += f" [{attrs['profile']}]"
        rows.append(InventoryRow(spec.get("nodeName") or spec["pool"]["name"], spec["driver"], d["name"],
                                 str(attrs.get("type", "")), model, caps.get("memory", ""), state))
    return rows


def html_table(rows: list[Any], columns: list[str] | None = None, max_rows: int = 200) -> str:
    """A small HTML table for dataclass rows (used by the widgets and notebooks)."""
    from dataclasses import asdict
    from html import escape

    if not rows:
        return "<i>nothing to show</i>"
    dicts = [asdict(r) if hasattr(r, "__dataclass_fields__") else dict(r) for r in rows]
    columns = columns or list(dicts[0])
    head = "".join(f"<th style='text-align:left;padding:2px 10px 2px 0'>{escape(c)}</th>" for c in columns)
    def cell(v: Any) -> str:
        return f"{v:.4g}" if isinstance(v, float) else str(v)  # 0.30000000000000004 -> 0.3

    body = "".join(
        "<tr>" + "".join(f"<td style='text-align:left;padding:2px 10px 2px 0'>{escape(cell(d.get(c, '')))}</td>" for c in columns) + "</tr>"
        for d in dicts[:max_rows]
    )
    more = f"<tr><td colspan={len(columns)}>… {len(dicts) - max_rows} more</td></tr>" if len(dicts) > max_rows else ""
    return f"<table class='labkit-table'><thead><tr>{head}</tr></thead><tbody>{body}{more}</tbody></table>"
