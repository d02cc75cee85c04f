"""The scheduling loop: kube-scheduler's filters plus the DynamicResources plugin, deterministic.

Per pod (queue: priority, then creation order):
1. PreEnqueue/PreFilter: every claim must exist, not be deleting, belong to the pod when it
   comes from a template, and not be reserved by 256 others ("resourceclaim in use").
2. Filter each node (in node-name order) with the first failing rule recorded, like
   kube-scheduler: NodeUnschedulable, TaintToleration, NodeAffinity, NodeResourcesFit,
   DynamicResources (allocated claims must suit the node; unallocated ones go to the allocator).
3. Node choice (labkit.sim.scoring): in clusters under 100 nodes every node is filtered and the
   feasible ones are scored like kube-scheduler's default profile (TaintToleration, NodeAffinity,
   NodeResourcesFit LeastAllocated, BalancedAllocation, DynamicResources' firstAvailable score);
   ties go to the first by name where kube-scheduler picks at random. In larger clusters (the
   fleet profiles) the first feasible node in name order is taken, which keeps 10,000-pod runs fast.
4. Reserve + PreBind: write status.allocation, the delete-protection finalizer and reservedFor,
   then bind (spec.nodeName, PodScheduled=True, event Scheduled).
Pending pods get PodScheduled=False/Unschedulable and a FailedScheduling event with a message
shaped like kube-scheduler's ("0/3 nodes are available: 1 cannot allocate all claims, ...").

Speed: capacity only shrinks between "epochs" (an epoch ends when the inventory changes), so for
pods with identical requirements we remember per epoch the first node that might still fit and why
the nodes before it failed. 10,000 pods on 1,000 nodes then cost about one allocator call per pod.
When something is freed on one node (a pod ends, a claim is deallocated), waiting pods are retried
but filter only that node again, like kube-scheduler's queueing hints; when the cluster has devices
several nodes can use (slices without nodeName), a free ends the epoch instead.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from labkit.allocator.nodes import node_selector_matches, pod_matches_node_affinity
from labkit.allocator.taints import untolerated_taint
from labkit.sim import podgroups
from labkit.sim.dra import DraState
from labkit.sim.events import EventRecorder
from labkit.sim.names import new_uid
from labkit.sim.podutil import (
    DELETE_PROTECTION,
    EXTENDED_RESOURCES_KEY,
    GROUP_LABEL,
    MIN_MEMBER_ANNOTATION,
    claim_name_for,
    is_deleting,
    is_finished,
    meta,
    pod_reference,
)
from labkit.sim.resources import (
    insufficient,
    is_extended,
    node_allocatable,
    pod_requests,
)
from labkit.sim.scoring import (
    SCORE_ALL_BELOW,
    Candidate,
    best,
    cpu_memory,
    nonzero_requests,
    prioritized_list_scoring,
    total_scores,
)
from labkit.sim.store import Store, copy_of, evolve

COMPONENT = "default-scheduler"
EXTENDED_CLAIM_ANNOTATION = "resource.kubernetes.io/extended-resource-claim"
MAX_RESERVED_FOR = 256


@dataclass
class Attempt:
    """The outcome of scheduling one pod (kept for explain())."""

    node: str | None = None
    prefilter: str | None = None  # PreEnqueue/PreFilter message: no node was tried
    per_node: dict[str, list[str]] = field(default_factory=dict)  # node -> reasons it failed
    explanations: dict[str, Any] = field(default_factory=dict)  # node -> allocator Outcome or a detail string
    allocations: dict[str, dict] = field(default_factory=dict)  # "ns/claim" -> AllocationResult
    claims: list[dict] = field(default_factory=list)  # the pod's claims as seen
    error: str | None = None
    ext_claim: dict | None = None  # in-memory claim for DRA-backed extended resources (DRAExtendedResource)
    ext_mappings: list[dict] = field(default_factory=list)
    gated: bool = False  # PreEnqueue: no status change, like kube-scheduler
    num_nodes: int = 0
    message: str = ""
    scores: dict[str, dict[str, int]] = field(default_factory=dict)  # node -> plugin -> weighted score


@dataclass
class _Cursor:
    epoch: int  # Scheduler.inventory_epoch it was made in
    start: int = 0
    log_pos: int = 0  # how much of Scheduler._changed it has taken into account
    per_node: dict[str, list[str]] = field(default_factory=dict)
    explanations: dict[str, Any] = field(default_factory=dict)


#: filter reasons kube-scheduler returns as Unschedulable (preemption could help); all others are
#: UnschedulableAndUnresolvable ("Preemption is not helpful for scheduling"). DynamicResources'
#: "cannot allocate all claims" is unresolvable (statusUnschedulable) unless DRA preemption is on,
#: which no supported version enables by default: kube-scheduler 1.37.1 on `local` says so.
PREEMPTABLE_PREFIXES = ("Insufficient ", "Too many pods")


def _histogram(reasons: list[str]) -> str:
    counts: dict[str, int] = {}
    for r in reasons:
        counts[r] = counts.get(r, 0) + 1
    return ", ".join(sorted(f"{n} {r}" for r, n in counts.items()))


def fit_error_message(num_nodes: int, per_node: dict[str, list[str]]) -> str:
    """kube-scheduler's FitError text, including the DefaultPreemption tail. The sim never preempts:
    it reports "No preemption victims found" where preemption could in principle help, which is
    what kube-scheduler says when no lower-priority pods are there to evict."""
    filt = _histogram([r for reasons in per_node.values() for r in reasons])
    msg = f"0/{num_nodes} nodes are available" + (f": {filt}." if filt else ".")
    post = []
    for reasons in per_node.values():
        helpful = any(r.startswith(PREEMPTABLE_PREFIXES) for r in reasons)
        post.append("No preemption victims found for incoming pod" if helpful else "Preemption is not helpful for scheduling")
    if post:
        msg += f" preemption: 0/{num_nodes} nodes are available: {_histogram(post)}."
    return msg


def _single_node(selector: dict | None) -> str | None:
    """The node an allocation's nodeSelector pins it to (matchFields metadata.name In [one])."""
    terms = (selector or {}).get("nodeSelectorTerms") or []
    if len(terms) != 1 or terms[0].get("matchExpressions"):
        return None
    fields = terms[0].get("matchFields") or []
    if len(fields) != 1:
        return None
    f = fields[0]
    values = f.get("values") or []
    if f.get("key") == "metadata.name" and f.get("operator") == "In" and len(values) == 1:
        return values[0]
    return None


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
        self.inventory_epoch = 0  # bumped by changes that are not confined to one node
        self._changed: list[str] = []  # nodes freed up since the last inventory_epoch bump
        self.attempts: dict[str, Attempt] = {}  # pod uid -> last attempt
        self._failed_epoch: dict[str, tuple[int, str]] = {}  # pod uid -> (epoch, resourceVersion)
        self._cursors: dict[str, _Cursor] = {}
        self._seq: dict[str, int] = {}  # pod uid -> creation order
        self._bound: dict[str, tuple[str, dict[str, Fraction], tuple[int, int]]] = {}  # uid -> (node, req, nonzero)
        self._usage: dict[str, dict[str, Fraction]] = {}
        self._nonzero: dict[str, tuple[int, int]] = {}  # node -> sum of kube-scheduler's nonzero cpu/memory
        self._pods_on: dict[str, int] = {}
        self._claim_allocs: dict[str, tuple[dict, str]] = {}  # claim uid -> (allocation, owner) in dra.allocated
        self._nodes: list[dict] | None = None
        self._index: dict[str, int] | None = None
        self.progress: Any = None  # optional tqdm-like wrapper for long passes
        self._alloc: dict[str, dict[str, Fraction]] = {}  # node -> parsed allocatable
        self._waiting: dict[str, dict] = {}  # uid -> unbound pod this scheduler must place
        for pod in store.list("Pod"):
            if _waiting(pod):
                self._waiting[meta(pod).get("uid", "")] = pod
        store.watch(self._on_pod, kinds=("Pod",))
        store.watch(self._on_inventory, kinds=("Node", "DeviceClass", "ResourceSlice", "DeviceTaintRule",
                                                "ResourceClaim", "ResourceClaimTemplate", "PodGroup"))

    # -- bookkeeping -----------------------------------------------------------------------
    def bump(self) -> None:
        """Something changed beyond one node: every cached failure is stale."""
        self.epoch += 1
        self.inventory_epoch += 1
        self._changed.clear()

    def _freed(self, node: str | None) -> None:
        """Something was freed on `node`: waiting pods retry, but only that node's remembered
        failures are stale (None, or devices other nodes can use too: everything is stale)."""
        if not node or self.dra.has_cluster_wide_slices():
            self.bump()
            return
        self.epoch += 1
        self._changed.append(node)

    def _on_inventory(self, ev) -> None:
        if ev.kind == "Node":
            self._nodes = None
            self._alloc.clear()
        if ev.kind == "ResourceClaim":
            ann = meta(ev.object).get("annotations") or {}
            generated = "resource.kubernetes.io/pod-claim-name" in ann or EXTENDED_CLAIM_ANNOTATION in ann
            if ev.type != "ADDED" or generated:
                # allocation changes are tracked by reserve()/release_claim(); a generated claim only
                # matters to its own pod, whose resourceClaimStatuses update triggers its retry
                return
        self.bump()

    def _on_pod(self, ev) -> None:
        pod = ev.object
        uid = meta(pod).get("uid", "")
        if ev.type == "ADDED":
            self._seq[uid] = ev.resource_version
        node = (pod.get("spec") or {}).get("nodeName")
        live = ev.type != "DELETED" and node and not is_finished(pod) and not is_deleting(pod)
        if live and uid not in self._bound:
            self._account(uid, node, pod_requests(pod), nonzero_requests(pod))
        elif not live and uid in self._bound:
            node_was = self._bound[uid][0]
            self._unaccount(uid)
            self._freed(node_was)
        if ev.type == "DELETED":
            self._seq.pop(uid, None)
            self._failed_epoch.pop(uid, None)
        if ev.type != "DELETED" and _waiting(pod):
            self._waiting[uid] = pod
        else:
            self._waiting.pop(uid, None)

    def _account(self, uid: str, node: str, req: dict[str, Fraction], nonzero: tuple[int, int]) -> None:
        self._bound[uid] = (node, req, nonzero)
        use = self._usage.setdefault(node, {})
        for k, v in req.items():
            use[k] = use.get(k, Fraction(0)) + v
        self._pods_on[node] = self._pods_on.get(node, 0) + 1
        cpu, mem = self._nonzero.get(node, (0, 0))
        self._nonzero[node] = (cpu + nonzero[0], mem + nonzero[1])

    def _unaccount(self, uid: str) -> None:
        node, req, nonzero = self._bound.pop(uid)
        use = self._usage.get(node, {})
        for k, v in req.items():
            use[k] = use.get(k, Fraction(0)) - v
        self._pods_on[node] = self._pods_on.get(node, 1) - 1
        cpu, mem = self._nonzero.get(node, (0, 0))
        self._nonzero[node] = (cpu - nonzero[0], mem - nonzero[1])

    def release_claim(self, claim: dict) -> None:
        """The claim controller deallocated `claim`."""
        held = self._claim_allocs.pop(meta(claim).get("uid", ""), None)
        if held is not None:
            self.dra.allocated.remove(held[0], owner=held[1])
            self._freed(_single_node(held[0].get("nodeSelector")))
        else:
            self.bump()

    def adopt_allocation(self, claim: dict) -> None:
        """Count an allocation made elsewhere (a claim restored from a real cluster's dump) as in use."""
        alloc = (claim.get("status") or {}).get("allocation")
        if alloc:
            owner = f"{meta(claim)['namespace']}/{meta(claim)['name']}"
            self.dra.allocated.add(alloc, owner=owner)
            self._claim_allocs[meta(claim)["uid"]] = (alloc, owner)

    def nodes(self) -> list[dict]:
        if self._nodes is None:
            self._nodes = self.store.list("Node")  # sorted by name
            self._index = None
        return self._nodes

    def _node_index(self) -> dict[str, int]:
        nodes = self.nodes()
        if self._index is None:
            self._index = {n["metadata"]["name"]: i for i, n in enumerate(nodes)}
        return self._index

    # -- queue -----------------------------------------------------------------------------
    def pending(self) -> list[dict]:
        pods = list(self._waiting.values())  # kept by the pod watch: no scan of every pod
        pods.sort(key=lambda p: (-int((p.get("spec") or {}).get("priority") or 0), self._seq.get(meta(p)["uid"], 0)))
        return pods

    def schedule_pending(self) -> None:
        done_groups: set[tuple[str, str]] = set()
        queue = self.pending()
        if self.progress is not None and len(queue) > 500:
            queue = self.progress(queue, desc="scheduling", total=len(queue))
        for pod in queue:
            if self.store.get("Pod", meta(pod)["name"], meta(pod)["namespace"]) is not pod:
                continue  # changed during this pass; next round
            uid = meta(pod)["uid"]
            if (pod.get("spec") or {}).get("schedulingGates"):
                self._gated(pod)
                continue
            group = self.group_of(pod)
            if group is not None:
                if group[:2] not in done_groups:
                    done_groups.add(group[:2])
                    self._schedule_gang(pod, group)
                continue
            if self._failed_epoch.get(uid) == (self.epoch, meta(pod).get("resourceVersion")):
                continue
            attempt = self.attempt(pod)
            self.attempts[uid] = attempt
            if attempt.node:
                self.commit(pod, attempt)
            else:
                self._fail(pod, attempt)

    # -- one pod ---------------------------------------------------------------------------
    def _prefilter(self, pod: dict) -> tuple[list[dict], str | None]:
        ns = meta(pod)["namespace"]
        claims = []
        for entry in (pod.get("spec") or {}).get("resourceClaims") or []:
            name, templated = claim_name_for(pod, entry)
            if name is None:
                return claims, (f'waiting for resource claim controller to create the resourceclaim for '
                                f'pod claim "{entry.get("name")}"')
            claim = self.store.get("ResourceClaim", name, ns)
            if claim is None:
                return claims, f'resourceclaim "{name}" not found'
            if is_deleting(claim):
                return claims, f'resourceclaim "{name}" is being deleted'
            if templated and not any(o.get("uid") == meta(pod)["uid"] for o in meta(claim).get("ownerReferences") or []) \
                    and podgroups.group_claim_ref(self.store, pod, claim) is None:
                return claims, f"ResourceClaim {ns}/{name} was not created for pod {ns}/{meta(pod)['name']} (pod is not owner)"
            st = claim.get("status") or {}
            tentative = self._claim_allocs.get(meta(claim)["uid"])
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
        return claims, None

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

    def attempt(self, pod: dict, cursors: dict[str, _Cursor] | None = None) -> Attempt:
        """Try every node for `pod`. `cursors` holds the per-epoch failure memory (default: the
        scheduler's; a gang passes its own, valid while its tentative reservations stand)."""
        nodes = self.nodes()
        att = Attempt(num_nodes=len(nodes))
        claims, msg = self._prefilter(pod)
        att.claims = claims
        if msg:
            att.prefilter = msg
            att.gated = msg.startswith("waiting for") or msg.endswith("not found")
            att.message = (f"0/{len(nodes)} nodes are available: {msg}. preemption: 0/{len(nodes)} nodes are "
                           f"available: {len(nodes)} Preemption is not helpful for scheduling.")
            return att
        sig = self._signature(pod, claims)
        cursors = self._cursors if cursors is None else cursors
        cur = cursors.get(sig)
        if cur is None or cur.epoch != self.inventory_epoch:
            cur = cursors[sig] = _Cursor(self.inventory_epoch, log_pos=len(self._changed))
        elif cur.log_pos < len(self._changed):
            # queueing-hint style: only nodes freed up since are filtered again
            index = self._node_index()
            for name in self._changed[cur.log_pos:]:
                if cur.per_node.pop(name, None) is not None:
                    cur.explanations.pop(name, None)
                    cur.start = min(cur.start, index.get(name, cur.start))
            cur.log_pos = len(self._changed)
        req = pod_requests(pod)
        ext_classes = self.dra.extended_resource_classes()
        ext = self._extended_requests(pod, req, ext_classes)
        pending_claims = [c for c in claims if not (c.get("status") or {}).get("allocation")]
        allocated_claims = [c for c in claims if (c.get("status") or {}).get("allocation")]
        if len(nodes) < SCORE_ALL_BELOW:
            return self._attempt_scored(pod, att, nodes, claims, req, allocated_claims, pending_claims,
                                        ext_classes, ext)
        for i in range(cur.start, len(nodes)):
            node = nodes[i]
            name = node["metadata"]["name"]
            if name in cur.per_node:
                continue  # failed before and unchanged since
            reasons, outcome, ext_claim = self._filter(pod, node, req, allocated_claims, pending_claims, ext_classes, ext)
            if outcome is not None and reasons:
                cur.explanations[name] = outcome  # its .explanation is computed lazily, on demand
            if reasons and reasons[0].startswith("error: "):
                att.error = reasons[0][len("error: "):]
                att.message = f'running Filter plugin "DynamicResources": {att.error}'
                att.per_node, att.explanations = dict(cur.per_node), dict(cur.explanations)
                return att
            if reasons:
                cur.per_node[name] = reasons
                cur.start = i + 1
                continue
            cur.start = i
            self._choose(att, name, outcome, ext_claim, pending_claims, ext)
            break
        if att.node is None:
            # shared with the cursor: once every node failed, nothing is added to it this epoch
            att.per_node, att.explanations = cur.per_node, cur.explanations
            att.message = fit_error_message(len(nodes), att.per_node)
        return att

    def _attempt_scored(self, pod: dict, att: Attempt, nodes: list[dict], claims: list[dict],
                        req: dict[str, Fraction], allocated_claims: list[dict], pending_claims: list[dict],
                        ext_classes: dict[str, str], ext: list[tuple[int, str, str, int, str]]) -> Attempt:
        """Small clusters: filter every node, then score the feasible ones (labkit.sim.scoring)."""
        feasible: list[tuple[dict, Any, dict | None]] = []
        for node in nodes:
            name = node["metadata"]["name"]
            reasons, outcome, ext_claim = self._filter(pod, node, req, allocated_claims, pending_claims,
                                                       ext_classes, ext)
            if outcome is not None and reasons:
                att.explanations[name] = outcome
            if reasons and reasons[0].startswith("error: "):
                att.error = reasons[0][len("error: "):]
                att.message = f'running Filter plugin "DynamicResources": {att.error}'
                return att
            if reasons:
                att.per_node[name] = reasons
            else:
                feasible.append((node, outcome, ext_claim))
        if not feasible:
            att.message = fit_error_message(len(nodes), att.per_node)
            return att
        chosen = feasible[0]
        if len(feasible) > 1:
            candidates = [self._candidate(node, outcome, len(pending_claims)) for node, outcome, _ in feasible]
            scores = total_scores(pod, claims, candidates, nonzero_requests(pod),
                                  cpu_memory(req), prioritized_list_scoring=prioritized_list_scoring(
                                      self.dra.features, self.dra.kubernetes_version))
            name = best(scores, [c.name for c in candidates])
            chosen = next(f for f in feasible if f[0]["metadata"]["name"] == name)
            att.scores = scores
        node, outcome, ext_claim = chosen
        self._choose(att, node["metadata"]["name"], outcome, ext_claim, pending_claims, ext)
        return att

    def _choose(self, att: Attempt, name: str, outcome: Any, ext_claim: dict | None, pending_claims: list[dict],
                ext: list[tuple[int, str, str, int, str]]) -> None:
        """Record the chosen node and the allocations its Filter computed."""
        att.node = name
        if outcome is None:
            return
        for c, result in zip(pending_claims, outcome.allocations):
            att.allocations[f"{meta(c)['namespace']}/{meta(c)['name']}"] = result
        if ext_claim is not None:
            att.ext_claim = ext_claim
            att.allocations[EXTENDED_RESOURCES_KEY] = outcome.allocations[len(pending_claims)]
            att.ext_mappings = [{"containerName": e[1], "resourceName": e[2], "requestName": e[4]}
                                for e in ext if e[2] not in (self._alloc.get(name) or {})]

    def _candidate(self, node: dict, outcome: Any, n_pending: int) -> Candidate:
        name = node["metadata"]["name"]
        alloc = self._alloc.get(name) or node_allocatable(node)
        return Candidate(name=name, node=node, allocatable=cpu_memory(alloc),
                         nonzero_used=self._nonzero.get(name, (0, 0)),
                         used=cpu_memory(self._usage.get(name, {})),
                         allocations=list(outcome.allocations[:n_pending]) if outcome is not None else [])

    @staticmethod
    def _extended_requests(pod: dict, req: dict[str, Fraction],
                           ext_classes: dict[str, str]) -> list[tuple[int, str, str, int, str]]:
        """(container index, container name, resource, count, request name) for every extended
        resource a DeviceClass backs (extendedResourceName); request names `container-<i>-request-<j>`."""
        out = []
        if not ext_classes or not any(r in ext_classes for r in req):
            return out
        for i, c in enumerate((pod.get("spec") or {}).get("containers") or []):
            res = c.get("resources") or {}
            merged = dict(res.get("limits") or {})
            merged.update(res.get("requests") or {})
            j = 0
            for r in sorted(merged):
                if r in ext_classes and int(str(merged[r])) > 0:
                    out.append((i, c.get("name", ""), r, int(str(merged[r])), f"container-{i}-request-{j}"))
                    j += 1
        return out

    def _extended_claim(self, pod: dict, ext: list[tuple[int, str, str, int, str]],
                        ext_classes: dict[str, str]) -> dict:
        requests = [{"name": e[4], "exactly": {"deviceClassName": ext_classes[e[2]], "allocationMode": "ExactCount",
                                               "count": e[3]}} for e in ext]
        return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                "metadata": {"name": EXTENDED_RESOURCES_KEY, "namespace": meta(pod)["namespace"], "uid": "",
                             "annotations": {EXTENDED_CLAIM_ANNOTATION: "true"}},
                "spec": {"devices": {"requests": requests}}}

    def _filter(self, pod: dict, node: dict, req: dict[str, Fraction], allocated: list[dict],
                pending: list[dict], ext_classes: dict[str, str],
                ext: list[tuple[int, str, str, int, str]]) -> tuple[list[str], Any, dict | None]:
        reasons, outcome, ext_claim = self._filter_node(pod, node, req, allocated, pending, ext_classes, ext)
        return reasons, outcome, ext_claim

    def _filter_node(self, pod: dict, node: dict, req: dict[str, Fraction], allocated: list[dict],
                     pending: list[dict], ext_classes: dict[str, str],
                     ext: list[tuple[int, str, str, int, str]]) -> tuple[list[str], Any, dict | None]:
        name = node["metadata"]["name"]
        if (node.get("spec") or {}).get("unschedulable"):
            return ["node(s) were unschedulable"], None, None
        taint = untolerated_taint(pod, node)
        if taint is not None:
            value = f"={taint['value']}" if taint.get("value") else ""
            return ["node(s) had untolerated taint(s)"], f"untolerated taint {taint.get('key')}{value}:{taint.get('effect')}", None
        if not pod_matches_node_affinity(pod, node):
            return ["node(s) didn't match Pod's node affinity/selector"], None, None
        alloc = self._alloc.get(name)
        if alloc is None:
            alloc = self._alloc[name] = node_allocatable(node)
        reasons = insufficient(req, self._usage.get(name, {}), alloc, self._pods_on.get(name, 0))
        for r in sorted(req):
            if req[r] and is_extended(r) and r not in alloc and r not in ext_classes:
                reasons.append(f"Insufficient {r}")
        if reasons:
            return reasons, None, None
        for c in allocated:
            if not node_selector_matches(node, ((c.get("status") or {}).get("allocation") or {}).get("nodeSelector")):
                return ["resourceclaim not available on the node"], None, None
        # extended resources the node does not advertise (no device plugin) are served by DRA
        dra_ext = [e for e in ext if e[2] not in alloc]
        ext_claim = self._extended_claim(pod, dra_ext, ext_classes) if dra_ext else None
        claims = pending + ([ext_claim] if ext_claim else [])
        if not claims:
            return [], None, None
        outcome = self.dra.allocator_for(node).allocate(node, claims)
        if outcome.status == "allocated":
            return [], outcome, ext_claim
        if outcome.status == "error":
            return [f"error: {outcome.error}"], outcome, None
        return ["cannot allocate all claims"], outcome, None

    # -- reserve / bind --------------------------------------------------------------------
    def _fix_share_ids(self, result: dict) -> dict:
        """Seeded shareIDs instead of random ones, so runs repeat exactly."""
        result = copy_of(result)
        for r in ((result.get("devices") or {}).get("results") or []):
            if r.get("shareID"):
                r["shareID"] = new_uid(self.store.rng)
        return result

    def reserve(self, pod: dict, att: Attempt) -> dict[str, dict]:
        """Count the attempt's devices and resources as in use (not yet written)."""
        fixed = {k: self._fix_share_ids(v) for k, v in att.allocations.items()}
        by_key = {f"{meta(c)['namespace']}/{meta(c)['name']}": c for c in att.claims}
        for key, result in fixed.items():
            owner = self._owner(pod, key)
            self.dra.allocated.add(result, owner=owner)
            self._claim_allocs[self._alloc_key(pod, by_key, key)] = (result, owner)
        self._account(meta(pod)["uid"], att.node or "", pod_requests(pod), nonzero_requests(pod))
        return fixed

    @staticmethod
    def _owner(pod: dict, key: str) -> str:
        """Owner name recorded in AllocatedState (shown in allocator explanations)."""
        return f"{meta(pod)['namespace']}/{meta(pod)['name']}-extended-resources" if key == EXTENDED_RESOURCES_KEY else key

    @staticmethod
    def _alloc_key(pod: dict, by_key: dict[str, dict], key: str) -> str:
        return f"ext:{meta(pod)['uid']}" if key == EXTENDED_RESOURCES_KEY else meta(by_key[key])["uid"]

    def unreserve(self, pod: dict, att: Attempt, fixed: dict[str, dict]) -> None:
        by_key = {f"{meta(c)['namespace']}/{meta(c)['name']}": c for c in att.claims}
        for key, result in fixed.items():
            self.dra.allocated.remove(result, owner=self._owner(pod, key))
            self._claim_allocs.pop(self._alloc_key(pod, by_key, key), None)
        if meta(pod)["uid"] in self._bound:
            self._unaccount(meta(pod)["uid"])

    def commit(self, pod: dict, att: Attempt, fixed: dict[str, dict] | None = None) -> None:
        if fixed is None:
            fixed = self.reserve(pod, att)
        ref = pod_reference(pod)
        for claim in att.claims:
            key = f"{meta(claim)['namespace']}/{meta(claim)['name']}"
            cur = self.store.get("ResourceClaim", meta(claim)["name"], meta(claim)["namespace"]) or claim
            new = evolve(cur, "status")
            st = new["status"]
            if key in fixed:
                st["allocation"] = fixed[key]
                fins = list(new["metadata"].get("finalizers") or [])
                if DELETE_PROTECTION not in fins:
                    fins.append(DELETE_PROTECTION)
                new["metadata"]["finalizers"] = fins
            reserved = list(st.get("reservedFor") or [])
            mine = podgroups.group_claim_ref(self.store, pod, claim) or ref  # a PodGroup's claim: reserved for the group
            if not any(r.get("uid") == mine["uid"] for r in reserved):
                reserved.append(mine)
            st["reservedFor"] = reserved
            self.store.update(new)
        new_pod = evolve(pod, "spec", "status")
        if EXTENDED_RESOURCES_KEY in fixed and att.ext_claim is not None:
            ext = self._create_extended_claim(pod, att.ext_claim, fixed[EXTENDED_RESOURCES_KEY], ref)
            new_pod["status"]["extendedResourceClaimStatus"] = {
                "requestMappings": att.ext_mappings, "resourceClaimName": meta(ext)["name"]}
        new_pod["spec"]["nodeName"] = att.node
        self._set_condition(new_pod, "True", None, None)
        self.store.update(new_pod)
        self._failed_epoch.pop(meta(pod)["uid"], None)
        self.events.record(pod, "Normal", "Scheduled",
                           f"Successfully assigned {meta(pod)['namespace']}/{meta(pod)['name']} to {att.node}", COMPONENT)

    def _create_extended_claim(self, pod: dict, synth: dict, result: dict, ref: dict) -> dict:
        pm = meta(pod)
        claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                 "metadata": {"generateName": f"{pm['name']}-extended-resources-", "namespace": pm["namespace"],
                              "annotations": {EXTENDED_CLAIM_ANNOTATION: "true"},
                              "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": pm["name"],
                                                   "uid": pm["uid"], "controller": True, "blockOwnerDeletion": True}],
                              "finalizers": [DELETE_PROTECTION]},
                 "spec": copy_of(synth["spec"])}
        created = self.store.create(claim, copy=False)
        new = evolve(created, "status")
        new["status"] = {"allocation": result, "reservedFor": [ref]}
        self._claim_allocs[meta(created)["uid"]] = self._claim_allocs.pop(
            f"ext:{pm['uid']}", (result, self._owner(pod, EXTENDED_RESOURCES_KEY)))
        return self.store.update(new)

    @staticmethod
    def _set_condition(pod: dict, status: str, reason: str | None, message: str | None) -> bool:
        st = pod.setdefault("status", {})
        st.setdefault("phase", "Pending")
        conds = [c for c in st.get("conditions") or [] if c.get("type") != "PodScheduled"]
        cond: dict[str, Any] = {"type": "PodScheduled", "status": status}
        if reason:
            cond["reason"] = reason
        if message:
            cond["message"] = message
        old = next((c for c in st.get("conditions") or [] if c.get("type") == "PodScheduled"), None)
        st["conditions"] = [cond, *conds]
        return old != cond

    def _fail(self, pod: dict, att: Attempt) -> None:
        uid = meta(pod)["uid"]
        if att.gated:
            self._failed_epoch[uid] = (self.epoch, meta(pod).get("resourceVersion"))
            return
        new = evolve(pod, "status")
        reason = "SchedulerError" if att.error else "Unschedulable"
        if self._set_condition(new, "False", reason, att.message):
            pod = self.store.update(new)
        self._failed_epoch[uid] = (self.epoch, meta(pod).get("resourceVersion"))
        self.events.record(pod, "Warning", "FailedScheduling", att.message, COMPONENT)

    def _gated(self, pod: dict) -> None:
        new = evolve(pod, "status")
        if self._set_condition(new, "False", "SchedulingGated", "Scheduling is blocked due to non-empty scheduling gates"):
            self.store.update(new)

    # -- gangs -----------------------------------------------------------------------------
    def group_of(self, pod: dict) -> tuple[str, str, int] | None:
        """(namespace, group name, minCount) when the pod belongs to a gang."""
        ns = meta(pod)["namespace"]
        pg_name = ((pod.get("spec") or {}).get("schedulingGroup") or {}).get("podGroupName")
        if pg_name:
            pg = self.store.get("PodGroup", pg_name, ns)
            if pg is None:
                return ns, f"podgroup/{pg_name}", -1
            gang = ((pg.get("spec") or {}).get("schedulingPolicy") or {}).get("gang")
            if gang is None:
                return None  # basic policy: ordinary pod-by-pod scheduling
            return ns, f"podgroup/{pg_name}", int(gang.get("minCount", 1))
        label = (meta(pod).get("labels") or {}).get(GROUP_LABEL)
        if label:
            mins = [int((meta(p).get("annotations") or {}).get(MIN_MEMBER_ANNOTATION, 0) or 0)
                    for p in self._members(ns, f"label/{label}")]
            return ns, f"label/{label}", max([m for m in mins if m > 0] or [1])
        return None

    def _members(self, ns: str, group: str) -> list[dict]:
        kind, name = group.split("/", 1)
        out = []
        for p in self.store.list("Pod", ns):
            if is_deleting(p):
                continue
            if kind == "podgroup":
                value = ((p.get("spec") or {}).get("schedulingGroup") or {}).get("podGroupName")
            else:
                value = (meta(p).get("labels") or {}).get(GROUP_LABEL)
            if value == name:
                out.append(p)
        out.sort(key=lambda p: self._seq.get(meta(p)["uid"], 0))
        return out

    def _schedule_gang(self, first: dict, group: tuple[str, str, int]) -> None:
        ns, gname, min_count = group
        shown = gname.split("/", 1)[1]
        members = self._members(ns, gname)
        pending = [p for p in members if not (p.get("spec") or {}).get("nodeName") and not is_finished(p)]
        placed_before = sum(1 for p in members if (p.get("spec") or {}).get("nodeName") and not is_finished(p))
        key = (self.epoch, ",".join(meta(p)["uid"] for p in pending))
        if all(self._failed_epoch.get(meta(p)["uid"]) == (self.epoch, key[1]) for p in pending):
            return
        if min_count < 0:
            for p in pending:
                self.attempts[meta(p)["uid"]] = Attempt(prefilter=f'waiting for PodGroup "{shown}" to be created', gated=True)
                self._failed_epoch[meta(p)["uid"]] = (self.epoch, key[1])
            return
        if placed_before + len(pending) < min_count:
            msg = f'waiting for pod group "{shown}": {placed_before + len(pending)} of minCount {min_count} pods exist'
            for p in pending:
                self.attempts[meta(p)["uid"]] = Attempt(prefilter=msg, gated=True)
                self._failed_epoch[meta(p)["uid"]] = (self.epoch, key[1])
            return
        reserved: list[tuple[dict, Attempt, dict]] = []
        failed: list[tuple[dict, Attempt]] = []
        gang_cursors: dict[str, _Cursor] = {}
        for p in pending:
            att = self.attempt(p, gang_cursors)
            self.attempts[meta(p)["uid"]] = att
            if att.node:
                reserved.append((p, att, self.reserve(p, att)))
            else:
                failed.append((p, att))
        if placed_before + len(reserved) >= min_count:
            for p, att, fixed in reserved:
                self.commit(p, att, fixed)
            for p, att in failed:
                self._fail(p, att)
            rest = ",".join(meta(p)["uid"] for p, _ in failed)
            for p, _ in failed:
                self._failed_epoch[meta(p)["uid"]] = (self.epoch, rest)
            return
        for p, att, fixed in reversed(reserved):
            self.unreserve(p, att, fixed)
        self.bump()
        reason = failed[0][1].message if failed else ""
        msg = (f'pod group "{shown}": only {placed_before + len(reserved)} of minCount {min_count} pods fit; '
               f"none were bound (all-or-nothing). {reason}").strip()
        for p in pending:
            att = self.attempts[meta(p)["uid"]]
            att.node = None
            att.message = msg
            self._fail(p, att)
        for p in pending:
            self._failed_epoch[meta(p)["uid"]] = (self.epoch, key[1])
