"""The structured allocator: depth-first search with backtracking, first solution wins.

A behavioural port of k8s.io/dynamic-resource-allocation/structured v0.37 (the variant is
picked from the enabled features, see :mod:`labkit.allocator.features`). One :class:`Search`
object lives for one ``allocate`` call and holds the tentative state of the attempt.
"""

from __future__ import annotations

import sys
import time
import uuid
from bisect import bisect_left
from collections.abc import Callable
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from labkit.allocator.capacity import CapacityError, check_capacity, consumed_quantities
from labkit.allocator.constraints import DistinctAttribute, MatchAttribute, UnsupportedAttribute
from labkit.allocator.errors import MAX_RESULTS, AllocationError, device_str, kobj
from labkit.allocator.features import Features
from labkit.allocator.model import MISSING, DeviceInfo
from labkit.allocator.pools import Pool
from labkit.allocator.requests import RequestData, request_view
from labkit.allocator.taints import taint_prevents
from labkit.api.attributes import SCALAR_KINDS
from labkit.cel.errors import NO_SUCH_KEY_HINT
from labkit.errors import EngineError

if TYPE_CHECKING:
    from labkit.allocator.allocator import Allocator

__all__ = ["Search", "DeviceResult", "SearchTimeout", "FILTER_TIMEOUT", "TIMEOUT_ERROR"]

_START = (0, 0)
_EMPTY: tuple[list[Any], list[Any]] = ([], [])
_OPTIONAL_NODE_OPS_FEATURE = "DRAOptionalNodeOperations"


class _MaxSize(EngineError):
    """errAllocationResultMaxSizeExceeded: more than 32 results would be needed."""


#: kube-scheduler's DynamicResources filterTimeout (seconds)
FILTER_TIMEOUT = 10.0
#: what kube-scheduler reports when filterTimeout cancels Allocate (upstream's Allocate itself
#: returns "filter operation aborted: <cause>"; the oracle prints the scheduler's words)
TIMEOUT_ERROR = "timed out trying to allocate devices"
#: the deadline is looked at on the first and then every this many search steps (Go: every
#: allocateOne call)
_CLOCK_EVERY = 64


class SearchTimeout(AllocationError):
    """The search ran past its deadline (the scheduler's cancelled filter context)."""

    def __init__(self) -> None:
        super().__init__(TIMEOUT_ERROR)


class DeviceResult:
    __slots__ = ("rd", "device", "share_id", "consumed")

    def __init__(self, rd: RequestData, device: DeviceInfo, share_id: str | None, consumed: dict[str, Any] | None):
        self.rd = rd
        self.device = device
        self.share_id = share_id
        self.consumed = consumed


