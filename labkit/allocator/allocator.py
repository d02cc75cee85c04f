"""Public entry: :class:`Allocator` and :class:`Outcome`."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from labkit.allocator.core import FILTER_TIMEOUT, Search, SearchTimeout
from labkit.allocator.errors import AllocationError
from labkit.allocator.features import Features, VariantProfile
from labkit.allocator.model import SliceInfo, build_slices
from labkit.allocator.nodes import NodeSelectorError, node_matches
from labkit.allocator.pools import Pool, PoolError, gather_pools
from labkit.allocator.result import build_results
from labkit.allocator.selectors import SelectorCompileError, SelectorEngine, SelectorRuntimeError
from labkit.allocator.state import AllocatedState

__all__ = ["Allocator", "Outcome"]


@dataclass
class Outcome:
    status: str                              # "allocated" | "unsatisfiable" | "error"
    allocations: list[dict] = field(default_factory=list)
    error: str | None = None
    node_scoped: bool = False
    #: allocateOne invocations (a measure of search effort)
    steps: int = 0
    _explain: Any = field(default=None, repr=False, compare=False)
    _explanation: Any = field(default=None, repr=False, compare=False)

    @property
    def explanation(self):
        """Why (not): computed on first access, in a separate pass (never changes the result)."""
        if self._explanation is None and self._explain is not None:
            self._explanation = self._explain()
            self._explain = None
        return self._explanation


class Allocator:
    """``Allocator(features, classes, slices, allocated, taint_rules=(), cel_engine=None)``.

    ``slices`` are parsed once; ``allocated`` may be an :class:`AllocatedState` (kept by
    reference, so ``add``/``remove`` on it are seen by later calls) or a list of claims.
    """

    def __init__(self, features: Features, classes: list[dict], slices: list[dict],
                 allocated: AllocatedState | list[dict] | None = None, taint_rules: list[dict] = (),
                 cel_engine: Any = None) -> None:
        self.features = features
        self.profile = VariantProfile.for_features(features)
        self.classes = {(c.get("metadata") or {}).get("name", ""): c for c in classes}
        if allocated is None:
            allocated = AllocatedState(consumable_capacity=features.ConsumableCapacity)
        elif not isinstance(allocated, AllocatedState):
            allocated = AllocatedState.from_claims(allocated, consumable_capacity=features.ConsumableCapacity)
        self.allocated = allocated
        self.slices: list[SliceInfo] = build_slices(slices, list(taint_rules))
        self.slices_on_node: dict[str, list[SliceInfo]] = {}
        self.slices_shared: list[SliceInfo] = []
        # 1.35/1.36: counter-only slices are needed on every node (NewAllocator puts them in
        # slicesShared whatever their nodeName)
        counters_shared = self.profile.counter_slices_everywhere
        for s in self.slices:
            if s.node_name and not (counters_shared and s.shared_counters):
                self.slices_on_node.setdefault(s.node_name, []).append(s)
            else:
                self.slices_shared.append(s)
        self.engine = SelectorEngine(cel_engine, consumable_capacity=features.ConsumableCapacity,
                                     list_type_attributes=features.ListTypeAttributes)
        self._cel_results: dict[tuple[int, str], Any] = {}
        self._pool_cache: dict[tuple, list[Pool]] = {}
        self._candidates: dict[tuple, tuple[list[int], list[tuple]]] = {}

    @property
    def variant(self) -> str:
        return self.profile.name

    # selectors are pure functions of (device, expression): cached for the Allocator's lifetime
    def eval_selector(self, expr: str, dev) -> bool:
        key = (id(dev), expr)
        hit = self._cel_results.get(key)
        if hit is not None:
            if isinstance(hit, Exception):
                raise hit
            return hit
        prog = self.engine.compile(expr)
        if isinstance(prog, SelectorCompileError):
            raise prog
        try:
            result = self.engine.matches(prog, dev.slice.driver, dev.raw)
        except Exception as exc:
            self._cel_results[key] = exc
            raise
        self._cel_results[key] = result
        return result

    def candidates(self, pool: Pool, rd, node: dict) -> tuple[list[int], list[tuple]]:
        """Devices of ``pool`` that pass ``isSelectable`` for a request, in search order.

        Entries are ``(position, device, error)``; ``error`` (a selector that failed to compile or
        evaluate on that device) is raised by the search only when it reaches the device, which
        is when upstream would evaluate it. Cached per (pool, class, request selectors): pools
        are per node, so per-device node selection is covered too.
        """
        key = (id(pool), rd.class_name, tuple(rd.selectors))
        hit = self._candidates.get(key)
        if hit is not None:
            return hit
        class_sels = [((s or {}).get("cel") or {}).get("expression", "")
                      for s in (rd.class_obj.get("spec") or {}).get("selectors") or []]
        binding_ok = self.features.DeviceBindingAndStatus
        positions: list[int] = []
        entries: list[tuple] = []
        pos = -1
        for s in pool.device_slices:
            for dev in s.devices:
                pos += 1
                if not binding_ok and dev.binding_conditions:
                    continue
                ok, err = self._check_selectors(dev, class_sels, "class")
                if ok and err is None:
                    ok, err = self._check_selectors(dev, rd.selectors, "claim")
                if ok and err is None and s.per_device:
                    try:
                        ok = node_matches(node, dev.node_name, dev.all_nodes, dev.node_selector)
                    except NodeSelectorError as exc:
                        err = ("node", 0, f"failed to parse node selector: {exc}")
                if ok or err is not None:
                    positions.append(pos)
                    entries.append((pos, dev, err))
        self._candidates[key] = (positions, entries)
        return positions, entries

    def _check_selectors(self, dev, exprs: list[str], who: str) -> tuple[bool, tuple | None]:
        for i, expr in enumerate(exprs):
            try:
                if not self.eval_selector(expr, dev):
                    return False, None
            except SelectorCompileError as exc:
                return False, (f"{who}-compile", i, str(exc))
            except SelectorRuntimeError as exc:
                return False, (f"{who}-runtime", i, str(exc))
        return True, None

    def pools_for(self, node: dict) -> list[Pool]:
        meta = (node or {}).get("metadata") or {}
        name = meta.get("name", "")
        key = (name, tuple(sorted((meta.get("labels") or {}).items())),
               tuple(((node or {}).get("status") or {}).get("declaredFeatures") or ()))
        pools = self._pool_cache.get(key)
        if pools is None:
            if self.profile.node_local_slices:
                for_node = self.slices_on_node.get(name, []) + self.slices_shared
            else:
                for_node = self.slices
            pools = gather_pools(for_node, node, self.features, self.slices, self.profile)
            self._pool_cache[key] = pools
        return pools

    def allocate(self, node: dict, claims: list[dict], timeout: float | None = FILTER_TIMEOUT) -> Outcome:
        """One scheduling attempt for ``node``. After ``timeout`` seconds of search (None: no
        limit) the attempt ends like kube-scheduler's cancelled filter: status ``error`` with
        ``TIMEOUT_ERROR`` (upstream's search is exponential in bad cases; Go cuts it the same way).
        """
        from labkit.allocator.explain import explain  # late: explain imports this module

        def later(outcome: Outcome):
            return lambda: explain(self, node, claims, outcome)

        try:
            try:
                pools = self.pools_for(node)
            except PoolError as exc:
                raise AllocationError(f"gather pool information: {exc}") from exc
            search = Search(self, node, claims, pools)
            search.prepare()
            if timeout is not None:
                search.deadline = time.monotonic() + timeout
            done = search.run()
            if done:
                outcome = Outcome("allocated", build_results(search), steps=search.steps)
            elif self.profile.skips_incomplete_pools and any(p.invalid for p in pools):
                outcome = Outcome("unsatisfiable", error="invalid resource pools were encountered",
                                  node_scoped=True, steps=search.steps)
            else:
                outcome = Outcome("unsatisfiable", steps=search.steps)
        except SearchTimeout as exc:
            return Outcome("error", error=exc.message, steps=search.steps)  # no explanation pass
        except AllocationError as exc:
            outcome = Outcome("unsatisfiable" if exc.node_scoped else "error", error=exc.message,
                              node_scoped=exc.node_scoped)
        outcome._explain = later(outcome)
        return outcome
