"""The claim explanation: why claims did (not) fit on one node, in words and as data.

(The pod-level explanations built on it: ``labkit.cluster.explain`` and ``explain_live``.)

Explanations are gathered in separate passes after the allocation, so they can never change
its result: first the shortest prefix of the claims that fails is found (by re-running the
allocator on ``claims[:k]``), then every device visible on the node is checked against the
failing claim's requests with the devices the successful prefix took counted as in use. For each
rejected device the FIRST rule that rejected it is reported, in the allocator's order of checks.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from labkit.allocator.capacity import CapacityError, check_capacity
from labkit.allocator.errors import AllocationError, device_str, kobj
from labkit.allocator.nodes import NodeSelectorError, node_matches
from labkit.allocator.quantities import qparse, qvalue
from labkit.allocator.requests import RequestData, request_view
from labkit.allocator.selectors import SelectorCompileError, SelectorRuntimeError
from labkit.allocator.taints import blocking_taint
from labkit.api.attributes import lookup_attribute
from labkit.api.quantity import Quantity
from labkit.output import escape_terminal

if TYPE_CHECKING:
    from labkit.allocator.allocator import Allocator, Outcome
    from labkit.allocator.model import DeviceInfo
    from labkit.allocator.pools import Pool
    from labkit.allocator.state import AllocatedState, DeviceID

__all__ = ["Explanation", "RequestExplanation", "Rejection", "explain"]

#: rule -> short phrase used in summaries
PHRASES = {
    "binding-conditions": ("has", "have", " binding conditions but DRADeviceBindingConditions is off"),
    "class-selector": ("is", "are", " excluded by the device class selector"),
    "request-selector": ("does", "do", " not match the request selector"),
    "cel-error": ("makes", "make", " a selector fail with a CEL error"),
    "node-mismatch": ("is", "are", " not usable from this node"),
    "in-use": ("is", "are", " in use"),
    "capacity": ("does", "do", " not have enough capacity left"),
    "partitionable-off": ("consumes", "consume", " shared counters but DRAPartitionableDevices is off"),
    "counters": ("has", "have", " not enough shared counters left (another partition of the same device is in use)"),
    "taint": ("is", "are", " tainted and the request does not tolerate it"),
    "constraint": ("breaks", "break", " a claim constraint"),
}


def phrase(rule: str, n: int) -> str:
    singular, plural, rest = PHRASES[rule]
    return (singular if n == 1 else plural) + rest


@dataclass
class Rejection:
    device: str
    rule: str
    detail: str
    data: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"device": self.device, "rule": self.rule, "detail": self.detail, **self.data}


@dataclass
class RequestExplanation:
    claim: str
    request: str
    needed: int | str
    considered: int = 0
    matching: int = 0
    candidates: list[str] = field(default_factory=list)
    rejected: list[Rejection] = field(default_factory=list)
    selectors: list[str] = field(default_factory=list)
    device_class: str = ""
    error: str | None = None

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for r in self.rejected:
            out[r.rule] = out.get(r.rule, 0) + 1
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"claim": self.claim, "request": self.request, "deviceClass": self.device_class,
                "error": self.error, "needed": self.needed,
                "considered": self.considered, "matching": self.matching,
                "available": len(self.candidates), "candidates": self.candidates,
                "reasons": self.counts(), "rejected": [r.to_dict() for r in self.rejected]}

    def summary(self) -> str:
        sel = " && ".join(f"`{s}`" for s in self.selectors) or f"class {self.device_class}"
        head = (f"claim {self.claim}, request {self.request} (needs {self.needed}): "
                f"{self.matching} of {self.considered} devices match {sel}")
        if self.error:
            return self.error
        groups: dict[str, list[Rejection]] = {}
        for r in self.rejected:
            groups.setdefault(r.rule, []).append(r)
        early = [f"{len(items)} {phrase(rule, len(items))}{_rule_detail(rule, items)}"
                 for rule, items in groups.items() if rule in _SELECTION_RULES]
        parts = []
        for rule, items in groups.items():
            if rule in _SELECTION_RULES:
                continue
            n = len(items)
            who = ("it" if n == 1 else f"all {n}") if n == self.matching else f"{n}"
            parts.append(f"{who} {phrase(rule, n)}{_rule_detail(rule, items)}")
        text = head + (f" ({'; '.join(early)})" if early else "")
        if parts:
            text += "; " + "; ".join(parts)
        usable = len(self.candidates)
        if self.matching and usable:
            text += f"; {usable} usable"
            if isinstance(self.needed, int) and usable < self.needed:
                text += f", {self.needed} needed"
            elif isinstance(self.needed, int):
                text += (f", but no {self.needed} of them fit together with the claim's other requests "
                         "(shared counters of one GPU, constraints, or capacity)")
        return text


_SELECTION_RULES = ("binding-conditions", "class-selector", "request-selector", "cel-error", "node-mismatch")


def _rule_detail(rule: str, items: list[Rejection]) -> str:
    if rule == "in-use":
        owners = sorted({o for r in items for o in r.data.get("by", [])})
        return f" by {', '.join(owners)}" if owners else ""
    if rule in ("taint", "counters", "capacity", "constraint", "class-selector", "request-selector",
                "cel-error"):
        details = sorted({r.detail for r in items})
        return f" ({'; '.join(details[:3])}{'; ...' if len(details) > 3 else ''})"
    return ""


@dataclass
class Explanation:
    node: str
    status: str
    error: str | None = None
    failing_claim: str | None = None
    allocated: list[str] = field(default_factory=list)
    requests: list[RequestExplanation] = field(default_factory=list)
    pools: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"node": self.node, "status": self.status, "error": self.error,
                "failingClaim": self.failing_claim, "allocatedBefore": self.allocated,
                "pools": self.pools, "requests": [r.to_dict() for r in self.requests]}

    def summary(self) -> str:
        """The explanation in words; what it quotes (attribute values, CEL errors, names) escaped
        for a terminal (labkit.output.escape_terminal)."""
        lines = []
        if self.status == "allocated":
            return f"all claims fit on node {self.node}"
        lines.append(f"node {self.node}: {self.status}" + (f" — {self.error}" if self.error else ""))
        if self.failing_claim:
            before = f" (after {', '.join(self.allocated)} got their devices)" if self.allocated else ""
            lines.append(f"claim {self.failing_claim} does not fit{before}")
        for p in self.pools:
            lines.append(f"pool {p['pool']} is {p['problem']}" + (f": {p['reason']}" if p.get("reason") else ""))
        lines.extend(r.summary() for r in self.requests)
        return escape_terminal("\n".join(lines))

    def __str__(self) -> str:
        return self.summary()


def explain(allocator: Allocator, node: dict[str, Any], claims: list[dict[str, Any]], outcome: Outcome) -> Explanation:
    name = ((node or {}).get("metadata") or {}).get("name", "")
    exp = Explanation(name, outcome.status, outcome.error)
    if outcome.status == "allocated":
        return exp
    # shortest failing prefix
    k = len(claims)
    prefix_outcome = None
    for i in range(1, len(claims) + 1):
        o = allocator.allocate(node, claims[:i])
        if o.status != "allocated":
            k = i
            break
        prefix_outcome = o
    if not claims:
        return exp
    failing = claims[k - 1]
    exp.failing_claim = kobj(failing)
    exp.allocated = [kobj(c) for c in claims[:k - 1]]
    taken = _taken_by(claims[:k - 1], prefix_outcome.allocations if prefix_outcome else [])
    try:
        pools = allocator.pools_for(node)
    except Exception:  # noqa: BLE001 - the outcome already carries the error
        return exp
    for p in pools:
        if p.incomplete:
            exp.pools.append({"pool": str(p), "problem": "incomplete (being updated)"})
        elif p.invalid:
            exp.pools.append({"pool": str(p), "problem": "invalid", "reason": p.invalid_reason})
    _note_invisible(allocator, name, pools, exp)
    _explain_claim(allocator, node, failing, k - 1, pools, taken, exp)
    return exp


def _note_invisible(allocator: Allocator, node_name: str, pools: list[Pool], exp: Explanation) -> None:
    """Pools this node cannot see that are not simply another node's local pool."""
    visible = {p.id for p in pools}
    if not pools:
        exp.pools.append({"pool": "-", "problem": f"absent: no ResourceSlice is visible from node {node_name}"})
    noted = set()
    for s in allocator.slices:
        key = (s.driver, s.pool)
        if key in visible or key in noted or (s.node_name and s.node_name != node_name):
            continue
        noted.add(key)
        if (s.shared_counters or s.per_device is not None) and not allocator.features.PartitionableDevices:
            exp.pools.append({"pool": f"{s.driver}/{s.pool}", "problem": "ignored",
                              "reason": "uses partitionable devices, DRAPartitionableDevices is off"})
            continue
        if s.node_selector is not None or s.per_device:
            exp.pools.append({"pool": f"{s.driver}/{s.pool}", "problem": "not visible from this node",
                              "reason": "its node selection does not match the node's name or labels"})


