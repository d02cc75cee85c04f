"""Public entry: :class:`Allocator` and :class:`Outcome`."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from labkit.allocator.core import FILTER_TIMEOUT, Search, SearchTimeout
from labkit.allocator.errors import AllocationError
from labkit.allocator.explain import Explanation, explain
from labkit.allocator.features import Features, VariantProfile
from labkit.allocator.model import MISSING, DeviceInfo, SliceInfo, slice_info
from labkit.allocator.nodes import NodeSelectorError, node_matches
from labkit.allocator.pools import Pool, PoolError, gather_pools
from labkit.allocator.requests import RequestData
from labkit.allocator.result import build_results
from labkit.allocator.selectors import (
    SelectorCompileError,
    SelectorEngine,
    learn_device,
)
from labkit.allocator.state import AllocatedState

__all__ = ["Allocator", "Outcome", "prepare_slices"]

#: (features, node key, the node's slice views) -> pools; the views are the slices' identity
_POOLS: dict[tuple[Any, ...], list[Pool]] = {}
_POOLS_MAX = 1 << 15


def _rules_key(rules: list[dict[str, Any]], versioned: bool) -> object:
    if not rules:
        return ()
    if versioned:
        stamps = [((r.get("metadata") or {}).get("uid"), (r.get("metadata") or {}).get("resourceVersion"))
                  for r in rules]
        if all(rv for _, rv in stamps):
            return tuple(stamps)
    return json.dumps(rules, sort_keys=True, default=repr)


def prepare_slices(slices: list[dict[str, Any]], taint_rules: Iterable[dict[str, Any]] = (), *, versioned: bool = False) -> None:
    """Convert ``slices`` now instead of in the first Allocator that looks at them: the slice and
    device views with parsed capacities and counters, and for each device what its first selector
    would work out (whether it converts to CEL). kube-scheduler converts slices in its
    ResourceSlice informer as they arrive (kubernetes PR 134105), not in a scheduling cycle; the
    sim calls this on every slice event. Allocators given the same ``taint_rules`` and
    ``versioned`` reuse the work (see labkit.allocator.model)."""
    rules = list(taint_rules)
    key = _rules_key(rules, versioned)
    for raw in slices:
        info = slice_info(raw, rules, key, versioned)
        if info.like is not None:
            continue  # its facts are another slice's, converted before (labkit.allocator.model)
        info.convert_all()
        for dev in info.devices:
            learn_device(info.driver, dev.raw, dev.cel_memo)
        info.content_key  # noqa: B018 - after learn_device, whose findings it reads


@dataclass
class Outcome:
    status: str                              # "allocated" | "unsatisfiable" | "error"
    allocations: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None
    node_scoped: bool = False
    #: allocateOne invocations (a measure of search effort)
    steps: int = 0
    _explain: Callable[[Outcome], Explanation] | None = field(default=None, repr=False, compare=False)
    _explanation: Explanation | None = field(default=None, repr=False, compare=False)

    @property
    def explanation(self) -> Explanation | None:
        """Why (not): computed on first access, in a separate pass (never changes the result)."""
        if self._explanation is None and self._explain is not None:
            self._explanation = self._explain(self)
            self._explain = None
        return self._explanation


class AttributeIndex:
    """Candidate entries by (kind, value) of one attribute, for matchAttribute constraints.

    ``clean``: no entry carries a selector error; ``plain``: every device has plain capacity;
    ``consumes``: some device consumes counters (see ``Search.one`` for why these matter).
    """

    __slots__ = ("buckets", "clean", "plain", "consumes")

    def __init__(self, entries: list[tuple[Any, ...]], attribute: str) -> None:
        self.buckets: dict[tuple[Any, ...], tuple[list[int], list[tuple[Any, ...]]]] = {}
        self.clean = self.plain = True
        self.consumes = False
        for entry in entries:
            pos, dev, err = entry
            if err is not None:
                self.clean = False
            if not dev.plain_capacity:
                self.plain = False
            if dev.consumes:
                self.consumes = True
            sc = dev.scalar(attribute)
            if sc is MISSING or sc is None:
                continue
            try:
                bucket = self.buckets.setdefault(sc, ([], []))
            except TypeError:  # unhashable value: no index
                self.clean = False
                continue
            bucket[0].append(pos)
            bucket[1].append(entry)


class Allocator:
    """``Allocator(features, classes, slices, allocated, taint_rules=(), cel_engine=None, versioned=False)``.

    ``slices`` are converted on first use and the conversions, pools and selector results are
    reused by later Allocators while the slices are unchanged (labkit.allocator.model): by
    content, or with ``versioned=True`` (objects from a store that replaces rather than edits
    them, like the sim's) by uid and resourceVersion. Within one Allocator they are read once.
    ``allocated`` may be an :class:`AllocatedState` (kept by reference, so ``add``/``remove`` on
    it are seen by later calls) or a list of claims.
    """

    def __init__(self, features: Features, classes: list[dict[str, Any]], slices: list[dict[str, Any]],
                 allocated: AllocatedState | list[dict[str, Any]] | None = None, taint_rules: Iterable[dict[str, Any]] = (),
                 cel_engine: Any = None, versioned: bool = False) -> None:
        self.features = features
        self.profile = VariantProfile.for_features(features)
        self.classes = {(c.get("metadata") or {}).get("name", ""): c for c in classes}
        if allocated is None:
            allocated = AllocatedState(consumable_capacity=features.ConsumableCapacity)
        elif not isinstance(allocated, AllocatedState):
            allocated = AllocatedState.from_claims(allocated, consumable_capacity=features.ConsumableCapacity)
        self.allocated = allocated
        # converted lazily, per node asked about, and reused across Allocators (model.slice_info)
        self._raw_slices = slices
        self._versioned = versioned
        self._rules = list(taint_rules)
        self._rules_key = _rules_key(self._rules, versioned)
        self._infos: dict[int, SliceInfo] = {}  # id(raw) -> view, checked once per Allocator
        self._all: list[SliceInfo] | None = None
        self._raw_on_node: dict[str, list[dict[str, Any]]] = {}
        self._raw_shared: list[dict[str, Any]] = []
        # 1.35/1.36: counter-only slices are needed on every node (NewAllocator puts them in
        # slicesShared whatever their nodeName)
        counters_shared = self.profile.counter_slices_everywhere
        for raw in slices:
            spec = raw.get("spec") or {}
            node_name = spec.get("nodeName")
            if node_name and not (counters_shared and spec.get("sharedCounters")):
                self._raw_on_node.setdefault(node_name, []).append(raw)
            else:
                self._raw_shared.append(raw)
        self.engine = SelectorEngine(cel_engine, consumable_capacity=features.ConsumableCapacity,
                                     list_type_attributes=features.ListTypeAttributes,
                                     lazy_attributes=self.profile.v38)
        # selector results and candidate lists are kept on the (shared) pools when the CEL engine
        # is one of labkit.cel's, named by a string; a caller's own engine object gets its own
        self._engine_key = ((cel_engine, features.ConsumableCapacity, features.ListTypeAttributes,
                             self.profile.v38)
                            if cel_engine is None or isinstance(cel_engine, str) else None)
        self._cel_results: dict[tuple[int, str], bool | Exception] = {}
        self._pool_cache: dict[tuple[Any, ...], list[Pool]] = {}
        self._candidates: dict[tuple[Any, ...], Any] = {}  # candidates()' results, _class_entries()' lists
        self._indexes: dict[tuple[Any, ...], AttributeIndex] = {}  # keys hold id(entries) kept by _candidates

    def _info(self, raw: dict[str, Any]) -> SliceInfo:
        info = self._infos.get(id(raw))
        if info is None:
            info = self._infos[id(raw)] = slice_info(raw, self._rules, self._rules_key, self._versioned)
        return info

    @property
    def slices(self) -> list[SliceInfo]:
        """Every slice this Allocator was given, converted (in the order given)."""
        if self._all is None:
            self._all = [self._info(raw) for raw in self._raw_slices]
        return self._all

    @property
    def variant(self) -> str:
        return self.profile.name

    # selectors are pure functions of (device, expression): cached for the Allocator's lifetime
    def eval_selector(self, expr: str, dev: DeviceInfo) -> bool:
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
            result = self.engine.matches(prog, dev.slice.driver, dev.raw, dev.cel_memo)
        except Exception as exc:
            self._cel_results[key] = exc
            raise
        self._cel_results[key] = result
        return result

    def candidates(self, pool: Pool, rd: RequestData, node: dict[str, Any]) -> tuple[list[int], list[tuple[Any, ...]]]:
        """Devices of ``pool`` that pass ``isSelectable`` for a request, in search order.

        Entries are ``(position, device, error)``; ``error`` (a selector that failed to compile or
        evaluate on that device) is raised by the search only when it reaches the device, which
        is when upstream would evaluate it. Cached per (pool, class, request selectors): pools
        are per node, so per-device node selection is covered too.
        """
        key = (id(pool), rd.class_name, tuple(rd.selectors))
        hit: tuple[list[int], list[tuple[Any, ...]]] | None = self._candidates.get(key)
        if hit is not None:
            return hit
        class_sels = tuple(((s or {}).get("cel") or {}).get("expression", "")
                           for s in (rd.class_obj.get("spec") or {}).get("selectors") or [])  # type: ignore[union-attr]  # request_view set it
        binding_ok = self.features.DeviceBindingAndStatus
        shared_key = None
        if self._engine_key is not None:
            shared_key = (self._engine_key, binding_ok, class_sels, tuple(rd.selectors))
            hit = pool.candidates.get(shared_key)
            if hit is not None:
                self._candidates[key] = hit
                return hit  # type: ignore[no-any-return]  # pool.candidates: candidates() results under these keys
        # the class's selectors first, once per pool and class (a request's selectors are only
        # evaluated on devices the class lets through, as upstream does per device)
        entries = self._class_entries(pool, class_sels, binding_ok)
        if rd.selectors:
            entries = self._screen(entries, rd.selectors, "claim")
        if any(dev.slice.per_device for _, dev, _ in entries):
            kept = []
            for entry in entries:
                _, dev, err = entry
                if err is None and dev.slice.per_device:
                    try:
                        if not node_matches(node, dev.node_name, dev.all_nodes, dev.node_selector):
                            continue
                    except NodeSelectorError as exc:
                        entry = (entry[0], dev, ("node", 0, str(exc)))
                kept.append(entry)
            entries = kept
        hit = ([pos for pos, _, _ in entries], entries)
        self._candidates[key] = hit
        if shared_key is not None:
            pool.candidates[shared_key] = hit
        return hit

    def _class_entries(self, pool: Pool, class_sels: tuple[str, ...], binding_ok: bool) -> list[tuple[Any, ...]]:
        """``(position, device, error)`` of the devices of ``pool`` that its DeviceClass selectors
        let through (or fail on with an error), kept per pool and class."""
        # on the shared pool when the engine is one of labkit.cel's (like candidates), else here
        store: dict[tuple[Any, ...], Any]  # pool.candidates holds candidates() results too
        key: tuple[Any, ...]
        if self._engine_key is not None:
            store, key = pool.candidates, ("class", self._engine_key, binding_ok, class_sels)
        else:
            store, key = self._candidates, ("class", id(pool), binding_ok, class_sels)
        hit: list[tuple[Any, ...]] | None = store.get(key)
        if hit is not None:
            return hit
        entries = []
        pos = -1
        for s in pool.device_slices:
            for dev in s.devices:
                pos += 1
                if binding_ok or not dev.binding_conditions:
                    entries.append((pos, dev, None))
        if class_sels:
            entries = self._screen(entries, class_sels, "class")
        store[key] = entries
        return entries

    def _screen(self, entries: list[tuple[Any, ...]], exprs: Iterable[str], who: str) -> list[tuple[Any, ...]]:
        """``entries`` without the devices one of ``exprs`` rejects; a device on which one fails
        to compile or evaluate gets that error (``(who-compile|who-runtime, index, text)``) and
        is not tried with the next. Entries that carry an error already pass unchanged."""
        alive = [e for e in entries if e[2] is None]
        failed: dict[int, tuple[Any, ...]] = {}
        for i, expr in enumerate(exprs):
            if not alive:
                break
            still = []
            for entry, verdict in zip(alive, self.engine.verdicts(expr, [e[1] for e in alive]), strict=True):
                if verdict is True:
                    still.append(entry)
                elif verdict is not False:
                    kind = "compile" if isinstance(verdict, SelectorCompileError) else "runtime"
                    failed[entry[0]] = (entry[0], entry[1], (f"{who}-{kind}", i, str(verdict)))
            alive = still
        if len(alive) == len(entries):
            return entries
        passed = {e[0] for e in alive}
        return [e if e[2] is not None or e[0] in passed else failed[e[0]]
                for e in entries if e[2] is not None or e[0] in passed or e[0] in failed]

    def attribute_index(self, entries: list[tuple[Any, ...]], attribute: str) -> AttributeIndex:
        """``entries`` (from :meth:`candidates`) grouped by their scalar value of ``attribute``."""
        key = (id(entries), attribute)
        ix = self._indexes.get(key)
        if ix is None:
            ix = self._indexes[key] = AttributeIndex(entries, attribute)
        return ix

    def pools_for(self, node: dict[str, Any]) -> list[Pool]:
        meta = (node or {}).get("metadata") or {}
        name = meta.get("name", "")
        key = (name, tuple(sorted((meta.get("labels") or {}).items())),
               tuple(((node or {}).get("status") or {}).get("declaredFeatures") or ()))
        pools = self._pool_cache.get(key)
        if pools is None:
            if self.profile.node_local_slices:
                for_node = [self._info(raw) for raw in self._raw_on_node.get(name, ())]
                for_node += [self._info(raw) for raw in self._raw_shared]
            else:
                for_node = self.slices
            shared_key = (self.features, key, tuple(for_node))
            pools = _POOLS.get(shared_key)
            if pools is None:
                consulted: list[bool] = []

                def all_slices() -> list[SliceInfo]:
                    consulted.append(True)
                    return self.slices

                pools = gather_pools(for_node, node, self.features, all_slices, self.profile)
                if not consulted:  # a function of the node's own slices: valid for any Allocator
                    if len(_POOLS) >= _POOLS_MAX:
                        del _POOLS[next(iter(_POOLS))]
                    _POOLS[shared_key] = pools
            self._pool_cache[key] = pools
        return pools

    def explanation(self, node: dict[str, Any], claims: list[dict[str, Any]], outcome: Outcome) -> Any:
        """Why (not) ``outcome`` for these claims on ``node``, worked out in a separate pass."""
        return explain(self, node, claims, outcome)

    def allocate(self, node: dict[str, Any], claims: list[dict[str, Any]], timeout: float | None = FILTER_TIMEOUT) -> Outcome:
        """One scheduling attempt for ``node``. After ``timeout`` seconds of search (None: no
        limit) the attempt ends like kube-scheduler's cancelled filter: status ``error`` with
        ``TIMEOUT_ERROR`` (upstream's search is exponential in bad cases; Go cuts it the same way).
        """
        # called with the outcome (a closure over it would make every cached outcome a cycle
        # that only the garbage collector frees)
        def later(outcome: Outcome) -> Any:
            return self.explanation(node, claims, outcome)

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
        outcome._explain = later
        return outcome
