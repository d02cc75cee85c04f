"""What kube-scheduler's DynamicResources plugin keeps between pods: the allocator inputs.

One `Allocator` per node is built lazily over the slices that node can see (its own pools and
cluster-wide slices whose nodeSelector/allNodes reach it) and shares one `AllocatedState`, which
is updated incrementally as claims are allocated and freed. Any change to DeviceClasses,
ResourceSlices or DeviceTaintRules drops the per-node allocators; the new ones reuse the
converted slices, pools and selector results of every unchanged slice (labkit.allocator.model).
A slice is converted when it arrives (labkit.allocator.prepare_slices), as kube-scheduler's
informer does, so that a scheduling cycle does not pay for it. Nodes whose devices look the same
to a claims shape share one search (:meth:`DraState.allocate`, labkit.allocator.twins): a fleet
of a few node kinds costs a few searches per shape, not one per node.
"""

from __future__ import annotations

from functools import partial
from itertools import repeat
from typing import Any

from labkit.allocator import AllocatedState, Allocator, Outcome, features_for, prepare_slices
from labkit.allocator.core import FILTER_TIMEOUT
from labkit.allocator.model import slice_info
from labkit.allocator.nodes import NodeSelectorError, selector_matches
from labkit.allocator.twins import (
    NodeTwin,
    TwinTable,
    attribute_key,
    claims_refs,
    in_use,
    kept,
    node_twin,
    shareable,
    twin_outcome,
)
from labkit.api.features import FEATURE_DEFAULTS, minor_key, normalize_version
from labkit.api.problem import go_quote
from labkit.api.quantity import QuantityError, parse_quantity
from labkit.sim.store import Store, WatchEvent

#: changes.get's default for each pool (map stops at the shorter iterable)
_ZEROS = repeat(0)


def split_gates(version: str, gates: dict[str, bool]) -> tuple[dict[str, bool], dict[str, bool]]:
    """(allocator/DRA gates known to labkit.api.features, all other gates)."""
    known = FEATURE_DEFAULTS[normalize_version(version)]
    return ({k: v for k, v in gates.items() if k in known}, {k: v for k, v in gates.items() if k not in known})


def _may_serve(slice_: dict, node: dict) -> bool:
    """Can a slice without nodeName serve this node? A selector Kubernetes cannot parse counts as
    yes: the allocator then reports "failed to parse node selector", as kube-scheduler does."""
    spec = slice_.get("spec") or {}
    selector = spec.get("nodeSelector")
    if spec.get("allNodes") or selector is None:
        return True
    try:
        return selector_matches(selector, node)
    except NodeSelectorError:
        return True


