"""What is in use on every GPU, built from the allocations the sim's real allocator made.

The runner feeds it (`add_pod` with the devices a pod's claims got, `remove_pod` when the pod is
gone); metrics and node-choosing policies read it. A device shared by several pods (one
ResourceClaim referenced by several pods, or a claim per pod on a multi-allocatable device) is
counted as allocated once, with the pods' needs added up.
"""

from __future__ import annotations

from bisect import bisect_left
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
        self.changed: list[str] = []  # nodes in the order they were touched (readers keep a position)
        self.index_of = {n: i for i, n in enumerate(fleet.nodes)}  # node -> fleet position
        # totals(): per node, each busy GPU's (alloc mem, alloc compute, need mem, need compute),
        # refreshed for touched nodes only; the fleet positions of busy nodes, sorted
        self._rows: dict[str, list[tuple[float, float, float, float]]] = {}
        self._dirty: set[str] = set()
        self._busy: list[int] = []

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
        self.changed.append(node)
        self._dirty.add(node)

    # -- totals ----------------------------------------------------------------------------
    def _node_rows(self, node: str) -> list[tuple[float, float, float, float]]:
        rows = []
        for u in self.gpus[node]:
            if u.devices:
                used = u.used_compute
                # a pod cannot use more compute than its devices give it (a MIG profile chosen
                # for its memory may have fewer SMs than the pod asked for)
                rows.append((u.used_mem, used, sum(u.need_mem.values()), min(sum(u.need_compute.values()), used)))
        return rows

    def totals(self) -> dict[str, float]:
        """Fleet totals over busy GPUs. Only nodes touched since the last call are re-read; the
        sums still run over the busy GPUs in fleet order, so they equal `totals_scan()` bit for bit."""
        busy = self._busy
        for node in self._dirty:
            i = self.index_of[node]
            rows = self._rows[node] = self._node_rows(node)
            j = bisect_left(busy, i)
            present = j < len(busy) and busy[j] == i
            if rows and not present:
                busy.insert(j, i)
            elif not rows and present:
                del busy[j]
        self._dirty.clear()
        alloc_mem = alloc_comp = need_mem = need_comp = 0.0
        n = 0
        nodes, rows_of = self.fleet.nodes, self._rows
        for i in busy:
            for am, ac, nm, nc in rows_of[nodes[i]]:
                n += 1
                alloc_mem += am
                alloc_comp += ac
                need_mem += nm
                need_comp += nc
        return {"alloc_mem_gib": alloc_mem, "need_mem_gib": need_mem, "alloc_compute": alloc_comp,
                "need_compute": need_comp, "gpus_busy": float(n)}

    def totals_scan(self) -> dict[str, float]:
        """totals() recomputed from every GPU (the reference the cached version is tested against)."""
        alloc_mem = alloc_comp = need_mem = need_comp = 0.0
        busy = 0
        for uses in self.gpus.values():
            for u in uses:
                if u.devices:
                    busy += 1
                    alloc_mem += u.used_mem
                    alloc_comp += u.used_compute
                    need_mem += sum(u.need_mem.values())
                    need_comp += min(sum(u.need_compute.values()), u.used_compute)
        return {"alloc_mem_gib": alloc_mem, "need_mem_gib": need_mem, "alloc_compute": alloc_comp,
                "need_compute": need_comp, "gpus_busy": float(busy)}
