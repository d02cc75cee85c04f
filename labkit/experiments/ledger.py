"""What is in use on every GPU, built from the allocations the sim's real allocator made.

The runner feeds it (`add_pod` with the devices a pod's claims got, `remove_pod` when the pod is
gone); metrics and node-choosing policies read it. A device shared by several pods (one
ResourceClaim referenced by several pods, or a claim per pod on a multi-allocatable device) is
counted as allocated once, with the pods' needs added up.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from labkit.experiments.fleet import DeviceInfo, Fleet, GpuInfo
from labkit.experiments.traces import WorkItem


@dataclass
class GpuUse:
    info: GpuInfo
    devices: dict[str, DeviceInfo] = field(default_factory=dict)  # allocated device -> info
    consumers: dict[str, set[str]] = field(default_factory=dict)  # device -> pod names
    need_mem: dict[str, float] = field(default_factory=dict)  # device -> GiB the pods need
    need_compute: dict[str, float] = field(default_factory=dict)

    @property
    def used_mem(self) -> float:
        return sum(d.mem_gib for d in self.devices.values())

    @property
    def used_compute(self) -> float:
        return sum(d.compute for d in self.devices.values())

    @property
    def idle(self) -> bool:
        return not self.devices

    def chunks(self, sharing: bool) -> list[float]:
        """Free pieces of GPU memory one request could use (GiB).

        Whole-free GPU: its memory. Static MIG: each free MIG device. Dynamic MIG: the memory not
        yet consumed (an approximation: placement rules for memory slices are ignored). A shared
        whole GPU (`sharing`): memory the sharing pods do not need."""
        info = self.info
        if info.static_mig:
            return [d.mem_gib for d in info.static_mig if d.name not in self.devices]
        if not self.devices:
            return [info.mem_gib]
        if info.dynamic_mig and all(d.profile for d in self.devices.values()):
            free = info.mem_gib - self.used_mem
            return [free] if free > 1e-9 else []
        if sharing:
            out = []
            for name, d in self.devices.items():
                head = d.mem_gib - self.need_mem.get(name, 0.0)
                if head > 1e-9 and not d.profile:
                    out.append(head)
            return out
        return []


class Ledger:
    def __init__(self, fleet: Fleet) -> None:
        self.fleet = fleet
        self.gpus: dict[str, list[GpuUse]] = {n: [GpuUse(g) for g in fleet.kind_of[n].gpus] for n in fleet.nodes}
        self._gpu_index: dict[str, dict[str, int]] = {
            n: {g.name: i for i, g in enumerate(fleet.kind_of[n].gpus)} for n in fleet.nodes}
        self.pods: dict[str, tuple[WorkItem, str, list[str]]] = {}  # pod -> (item, node, devices)
        self.version = 0  # bumps on every change (cache key for policies)
        self.node_version: dict[str, int] = dict.fromkeys(fleet.nodes, 0)
        #: called with the node's name after every change on it (incremental metrics)
        self.listeners: list[Callable[[str], None]] = []
        self._order = {n: i for i, n in enumerate(fleet.nodes)}
        #: the GPUs with something allocated, by (node index, GPU index), with their terms of the
        #: totals (computed when their node changes): totals() adds only these, in fleet order,
        #: instead of reading every GPU of the fleet on every tick
        self._busy: dict[tuple[int, int], tuple[float, float, float, float]] = {}
        self._busy_order: list[tuple[int, int]] | None = []

    def device(self, node: str, name: str) -> DeviceInfo | None:
        return self.fleet.kind_of[node].devices.get(name)

    def add_pod(self, pod: str, item: WorkItem, node: str, devices: list[str]) -> None:
        kind = self.fleet.kind_of[node]
        share = len(devices) or 1
        for name in devices:
            info = kind.devices.get(name)
            if info is None:
                continue
            use = self.gpus[node][self._gpu_index[node][info.gpu]]
            use.devices[name] = info
            use.consumers.setdefault(name, set()).add(pod)
            use.need_mem[name] = use.need_mem.get(name, 0.0) + item.needed_mem_gib / share
            use.need_compute[name] = use.need_compute.get(name, 0.0) + item.needed_compute / share
        self.pods[pod] = (item, node, list(devices))
        self._touch(node)

    def remove_pod(self, pod: str) -> None:
        entry = self.pods.pop(pod, None)
        if entry is None:
            return
        item, node, devices = entry
        kind = self.fleet.kind_of[node]
        share = len(devices) or 1
        for name in devices:
            info = kind.devices.get(name)
            if info is None:
                continue
            use = self.gpus[node][self._gpu_index[node][info.gpu]]
            users = use.consumers.get(name, set())
            users.discard(pod)
            use.need_mem[name] = use.need_mem.get(name, 0.0) - item.needed_mem_gib / share
            use.need_compute[name] = use.need_compute.get(name, 0.0) - item.needed_compute / share
            if not users:
                use.consumers.pop(name, None)
                use.devices.pop(name, None)
                use.need_mem.pop(name, None)
                use.need_compute.pop(name, None)
        self._touch(node)

    def _touch(self, node: str) -> None:
        self.version += 1
        self.node_version[node] = self.node_version.get(node, 0) + 1
        at = self._order.get(node)
        if at is not None:
            for i, use in enumerate(self.gpus[node]):
                key = (at, i)
                if use.devices:
                    if key not in self._busy:
                        self._busy_order = None
                    self._busy[key] = _terms(use)
                elif self._busy.pop(key, None) is not None:
                    self._busy_order = None
        for listener in self.listeners:
            listener(node)

    # -- totals ----------------------------------------------------------------------------
    def totals(self) -> dict[str, float]:
        alloc_mem = alloc_comp = need_mem = need_comp = 0.0
        if self._busy_order is None:
            self._busy_order = sorted(self._busy)
        busy = self._busy
        for key in self._busy_order:  # the order of a scan of the whole fleet: the same float sums
            a, b, c, d = busy[key]
            alloc_mem += a
            alloc_comp += b
            need_mem += c
            need_comp += d
        busy_count = len(self._busy_order)
        return {"alloc_mem_gib": alloc_mem, "need_mem_gib": need_mem, "alloc_compute": alloc_comp,
                "need_compute": need_comp, "gpus_busy": float(busy_count)}


def _terms(u: GpuUse) -> tuple[float, float, float, float]:
    """One busy GPU's terms of Ledger.totals: memory and compute allocated and needed. A pod cannot
    use more compute than its devices give it (a MIG profile chosen for its memory may have fewer
    SMs than the pod asked for)."""
    used_compute = u.used_compute
    return u.used_mem, used_compute, sum(u.need_mem.values()), min(sum(u.need_compute.values()), used_compute)
