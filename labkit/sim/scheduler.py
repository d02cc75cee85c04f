"""The sim scheduler: kube-scheduler's scheduling cycle with the DynamicResources plugin, deterministic.

Split along kube-scheduler's seams (the names kube-scheduler-simulator shows):

- queue (labkit.sim.queue): activeQ in priority, then creation order; unschedulable pods come
  back only when a queueing hint says an event could help them (a claim deallocated, a pod gone,
  inventory changes), pods of one shape one after another.
- PreEnqueue/PreFilter (here): every claim must exist, not be deleting, belong to the pod when
  it comes from a template, and not be reserved by 256 others ("resourceclaim in use").
- filters (labkit.sim.filters): NodeUnschedulable, TaintToleration, NodeAffinity,
  NodeResourcesFit, DynamicResources (allocated claims must suit the node; unallocated ones go to
  the allocator), first failing reason recorded per node.
- node sampling (here, numFeasibleNodesToFind): below 100 nodes every node is filtered; from 100
  nodes on filtering stops after max(5, 50 - nodes/125) percent of the nodes (at least 100) were
  found feasible, starting at a rotating index (nextStartNodeIndex) that moves on by the number
  of nodes looked at, like kube-scheduler. The sim walks nodes in name order from that index
  (kube-scheduler's order is its node tree's, zone by zone).
- scoring (labkit.sim.scoring): the found nodes are scored like kube-scheduler's default profile;
  ties go to the first node in walk order (kube-scheduler picks one at random).
- binding (labkit.sim.binding): Reserve, PreBind (status.allocation, finalizer, reservedFor), Bind.
- gang (labkit.sim.gang): all-or-nothing pod groups.

Pending pods get PodScheduled=False/Unschedulable and a FailedScheduling event with a message
shaped like kube-scheduler's ("0/3 nodes are available: 1 cannot allocate all claims, ...").

Speed: filter results and raw node scores are kept per pod *shape* (signature: namespace,
requests, node selection, tolerations, claims) and node, and dropped only for the nodes whose
state changed since (labkit.sim.filters.NodeResources.log), or for all nodes when something
cluster-wide changed (Nodes, DeviceClasses, slices, rules; or any allocation while slices without
nodeName exist). A pod then costs about one allocator call (the node the previous pod of its
shape went to) however large the fleet. A status byte per node and shape (unknown, feasible,
infeasible) lets the sampling walk take runs of nodes whose verdict is kept in one step each
(in C), so looking at the 500-780 nodes a large fleet samples costs little more than at 100.
A node a pod shape has not looked at yet gets the verdict of a node in the same state, when the
shape's verdict can depend on nothing else (no node affinity, allocated claims or extended
resources): the same taints, allocatable and used resources, and for pending claims a twin (the
same devices in the same use, labkit.allocator.twins; its allocations renamed to the node's own
devices). So a fleet of a few node kinds costs one real filter per shape and node state.
A shape with a nodeSelector gets NodeAffinity's verdict for the nodes a label index says it
misses before its first walk (untainted, schedulable ones: no earlier plugin could reject them),
and a kept attempt holds the walk's rejections by runs (one object for a run of one verdict), so
a pod pinned to one rack of thousands costs neither a filter nor memory per missed node.
"""

from __future__ import annotations

import json
import re
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any

from labkit.allocator.twins import TwinTable
from labkit.model.podutil import (
    EXTENDED_RESOURCES_KEY,
    claim_gate,
    claim_name_for,
    claim_not_needed,
    is_deleting,
    is_finished,
    meta,
)
from labkit.sim import podgroups
from labkit.sim.attempt import Attempt
from labkit.sim.binding import Binder
from labkit.sim.dra import DraState
from labkit.sim.events import EventRecorder
from labkit.sim.filters import (
    AFFINITY_MISMATCH,
    MIN_FEASIBLE_NODES_TO_FIND,
    PREEMPTABLE_PREFIXES,
    PREFILTER_ABSENT,
    FilterInputs,
    FilterResult,
    NodeResources,
    extended_requests,
    filter_node,
    fit_error_message,
    fit_error_text,
    num_feasible_nodes_to_find,
    prefilter_node_names,
    single_node,
)
from labkit.sim.gang import Gangs
from labkit.sim.queue import HELPS, SchedulingQueue, rejecting_plugins
from labkit.sim.resources import pod_requests
from labkit.sim.scoring import (
    Candidate,
    ScoreRow,
    cpu_memory,
    nonzero_requests,
    prioritized_list_scoring,
    score_row,
    simple_total,
    totals,
)
from labkit.sim.store import Store

__all__ = ["MAX_RESERVED_FOR", "PREEMPTABLE_PREFIXES", "Attempt", "Scheduler", "fit_error_message"]

COMPONENT = "default-scheduler"
MAX_RESERVED_FOR = 256
#: pod shapes whose per-node filter results are kept (least recently used ones are dropped)
SHAPES_KEPT = 256
#: node states numbered for shared verdicts (Scheduler._node_key) before those no node holds are
#: forgotten (or twice the number of nodes, if more)
INTERNED_KEYS_KEPT = 1024
#: _Shape.status values: no verdict kept, the node passed every filter, a filter rejected it
UNKNOWN, FEASIBLE, INFEASIBLE = 0, 1, 2
#: the next node whose verdict is not a kept "feasible" ("infeasible")
_NOT_FEASIBLE = re.compile(rb"[^\x01]")
_NOT_INFEASIBLE = re.compile(rb"[^\x02]")
#: _find_feasible's first segment when it filtered NodeAffinity's subset, not runs of nodes
_NOT_RUNS = -2
#: _Scheduler._node_key's twin part, not worked out yet
_UNSET: Any = object()


