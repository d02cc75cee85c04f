"""Consumable capacity (``DRAConsumableCapacity``): request policies and the capacity check.

Mirrors 1.37: requested capacity names must exist on the device with the exact same key;
capacities that are not requested consume their policy default, or the whole value.

1.38 (``driver`` given; k8s.io/dynamic-resource-allocation@v0.38.0-beta.0:
structured/internal/stable/consumable_capacity.go ``resolveCapacityRequests``,
``calculateConsumedCapacity``): a request name resolves with the driver as its default domain
(``memory`` and ``<driver>/memory`` name one capacity), naming one capacity both ways is an error,
and so is a negative request, whatever the policy; messages name the capacity fully qualified.
"""

from __future__ import annotations

import json
import math
from fractions import Fraction
from typing import Any

from labkit.allocator.model import CapacityInfo
from labkit.allocator.quantities import qparse
from labkit.api.quantity import Quantity
from labkit.errors import InputError

__all__ = ["CapacityError", "check_capacity", "consumed_quantities", "resolve_requests"]

_MAX_INT64 = 2**63 - 1


class CapacityError(InputError):
    """A request that cannot be represented (fatal in upstream, aborts allocation)."""


def _q(text: object) -> Quantity:
    return qparse(str(text))


def _milli_ok(q: Quantity) -> bool:
    return (q.value * 1000).denominator == 1


def _use_milli(vrange: dict[str, Any], fractional: bool) -> bool:
    if not fractional:
        return False
    for key in ("min", "max", "step"):
        if vrange.get(key) is None:
            continue
        q = _q(vrange[key])
        if not _milli_ok(q):
            return False
        if key == "step" and q.value * 1000 < 1:
            return False
    return True