class DraState:
    def __init__(self, store: Store, kubernetes_version: str, gates: dict[str, bool], cel_engine: str | None = None):
        self.store = store
        self.kubernetes_version = kubernetes_version
        self.gates = gates
        self.cel_engine = cel_engine
        self.features = features_for(kubernetes_version, gates)
        self.allocated = AllocatedState(consumable_capacity=self.features.ConsumableCapacity)
        #: 1.38 with DRAConsumableCapacity: stored claims whose allocation has a negative consumed
        #: capacity (claim uid -> why), see allocation_state_error
        self.checks_consumed_capacity = (self.features.ConsumableCapacity
                                         and minor_key(kubernetes_version) >= (1, 38))
        self.invalid_capacity: dict[str, str] = {}
        self._allocators: dict[str, Any] = {}
        self._slices: dict[str, list[dict]] | None = None
        self._cluster_wide: list[dict] = []
        #: twin nodes (labkit.allocator.twins): off to compare with every node's own search
        self.twins = True
        self.inventory_epoch = 0  # bumped by every inventory change (TwinTable.epoch)
        self._twins_ok: bool | None = None
        #: node -> (twin, content number, [pools' change counts, devices in use then])
        self._node_twins: dict[str, tuple[NodeTwin | None, int, list]] = {}
        self._twin_attributes: dict[tuple, dict[str, int | None]] = {}  # refs -> node -> attributes number
        self._twin_classes: dict[Any, Any] = {}  # node_twin's classes, for this inventory
        self._content_numbers: dict[int, tuple[tuple, int]] = {}  # id(NodeTwin.content) -> (it, its number)
        self._interned: dict[tuple, int] = {}  # contents and attribute keys -> their numbers
        store.watch(self._on_inventory, kinds=("DeviceClass", "ResourceSlice", "DeviceTaintRule"))

    def note_allocated(self, uid: str, claim: dict) -> None:
        """A stored claim's allocation is in use (kube-scheduler's allocatedDevices.addDevices):
        remember it when it consumes a negative capacity."""
        if self.checks_consumed_capacity:
            problem = consumed_capacity_error(claim)
            if problem is not None:
                self.invalid_capacity[uid] = problem

    def forget_allocated(self, uid: str) -> None:
        self.invalid_capacity.pop(uid, None)

    def allocation_state_error(self) -> str | None:
        """Why the allocated state cannot be gathered (1.38's PreFilter error for every pod that
        needs an allocation), or None. One claim is named, the others counted, the first in
        string order as kube-scheduler sorts them (allocateddevices.go: getCapacities)."""
        if not self.invalid_capacity:
            return None
        problems = sorted(self.invalid_capacity.values())
        more = f" (and {len(problems) - 1} more claims with invalid consumed capacity)" if len(problems) > 1 else ""
        return f"gather allocation state: {problems[0]}{more}"

    def _on_inventory(self, ev: WatchEvent) -> None:
        self.invalidate()
        if ev.type != "DELETED" and ev.kind == "ResourceSlice":
            # converted as it arrives, like kube-scheduler's informer: not in a scheduling cycle
            prepare_slices([ev.object], self.store.list("DeviceTaintRule"), versioned=True)

    def invalidate(self) -> None:
        self._allocators.clear()
        self._slices = None
        self.inventory_epoch += 1
        self._twins_ok = None
        self._node_twins.clear()
        self._twin_classes.clear()
        self._content_numbers.clear()
        self._twin_attributes.clear()
        self._interned.clear()

    def _index(self) -> dict[str, list[dict]]:
        if self._slices is None:
            by_node: dict[str, list[dict]] = {}
            wide: list[dict] = []
            for s in self.store.list("ResourceSlice"):
                spec = s.get("spec") or {}
                if spec.get("nodeName"):
                    by_node.setdefault(spec["nodeName"], []).append(s)
                else:
                    wide.append(s)
            self._slices, self._cluster_wide = by_node, wide
        return self._slices

    def slices_for(self, node: dict) -> list[dict]:
        name = node["metadata"]["name"]
        own = self._index().get(name, [])
        wide = [s for s in self._cluster_wide if _may_serve(s, node)]
        return own + wide

    def has_cluster_wide_slices(self) -> bool:
        """Are there slices without a nodeName (devices more than one node can use)?"""
        self._index()
        return bool(self._cluster_wide)

    def all_slices(self) -> list[dict]:
        return self.store.list("ResourceSlice")

    def allocator_for(self, node: dict) -> Any:
        name = node["metadata"]["name"]
        alloc = self._allocators.get(name)
        if alloc is None:
            alloc = Allocator(
                self.features,
                self.store.list("DeviceClass"),
                self.slices_for(node),
                self.allocated,
                taint_rules=self.store.list("DeviceTaintRule"),
                cel_engine=self.cel_engine,
                versioned=True,  # store objects are replaced, never edited: reuse by resourceVersion
            )
            self._allocators[name] = alloc
        return alloc

    def allocate(self, node: dict, claims: list[dict], table: TwinTable | None = None,
                 timeout: float | None = FILTER_TIMEOUT) -> Outcome:
        """The node's Allocator's outcome for ``claims``, or, with ``table`` (kept by the caller
        for claims of this shape), that of a twin node asked before (labkit.allocator.twins).
        ``timeout``: the search's filterTimeout in seconds (Allocator.allocate's)."""
        found = self._twin_key(node, claims, table) if table is not None and self.twins else None
        if found is None:
            return self.allocator_for(node).allocate(node, claims, timeout)
        key, pools = found
        name = node["metadata"]["name"]
        entry = table.outcomes.get(key)  # type: ignore[union-attr]  # found: table is not None
        if entry is not None:
            return self.twin_answer(entry, pools, node, claims, table)  # type: ignore[arg-type]  # as above
        outcome = self.allocator_for(node).allocate(node, claims, timeout)
        if shareable(outcome, name):
            table.outcomes[key] = kept(outcome, pools, name)  # type: ignore[union-attr]  # as above
        return outcome

    def twin_answer(self, entry: tuple[Outcome, tuple[tuple[str, str], ...]], pools: tuple[tuple[str, str], ...],
                    node: dict, claims: list[dict], table: TwinTable) -> Outcome:
        """A twin's kept outcome (``table.outcomes``' ``entry``), for ``node`` whose pools are ``pools``."""
        table.hits += 1
        return twin_outcome(entry, pools, node["metadata"]["name"], partial(_explain_later, self, node, claims))

    def _twin_key(self, node: dict, claims: list[dict], table: TwinTable) -> tuple[tuple, tuple] | None:
        """(the key, the node's pools in search order), or None when the node has no twin."""
        if not self.twin_refs(table, claims):
            return None
        part = self.twin_part(node)
        if part is None:
            return None
        twin, content, used = part
        attributes = self.twin_attributes(table, node["metadata"]["name"], twin)
        return ((content, attributes, used), twin.pools) if attributes is not None else None

    def twin_refs(self, table: TwinTable, claims: list[dict]) -> bool:
        """Bring ``table`` (for claims of the shape of ``claims``) up to the inventory; can its
        claims have twin answers at all?"""
        if table.epoch != self.inventory_epoch:
            table.epoch, table.outcomes = self.inventory_epoch, {}
            table.refs = claims_refs(claims, {c["metadata"]["name"]: c for c in self.store.list("DeviceClass")})
            table.attributes = self._twin_attributes.setdefault(table.refs, {}) if table.refs is not None else {}
        return table.refs is not None

    def twin_part(self, node: dict) -> tuple[NodeTwin, int, tuple] | None:
        """The node's part of a twin key, the same for every claims shape: (its NodeTwin, its
        content as a number, the positions of its devices in use now), or None: no twin."""
        if self._twins_ok is None:
            self._index()
            self._twins_ok = not self._cluster_wide and not self.store.count("DeviceTaintRule")
        if not self._twins_ok:
            return None
        name = node["metadata"]["name"]
        try:
            twin, content, used = self._node_twins[name]
        except KeyError:
            twin = node_twin([slice_info(raw, [], (), True) for raw in self._index().get(name, ())], self.features,
                             self._twin_classes)
            # the content as a number: hashing the nested tuple for every filter would cost more; the
            # nodes of one class (node_twin's classes) share one content object: numbered once
            content = -1
            if twin is not None:
                known = self._content_numbers.get(id(twin.content))
                if known is not None and known[0] is twin.content:
                    content = known[1]
                else:
                    content = self._interned.setdefault(twin.content, len(self._interned))
                    self._content_numbers[id(twin.content)] = (twin.content, content)
            used = [None, None]  # [the pools' change counts, the devices in use then]
            self._node_twins[name] = (twin, content, used)
        if twin is None:
            return None
        changes = self.allocated.changes
        counts = tuple(map(changes.get, twin.pools, _ZEROS))
        if used[0] != counts:
            used[0], used[1] = counts, in_use(twin, self.allocated, counts)
        return (twin, content, used[1]) if used[1] is not None else None

    def twin_attributes(self, table: TwinTable, name: str, twin: NodeTwin) -> int | None:
        """The node's attribute key for the claims of ``table`` (twin_refs first), as a number;
        None: no twin."""
        try:
            return table.attributes[name]
        except KeyError:
            found = attribute_key(twin, table.refs)  # type: ignore[arg-type]  # twin_refs: refs is set
            attributes = table.attributes[name] = (
                self._interned.setdefault(found, len(self._interned)) if found is not None else None)
            return attributes

    def extended_resource_classes(self) -> dict[str, str]:
        """extendedResourceName -> DeviceClass name (DRAExtendedResource). Every class also backs
        its implicit name `deviceclass.resource.kubernetes.io/<class>` (KEP-5004)."""
        out: dict[str, str] = {}
        for c in self.store.list("DeviceClass"):
            ern = (c.get("spec") or {}).get("extendedResourceName")
            if ern:
                out.setdefault(ern, c["metadata"]["name"])
        for c in self.store.list("DeviceClass"):
            out.setdefault(f"deviceclass.resource.kubernetes.io/{c['metadata']['name']}", c["metadata"]["name"])
        return out


def consumed_capacity_error(claim: dict) -> str | None:
    """The first negative ``consumedCapacity`` of a claim's allocation (results in order, capacity
    names sorted), as 1.38's kube-scheduler words it (allocateddevices.go: consumedCapacityError).
    Checked per result: another claim's positive value on the same device could hide it in a sum."""
    m = claim.get("metadata") or {}
    results = (((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results") or ()
    for r in results:
        consumed = r.get("consumedCapacity") or {}
        for name in sorted(consumed):
            try:
                q = parse_quantity(str(consumed[name]))
            except QuantityError:
                continue
            if q.sign() < 0:
                device = f"{r.get('driver', '')}/{r.get('pool', '')}/{r.get('device', '')}"
                return (f"claim {m.get('namespace', '')}/{m.get('name', '')}, device {device}: consumed capacity "
                        f"{go_quote(name)} must not be negative, got {q.canonical()}")
    return None


def _explain_later(dra: DraState, node: dict, claims: list[dict], outcome: Outcome) -> Any:
    """A twin's outcome explained for its own node (called with the outcome, so that a kept
    outcome is not a reference cycle)."""
    return dra.allocator_for(node).explanation(node, claims, outcome)