@dataclass
class _Shape:
    """Per pod shape: filter results and raw scores of the nodes, valid until the node changes.
    Also used per claims shape, for DynamicResources' verdicts alone (pods that differ only in
    cpu/memory share those)."""

    inventory_epoch: int
    log_pos: int
    results: dict[str, FilterResult] = field(default_factory=dict)  # per claims shape: by node name
    twins: TwinTable = field(default_factory=TwinTable)  # per claims shape: outcomes of twin nodes
    rows: dict[str, ScoreRow] = field(default_factory=dict)
    failed: Attempt | None = None  # no node fitted, and nothing changed since
    # per pod shape: by node index (Scheduler.nodes() order), None = not known; a list, so the
    # walk over the sampled nodes is an index per node, not a dict lookup
    by_index: list[FilterResult | None] = field(default_factory=list)
    rows_by_index: list[ScoreRow | None] = field(default_factory=list)
    # per pod shape, by node index: UNKNOWN, FEASIBLE or INFEASIBLE (by_index's verdict), so the
    # walk skips runs of known feasible nodes in C (a regular expression over the bytes)
    status: bytearray = field(default_factory=bytearray)
    # per pod shape, by node index: the row's total when no score needs normalising (see
    # scoring.totals' common case), else None; valid while rows_by_index[i] is
    simple_by_index: list[int | None] = field(default_factory=list)
    # per pod shape whose rows depend on the node's resources alone (no claim with a firstAvailable
    # request, no preferred node affinity; see Scheduler._plain_rows), for nodes without taints:
    # ((allocatable, used) cpu/memory, nonzero used) -> the raw score row. None: not such a shape
    plain_rows: dict[tuple, ScoreRow] | None = None
    # per pod shape that may share Filter verdicts between nodes in the same state (see
    # Scheduler._shared_filter): node state key -> (reasons, kept twin outcome or None, detail);
    # None: the shape does not share. Valid for one DraState inventory (verdicts_epoch)
    verdicts: dict[tuple, tuple[list[str], Any, Any]] | None = None
    verdicts_epoch: int = -1
    # per pod shape with a nodeSelector: the nodes a label index says it misses were given
    # NodeAffinity's verdict before its first walk (Scheduler._fill_selector_misses)
    selector_filled: bool = False


def _keep_run(walked: list[list[Any]], names: list[str], lo: int, results: list[FilterResult]) -> None:
    """Keep the rejected nodes lo.. with their results on an Attempt's ``walked``: continuing the
    run before them where they follow it, as one result for the whole run where every node got
    the same object (NodeAffinity's rejection: see Attempt.walked)."""
    count, first = len(results), results[0]
    # equal reasons and no detail (== is identity first, in C): the run reads back the same
    same = first[1] is None and first[2] is None and results.count(first) == count
    last = walked[-1] if walked else None
    if last is not None and last[0] is names and last[1] + last[2] == lo:
        if isinstance(last[3], tuple):
            if same and last[3] is first:
                last[2] += count
                return
        elif not same or count == 1:
            last[3].extend(results)
            last[2] += count
            return
    walked.append([names, lo, count, first if same and count > 1 else results])


def _picker(feasible: list[int], first_segment: int) -> Callable[[list], list]:
    """A function that reads the items at ``feasible``'s indexes from a per-node list, as a new
    list, in C. The walk took every node of a run of indexes (one, or two when it wrapped past
    the last node: ``first_segment`` is where it started again at node 0, -1 if it did not), and
    kept the feasible ones: a run without an infeasible node is read as a slice, any other
    index by index (cheaper than masking the run, however few its infeasible nodes).
    NodeAffinity's PreFilter subset (``first_segment`` _NOT_RUNS) is read index by index."""
    if first_segment == _NOT_RUNS:
        return _getter(feasible)
    parts = [p for p in ((feasible,) if first_segment < 0 else (feasible[:first_segment], feasible[first_segment:])) if p]
    reads = [(p[0], p[-1] + 1, None if p[-1] + 1 - p[0] == len(p) else _getter(p)) for p in parts]
    if len(reads) == 1:
        lo, hi, get = reads[0]
        if get is not None:
            return get
        return lambda seq: seq[lo:hi]

    def read(seq: list) -> list:
        out: list = []
        for lo, hi, get in reads:
            out.extend(seq[lo:hi] if get is None else get(seq))
        return out
    return read


def _getter(indexes: list[int]) -> Callable[[list], list]:
    """A function that reads the items at ``indexes`` from a per-node list, as a new list, in C."""
    if len(indexes) == 1:
        (only,) = indexes
        return lambda seq: [seq[only]]
    get = itemgetter(*indexes)  # two or more indexes: a tuple
    return lambda seq: list(get(seq))


def _plain_rows(pod: dict, claims: list[dict]) -> bool:
    """Does a score row of this pod depend only on the node's cpu/memory (allocatable, used,
    nonzero used) and its taints? So when no claim has a firstAvailable request (DynamicResources
    scores 0 then, or nothing without claims) and the pod prefers no node affinity (NodeAffinity
    scores 0); TaintToleration reads the taints, so untainted nodes share rows (scoring.score_row)."""
    preferred = ((((pod.get("spec") or {}).get("affinity") or {}).get("nodeAffinity") or {})
                 .get("preferredDuringSchedulingIgnoredDuringExecution"))
    return not preferred and not any(r.get("firstAvailable") for c in claims
                                     for r in ((c.get("spec") or {}).get("devices") or {}).get("requests") or ())


def _static_key(node: dict) -> Any:
    """What NodeUnschedulable, TaintToleration and NodeResourcesFit read from the node object
    (spec.unschedulable, spec.taints, status.allocatable), as a hashable key equal for nodes
    that read the same: a tuple for the common node (no taints, allocatable strings), else
    JSON (never equal to a tuple)."""
    spec = node.get("spec") or {}
    unschedulable, taints = spec.get("unschedulable"), spec.get("taints")
    allocatable = (node.get("status") or {}).get("allocatable")
    if taints is None and (unschedulable is None or type(unschedulable) is bool) and type(allocatable) is dict \
            and all(type(k) is str and type(v) is str for k, v in allocatable.items()):
        return (unschedulable, tuple(sorted(allocatable.items())))
    return json.dumps([unschedulable, taints, allocatable], sort_keys=True, default=str)


class _FilterError(Exception):
    """A Filter plugin failed on a node (the allocator's error), not: the pod does not fit."""