def _taken_by(claims: list[dict[str, Any]], allocations: list[dict[str, Any]]) -> dict[str, Any]:
    """Devices (and capacity, counters) the successful prefix took, with owner names."""
    dedicated: dict[tuple[Any, ...], list[str]] = {}
    capacity: dict[tuple[Any, ...], dict[str, Fraction]] = {}
    for claim, alloc in zip(claims, allocations):
        for r in (alloc.get("devices") or {}).get("results") or []:
            did = (r["driver"], r["pool"], r["device"])
            if r.get("shareID"):
                per = capacity.setdefault(did, {})
                for cname, v in (r.get("consumedCapacity") or {}).items():
                    per[cname] = per.get(cname, Fraction(0)) + qvalue(v)
            elif not r.get("adminAccess"):
                dedicated.setdefault(did, []).append(f"{kobj(claim)} (this run)")
    return {"dedicated": dedicated, "capacity": capacity}


def _explain_claim(allocator: Allocator, node: dict[str, Any], claim: dict[str, Any], ci: int, pools: list[Pool],
                   taken: dict[str, Any], exp: Explanation) -> None:
    f = allocator.features
    requests = ((claim.get("spec") or {}).get("devices") or {}).get("requests") or []
    for ri, req in enumerate(requests):
        subs = req.get("firstAvailable") or []
        for si, sub in enumerate(subs or [None]):
            try:
                rd = request_view(claim, ci, ri, si, req, sub, allocator.classes, f.AdminAccess)
            except AllocationError as exc:
                name = f"{req.get('name', '')}/{sub.get('name', '')}" if sub else req.get("name", "")
                exp.requests.append(RequestExplanation(kobj(claim), name, "?", error=exc.message))
                continue
            exp.requests.append(_explain_request(allocator, node, claim, rd, pools, taken))


