"""What is in use on every GPU, built from the allocations the sim's real allocator made.

The runner feeds it (`add_pod` with the devices a pod's claims got, `remove_pod` when the pod is
gone); metrics and node-choosing policies read it. A device shared by several pods (one
ResourceClaim referenced by several pods, or a claim per pod on a multi-allocatable device) is
counted as allocated once, with the pods' needs added up.
"""

from __future__ import annotations

import operator
from bisect import bisect_left
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from functools import reduce

from labkit.experiments.fleet import DeviceInfo, Fleet, GpuInfo, NodeKind
from labkit.experiments.traces import WorkItem

#: whether the builtin sum() of floats adds them one after another, rounding each step, as a
#: Python loop of `+=` does (3.11); 3.12 made it compensated, which rounds differently
_SUM_IS_SEQUENTIAL = sum([1e100, 1.0, -1e100], 0.0) == 0.0


def sequential_sum(values: list[float]) -> float:
    """0.0 + values[0] + values[1] + ... left to right, each step rounded (a `+=` loop's float),
    at C speed."""
    return sum(values, 0.0) if _SUM_IS_SEQUENTIAL else reduce(operator.add, values, 0.0)


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


class NodeGpus(Mapping[str, list[GpuUse]]):
    """node -> the use of each of its GPUs, every node of the fleet in fleet order. A node's list
    is made when it is first asked for: most nodes of a big fleet stay idle, and 100,000 GPUs'
    empty GpuUse cost a third of a second and ~40 MB up front."""

    def __init__(self, fleet: Fleet) -> None:
        self._fleet = fleet
        self._made: dict[str, list[GpuUse]] = {}

    def __getitem__(self, node: str) -> list[GpuUse]:
        uses = self._made.get(node)
        if uses is None:
            uses = self._made[node] = [GpuUse(g) for g in self._fleet.kind_of[node].gpus]
        return uses

    def __contains__(self, node: object) -> bool:
        return node in self._fleet.kind_of

    def __iter__(self) -> Iterator[str]:
        return iter(self._fleet.nodes)

    def __len__(self) -> int:
        return len(self._fleet.nodes)

    def made(self, node: str) -> list[GpuUse] | None:
        """The node's list if anything asked for it yet; None: every GPU of the node is idle."""
        return self._made.get(node)


class Ledger:
    def __init__(self, fleet: Fleet) -> None:
        self.fleet = fleet
        self.gpus = NodeGpus(fleet)
        self._gpu_index: dict[int, dict[str, int]] = {}  # id(NodeKind) -> GPU name -> position
        self.pods: dict[str, tuple[WorkItem, str, list[str]]] = {}  # pod -> (item, node, devices)
        self.version = 0  # bumps on every change (cache key for policies)
        self.node_version: dict[str, int] = dict.fromkeys(fleet.nodes, 0)
        self.changed: list[str] = []  # nodes in the order they were touched (readers keep a position)
        self.index_of = {n: i for i, n in enumerate(fleet.nodes)}  # node -> fleet position
        # totals(): every busy GPU's row (alloc mem, alloc compute, need mem, need compute) as four
        # columns in fleet order (node position, then GPU order), keyed by a slot number
        # (node position * _stride + GPU position) kept sorted beside them; refreshed for the
        # (node, GPU position)s pods came to or left only
        self._dirty: set[tuple[str, int]] = set()
        self._stride = max((len(k.gpus) for k in fleet.kind_of.values()), default=0) + 1
        self._slots: list[int] = []
        self._cols: tuple[list[float], list[float], list[float], list[float]] = ([], [], [], [])

    def _gpu_position(self, kind: NodeKind) -> dict[str, int]:
        """GPU name -> its position in the kind's (and so every such node's) GPU list."""
        index = self._gpu_index.get(id(kind))
        if index is None:  # the fleet holds its kinds, so an id stays theirs
            index = self._gpu_index[id(kind)] = {g.name: i for i, g in enumerate(kind.gpus)}
        return index

    def device(self, node: str, name: str) -> DeviceInfo | None:
        return self.fleet.kind_of[node].devices.get(name)

    def add_pod(self, pod: str, item: WorkItem, node: str, devices: list[str]) -> None:
        kind = self.fleet.kind_of[node]
        share = len(devices) or 1
        for name in devices:
            info = kind.devices.get(name)
            if info is None:
                continue
            pos = self._gpu_position(kind)[info.gpu]
            use = self.gpus[node][pos]
            self._dirty.add((node, pos))
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
            pos = self._gpu_position(kind)[info.gpu]
            use = self.gpus[node][pos]
            self._dirty.add((node, pos))
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

    # -- totals ----------------------------------------------------------------------------
    @staticmethod
    def _gpu_row(u: GpuUse) -> tuple[float, float, float, float]:
        """A busy GPU's (alloc mem, alloc compute, need mem, need compute)."""
        used = u.used_compute
        # a pod cannot use more compute than its devices give it (a MIG profile chosen for its
        # memory may have fewer SMs than the pod asked for)
        return u.used_mem, used, sum(u.need_mem.values()), min(sum(u.need_compute.values()), used)

    def totals(self) -> dict[str, float]:
        """Fleet totals over busy GPUs. Only GPUs a pod came to or left since the last call are
        re-read (their rows put into, or taken out of, the columns); each column is then added up
        left to right in fleet order, as `totals_scan()` does, so the two are equal bit for bit."""
        slots, cols, stride = self._slots, self._cols, self._stride
        for node, pos in self._dirty:
            slot = self.index_of[node] * stride + pos
            u = self.gpus[node][pos]
            i = bisect_left(slots, slot)
            present = i < len(slots) and slots[i] == slot
            if u.devices:
                row = self._gpu_row(u)
                if present:
                    for col, v in zip(cols, row, strict=True):
                        col[i] = v
                else:
                    slots.insert(i, slot)
                    for col, v in zip(cols, row, strict=True):
                        col.insert(i, v)
            elif present:
                del slots[i]
                for col in cols:
                    del col[i]
        self._dirty.clear()
        alloc_mem, alloc_comp, need_mem, need_comp = (sequential_sum(col) for col in cols)
        return {"alloc_mem_gib": alloc_mem, "need_mem_gib": need_mem, "alloc_compute": alloc_comp,
                "need_compute": need_comp, "gpus_busy": float(len(slots))}

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