def _waiting(pod: dict) -> bool:
    """Unbound, alive and for this scheduler: a pod the queue holds."""
    spec = pod.get("spec") or {}
    return (not spec.get("nodeName") and not is_deleting(pod) and not is_finished(pod)
            and spec.get("schedulerName", "default-scheduler") == "default-scheduler")


class Scheduler:
    def __init__(self, store: Store, events: EventRecorder, dra: DraState) -> None:
        self.store = store
        self.events = events
        self.dra = dra
        self.epoch = 0  # bumped by every change that could make a waiting pod schedulable
        self.inventory_epoch = 0  # bumped when cached filter results of every node are stale
        self.global_epoch = 0  # bumped by cluster-wide changes (every pod is retried)
        self.attempts: dict[str, Attempt] = {}  # pod uid -> last attempt
        self.queue = SchedulingQueue()
        self.resources = NodeResources()
        self.claim_allocs: dict[str, tuple[dict, str]] = {}  # claim uid -> (allocation, owner) in dra.allocated
        self.binder = Binder(self)
        self.gangs = Gangs(self, self.binder)
        self.percentage_of_nodes_to_score = 0  # KubeSchedulerConfiguration's; 0 = adaptive
        self.next_start_node_index = 0
        self._first_segment = -1  # _find_feasible's: where its walk wrapped to node 0 (see _picker)
        self.filter_calls = 0  # Filter verdicts worked out: filter_node calls and shared verdicts (tests count them)
        self.shared_verdicts = 0  # of those, verdicts shared by a node in the same state (_shared_filter)
        #: share Filter verdicts between nodes in the same state (off: tests compare with every node's own)
        self.share_verdicts = True
        # per node index: its state key for shared verdicts (None: not worked out since it changed),
        # valid for (inventory_epoch, number of nodes) _node_keys_for, read up to _node_keys_pos in the log
        self._node_keys: list[list | None] = []
        self._node_keys_for = (-1, -1, -1)  # (inventory_epoch, DraState's, number of nodes)
        self._verdicts: dict | None = None  # the shape's shared verdicts in this attempt's Filter stage
        self._twin_table: TwinTable | None = None  # and the twin table of its pending claims
        self._node_keys_pos = 0
        self._next_key = 0
        self._interned_keys: dict[Any, int] = {}  # node state -> its number (never reused: see _node_key)
        self._static_keys: dict[str, tuple[str | None, Any]] = {}  # node name -> (its resourceVersion, static part)
        self.progress: Any = None  # optional tqdm-like wrapper for long passes
        self._shapes: OrderedDict[str, _Shape] = OrderedDict()
        self._claim_shapes: OrderedDict[str, _Shape] = OrderedDict()
        self._nodes: list[dict] | None = None
        self._names: list[str] = []
        self._index: dict[str, int] = {}  # node name -> its index in self._nodes
        self._ext_classes: tuple[int, dict[str, str]] | None = None
        # for the nodes() listing _labels_for: label key -> value -> node indexes, and the nodes
        # that are unschedulable or tainted (see _fill_selector_misses)
        self._labels_for: list[dict] | None = None
        self._label_index: dict[str, dict[str, list[int]]] = {}
        self._special_nodes: list[int] = []
        self._plist = prioritized_list_scoring(dra.features, dra.kubernetes_version)
        self._in_pass = False
        self._hint_epoch = -1
        for pod in store.list("Pod"):
            if _waiting(pod):
                self.queue.added_or_changed(pod)
        store.watch(self._on_pod, kinds=("Pod",))
        store.watch(self._on_inventory, kinds=("Node", "DeviceClass", "ResourceSlice", "DeviceTaintRule",
                                                "ResourceClaim", "ResourceClaimTemplate", "PodGroup"))

    # -- bookkeeping -----------------------------------------------------------------------
    def bump(self) -> None:
        """Something changed beyond one node: every cached result is stale, every pod retries."""
        self.epoch += 1
        self.inventory_epoch += 1
        self.global_epoch += 1
        self.resources.log.clear()

    def allocated_devices(self) -> None:
        """Devices were reserved: with devices several nodes can use, every node may have changed."""
        if self.dra.has_cluster_wide_slices():
            self.inventory_epoch += 1
            self.resources.log.clear()

    def _freed(self, node: str | None, what: str) -> None:
        """Something was freed on `node` ("pod": cpu/memory/a pod slot, "claim": devices). Pods the
        matching plugin rejected are retried (None, or devices other nodes use too: all pods)."""
        if not node or self.dra.has_cluster_wide_slices():
            self.bump()
            return
        self.epoch += 1
        if what == "claim":
            self.resources.note(node, "claim")  # pod frees are logged by NodeResources.unaccount

    def _on_inventory(self, ev) -> None:
        if ev.kind == "Node":
            self._nodes = None
            self.resources.allocatable.clear()
            self.resources.cpu_mem.clear()
        if ev.kind == "ResourceClaim":
            ann = meta(ev.object).get("annotations") or {}
            generated = "resource.kubernetes.io/pod-claim-name" in ann or "resource.kubernetes.io/extended-resource-claim" in ann
            if ev.type != "ADDED" or generated:
                # allocation changes are tracked by reserve()/release_claim(); a generated claim only
                # matters to its own pod, whose resourceClaimStatuses update triggers its retry
                return
        self.bump()

    def _on_pod(self, ev) -> None:
        pod = ev.object
        uid = meta(pod).get("uid", "")
        q = self.queue
        if ev.type == "ADDED":
            q.seq[uid] = ev.resource_version
        node = (pod.get("spec") or {}).get("nodeName")
        live = ev.type != "DELETED" and node and not is_finished(pod) and not is_deleting(pod)
        res = self.resources
        if live and uid not in res.bound:
            res.account(uid, node, pod_requests(pod), nonzero_requests(pod))
        elif not live and uid in res.bound:
            self._freed(res.unaccount(uid), "pod")
        if ev.type == "DELETED":
            q.forget(uid)
            self.attempts.pop(uid, None)  # explain() reads the attempts of pods that exist
        elif not _waiting(pod):
            q.remove(uid)
        elif self._in_pass:
            q.refresh(pod)  # the scheduler's own write
        else:
            q.added_or_changed(pod)

    def release_claim(self, claim: dict) -> None:
        """The claim controller deallocated `claim`."""
        held = self.claim_allocs.pop(meta(claim).get("uid", ""), None)
        self.dra.forget_allocated(meta(claim).get("uid", ""))
        if held is not None:
            self.dra.allocated.remove(held[0], owner=held[1])
            self._freed(single_node(held[0].get("nodeSelector")), "claim")
        else:
            self.bump()

    def adopt_allocation(self, claim: dict) -> None:
        """Count an allocation made elsewhere (a claim restored from a real cluster's dump) as in use."""
        alloc = (claim.get("status") or {}).get("allocation")
        if alloc:
            owner = f"{meta(claim)['namespace']}/{meta(claim)['name']}"
            self.dra.allocated.add(alloc, owner=owner)
            self.dra.note_allocated(meta(claim)["uid"], claim)
            self.claim_allocs[meta(claim)["uid"]] = (alloc, owner)
            self.bump()

    def nodes(self) -> list[dict]:
        if self._nodes is None:
            self._nodes = self.store.list("Node")  # sorted by name
            self._names = [n["metadata"]["name"] for n in self._nodes]
            self._index = {name: i for i, name in enumerate(self._names)}
        return self._nodes

    # -- queue -----------------------------------------------------------------------------
    def pending(self) -> list[dict]:
        """The pods waiting to be placed, in queue order (active or not)."""
        q = self.queue
        return sorted(q.waiting.values(), key=lambda p: q.key(meta(p)["uid"]))

    def _hints(self) -> None:
        """Move unschedulable pods back to activeQ where an event since could help them."""
        q = self.queue
        if self.epoch != self._hint_epoch:
            self._hint_epoch = self.epoch
            for uid, (ep, _) in list(q.failed_epoch.items()):
                if ep != self.epoch:
                    q.push(uid)
        log = self.resources.log
        for name, shape in list(q.shapes.items()):
            if shape.open:
                continue
            if shape.global_epoch != self.global_epoch:
                q.open_shape(name)
                continue
            if shape.inventory_epoch != self.inventory_epoch:  # the log restarted; no free was lost:
                shape.inventory_epoch, shape.log_pos = self.inventory_epoch, 0  # those bump globally
            if shape.log_pos < len(log):
                helps = {HELPS[what] for _, what in log[shape.log_pos:] if what in HELPS}
                shape.log_pos = len(log)
                if helps & shape.plugins:
                    q.open_shape(name)

    def _drain(self):  # noqa: ANN202 - a generator of uids
        seen = (self.epoch, self.global_epoch)
        while True:
            if (self.epoch, self.global_epoch) != seen:  # a gang gave its reservations back
                seen = (self.epoch, self.global_epoch)
                self._hints()
            uid = self.queue.pop()
            if uid is None:
                return
            yield uid

    def schedule_pending(self) -> None:
        q = self.queue
        self._in_pass = True
        try:
            self._hints()
            q.flush_incoming()
            uids: Any = self._drain()
            if self.progress is not None and len(q) > 500:
                uids = self.progress(uids, desc="scheduling", total=len(q))
            done_groups: set[tuple[str, str]] = set()
            for uid in uids:
                self._schedule_one(uid, done_groups)
        finally:
            self._in_pass = False

    def _schedule_one(self, uid: str, done_groups: set[tuple[str, str]]) -> None:
        q = self.queue
        pod = q.waiting.get(uid)
        origin = q.origin.pop(uid, None)
        if pod is None:
            return
        follow = True  # let the next pod of an opened shape follow
        try:
            if (pod.get("spec") or {}).get("schedulingGates"):
                self.binder.gated(pod)
                return
            group = self.gangs.group_of(pod)
            if group is not None:
                if group[:2] not in done_groups:
                    done_groups.add(group[:2])
                    self.gangs.schedule(group)
                return
            if q.failed_epoch.get(uid) == (self.epoch, meta(pod).get("resourceVersion")):
                return
            attempt = self.attempt(pod)
            self.attempts[uid] = attempt
            if attempt.node:
                self.binder.commit(pod, attempt)
                return
            pod = self.binder.fail(pod, attempt)
            self._park(pod, attempt)
            follow = attempt.shape != origin
        finally:
            if origin is not None and follow:
                q.next_of(origin)

    def _park(self, pod: dict, att: Attempt) -> None:
        uid = meta(pod)["uid"]
        if att.shape is not None and not att.error and att.prefilter is None:
            self.queue.park_shape(uid, att.shape, rejecting_plugins(att.reason_counts()), len(self.resources.log),
                                  self.inventory_epoch, self.global_epoch)
        else:
            self.queue.park_single(uid, self.epoch, meta(pod).get("resourceVersion"))

    # -- one pod ---------------------------------------------------------------------------
    def _prefilter(self, pod: dict) -> tuple[list[dict], str | None]:
        ns = meta(pod)["namespace"]
        # PreEnqueue's part (a claim not created yet, or not found) has one home, claim_gate: it walks the
        # claims in the same order and stops where this loop would
        gate = claim_gate(pod, lambda name: self.store.get("ResourceClaim", name, ns))
        claims = []
        for entry in (pod.get("spec") or {}).get("resourceClaims") or []:
            if claim_not_needed(pod, entry):
                continue
            name, templated = claim_name_for(pod, entry)
            claim = self.store.get("ResourceClaim", name, ns) if name is not None else None
            if claim is None:
                return claims, gate
            if is_deleting(claim):
                return claims, f'resourceclaim "{name}" is being deleted'
            if templated and not any(o.get("uid") == meta(pod)["uid"] for o in meta(claim).get("ownerReferences") or []) \
                    and podgroups.group_claim_ref(self.store, pod, claim) is None:
                return claims, f"ResourceClaim {ns}/{name} was not created for pod {ns}/{meta(pod)['name']} (pod is not owner)"
            st = claim.get("status") or {}
            tentative = self.claim_allocs.get(meta(claim)["uid"])
            if not st.get("allocation") and tentative is not None:
                # reserved a moment ago for another member of the same gang (a shared claim, e.g. the
                # PodGroup's): this pod gets that allocation, not a second one
                claim = {**claim, "status": {**st, "allocation": tentative[0]}}
                st = claim["status"]
            reserved = st.get("reservedFor") or []
            if st.get("allocation") and len(reserved) >= MAX_RESERVED_FOR and not any(
                    r.get("uid") == meta(pod)["uid"] for r in reserved):
                return claims, "resourceclaim in use"
            claims.append(claim)
        return claims, self._missing_class(claims)

    def _missing_class(self, claims: list[dict]) -> str | None:
        """DynamicResources PreFilter (validateDeviceClass): every request of a claim still to be
        allocated must name an existing DeviceClass, a firstAvailable subrequest as
        ``request/subrequest``; else the pod is Unschedulable before any node is tried."""
        for claim in claims:
            if (claim.get("status") or {}).get("allocation"):
                continue
            for req in ((claim.get("spec") or {}).get("devices") or {}).get("requests") or ():
                if req.get("exactly"):
                    pairs = [(req.get("name"), req["exactly"].get("deviceClassName"))]
                else:
                    pairs = [(f'{req.get("name")}/{sub.get("name")}', sub.get("deviceClassName"))
                             for sub in req.get("firstAvailable") or ()]
                for request, cls in pairs:
                    if cls and self.store.get("DeviceClass", cls, None) is None:
                        return f"request {request}: device class {cls} does not exist"
        return None

    def _signature(self, pod: dict, claims: list[dict]) -> str:
        spec = pod.get("spec") or {}
        cs = []
        for c in claims:
            st = c.get("status") or {}
            if st.get("allocation"):
                cs.append(["allocated", meta(c)["name"], (st["allocation"] or {}).get("nodeSelector")])
            else:
                cs.append(["pending", c.get("spec")])
        return json.dumps([
            meta(pod)["namespace"],
            [(c.get("resources") or {}) for c in spec.get("containers") or []],
            [(c.get("resources") or {}) for c in spec.get("initContainers") or []],
            spec.get("nodeSelector"), (spec.get("affinity") or {}).get("nodeAffinity"),
            spec.get("tolerations"), cs,
        ], sort_keys=True, default=str)

    def _shape(self, sig: str, shapes: OrderedDict[str, _Shape] | None = None, plain: bool = False) -> _Shape:
        """The shape's cache, with the results of every node that changed since dropped. Pod
        shapes (``shapes`` None) keep them by node index, claims shapes by node name; ``plain``:
        a new pod shape's score rows depend on the node's resources alone (_plain_rows)."""
        by_index = shapes is None
        shapes = self._shapes if shapes is None else shapes
        log = self.resources.log
        st = shapes.get(sig)
        n = len(self._names)
        if st is None or st.inventory_epoch != self.inventory_epoch or (by_index and len(st.by_index) != n):
            st = shapes[sig] = _Shape(self.inventory_epoch, len(log))
            if by_index:
                st.by_index, st.rows_by_index, st.simple_by_index = [None] * n, [None] * n, [None] * n
                st.status = bytearray(n)
                st.plain_rows = {} if plain else None
            if len(shapes) > SHAPES_KEPT:
                shapes.popitem(last=False)
        else:
            shapes.move_to_end(sig)
            if st.log_pos < len(log):
                if by_index:
                    index = self._index
                    for name, _ in log[st.log_pos:]:
                        i = index.get(name)
                        if i is not None:
                            st.by_index[i] = st.rows_by_index[i] = st.simple_by_index[i] = None
                            st.status[i] = UNKNOWN
                else:
                    for name, _ in log[st.log_pos:]:
                        st.results.pop(name, None)
                        st.rows.pop(name, None)
                st.log_pos = len(log)
                st.failed = None
        return st

    def _extended_classes(self) -> dict[str, str]:
        if self._ext_classes is None or self._ext_classes[0] != self.inventory_epoch:
            self._ext_classes = (self.inventory_epoch, self.dra.extended_resource_classes())
        return self._ext_classes[1]

    def _filter(self, inp: FilterInputs, node: dict, dra: _Shape | None) -> FilterResult:
        self.filter_calls += 1
        if dra is None:
            return filter_node(inp, node, self.resources, self.dra)
        return filter_node(inp, node, self.resources, self.dra, dra.results, dra.twins)

    def _dra_results(self, inp: FilterInputs) -> _Shape | None:
        """DynamicResources' per-node verdicts (and twin outcomes) shared by every pod with these
        pending claims."""
        if not inp.pending or inp.ext:
            return None
        key = json.dumps([c.get("spec") for c in inp.pending], sort_keys=True, default=str)
        return self._shape(key, self._claim_shapes)

    def attempt(self, pod: dict) -> Attempt:
        """Find a node for `pod` (nothing is written; binder.commit() does that)."""
        n = len(self.nodes())
        att = Attempt(num_nodes=n)
        claims, msg = self._prefilter(pod)
        att.claims = claims
        if msg:
            att.prefilter = msg
            # PreEnqueue rejections (no claim yet) leave the pod's status alone, like kube-scheduler
            att.gated = (msg.startswith("waiting for") or msg.endswith("ResourceClaim not created yet")
                         or msg.startswith("could not find ResourceClaim"))
            att.stage = f"DynamicResources {'PreEnqueue' if att.gated else 'PreFilter'}, Unschedulable"
            att.message = (f"0/{n} nodes are available: {msg}. preemption: 0/{n} nodes are "
                           f"available: {n} Preemption is not helpful for scheduling.")
            return att
        error = self.dra.allocation_state_error() if self.dra.invalid_capacity else None
        if error is not None and self._needs_allocation(pod, claims):
            # DynamicResources PreFilter could not gather the allocated state (1.38): an error, not
            # Unschedulable; the pod is retried when something changes
            att.prefilter = att.error = error
            att.stage = "DynamicResources PreFilter, Error"
            att.message = f'running PreFilter plugin "DynamicResources": {error}'
            return att
        sig = self._signature(pod, claims)
        shape = self._shape(sig, plain=_plain_rows(pod, claims))
        if shape.failed is not None:
            return shape.failed.again(claims)
        att.shape = sig
        inp = self._filter_inputs(pod, claims)
        try:
            feasible = self._find_feasible(inp, shape, att)
        except _FilterError as exc:  # a plugin failed (not: the pod does not fit): no node is chosen
            att.error = str(exc)
            att.message = f'running Filter plugin "DynamicResources": {att.error}'
            return att
        if not feasible:
            att.message = fit_error_text(n, att.reason_counts())
            shape.failed = att
            return att
        chosen = self._best(pod, inp, shape, feasible, att)
        _, outcome, ext_claim = shape.by_index[chosen]  # type: ignore[misc]  # a feasible node's result is kept
        self._choose(att, self._names[chosen], outcome, ext_claim, inp)
        return att

    def _needs_allocation(self, pod: dict, claims: list[dict]) -> bool:
        """Has the pod a claim still to allocate (its own, or the one for its DRA-backed extended
        resources)? Only then does DynamicResources' PreFilter gather the allocated state."""
        if any(not (c.get("status") or {}).get("allocation") for c in claims):
            return True
        return bool(extended_requests(pod, pod_requests(pod), self._extended_classes()))

    def _filter_inputs(self, pod: dict, claims: list[dict]) -> FilterInputs:
        req = pod_requests(pod)
        ext_classes = self._extended_classes()
        return FilterInputs(pod=pod, req=req, claims=claims,
                            allocated=[c for c in claims if (c.get("status") or {}).get("allocation")],
                            pending=[c for c in claims if not (c.get("status") or {}).get("allocation")],
                            ext_classes=ext_classes, ext=extended_requests(pod, req, ext_classes),
                            first_available=any(r.get("firstAvailable") for c in claims
                                                for r in ((c.get("spec") or {}).get("devices") or {}).get("requests")
                                                or ()))

    def _filter_at(self, inp: FilterInputs, k: int, shape: _Shape, dra_results: _Shape | None) -> FilterResult:
        """Node ``k``'s Filter result for this pod shape, run once and kept; a plugin error raises
        _FilterError (and is not kept)."""
        res = shape.by_index[k]
        if res is None:
            if self._verdicts is not None:
                res = self._shared_filter(inp, k, self._verdicts, dra_results)
            else:
                res = self._filter(inp, self._nodes[k], dra_results)  # type: ignore[index]  # k indexes nodes(), which sets _nodes
            if res[0] and res[0][0].startswith("error: "):
                raise _FilterError(res[0][0][len("error: "):])
            shape.by_index[k] = res
            shape.status[k] = INFEASIBLE if res[0] else FEASIBLE
        return res

    def _share_verdicts(self, inp: FilterInputs, shape: _Shape, dra_results: _Shape | None) -> dict | None:
        """``shape.verdicts`` when this pod shape's verdicts depend only on what a node's state
        key holds (see _shared_filter), else None; brings the node keys up to date."""
        dra = self.dra
        if not (self.share_verdicts and dra.twins) or inp.node_affinity or inp.allocated or inp.ext:
            return None  # node labels and name (affinity, an allocated claim's node), extended claims: per node
        self._twin_table = None
        if inp.pending:
            table = dra_results.twins  # type: ignore[union-attr]  # pending claims, no extended ones: set
            if not dra.twin_refs(table, inp.pending):
                return None
            self._twin_table = table
        if shape.verdicts is None or shape.verdicts_epoch != dra.inventory_epoch:
            shape.verdicts, shape.verdicts_epoch = {}, dra.inventory_epoch
        log, n = self.resources.log, len(self._names)
        if self._node_keys_for != (self.inventory_epoch, dra.inventory_epoch, n):
            self._node_keys, self._node_keys_pos = [None] * n, len(log)
            self._node_keys_for = (self.inventory_epoch, dra.inventory_epoch, n)
        elif self._node_keys_pos < len(log):
            keys, index = self._node_keys, self._index
            for name, _ in log[self._node_keys_pos:]:
                i = index.get(name)
                if i is not None:
                    keys[i] = None
            self._node_keys_pos = len(log)
        return shape.verdicts

    def _node_key(self, k: int) -> list:
        """Node ``k``'s state as the Filter plugins read it for a pod without node affinity,
        allocated claims or extended resources: [a number for what NodeUnschedulable
        (spec.unschedulable), TaintToleration (spec.taints) and NodeResourcesFit
        (status.allocatable, the bound pods' requests and count) read, equal for nodes in the
        same state; the node's part of a twin key (DraState.twin_part), worked out on first use].
        Kept until the node changes (NodeResources.log, as the shapes' verdicts)."""
        key = self._node_keys[k]
        if key is None:
            node, name, res = self._nodes[k], self._names[k], self.resources  # type: ignore[index]  # k indexes nodes()
            static = self._static_keys.get(name)
            version = (node.get("metadata") or {}).get("resourceVersion")
            if static is None or static[0] != version or not version:  # every write gives a new resourceVersion
                static = self._static_keys[name] = (version, _static_key(node))
            state = (static[1], res.pods_on.get(name, 0), tuple(sorted((res.usage.get(name) or {}).items())))
            number = self._interned_keys.get(state)
            if number is None:
                if len(self._interned_keys) >= max(INTERNED_KEYS_KEPT, 2 * len(self._names)):
                    self._prune_keys()
                # numbered by a counter, not the dict's size: a number kept by a verdict stays its state's
                number = self._interned_keys[state] = self._next_key = self._next_key + 1
            key = self._node_keys[k] = [number, _UNSET]
        return key

    def _prune_keys(self) -> None:
        """Forget the node states no node holds now, and the shared verdicts kept for them: node
        states change with every pod bound or gone, so the numbers would grow with the run. A
        state seen again gets a new number (numbers are never reused, so a verdict kept for a
        forgotten one is never read)."""
        held = {key[0] for key in self._node_keys if key is not None}
        self._interned_keys = {state: number for state, number in self._interned_keys.items() if number in held}
        for shape in self._shapes.values():
            verdicts = shape.verdicts
            if verdicts:  # in place: a walk may hold the dict
                for key in [key for key in verdicts if key[0] not in held]:
                    del verdicts[key]

    def _shared_filter(self, inp: FilterInputs, k: int, verdicts: dict[tuple, tuple[list[str], Any, Any]],
                       dra_results: _Shape | None) -> FilterResult:
        """Node ``k``'s Filter result, shared with a node in the same state filtered before for
        this pod shape: its state key (_node_key) and, for pending claims, its twin key
        (labkit.allocator.twins: devices, attributes the claims read, devices in use), so a fleet
        of a few node kinds costs one real filter per pod shape and node state. A twin's
        allocations are renamed to this node's devices (as DraState.allocate does); a node
        without a twin is filtered as itself."""
        node = self._nodes[k]  # type: ignore[index]  # k indexes nodes()
        state = self._node_key(k)
        table = self._twin_table
        if table is None:
            key: tuple = (state[0],)
        else:
            part = state[1]
            if part is _UNSET:
                part = state[1] = self.dra.twin_part(node)
            attributes = None
            if part is not None:
                attributes = table.attributes.get(self._names[k], _UNSET)
                if attributes is _UNSET:
                    attributes = self.dra.twin_attributes(table, self._names[k], part[0])
            if attributes is None:
                return self._filter(inp, node, dra_results)
            key = (state[0], part[1], attributes, part[2])
        known = verdicts.get(key)
        if known is not None:
            self.filter_calls += 1
            self.shared_verdicts += 1
            reasons, entry, detail = known
            if entry is None:
                return reasons, detail, None
            return reasons, self.dra.twin_answer(entry, part[0].pools, node, inp.pending, table), None  # type: ignore[arg-type]
        res = self._filter(inp, node, dra_results)
        if res[0] and res[0][0].startswith("error: "):
            return res
        if table is None or res[1] is None or isinstance(res[1], str):  # no DynamicResources verdict
            verdicts[key] = (res[0], None, res[1])
        else:
            entry = table.outcomes.get(key[1:])  # the twin outcome DraState.allocate kept, if shareable
            if entry is not None:
                verdicts[key] = (res[0], entry, None)
        return res

    def _find_feasible(self, inp: FilterInputs, shape: _Shape, att: Attempt) -> list[int]:
        """The Filter stage: up to numFeasibleNodesToFind feasible node indexes, walking from
        nextStartNodeIndex (or only the nodes NodeAffinity's PreFilter names); the reasons of
        the others go to ``att.per_node`` / ``att.explanations``, also when a plugin fails."""
        n = len(self._names)
        to_find = num_feasible_nodes_to_find(n, self.percentage_of_nodes_to_score)
        sampling = n >= MIN_FEASIBLE_NODES_TO_FIND
        start = self.next_start_node_index % n if sampling else 0
        dra_results = self._dra_results(inp)
        feasible: list[int] = []
        att.per_node, att.explanations = {}, {}
        only = prefilter_node_names(inp.pod)
        self._first_segment = -1  # feasible[:this] and feasible[this:] each ascend (-1: ascending throughout)
        self._verdicts = self._share_verdicts(inp, shape, dra_results)
        if inp.node_affinity and not shape.selector_filled:
            self._fill_selector_misses(inp.pod, shape)
        try:
            if only is not None:  # NodeAffinity's PreFilterResult: only these nodes are filtered
                looked = self._filter_subset(inp, shape, dra_results, only, to_find, feasible, att)
                self._first_segment = _NOT_RUNS
            else:
                looked = 0  # nodes looked at: start..n-1, then 0..start-1
                for lo, hi in ((start, n), (0, start)):
                    if lo == 0 and start:
                        self._first_segment = len(feasible)  # the walk wraps to node 0
                    looked += self._walk(inp, shape, dra_results, lo, hi, to_find, feasible, att) - lo
                    if len(feasible) >= to_find:
                        break
        finally:
            self._verdicts = None
        if sampling:
            self.next_start_node_index = (start + looked) % n  # moved on by the number of nodes looked at
        return feasible

    def _fill_selector_misses(self, pod: dict, shape: _Shape) -> None:
        """Give the nodes the pod's nodeSelector misses NodeAffinity's verdict without filtering
        them one by one (a pod pinned to one NVL72 rack misses thousands), once per shape. Exact:
        the walk still visits every node in its order (kube-scheduler's NodeAffinity PreFilter
        does not narrow on a nodeSelector), and such a node's Filter result is NodeAffinity's
        rejection unless an earlier plugin rejects it first (NodeUnschedulable, TaintToleration),
        so unschedulable or tainted nodes are left to be filtered as themselves; the verdicts are
        kept and dropped like any other (a node that changes is filtered again)."""
        shape.selector_filled = True
        selector = (pod.get("spec") or {}).get("nodeSelector") or {}
        if not selector or not all(isinstance(k, str) and isinstance(v, str) for k, v in selector.items()):
            return
        nodes = self._nodes
        if self._labels_for is not nodes:  # a new listing: the index is built again, key by key
            self._labels_for, self._label_index = nodes, {}
            self._special_nodes = [k for k, node in enumerate(nodes or ())
                                   if (node.get("spec") or {}).get("unschedulable") or (node.get("spec") or {}).get("taints")]
        keep: set[int] | None = None  # the nodes the selector matches, and the special ones
        for key, value in selector.items():
            index = self._label_index.get(key)
            if index is None:
                index = self._label_index[key] = {}
                for k, node in enumerate(nodes or ()):
                    v = ((node.get("metadata") or {}).get("labels") or {}).get(key)
                    if isinstance(v, str):
                        index.setdefault(v, []).append(k)
            hit = index.get(value, ())
            keep = set(hit) if keep is None else keep.intersection(hit)
        keep = (keep or set()).union(self._special_nodes)
        status, results = shape.status, shape.by_index
        n = len(status)
        if status.count(UNKNOWN) != n:  # some verdicts kept already: they stay
            keep.update(k for k in range(n) if status[k] != UNKNOWN)
            saved = [(k, status[k], results[k]) for k in keep]
        else:
            saved = [(k, UNKNOWN, None) for k in keep]
        status[:] = bytes([INFEASIBLE]) * n
        results[:] = [AFFINITY_MISMATCH] * n
        for k, st, res in saved:
            status[k], results[k] = st, res

    def _filter_subset(self, inp: FilterInputs, shape: _Shape, dra_results: _Shape | None, only: set[str],
                       to_find: int, feasible: list[int], att: Attempt) -> int:
        """Filter the nodes NodeAffinity's PreFilter left; returns how many were looked at."""
        names, per_node, explanations = self._names, att.per_node, att.explanations
        subset = sorted(self._index[name] for name in only if name in self._index)
        for k in subset:
            res = self._filter_at(inp, k, shape, dra_results)
            if res[0]:
                per_node[names[k]] = res[0]
                if res[1] is not None:
                    explanations[names[k]] = res[1]
            elif len(feasible) < to_find:
                feasible.append(k)
        if not feasible:  # the nodes the PreFilter left out share one status
            absent = [PREFILTER_ABSENT]
            per_node.update((name, absent) for name in names if name not in per_node and name not in only)
        return len(subset)

    def _walk(self, inp: FilterInputs, shape: _Shape, dra_results: _Shape | None, lo: int, hi: int,
              to_find: int, feasible: list[int], att: Attempt) -> int:
        """Filter nodes lo..hi-1 until enough are feasible; returns the index it stopped at. Runs
        of nodes whose verdict is known are taken as a whole."""
        names, results, status = self._names, shape.by_index, shape.status
        walked = att.walked  # the rejected nodes' verdicts, read into att.per_node on demand
        k = lo
        while k < hi and len(feasible) < to_find:
            known = status[k]
            if known == FEASIBLE:  # a run of nodes known to be feasible: taken as a whole
                m = _NOT_FEASIBLE.search(status, k, hi)
                j = min(m.start() if m is not None else hi, k + to_find - len(feasible))
                feasible.extend(range(k, j))
                k = j
                continue
            if known == INFEASIBLE:  # a run of nodes known to be infeasible: their reasons, as a whole
                m = _NOT_INFEASIBLE.search(status, k, hi)
                j = m.start() if m is not None else hi
                _keep_run(walked, names, k, results[k:j])
                k = j
                continue
            res = self._filter_at(inp, k, shape, dra_results)
            if res[0]:  # an Outcome's .explanation is computed lazily, on demand
                _keep_run(walked, names, k, [res])
            else:
                feasible.append(k)
            k += 1
        return k

    def _best(self, pod: dict, inp: FilterInputs, shape: _Shape, feasible: list[int], att: Attempt) -> int:
        """The Score stage: the first of the best-scored feasible nodes (scores kept on ``att``)."""
        if len(feasible) == 1:
            return feasible[0]
        pick = _picker(feasible, self._first_segment)  # hundreds of nodes per pod: read in C
        tot: Any = pick(shape.simple_by_index)
        rows = pick(shape.rows_by_index)
        if None in tot:  # a row not computed yet, or one whose score needs normalising
            if None in rows:
                pod_sizes = (nonzero_requests(pod), cpu_memory(inp.req))  # once per pod, not per node
                j = rows.index(None)
                while True:  # the rows still to work out, found in C (most of hundreds are kept)
                    rows[j] = self._score_row(shape, inp, feasible[j], *pod_sizes)
                    try:
                        j = rows.index(None, j + 1)
                    except ValueError:
                        break
                tot = pick(shape.simple_by_index)
            if None in tot:  # some score needs normalising over these nodes
                tot = totals(rows)
        att.score_nodes, att.score_rows = pick(self._names), rows
        return feasible[tot.index(max(tot))]

    def _score_row(self, shape: _Shape, inp: FilterInputs, i: int, pod_nonzero: tuple[int, int],
                   pod_req: tuple[int, int]) -> ScoreRow:
        """The raw scores of node ``i`` (an index into nodes()) for this pod shape, kept on the shape."""
        row = shape.rows_by_index[i]
        if row is None:
            res = self.resources
            node, name = self._nodes[i], self._names[i]  # type: ignore[index]  # i indexes nodes(), which sets them
            outcome = shape.by_index[i][1]  # type: ignore[index]  # a scored node was filtered
            cm = res.cpu_mem.get(name)
            if cm is None:
                cm = res.cpu_mem[name] = (cpu_memory(res.allocatable_of(node)), cpu_memory(res.usage.get(name, {})))
            nonzero_used = res.nonzero.get(name, (0, 0))
            memo = None
            if shape.plain_rows is not None and not (node.get("spec") or {}).get("taints"):
                # the row is a function of these three alone (see _Shape.plain_rows)
                memo = (cm, nonzero_used)
                row = shape.plain_rows.get(memo)
                if row is not None:
                    shape.rows_by_index[i], shape.simple_by_index[i] = row, simple_total(row)
                    return row
            cand = Candidate(name=name, node=node, allocatable=cm[0], nonzero_used=nonzero_used, used=cm[1],
                             # only a firstAvailable choice is scored from them (a twin's are renamed when read)
                             allocations=(list(outcome.allocations[:len(inp.pending)])
                                          if outcome is not None and inp.first_available else []))
            row = shape.rows_by_index[i] = score_row(inp.pod, inp.claims, cand, pod_nonzero, pod_req,
                                                     prioritized_list_scoring=self._plist,
                                                     first_available=inp.first_available)
            shape.simple_by_index[i] = simple_total(row)
            if memo is not None:
                shape.plain_rows[memo] = row  # type: ignore[index]  # memo is set only with plain_rows
        return row

    def _choose(self, att: Attempt, name: str, outcome: Any, ext_claim: dict | None, inp: FilterInputs) -> None:
        """Record the chosen node and the allocations its Filter computed."""
        att.node = name
        if outcome is None:
            return
        for c, result in zip(inp.pending, outcome.allocations):
            att.allocations[f"{meta(c)['namespace']}/{meta(c)['name']}"] = result
        if ext_claim is not None:
            att.ext_claim = ext_claim
            att.allocations[EXTENDED_RESOURCES_KEY] = outcome.allocations[len(inp.pending)]
            alloc = self.resources.allocatable.get(name) or {}
            att.ext_mappings = [{"containerName": e[1], "resourceName": e[2], "requestName": e[4]}
                                for e in inp.ext if e[2] not in alloc]