def _round_up_range(req: Quantity, vrange: dict[str, Any], fractional: bool) -> Quantity:
    vmin = _q(vrange["min"])
    if req.value < vmin.value:
        return vmin
    if vrange.get("step") is None:
        return req
    step = _q(vrange["step"])
    if _use_milli(vrange, fractional):
        if not _milli_ok(req):
            raise CapacityError(f"capacity request cannot be represented in the device's range arithmetic: "
                                f"request {req.canonical()} is not a representable milli value")
        added = req.value - vmin.value
        n = math.ceil(added / step.value)
        return Quantity(vmin.value + step.value * n, step.format)
    if req.value > _MAX_INT64:
        raise CapacityError(f"capacity request cannot be represented in the device's range arithmetic: "
                            f"request {req.canonical()} exceeds MaxInt64")
    r, s, m = math.ceil(req.value), math.ceil(step.value), math.ceil(vmin.value)
    n = -(-(r - m) // s) if r >= m else int((r - m) / s)
    return Quantity(Fraction(m + s * n), step.format)


def _consumed(req: Quantity | None, cap: CapacityInfo, fractional: bool) -> Quantity:
    policy = cap.policy
    if req is None:
        if policy and policy.get("default") is not None:
            return _q(policy["default"])
        return _q(cap.text)
    if not policy:
        return req
    vrange = policy.get("validRange")
    if vrange is not None and vrange.get("min") is not None:
        return _round_up_range(req, vrange, fractional)
    if policy.get("validValues") is not None:
        for v in policy["validValues"]:
            if req.value <= _q(v).value:
                return _q(v)
        return req
    return req


def _violates(value: Quantity, policy: dict[str, Any] | None, fractional: bool) -> bool:
    if not policy:
        return False
    if policy.get("default") is not None and value.value == _q(policy["default"]).value:
        return False
    vrange = policy.get("validRange")
    if vrange is not None:
        if vrange.get("max") is not None and value.value > _q(vrange["max"]).value:
            return True
        if vrange.get("step") is not None:
            step, vmin = _q(vrange["step"]), _q(vrange.get("min") or "0")
            if _use_milli(vrange, fractional):
                if not _milli_ok(value):
                    return True
                return ((value.value - vmin.value) * 1000) % (step.value * 1000) != 0
            return (math.ceil(value.value) - math.ceil(vmin.value)) % math.ceil(step.value) != 0
        return False
    values = policy.get("validValues") or []
    if values:
        return all(value.value != _q(v).value for v in values)
    return False


def _qualified(name: str, driver: str) -> str:
    return name if "/" in name else f"{driver}/{name}"


def _label(name: str, driver: str | None) -> str:
    """How an error names a capacity, as Go's %q does: the key as written (1.37), qualified (1.38)."""
    return json.dumps(name if driver is None else _qualified(name, driver))


def resolve_requests(requests: dict[str, Any] | None, caps: dict[str, CapacityInfo],
                     driver: str) -> tuple[dict[str, Any] | None, tuple[Any, ...] | None]:
    """1.38: the request keyed by the device's own capacity names, or (None, ("missing", name)).

    Raises :class:`CapacityError` for one capacity named both ways, or a negative request. Go walks
    the request map in random order; the names are taken sorted here, so the message says which
    spelling came second in that order."""
    if not requests:
        return requests, None
    own: dict[str, str] = {}
    raw: str | None
    for raw in caps:
        if "/" in raw or _qualified(raw, driver) not in own:  # a qualified twin wins
            own[_qualified(raw, driver)] = raw
    resolved: dict[str, object] = {}
    seen: set[str] = set()
    for name in sorted(requests):
        key = _qualified(name, driver)
        raw = own.get(key)
        if raw is None:
            return None, ("missing", name)
        if key in seen:
            ident = key.split("/", 1)[1]
            other = ident if name == key else key
            raise CapacityError(f"capacity {json.dumps(ident)} requested both as {json.dumps(name)} and as "
                                f"{json.dumps(other)}")
        seen.add(key)
        resolved[raw] = requests[name]
    for raw, text in resolved.items():
        q = _q(text)
        if q.value < 0:
            raise CapacityError(f"capacity {_label(raw, driver)}: capacity value is negative: request "
                                f"{q.canonical()}")
    return resolved, None


def _own_names(used: dict[str, Fraction] | None, caps: dict[str, CapacityInfo],
               driver: str) -> dict[str, Fraction] | None:
    """1.38 sums consumed capacity by qualified name: stored results keyed either way count."""
    if not used or all(name in caps for name in used):
        return used
    own = {_qualified(raw, driver): raw for raw in caps}
    out: dict[str, Fraction] = {}
    for name, value in used.items():
        raw = own.get(_qualified(name, driver), name)
        out[raw] = out.get(raw, 0) + value
    return out


def _consumed_of(requests: dict[str, Any] | None, name: str, cap: CapacityInfo, fractional: bool,
                 driver: str | None = None) -> tuple[Quantity, bool]:
    """(what the request consumes of `cap`, whether that violates its policy), kept on the
    capacity: a request text always consumes the same (the allocator asks for every device it
    looks at, many times per claim)."""
    text = str(requests[name]) if requests and name in requests else None
    key = (text, fractional)
    hit = cap.memo.get(key)
    if hit is None:
        try:
            q = _consumed(None if text is None else _q(text), cap, fractional)
        except CapacityError as exc:
            raise CapacityError(f"capacity {_label(name, driver)}: {exc}") from exc
        hit = cap.memo[key] = (q, q.value >= 0 and _violates(q, cap.policy, fractional))
    return hit


def consumed_quantities(requests: dict[str, Any] | None, caps: dict[str, CapacityInfo],
                        fractional: bool, driver: str | None = None) -> dict[str, Quantity]:
    """What a request consumes of every capacity of a device (``GetConsumedCapacityFromRequest``);
    ``driver``: resolve the request's names as 1.38 does."""
    if driver is not None:
        requests = resolve_requests(requests, caps, driver)[0]
    return {name: _consumed_of(requests, name, cap, fractional, driver)[0] for name, cap in caps.items()}


def check_capacity(requests: dict[str, Any] | None, caps: dict[str, CapacityInfo],
                   already: dict[str, Fraction] | None, allocating: dict[str, Fraction] | None,
                   fractional: bool, driver: str | None = None) -> tuple[bool, tuple[Any, ...] | None]:
    """``CmpRequestOverCapacity``. Returns (ok, reason); reason explains a refusal:
    ("missing", name) | ("policy", name, consumed) | ("exceeds", name, short_by).
    ``driver``: the device's driver, to resolve names as 1.38 does (None: 1.37's exact keys)."""
    if driver is not None:
        requests, missing = resolve_requests(requests, caps, driver)
        if missing is not None:
            return False, missing
        already = _own_names(already, caps, driver)
        allocating = _own_names(allocating, caps, driver)
    elif requests:
        for name in requests:
            if name not in caps:
                return False, ("missing", name)
    consumed = {name: _consumed_of(requests, name, cap, fractional, driver) for name, cap in caps.items()}
    for name, (q, _) in consumed.items():
        if q.value < 0:
            raise CapacityError(f"capacity {_label(name, driver)}: capacity value is negative")
    for name, cap in caps.items():
        q, violates = consumed[name]
        if violates:
            return False, ("policy", name, q.canonical())
        total = q.value + (already or {}).get(name, 0) + (allocating or {}).get(name, 0)
        if total > cap.value:
            return False, ("exceeds", name, total - cap.value)
    return True, None
