"""Twin nodes: one search answers for every node whose devices look the same to a set of claims.

A fleet is built from a few node kinds, so many nodes hold the same devices in the same state.
Their ResourceSlices differ in names (node, pool, slice), in ids such as a GPU's uuid or PCI
address, and often in nothing else that a search reads. For such nodes the search walks the same
steps and takes the same devices; only the pool and node names in the results differ.
kube-scheduler once kept an "equivalence class cache" in the same spirit.

Two nodes are twins for the claims of one shape (the same request specs) when this key is equal
for both (built by the caller, labkit.sim.dra.DraState, from :func:`node_twin`,
:func:`attribute_key` and :func:`in_use`):

- every slice the node sees is its own (``nodeName``; no cluster-wide slices, no
  DeviceTaintRules: the caller checks those), each pool complete in one generation, and no
  device carries what ties a result to one node or one allocation (binding conditions,
  ``bindsToNode``, multiple allocations, node operations) or fails to convert to CEL;
- per pool, in search order (driver, then pool name), and per slice in the order the node lists
  them: everything the search reads except names and attributes (``SliceInfo.content_key``,
  worked out when the slice arrives; capacities and the driver are in it);
- per slice, the values of the attributes that the claims' selectors, their classes' selectors
  and their constraints read (:func:`claims_refs`, ``SliceInfo.column``): a selector that reads
  a uuid makes every node distinct, as it should;
- which of the node's devices are in use (a node with a shared device or consumed capacity in
  use has no twin).

Only outcomes without an error are shared (an error names claims and devices), and the
explanation of a twin's outcome is worked out for its own node, on demand.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from labkit.allocator.allocator import Outcome
from labkit.allocator.features import Features
from labkit.allocator.model import SliceInfo
from labkit.allocator.state import AllocatedState
from labkit.cel.literals import device_references

__all__ = ["NodeTwin", "TwinTable", "attribute_key", "claims_refs", "in_use", "kept", "node_twin", "renamed",
           "shareable", "twin_outcome"]


@dataclass
class TwinTable:
    """The twin outcomes of one claims shape, for one inventory (DeviceClasses, slices, taint
    rules): ``epoch`` says which; the owner empties the table when it changes. ``hits`` counts
    the searches it saved."""

    epoch: int = -1
    refs: tuple[Any, ...] | None = None  # claims_refs() of the shape's claims
    #: node name -> its attribute_key() as a number, shared by the tables whose claims read the same refs
    attributes: dict[str, int | None] = field(default_factory=dict)
    #: key -> (outcome with results of its own, the pools it was found on)
    outcomes: dict[tuple[Any, ...], tuple[Outcome, tuple[tuple[str, str], ...]]] = field(default_factory=dict)
    hits: int = 0


@dataclass(frozen=True)
class NodeTwin:
    """What a node's own slices give its key, worked out once per node and inventory."""

    content: tuple[Any, ...]  # per pool: (driver, slice content keys)
    pools: tuple[tuple[str, str], ...]  # (driver, pool name), in search order
    slices: tuple[SliceInfo, ...]  # in search order

    @cached_property
    def ids(self) -> tuple[tuple[str, str, str], ...]:
        """The devices, in search order."""
        ids: list[tuple[str, str, str]] = []
        for s in self.slices:
            ids += s.device_ids
        return tuple(ids)


#: a class of nodes (node_twin's ``classes``): per slice in the node's order, the converted slice
#: it is like (SliceInfo.like, or itself)
ClassKey = tuple[SliceInfo, ...]


def node_twin(own: list[SliceInfo], features: Features,
              classes: dict[ClassKey, tuple[tuple[int, ...], tuple[Any, ...]] | None] | None = None) -> NodeTwin | None:
    """The node's part of the key from its own slices (in the order the node lists them), or
    None when it cannot have a twin. ``classes`` (kept by the caller for one inventory): what
    the nodes whose slices are like the same slices share, worked out once for them all: every
    fact read here but the pool names is the slice's ``like``'s (labkit.allocator.model._twin_of),
    and where the slices' drivers differ each is a pool of its own in driver order, whatever its
    pool's name."""
    if classes is None:
        return _node_twin(own, features)
    key = tuple([s.like or s for s in own])
    try:
        found = classes[key]
    except KeyError:
        found = None
        drivers = [s.driver for s in own]
        twin = _node_twin(own, features)
        if twin is not None and len(set(drivers)) == len(drivers):
            order = tuple(sorted(range(len(own)), key=drivers.__getitem__))
            found = classes[key] = (order, twin.content)
        elif twin is None:
            classes[key] = None
        return twin
    if found is None:
        return None
    order, content = found
    ordered = tuple([own[i] for i in order])
    return NodeTwin(content, tuple([(s.driver, s.pool) for s in ordered]), ordered)