def _explain_request(allocator: Allocator, node: dict[str, Any], claim: dict[str, Any], rd: RequestData,
                     pools: list[Pool], taken: dict[str, Any]) -> RequestExplanation:
    state = allocator.allocated
    needed: int | str = "all" if rd.mode == "All" else rd.num_devices
    out = RequestExplanation(kobj(claim), rd.full_name, needed, selectors=list(rd.selectors),
                             device_class=rd.class_name)
    cls_sel = [((s or {}).get("cel") or {}).get("expression", "")
               for s in (rd.class_obj.get("spec") or {}).get("selectors") or []]  # type: ignore[union-attr]  # request_view set it
    counters_used = _counters_used(pools, state, taken)
    candidates = []
    for pool in pools:
        if pool.incomplete or pool.invalid:
            continue
        for s in pool.device_slices:
            for dev in s.devices:
                out.considered += 1
                rej = _first_rule(allocator, node, rd, dev, pool, cls_sel, taken, counters_used)
                if rej is None:
                    candidates.append(dev)
                else:
                    out.rejected.append(rej)
                if rej is None or rej.rule not in ("binding-conditions", "class-selector", "request-selector",
                                                   "cel-error", "node-mismatch"):
                    out.matching += 1
    candidates = _constraint_pass(claim, rd, candidates, out)
    out.candidates = [device_str(d.id) for d in candidates]
    return out


