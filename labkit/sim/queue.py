"""The scheduling queue: kube-scheduler's activeQ and unschedulable pods with queueing hints.

kube-scheduler pops pods from activeQ (PrioritySort: higher priority first, then older first).
A pod that does not fit goes to the unschedulable pods together with the plugins that rejected
it, and goes back to activeQ only when a cluster event arrives that one of those plugins says
could make it schedulable (its queueing hint returns Queue). The sim does the same with the
events it has:

============================  ====================================  ==========================
event                         plugins whose rejections it lifts     sim source
============================  ====================================  ==========================
claim deallocated on a node   DynamicResources                      claim controller
                              (isSchedulableAfterClaimChange)
assigned pod gone             NodeResourcesFit                      pod deleted / finished
Node, DeviceClass, ResourceSlice, DeviceTaintRule,                  any change: every pod is
ResourceClaimTemplate, PodGroup, a new ResourceClaim                retried
the pod itself changed        all                                   e.g. resourceClaimStatuses
============================  ====================================  ==========================

Pods are parked per *shape* (the scheduler's signature: namespace, requests, node selection,
tolerations, claims): pods of one shape fail and succeed alike. When a hint fires for a shape,
only its first pod (queue order) goes back to activeQ; while its pods keep fitting the next
one follows, and the first one that fails again closes the shape. The pods behind it are not
retried (kube-scheduler would retry each and fail each the same way), so their PodScheduled
message stays the one of their own last attempt and they get no new FailedScheduling event.

Pods that PreEnqueue/PreFilter holds back (claims not created yet, a gang still incomplete) and
gangs are parked one by one and retried on any event (the scheduler's `epoch` moves).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from labkit.model.podutil import meta

Key = tuple[int, int]  # (-priority, creation order)

#: which plugin a filter reason comes from (the plugins whose hints can requeue the pod)
FIT = "NodeResourcesFit"
DRA = "DynamicResources"
#: log kinds (labkit.sim.filters.NodeResources.log) and the plugins they can help
FREE_POD = "pod"
FREE_CLAIM = "claim"
HELPS = {FREE_POD: FIT, FREE_CLAIM: DRA}


def rejecting_plugins(reason_lists: Iterable[Sequence[str]]) -> frozenset[str]:
    """The plugins behind the nodes' reasons (each distinct list once: Attempt.reason_counts);
    only those with node-level hints, the rest wait for cluster-wide events."""
    out = set()
    for reasons in reason_lists:
        for r in reasons:
            if r.startswith(("Insufficient ", "Too many pods")):
                out.add(FIT)
            elif r in ("cannot allocate all claims", "resourceclaim not available on the node"):
                out.add(DRA)
    return frozenset(out)


@dataclass
class ParkedShape:
    """Unschedulable pods of one shape, in queue order, and what can requeue them."""

    heap: list[tuple[Key, str]] = field(default_factory=list)
    plugins: frozenset[str] = frozenset()
    log_pos: int = 0  # how much of the node log the hints have looked at
    inventory_epoch: int = 0
    global_epoch: int = 0
    open: bool = False  # its pods are being retried one after another


class SchedulingQueue:
    def __init__(self) -> None:
        self.waiting: dict[str, dict] = {}  # uid -> unbound pod the scheduler must place
        self.seq: dict[str, int] = {}  # uid -> creation order
        self.incoming: set[str] = set()  # added or changed since the last pass
        self._active: list[tuple[Key, str]] = []
        self._queued: set[str] = set()
        self.failed_epoch: dict[str, tuple[int, Any]] = {}  # parked one by one: retried when epoch moves
        self.shapes: dict[str, ParkedShape] = {}
        self.shape_of: dict[str, str] = {}  # uid -> the shape it is parked under
        self.origin: dict[str, str] = {}  # uid in activeQ because its shape was opened -> that shape
        self.hint_calls = 0  # pods moved back to activeQ by hints (tests count them)

    def __len__(self) -> int:
        return len(self._active)

    def key(self, uid: str) -> Key:
        pod = self.waiting[uid]
        return -int((pod.get("spec") or {}).get("priority") or 0), self.seq.get(uid, 0)

    # -- pod events --------------------------------------------------------------------------
    def added_or_changed(self, pod: dict) -> None:
        """The pod is new or was changed by someone else: it leaves the unschedulable pods."""
        uid = meta(pod).get("uid", "")
        self.waiting[uid] = pod
        self._unpark(uid)
        self.incoming.add(uid)

    def refresh(self, pod: dict) -> None:
        """The scheduler's own write: keep the newest object, change nothing else."""
        self.waiting[meta(pod).get("uid", "")] = pod

    def remove(self, uid: str) -> None:
        self.waiting.pop(uid, None)
        self._unpark(uid)
        self.incoming.discard(uid)
        self._queued.discard(uid)
        shape = self.origin.pop(uid, None)
        if shape is not None:  # it was its shape's turn: the next one follows
            self.next_of(shape)

    def forget(self, uid: str) -> None:
        self.remove(uid)
        self.seq.pop(uid, None)
        self.failed_epoch.pop(uid, None)

    def _unpark(self, uid: str) -> None:
        self.shape_of.pop(uid, None)  # its heap entry is dropped lazily

    # -- parking -----------------------------------------------------------------------------
    def park_shape(self, uid: str, shape: str, plugins: frozenset[str], log_pos: int,
                   inventory_epoch: int, global_epoch: int) -> None:
        """The pod failed the Filter stage: park it with its shape, which is closed for now."""
        self.failed_epoch.pop(uid, None)
        s = self.shapes.get(shape)
        if s is None:
            s = self.shapes[shape] = ParkedShape()
        s.plugins = plugins
        s.log_pos, s.inventory_epoch, s.global_epoch = log_pos, inventory_epoch, global_epoch
        s.open = False
        if uid in self.waiting:
            self.shape_of[uid] = shape
            heapq.heappush(s.heap, (self.key(uid), uid))

    def park_single(self, uid: str, epoch: int, marker: Any) -> None:
        self._unpark(uid)
        self.failed_epoch[uid] = (epoch, marker)

    # -- activeQ -----------------------------------------------------------------------------
    def push(self, uid: str, origin: str | None = None) -> None:
        if uid in self._queued or uid not in self.waiting:
            return
        self._queued.add(uid)
        if origin is not None:
            self.origin[uid] = origin
        heapq.heappush(self._active, (self.key(uid), uid))

    def flush_incoming(self) -> None:
        for uid in sorted(self.incoming):
            self.push(uid)
        self.incoming.clear()

    def pop(self) -> str | None:
        while self._active:
            _, uid = heapq.heappop(self._active)
            if uid in self._queued:
                self._queued.discard(uid)
                return uid
        return None

    def open_shape(self, shape: str) -> None:
        """A hint fired: the shape's first pod goes back to activeQ."""
        s = self.shapes.get(shape)
        if s is None:
            return
        s.open = True
        self.next_of(shape)

    def next_of(self, shape: str) -> None:
        """The shape's previous pod did not fail again: the next one follows (if the shape is open)."""
        s = self.shapes.get(shape)
        if s is None or not s.open:
            return
        while s.heap:
            _, uid = heapq.heappop(s.heap)
            if self.shape_of.get(uid) == shape:
                del self.shape_of[uid]
                self.hint_calls += 1
                self.push(uid, origin=shape)
                return
        s.open = False
        del self.shapes[shape]