def _node_twin(own: list[SliceInfo], features: Features) -> NodeTwin | None:
    by_pool: dict[tuple[str, str], list[SliceInfo]] = {}
    for s in own:
        if s.content_key is None:
            return None
        if ((not features.PartitionableDevices and (s.per_device is not None or s.shared_counters))
                or (not features.CompatibilityGroups and s.uses_compat_groups)):
            return None  # a slice the allocator leaves out: its pool then depends on other slices
        by_pool.setdefault((s.driver, s.pool), []).append(s)
    content, pools, ordered = [], [], []
    for (driver, pool), slices in sorted(by_pool.items(), key=lambda kv: kv[0]):
        if len(slices) != slices[0].count or any(s.generation != slices[0].generation for s in slices):
            return None  # incomplete or mixed generations: the pool depends on other slices
        content.append((driver, tuple(s.content_key for s in slices)))
        pools.append((driver, pool))
        ordered += slices
    return NodeTwin(tuple(content), tuple(pools), tuple(ordered))


def claims_refs(claims: list[dict[str, Any]], classes: dict[str, dict[str, Any]]) -> tuple[Any, ...] | None:
    """The attributes (``(domain, id)``) that the claims' selectors, their DeviceClasses'
    selectors and their constraints read; None when that cannot be told, or for claims of an
    unexpected shape (their own search reports what is wrong). (Everything else they can read,
    the driver and capacities, is in ``SliceInfo.content_key``.)"""
    try:
        return _claims_refs(claims, classes)
    except (AttributeError, TypeError):
        return None


def _claims_refs(claims: list[dict[str, Any]], classes: dict[str, dict[str, Any]]) -> tuple[Any, ...] | None:
    refs: list[tuple[str, str]] = []

    def add(ref: tuple[str, str]) -> None:
        if ref not in refs:
            refs.append(ref)

    def add_expression(expr: Any) -> bool:
        found = device_references(expr) if type(expr) is str else None
        if found is None:
            return False
        for what, domain, ident in found:
            if what == "attributes":
                if domain is None or ident is None:
                    return False  # a whole map: every value counts
                add((domain, ident))
        return True

    for claim in claims:
        devices = ((claim.get("spec") or {}).get("devices")) or {}
        for req in devices.get("requests") or []:
            exact = req.get("exactly")
            subs = [exact] if exact is not None else list(req.get("firstAvailable") or [])
            if not subs:
                return None
            for sub in subs:
                cls = classes.get(sub.get("deviceClassName", ""))
                if cls is None:
                    return None
                for sel in list((cls.get("spec") or {}).get("selectors") or []) + list(sub.get("selectors") or []):
                    if not add_expression(((sel or {}).get("cel") or {}).get("expression")):
                        return None
        for c in devices.get("constraints") or []:
            for kind in ("matchAttribute", "distinctAttribute"):
                name = c.get(kind)
                if name is None:
                    continue
                domain, sep, ident = name.partition("/") if type(name) is str else ("", "", "")
                if not (sep and domain and ident):
                    return None
                add((domain, ident))
    return tuple(refs)


def attribute_key(twin: NodeTwin, refs: tuple[Any, ...]) -> tuple[Any, ...] | None:
    """Per slice and attribute in ``refs``: its values on the slice's devices, under the bare
    name (for the slice's driver's own domain) and under the qualified one."""
    out = []
    for s in twin.slices:
        for domain, ident in refs:
            bare = s.column(ident) if domain == s.driver and "/" not in ident else ()
            full = s.column(f"{domain}/{ident}")
            if bare is None or full is None:
                return None
            out.append((bare, full))
    return tuple(out)


def in_use(twin: NodeTwin, state: AllocatedState, counts: tuple[int, ...] | None = None) -> tuple[Any, ...] | None:
    """The positions of the node's devices in use now; None when one of them is shared or has
    capacity consumed. ``counts``: the pools' AllocatedState.changes, when the caller has them
    (no result was ever added to a pool whose count is 0: nothing of the node in use then)."""
    if counts is not None:
        return _in_use_by_pool(twin, state, counts)
    if state.shared_devices or state.capacity:
        shared, capacity = state.shared_devices, state.capacity
        if any(i in shared or i in capacity for i in twin.ids):
            return None
    used = state.devices
    return tuple([k for k, i in enumerate(twin.ids) if i in used])


