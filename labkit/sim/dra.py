"""What kube-scheduler's DynamicResources plugin keeps between pods: the allocator inputs.

One `Allocator` per node is built lazily over the slices that node can see (its own pools and
cluster-wide slices whose nodeSelector/allNodes reach it) and shares one `AllocatedState`, which
is updated incrementally as claims are allocated and freed. Any change to DeviceClasses,
ResourceSlices or DeviceTaintRules drops the per-node allocators; the new ones reuse the
converted slices, pools and selector results of every unchanged slice (labkit.allocator.model).
A slice is converted when it arrives (labkit.allocator.prepare_slices), as kube-scheduler's
informer does, so that a scheduling cycle does not pay for it.
"""

from __future__ import annotations

from typing import Any

from labkit.allocator import AllocatedState, Allocator, features_for, prepare_slices
from labkit.allocator.nodes import NodeSelectorError, selector_matches
from labkit.api.features import FEATURE_DEFAULTS, normalize_version
from labkit.sim.store import Store, WatchEvent


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
        self._allocators: dict[str, Any] = {}
        self._slices: dict[str, list[dict]] | None = None
        self._cluster_wide: list[dict] = []
        store.watch(self._on_inventory, kinds=("DeviceClass", "ResourceSlice", "DeviceTaintRule"))

    def _on_inventory(self, ev: WatchEvent) -> None:
        self.invalidate()
        if ev.type != "DELETED" and ev.kind == "ResourceSlice":
            # converted as it arrives, like kube-scheduler's informer: not in a scheduling cycle
            prepare_slices([ev.object], self.store.list("DeviceTaintRule"), versioned=True)

    def invalidate(self) -> None:
        self._allocators.clear()
        self._slices = None

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