class Search:
    def __init__(self, allocator: Allocator, node: dict[str, Any], claims: list[dict[str, Any]], pools: list[Pool]) -> None:
        self.a = allocator
        self.f: Features = allocator.features
        self.profile = allocator.profile
        self.state = allocator.allocated
        self.node = node
        self.claims = claims
        self.pools = pools
        self.req_data: dict[tuple[int, int, int], RequestData] = {}
        self.requests: list[list[dict[str, Any]]] = [((c.get("spec") or {}).get("devices") or {}).get("requests") or []
                                           for c in claims]
        self.constraints: list[list[Any]] = [[] for _ in claims]
        self.allocating: dict[tuple[Any, ...], set[int]] = {}
        self.allocating_capacity: dict[tuple[Any, ...], dict[str, Fraction]] = {}
        self.available_counters: dict[tuple[Any, ...], dict[str, dict[str, Fraction | int]]] = {}
        self.negative_pools: set[tuple[Any, ...]] = set()
        self.consumed_counters: dict[tuple[Any, ...], dict[str, dict[str, Fraction | int]]] = {}
        self.results: list[list[DeviceResult]] = [[] for _ in claims]
        self.shared_ids = self.state.shared_device_ids()
        self.steps = 0
        #: time.monotonic() after which the search gives up (None: never)
        self.deadline: float | None = None

    # -- pre-pass ------------------------------------------------------------------------------
    def prepare(self) -> None:
        f = self.f
        for ci, claim in enumerate(self.claims):
            min_claim = 0
            for ri, req in enumerate(self.requests[ci]):
                subs = req.get("firstAvailable") or []
                if not f.PrioritizedList and subs:
                    raise AllocationError(f"claim {kobj(claim)}, request {req.get('name', '')}: has subrequests, "
                                          "but the DRAPrioritizedList feature is disabled")
                if not f.ConsumableCapacity and self.profile.knows_capacity:
                    exactly = req.get("exactly")
                    if exactly is not None and exactly.get("capacity") is not None:
                        raise AllocationError(f"claim {kobj(claim)}, request {req.get('name', '')}: has capacity "
                                              "requests, but the DRAConsumableCapacity feature is disabled")
                    for sub in subs:
                        if sub.get("capacity") is not None:
                            raise AllocationError(f"claim {kobj(claim)}, subrequest {sub.get('name', '')}: has "
                                                  "capacity requests, but the DRAConsumableCapacity feature is "
                                                  "disabled")
                if subs:
                    min_req = sys.maxsize
                    for si, sub in enumerate(subs):
                        rd = self._validate(claim, ci, ri, si, req, sub)
                        self.req_data[rd.key] = rd
                        min_req = min(min_req, rd.num_devices)
                else:
                    rd = self._validate(claim, ci, ri, 0, req, None)
                    self.req_data[rd.key] = rd
                    min_req = rd.num_devices
                if min_req > MAX_RESULTS - min_claim:
                    raise AllocationError(f"claim {kobj(claim)}, request {req.get('name', '')}: adding {min_req} "
                                          f"devices exceeds the claim limit of {MAX_RESULTS}, with {min_claim} "
                                          "already accounted for")
                min_claim += min_req
            list_mode = self.profile.experimental_code and f.ListTypeAttributes
            for i, c in enumerate(((claim.get("spec") or {}).get("devices") or {}).get("constraints") or []):
                if c.get("matchAttribute") is not None:
                    self.constraints[ci].append(MatchAttribute(i, c.get("requests"), c["matchAttribute"], list_mode,
                                                               v38=self.profile.v38))
                elif c.get("distinctAttribute") is not None and self.profile.knows_capacity:
                    self.constraints[ci].append(
                        DistinctAttribute(i, c.get("requests"), c["distinctAttribute"], list_mode,
                                          by_request=self.profile.distinct_by_request, v38=self.profile.v38))
                else:
                    raise AllocationError(f"claim {kobj(claim)}, constraint #{i}: empty constraint "
                                          "(unsupported constraint type?)")

    def _validate(self, claim: dict[str, Any], ci: int, ri: int, si: int, req: dict[str, Any],
                  sub: dict[str, Any] | None) -> RequestData:
        rd = request_view(claim, ci, ri, si, req, sub, self.a.classes, self.f.AdminAccess)
        if rd.mode == "All":
            for pool in self.pools:
                # 1.38 wraps both in ErrFailedAllocationOnNode: only this node fails (#141898)
                if pool.incomplete:
                    raise AllocationError(f"claim {kobj(claim)}, request {rd.name}: asks for all devices, but "
                                          f"resource pool {pool} is currently being updated",
                                          node_scoped=self.profile.v38)
                if pool.invalid:
                    raise AllocationError(f"claim {kobj(claim)}, request {rd.name}: asks for all devices, but "
                                          f"resource pool {pool} is currently invalid", node_scoped=self.profile.v38)
                for _pos, dev, err in self.a.candidates(pool, rd, self.node)[1]:
                    if err is not None:
                        raise self.selector_error(rd, dev, err)
                    if True:
                        if self.f.ConsumableCapacity:
                            try:
                                ok, _ = check_capacity(rd.capacity_requests, dev.capacity, None, None,
                                                       self.f.FractionalCapacityRange, self.driver38(dev))
                            except CapacityError as exc:
                                raise AllocationError(f"claim {kobj(claim)}, request {rd.name}: checking capacity "
                                                      f"for device {dev.name}: {exc}") from exc
                            if not ok:
                                continue
                        rd.all_devices.append((dev, pool))
            rd.num_devices = len(rd.all_devices)
        return rd

    # -- search --------------------------------------------------------------------------------
    def run(self) -> bool:
        limit = 2000 + 8 * (len(self.claims) + sum(len(r) for r in self.requests)) + 64 * MAX_RESULTS
        old = sys.getrecursionlimit()
        if old < limit:
            sys.setrecursionlimit(limit)
        try:
            return self.one(0, 0, 0, 0, False, _START)
        except _MaxSize:
            return False
        finally:
            if old < limit:
                sys.setrecursionlimit(old)

    def one(self, ci: int, ri: int, si: int, di: int, alloc_sub: bool, start: tuple[int, int]) -> bool:
        self.steps += 1
        if self.deadline is not None and self.steps % _CLOCK_EVERY == 1 and time.monotonic() > self.deadline:
            raise SearchTimeout()
        if ci >= len(self.claims):
            return True
        if ri >= len(self.requests[ci]):
            try:
                return self.one(ci + 1, 0, 0, 0, False, _START)
            except _MaxSize:
                return False
        rd = self.req_data[(ci, ri, si)]
        if not alloc_sub and rd.parent is not None:
            all_exceeded = True
            sub = 0
            while (ci, ri, sub) in self.req_data:
                try:
                    ok = self.one(ci, ri, sub, di, True, _START)
                except _MaxSize:
                    sub += 1
                    continue
                all_exceeded = False
                if ok:
                    self.req_data[(ci, ri, 0)].selected_sub = sub
                    return True
                sub += 1
            if all_exceeded:
                raise _MaxSize
            return False
        if rd.mode == "All" and not rd.all_devices:
            return False
        if di >= rd.num_devices:
            return self.one(ci, ri + 1, 0, 0, False, _START)
        if rd.num_devices - di > MAX_RESULTS - len(self.results[ci]):
            raise _MaxSize
        if rd.mode == "All":
            dev, pool = rd.all_devices[di]
            undo = self.allocate_device(ci, rd, dev, pool, must=True)
            if undo is None:
                return False
            try:
                done = self.one(ci, ri, si, di + 1, alloc_sub, _START)
            except BaseException:
                undo()
                raise
            if not done:
                undo()
            return done

        combos = self.profile.combinations
        pools = self.pools
        cc = self.f.ConsumableCapacity
        candidates = self.a.candidates
        node = self.node
        screen = self._screen(ci, rd)
        leak = self.profile.counters_leak
        # a matchAttribute that holds one value: only devices with that value can be taken
        narrow = None
        if screen and screen[0][0]:
            keys = [(k, v) for k, v in screen[0][2].items() if v is not None]
            # only a scalar value narrows: a list value (DRAListTypeAttributes off) or a
            # malformed one matches no other device, as in Go's allocator (no index for it)
            if len(keys) == 1 and keys[0][0] in SCALAR_KINDS and isinstance(keys[0][1], str | int | bool):
                narrow = (screen[0][1], keys[0])
        for pi in range(start[0] if combos else 0, len(pools)):
            pool = pools[pi]
            if pool.invalid and not self.profile.skips_incomplete_pools:
                raise AllocationError(f"pool {pool.pool} is invalid: {pool.invalid_reason}")
            if (pool.incomplete and self.profile.skips_incomplete_pools) or pool.invalid:
                continue
            positions, entries = candidates(pool, rd, node)
            if narrow is not None:
                ix = self.a.attribute_index(entries, narrow[0])
                # skipping the others must not skip an error or a side effect they would cause
                if ix.clean and not (leak and ix.consumes) and (not cc or (rd.capacity_requests is None
                                                                          and ix.plain)):
                    positions, entries = ix.buckets.get(narrow[1], _EMPTY)
            lo = bisect_left(positions, start[1]) if combos and pi == start[0] and start[1] else 0
            for k in range(lo, len(entries)):
                pos, dev, err = entries[k]
                if rd.admin:
                    if ci in self.allocating.get(dev.id, ()):
                        continue
                elif self.in_use(dev.id):
                    continue
                if err is not None:
                    raise self.selector_error(rd, dev, err)
                if cc and not self.capacity_ok(ci, rd, dev, "checking"):
                    continue
                if screen and not (leak and dev.consumes) and not _passes(screen, dev):
                    continue  # allocate_device would refuse it at the constraints, changing nothing
                undo = self.allocate_device(ci, rd, dev, pool, must=False)
                if undo is None:
                    continue
                try:
                    done = self.one(ci, ri, si, di + 1, alloc_sub, (pi, pos + 1))
                except BaseException:
                    undo()
                    raise
                if done:
                    return True
                undo()
        return False

    # -- checks --------------------------------------------------------------------------------
    def _screen(self, ci: int, rd: RequestData) -> list[tuple[Any, ...]]:
        """The claim's scalar constraints that already hold values, as cheap per-device tests.

        A device failing one of them makes ``allocate_device`` undo its steps and return None;
        testing first skips that work. Not used when an add/remove pair is not a no-op: a
        1.34-1.36 ``distinctAttribute`` (it forgets a request's value on removal).
        """
        constraints = self.constraints[ci]
        if not constraints:
            return []
        name, sub = (rd.parent, rd.name) if rd.parent else (rd.name, None)
        screen = []
        for c in constraints:
            if c.list_mode or c.v38:
                continue
            if isinstance(c, MatchAttribute):
                if c.count and c.applies(name, sub):
                    screen.append((True, c.attribute, c.reference or {}))
            elif c.by_request:
                return []
            elif c.seen and c.applies(name, sub):
                screen.append((False, c.attribute, c.seen))
        return screen

    def in_use(self, device_id: tuple[Any, ...]) -> bool:
        return device_id in self.state.devices or bool(self.allocating.get(device_id))

    def capacity_in_use(self, device_id: tuple[Any, ...]) -> bool:
        return (device_id in self.state.capacity or device_id in self.allocating_capacity
                or (self.profile.shared_ids_mark_capacity_in_use and device_id in self.shared_ids))

    def driver38(self, dev: DeviceInfo) -> str | None:
        """The driver 1.38 resolves capacity names against (None before 1.38: exact keys)."""
        return dev.slice.driver if self.profile.v38 else None

    def capacity_ok(self, ci: int, rd: RequestData, dev: DeviceInfo, verb: str) -> bool:
        if (rd.capacity_requests is None and dev.plain_capacity and dev.id not in self.state.capacity
                and dev.id not in self.allocating_capacity):
            return True  # whole-device use of a device nobody shares: always fits
        try:
            ok, _ = check_capacity(rd.capacity_requests, dev.capacity, self.state.capacity.get(dev.id),
                                   self.allocating_capacity.get(dev.id), self.f.FractionalCapacityRange,
                                   self.driver38(dev))
        except CapacityError as exc:
            raise AllocationError(f"claim {kobj(self.claims[ci])}, request {rd.name}: {verb} capacity for device "
                                  f"{device_str(dev.id)}: {exc}") from exc
        return ok

    def selector_error(self, rd: RequestData, dev: DeviceInfo, err: tuple[Any, ...]) -> AllocationError:
        """Format a selector failure recorded by :meth:`Allocator.candidates` for this claim."""
        kind, i, text = err
        cls_name = rd.class_name
        claim = kobj(self.claims[rd.claim_index])
        if kind == "class-compile":
            return AllocationError(f"class {cls_name}: selector #{i}: CEL compile error: {text}")
        if kind == "claim-compile":
            return AllocationError(f"claim {claim}: selector #{i}: CEL compile error: {text}")
        if not self.profile.selector_error_names_device and kind.endswith("-runtime"):
            text = text.removesuffix(NO_SUCH_KEY_HINT)
            who = f"class {cls_name}" if kind == "class-runtime" else f"claim {claim}"
            return AllocationError(f"{who}: selector #{i}: CEL runtime error: {text}")
        if kind == "class-runtime":
            return AllocationError(f"class {cls_name}: selector #{i} on device {device_str(dev.id)}: "
                                   f"CEL runtime error: {text}")
        if kind == "claim-runtime":
            return AllocationError(f"claim {claim}: selector #{i} on device {device_str(dev.id)}: "
                                   f"CEL runtime error: {text}")
        return AllocationError(text)

    def allocate_device(self, ci: int, rd: RequestData, dev: DeviceInfo, pool: Pool,
                        must: bool) -> Callable[[], None] | None:
        """Tentatively take ``dev``; returns an undo callable, or None if it cannot be taken."""
        f = self.f
        multi = f.ConsumableCapacity and dev.allow_multi
        if not multi and rd.admin and ci in self.allocating.get(dev.id, ()):
            return None
        if not rd.admin and self.in_use(dev.id):
            return None
        if self.profile.v38 and not rd.admin and not multi and self.capacity_in_use(dev.id):
            return None  # a live share blocks exclusive use (1.38, #140798)
        if self.profile.experimental_code and dev.slice.skip_node_operations:
            declared = ((self.node or {}).get("status") or {}).get("declaredFeatures") or []
            if not f.OptionalNodeOperations or _OPTIONAL_NODE_OPS_FEATURE not in declared:
                return None
        if not f.PartitionableDevices and dev.consumes:
            return None
        skip_counters = multi and self.capacity_in_use(dev.id)
        counters_reserved = False
        if not skip_counters and dev.consumes:
            if not self.reserve_counters(dev, pool):
                return None
            counters_reserved = True
        name, sub = (rd.parent, rd.name) if rd.parent else (rd.name, None)
        constraints = self.constraints[ci]
        added = 0
        marked = False
        inserted: dict[str, Any] | None = None
        existed = False

        def rollback() -> None:
            if inserted is not None:
                self._capacity_remove(dev.id, inserted)
                if existed and dev.id not in self.allocating_capacity:
                    self.allocating_capacity[dev.id] = {}
            if marked:
                self.allocating[dev.id].discard(ci)
            for k in range(added - 1, -1, -1):
                constraints[k].remove(name, sub)
            if counters_reserved:
                self.release_counters(dev, pool)

        if f.DeviceTaints and taint_prevents(dev.taints, rd.tolerations, self.profile.every_taint_blocks):
            if self.profile.counters_leak:
                counters_reserved = False  # <= 1.35 quirk: the counters stay taken for this call
            rollback()
            return None
        for c in constraints:
            try:
                fits = c.add(name, sub, dev.attributes, dev.slice.driver)
            except UnsupportedAttribute:
                rollback()
                raise AllocationError(f"claim {kobj(self.claims[ci])}, request {rd.name}: device "
                                      f"{device_str(dev.id)}: unsupported attribute value for {c.attribute}") from None
            if not fits:
                if self.profile.counters_leak:
                    counters_reserved = False
                rollback()
                if must:
                    raise AllocationError(f"claim {kobj(self.claims[ci])}, request {rd.name}: cannot add device "
                                          f"{device_str(dev.id)} because a claim constraint would not be satisfied")
                return None
            added += 1
        if not multi:
            self.allocating.setdefault(dev.id, set()).add(ci)
            marked = True
        share_id = None
        consumed = None
        if f.ConsumableCapacity:
            try:
                ok = self.capacity_ok(ci, rd, dev, "rechecking")
            except AllocationError:
                rollback()
                raise
            if not ok:
                rollback()
                return None
            if multi:
                try:
                    consumed = consumed_quantities(rd.capacity_requests, dev.capacity, f.FractionalCapacityRange,
                                                   self.driver38(dev))
                except CapacityError as exc:
                    rollback()
                    raise AllocationError(f"claim {kobj(self.claims[ci])}, request {rd.name}: computing consumed "
                                          f"capacity for device {device_str(dev.id)}: {exc}") from exc
                share_id = str(uuid.uuid1())
                existed = dev.id in self.allocating_capacity
                inserted = {k: q.value for k, q in consumed.items()}
                per = self.allocating_capacity.setdefault(dev.id, {})
                for k, v in inserted.items():
                    per[k] = per.get(k, 0) + v
        results = self.results[ci]
        results.append(DeviceResult(rd, dev, share_id, consumed or None))
        n = len(results)

        def undo() -> None:
            del results[n - 1:]
            rollback()

        return undo

    def _capacity_remove(self, device_id: tuple[Any, ...], amounts: dict[str, Fraction]) -> None:
        per = self.allocating_capacity.get(device_id)
        if per is None:
            return
        for k, v in amounts.items():
            if k in per:
                per[k] -= v
        if all(v == 0 for v in per.values()):
            del self.allocating_capacity[device_id]

    # -- shared counters -----------------------------------------------------------------------
    def _available(self, pool: Pool) -> dict[str, dict[str, Fraction | int]]:
        avail = self.available_counters.get(pool.id)
        if avail is None:
            avail = {cs: dict(counters) for cs, counters in pool.counter_sets.items()}
            for group in (pool.device_slices, pool.other_slices):
                for s in group:
                    for d in s.devices:
                        if not self._is_allocated(d.id) or not d.consumes:
                            continue
                        for cs, counters in d.consumes:
                            have = avail.get(cs)
                            if have is None:
                                continue
                            for cname, v in counters.items():
                                if cname in have:
                                    have[cname] -= v
            self.available_counters[pool.id] = avail
            if any(v < 0 for counters in avail.values() for v in counters.values()):
                self.negative_pools.add(pool.id)
        return avail

    def _is_allocated(self, device_id: tuple[Any, ...]) -> bool:
        return device_id in self.state.devices or device_id in self.shared_ids or device_id in self.state.capacity

    def reserve_counters(self, dev: DeviceInfo, pool: Pool) -> bool:
        avail = self._available(pool)
        used = self.consumed_counters.setdefault(pool.id, {})
        for cs, counters in dev.consumes:
            u = used.setdefault(cs, {})
            for cname, v in counters.items():
                u[cname] = u.get(cname, 0) + v
        ok = pool.id not in self.negative_pools
        if ok:
            # only sets this device touched can have changed; the rest were checked when added
            for cs, _ in dev.consumes:
                have = avail.get(cs)
                if have is None:
                    continue
                u = used.get(cs, {})
                for cname, a in have.items():
                    if a < u.get(cname, 0):
                        ok = False
                        break
                if not ok:
                    break
        if not ok:
            self.release_counters(dev, pool)
        return ok

    def release_counters(self, dev: DeviceInfo, pool: Pool) -> None:
        used = self.consumed_counters[pool.id]
        for cs, counters in dev.consumes:
            u = used.get(cs)
            if u is None:
                continue
            for cname, v in counters.items():
                if cname in u:
                    u[cname] -= v


def _passes(screen: list[tuple[Any, ...]], dev: DeviceInfo) -> bool:
    """Would ``dev`` satisfy every constraint in ``screen`` (see :meth:`Search._screen`)?"""
    for is_match, attribute, values in screen:
        sc = dev.scalar(attribute)
        if sc is MISSING:
            return False
        if is_match:
            if sc is None or values.get(sc[0]) is None or values[sc[0]] != sc[1]:
                return False
        else:
            for old in values:
                if sc is None or (old.get(sc[0]) is not None and old[sc[0]] == sc[1]):
                    return False
    return True