def _in_use_by_pool(twin: NodeTwin, state: AllocatedState, counts: tuple[int, ...]) -> tuple[Any, ...] | None:
    """in_use, looking only at the pools some result was ever added to."""
    if not any(counts):
        return ()
    touched = {pool for pool, count in zip(twin.pools, counts) if count}
    shared, capacity, used = state.shared_devices, state.capacity, state.devices
    out: list[int] = []
    k = 0
    for s in twin.slices:
        names = s.device_names
        if (s.driver, s.pool) in touched:
            driver, pool = s.driver, s.pool
            for j, name in enumerate(names):
                device = (driver, pool, name)
                if (shared or capacity) and (device in shared or device in capacity):
                    return None
                if device in used:
                    out.append(k + j)
        k += len(names)
    return tuple(out)


def _node_selector(name: str) -> dict[str, Any]:
    return {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [name]}]}]}


def shareable(outcome: Outcome, node_name: str) -> bool:
    """Can ``outcome`` serve a twin: no error, and every node selector is the node's own name."""
    if outcome.error is not None or outcome.status not in ("allocated", "unsatisfiable"):
        return False
    mine = _node_selector(node_name)
    return all(a.get("nodeSelector", mine) == mine for a in outcome.allocations)


def renamed(allocations: list[dict[str, Any]], src_pools: tuple[tuple[str, str], ...], pools: tuple[tuple[str, str], ...],
            node_name: str) -> list[dict[str, Any]]:
    """A twin's allocation results (:func:`shareable`) for the node ``node_name`` whose pools, in
    search order, are ``pools``: new dicts where a name changes, the rest shared (allocation
    results are read only; the binder writes a copy)."""
    names = {src: dst[1] for src, dst in zip(src_pools, pools, strict=True)}
    out = []
    for a in allocations:
        a = dict(a)
        devices = a.get("devices")
        if devices:
            devices = a["devices"] = dict(devices)
            results = devices.get("results")
            if results:
                devices["results"] = [{**r, "pool": names[(r["driver"], r["pool"])]} for r in results]
        if "nodeSelector" in a:
            a["nodeSelector"] = _node_selector(node_name)
        out.append(a)
    return out


class RenamedOutcome(Outcome):
    """A twin's outcome for another node: its results are renamed when first read (most twin
    outcomes are only looked at as feasible or not)."""

    def __init__(self, src: Outcome, src_pools: tuple[tuple[str, str], ...], pools: tuple[tuple[str, str], ...],
                 node_name: str, later: Callable[[Outcome], Any]) -> None:
        # Outcome's fields, set here rather than by its __init__: one of these per node a twin answers for
        self._allocations: list[dict[str, Any]] = []
        self.status, self.error, self.node_scoped = src.status, None, False
        self.steps, self._explanation = src.steps, None
        self._renaming: tuple[list[dict[str, Any]], tuple[tuple[str, str], ...], tuple[tuple[str, str], ...], str] | None = (
            src.allocations, src_pools, pools, node_name) if src.allocations else None
        self._explain = later

    @property
    def allocations(self) -> list[dict[str, Any]]:
        if self._renaming is not None:
            self._allocations = renamed(*self._renaming)
            self._renaming = None
        return self._allocations

    @allocations.setter
    def allocations(self, value: list[dict[str, Any]]) -> None:
        self._allocations = value
        self._renaming = None


def twin_outcome(entry: tuple[Outcome, tuple[tuple[str, str], ...]], pools: tuple[tuple[str, str], ...],
                 node_name: str, later: Callable[[Outcome], Any]) -> Outcome:
    """The outcome a twin's search gave, for this node; ``later`` explains it (for this node)."""
    src, src_pools = entry
    return RenamedOutcome(src, src_pools, pools, node_name, later)


def kept(outcome: Outcome, pools: tuple[tuple[str, str], ...], node_name: str) -> tuple[Outcome, tuple[tuple[str, str], ...]]:
    """A table entry for ``outcome`` (its results' dicts of its own)."""
    return (Outcome(outcome.status, renamed(outcome.allocations, pools, pools, node_name), steps=outcome.steps), pools)