def _first_rule(allocator: Allocator, node: dict[str, Any], rd: RequestData, dev: DeviceInfo, pool: Pool,
                cls_sel: list[str], taken: dict[str, Any], counters_used: dict[Any, Any]) -> Rejection | None:
    f = allocator.features
    did = device_str(dev.id)
    if not f.DeviceBindingAndStatus and dev.binding_conditions:
        return Rejection(did, "binding-conditions", "device has bindingConditions")
    for rule, sels, who in (("class-selector", cls_sel, f"class {rd.class_name}"),
                            ("request-selector", rd.selectors, "request")):
        for i, expr in enumerate(sels):
            try:
                ok = allocator.eval_selector(expr, dev)
            except (SelectorCompileError, SelectorRuntimeError) as exc:
                return Rejection(did, "cel-error", f"{who} selector #{i}: {exc}", {"expression": expr})
            if not ok:
                return Rejection(did, rule, f"{who} selector #{i} `{expr}` is false", {"expression": expr})
    if dev.slice.per_device:
        try:
            ok = node_matches(node, dev.node_name, dev.all_nodes, dev.node_selector)
        except NodeSelectorError as exc:
            return Rejection(did, "node-mismatch", str(exc))
        if not ok:
            return Rejection(did, "node-mismatch", "the device's own node selection does not match this node")
    multi = f.ConsumableCapacity and dev.allow_multi
    if not rd.admin and not multi:
        owners = []
        if dev.id in state_devices(allocator):
            owners = list(allocator.allocated.owners.get(dev.id, [])) or ["an allocated claim"]
        owners += taken["dedicated"].get(dev.id, [])
        if owners:
            return Rejection(did, "in-use", f"in use by {', '.join(owners)}", {"by": owners})
    if f.ConsumableCapacity:
        already = dict(allocator.allocated.capacity.get(dev.id, {}))
        for k, v in taken["capacity"].get(dev.id, {}).items():
            already[k] = already.get(k, Fraction(0)) + v
        try:
            ok, why = check_capacity(rd.capacity_requests, dev.capacity, already, None, f.FractionalCapacityRange,
                                     dev.slice.driver if allocator.profile.v38 else None)
        except CapacityError as exc:
            return Rejection(did, "capacity", str(exc))
        if not ok:
            fmt = _fmt(dev.capacity[why[1]].text) if why[1] in dev.capacity else None  # type: ignore[index]  # not ok: why is set
            return Rejection(did, "capacity", _capacity_text(why, fmt), {"capacity": why[1]})  # type: ignore[arg-type,index]  # as above
    if dev.consumes and not f.PartitionableDevices:
        return Rejection(did, "partitionable-off", "device consumes shared counters")
    if dev.consumes and f.PartitionableDevices:
        short = _counter_short(pool, dev, counters_used)
        if short is not None:
            cs, cname, by = short
            text = _num(by, "BinarySI" if by >= 1024 and by % 1024 == 0 else None)
            return Rejection(did, "counters", f"counter set {cs}, counter {cname}: short by {text}",
                             {"counterSet": cs, "counter": cname, "shortBy": text})
    if f.DeviceTaints:
        taint = blocking_taint(dev.taints, rd.tolerations, allocator.profile.every_taint_blocks)
        if taint is not None:
            text = f"{taint.get('key', '')}={taint.get('value', '')}:{taint.get('effect', '')}"
            return Rejection(did, "taint", f"taint {text} not tolerated",
                             {"taint": {k: taint.get(k) for k in ("key", "value", "effect") if taint.get(k)}})
    return None


def state_devices(allocator: Allocator) -> dict[DeviceID, int]:
    return allocator.allocated.devices


def _capacity_text(why: tuple[Any, ...], fmt: str | None = None) -> str:
    if why[0] == "missing":
        return f"device has no capacity {why[1]}"
    if why[0] == "policy":
        return f"capacity {why[1]}: {why[2]} is not allowed by the device's requestPolicy"
    return f"capacity {why[1]}: short by {_num(why[2], fmt)}"


