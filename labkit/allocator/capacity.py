"""Consumable capacity (``DRAConsumableCapacity``): request policies and the capacity check.

Mirrors 1.37: requested capacity names must exist on the device with the exact same key;
capacities that are not requested consume their policy default, or the whole value.
"""

from __future__ import annotations

import math
from fractions import Fraction

from labkit.allocator.model import CapacityInfo
from labkit.allocator.quantities import qparse
from labkit.api.quantity import Quantity
from labkit.errors import InputError

__all__ = ["CapacityError", "check_capacity", "consumed_quantities"]

_MAX_INT64 = 2**63 - 1


class CapacityError(InputError):
    """A request that cannot be represented (fatal in upstream, aborts allocation)."""


def _q(text: object) -> Quantity:
    return qparse(str(text))


def _milli_ok(q: Quantity) -> bool:
    return (q.value * 1000).denominator == 1


def _use_milli(vrange: dict, fractional: bool) -> bool:
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


def _round_up_range(req: Quantity, vrange: dict, fractional: bool) -> Quantity:
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


def _violates(value: Quantity, policy: dict | None, fractional: bool) -> bool:
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


def _consumed_of(requests: dict | None, name: str, cap: CapacityInfo, fractional: bool) -> tuple[Quantity, bool]:
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
            raise CapacityError(f"capacity {name!r}: {exc}") from exc
        hit = cap.memo[key] = (q, q.value >= 0 and _violates(q, cap.policy, fractional))
    return hit


def consumed_quantities(requests: dict | None, caps: dict[str, CapacityInfo],
                        fractional: bool) -> dict[str, Quantity]:
    """What a request consumes of every capacity of a device (``GetConsumedCapacityFromRequest``)."""
    return {name: _consumed_of(requests, name, cap, fractional)[0] for name, cap in caps.items()}


def check_capacity(requests: dict | None, caps: dict[str, CapacityInfo],
                   already: dict[str, Fraction] | None, allocating: dict[str, Fraction] | None,
                   fractional: bool) -> tuple[bool, tuple | None]:
    """``CmpRequestOverCapacity``. Returns (ok, reason); reason explains a refusal:
    ("missing", name) | ("policy", name, consumed) | ("exceeds", name, short_by)."""
    if requests:
        for name in requests:
            if name not in caps:
                return False, ("missing", name)
    consumed = {name: _consumed_of(requests, name, cap, fractional) for name, cap in caps.items()}
    for name, (q, _) in consumed.items():
        if q.value < 0:
            raise CapacityError(f"capacity {name!r}: capacity value is negative")
    for name, cap in caps.items():
        q, violates = consumed[name]
        if violates:
            return False, ("policy", name, q.canonical())
        total = q.value + (already or {}).get(name, 0) + (allocating or {}).get(name, 0)
        if total > cap.value:
            return False, ("exceeds", name, total - cap.value)
    return True, None