def _fmt(text: str) -> str | None:
    try:
        return qparse(text).format
    except Exception:  # noqa: BLE001
        return None


def _num(value: Fraction | int, fmt: str | None = None) -> str:
    q = Quantity(Fraction(value), fmt) if fmt else Quantity(Fraction(value))
    return q.canonical()


def _counters_used(pools: list[Pool], state: AllocatedState, taken: dict[str, Any]) -> dict[Any, Any]:
    """Per pool: counter set -> counter -> consumed (allocated claims + this run's prefix)."""
    used: dict[Any, Any] = {}  # keyed by pool.id
    busy = set(state.devices) | set(state.shared_device_ids()) | set(state.capacity) | set(taken["dedicated"]) \
        | set(taken["capacity"])
    for pool in pools:
        if pool.incomplete or pool.invalid:
            continue
        per: dict[str, dict[str, Fraction | int]] = {}
        for group in (pool.device_slices, pool.other_slices):
            for s in group:
                for d in s.devices:
                    if d.id in busy:
                        for cs, counters in d.consumes:
                            u = per.setdefault(cs, {})
                            for cname, v in counters.items():
                                u[cname] = u.get(cname, Fraction(0)) + v
        used[pool.id] = per
    return used


def _counter_short(pool: Pool, dev: DeviceInfo, counters_used: dict[Any, Any]) -> tuple[str, str, Fraction | int] | None:
    used = counters_used.get(pool.id, {})
    for cs, counters in dev.consumes:
        total = pool.counter_sets.get(cs, {})
        for cname, v in counters.items():
            if cname not in total:
                continue
            left = total[cname] - used.get(cs, {}).get(cname, Fraction(0))
            if v > left:
                return cs, cname, v - left
    return None


def _constraint_pass(claim: dict[str, Any], rd: RequestData, candidates: list[DeviceInfo],
                     out: RequestExplanation) -> list[DeviceInfo]:
    constraints = ((claim.get("spec") or {}).get("devices") or {}).get("constraints") or []
    name, sub = (rd.parent, rd.name) if rd.parent else (rd.name, None)
    kept = list(candidates)
    for i, c in enumerate(constraints):
        attr_name = c.get("matchAttribute") or c.get("distinctAttribute")
        if not attr_name:
            continue
        wanted = set(c.get("requests") or [])
        if wanted and name not in wanted and (sub is None or f"{name}/{sub}" not in wanted):
            continue
        kind = "matchAttribute" if c.get("matchAttribute") else "distinctAttribute"
        still = []
        for dev in kept:
            attr = lookup_attribute(dev.attributes, dev.slice.driver, attr_name)
            if attr is None:
                out.rejected.append(Rejection(device_str(dev.id), "constraint",
                                              f"constraint #{i} ({kind} {attr_name}): attribute not set",
                                              {"constraint": i}))
            else:
                still.append(dev)
        kept = still
        if kind == "matchAttribute" and kept and rd.num_devices > 1:
            groups: dict[str, list[Any]] = {}
            for dev in kept:
                attr = lookup_attribute(dev.attributes, dev.slice.driver, attr_name)
                groups.setdefault(repr(sorted(attr.items())), []).append(dev)  # type: ignore[union-attr]  # kept: devices with it
            best = max(groups.values(), key=len)
            if len(best) < rd.num_devices:
                ref = best[0]
                value = lookup_attribute(ref.attributes, ref.slice.driver, attr_name)
                for dev in kept:
                    if dev in best:
                        continue
                    other = lookup_attribute(dev.attributes, dev.slice.driver, attr_name)
                    out.rejected.append(Rejection(
                        device_str(dev.id), "constraint",
                        f"constraint #{i} ({kind} {attr_name}): {_attr_text(other)} differs from "
                        f"{_attr_text(value)} of {device_str(ref.id)}", {"constraint": i, "against": device_str(ref.id)}))
                kept = best
    return kept


def _attr_text(attr: dict[str, Any] | None) -> str:
    if not attr:
        return "<unset>"
    key, value = next(iter(attr.items()))
    return f"{value!r}" if key != "version" else str(value)
