"""The Filter stage of the sim scheduler (kube-scheduler's findNodesThatPassFilters).

- :class:`NodeResources`: what kube-scheduler's NodeInfo snapshot keeps per node (requests of the
  bound pods, their count, the non-zero cpu/memory sums scoring needs), kept incrementally from
  pod events, plus a log of the nodes that changed, from which per-pod-shape filter results
  are invalidated node by node instead of being recomputed for the whole fleet.
- :func:`filter_node`: the filter plugins in kube-scheduler's order, first failing reason wins:
  NodeUnschedulable, TaintToleration, NodeAffinity, NodeResourcesFit, DynamicResources.
- :func:`num_feasible_nodes_to_find`: how many feasible nodes kube-scheduler looks for before it
  stops filtering (``percentageOfNodesToScore``, adaptive by default).
- :func:`fit_error_message`: the "0/N nodes are available: ..." text of an unschedulable pod.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from labkit.allocator.nodes import node_selector_matches, pod_matches_node_affinity
from labkit.allocator.taints import untolerated_taint
from labkit.allocator.twins import TwinTable
from labkit.model.podutil import EXTENDED_RESOURCES_KEY, meta
from labkit.sim.dra import DraState
from labkit.sim.resources import insufficient, is_extended, node_allocatable

EXTENDED_CLAIM_ANNOTATION = "resource.kubernetes.io/extended-resource-claim"

#: kube-scheduler's minFeasibleNodesToFind: below this many nodes every node is filtered and scored
MIN_FEASIBLE_NODES_TO_FIND = 100
#: minFeasibleNodesPercentageToFind: the adaptive percentage never drops below this
MIN_FEASIBLE_NODES_PERCENTAGE = 5
#: the adaptive percentage starts here and loses one point per 125 nodes
BASE_PERCENTAGE_OF_NODES_TO_SCORE = 50

#: filter reasons kube-scheduler returns as Unschedulable (preemption could help); all others are
#: UnschedulableAndUnresolvable ("Preemption is not helpful for scheduling"). DynamicResources'
#: "cannot allocate all claims" is unresolvable (statusUnschedulable) unless DRA preemption is on,
#: which no supported version enables by default: kube-scheduler 1.37.1 on `local` says so.
PREEMPTABLE_PREFIXES = ("Insufficient ", "Too many pods")

ExtRequest = tuple[int, str, str, int, str]  # container index, container name, resource, count, request name
FilterResult = tuple[list[str], Any, dict | None]  # reasons (empty: feasible), allocator Outcome, extended claim
#: NodeAffinity's rejection, one object for every node (the shapes' caches keep one per node
#: walked: thousands per shape where a nodeSelector pins pods to one rack); read, never changed
AFFINITY_MISMATCH: FilterResult = (["node(s) didn't match Pod's node affinity/selector"], None, None)


def num_feasible_nodes_to_find(num_nodes: int, percentage: int = 0) -> int:
    """kube-scheduler's numFeasibleNodesToFind: once this many feasible nodes are found, filtering
    stops and only those are scored. `percentage` 0 = adaptive (the default profile's)."""
    if num_nodes < MIN_FEASIBLE_NODES_TO_FIND or percentage >= 100:
        return num_nodes
    if percentage <= 0:
        percentage = max(MIN_FEASIBLE_NODES_PERCENTAGE, BASE_PERCENTAGE_OF_NODES_TO_SCORE - num_nodes // 125)
    return max(MIN_FEASIBLE_NODES_TO_FIND, num_nodes * percentage // 100)


def histogram(reasons: list[str]) -> str:
    counts: dict[str, int] = {}
    for r in reasons:
        counts[r] = counts.get(r, 0) + 1
    return ", ".join(sorted(f"{n} {r}" for r, n in counts.items()))


def fit_error_message(num_nodes: int, per_node: dict[str, list[str]]) -> str:
    """kube-scheduler's FitError text, including the DefaultPreemption tail. The sim never preempts:
    it reports "No preemption victims found" where preemption could in principle help, which is
    what kube-scheduler says when no lower-priority pods are there to evict."""
    return fit_error_text(num_nodes, Counter(map(tuple, per_node.values())))


def fit_error_text(num_nodes: int, counts: Counter[tuple[str, ...]]) -> str:
    """fit_error_message's text from how many nodes failed with each distinct reason list."""
    filt: dict[str, int] = {}
    post: dict[str, int] = {}
    for reasons, n in counts.items():
        for r in reasons:
            filt[r] = filt.get(r, 0) + n
        helpful = any(r.startswith(PREEMPTABLE_PREFIXES) for r in reasons)
        verdict = "No preemption victims found for incoming pod" if helpful else "Preemption is not helpful for scheduling"
        post[verdict] = post.get(verdict, 0) + n
    text = ", ".join(sorted(f"{n} {r}" for r, n in filt.items()))
    msg = f"0/{num_nodes} nodes are available" + (f": {text}." if text else ".")
    if post:
        msg += f" preemption: 0/{num_nodes} nodes are available: " + ", ".join(sorted(f"{n} {r}" for r, n in post.items())) + "."
    return msg


#: the status kube-scheduler gives every node a PreFilterResult left out (findNodesThatFitPod)
PREFILTER_ABSENT = "node(s) didn't satisfy plugin(s) [NodeAffinity]"

#: which kube-scheduler Filter plugin gives each reason filter_node returns (by its start)
_PLUGIN_OF = (("node(s) were unschedulable", "NodeUnschedulable"), ("node(s) had untolerated taint", "TaintToleration"),
              ("node(s) didn't match Pod's node affinity", "NodeAffinity"), (PREFILTER_ABSENT, "NodeAffinity"),
              ("Insufficient ", "NodeResourcesFit"), ("Too many pods", "NodeResourcesFit"),
              ("resourceclaim not available on the node", "DynamicResources"),
              ("cannot allocate all claims", "DynamicResources"), ("error: ", "DynamicResources"))


def plugin_of(reason: str) -> str:
    """The Filter plugin behind one of filter_node's reasons ("" for a reason it does not give)."""
    return next((plugin for start, plugin in _PLUGIN_OF if reason.startswith(start)), "")


def prefilter_node_names(pod: dict) -> set[str] | None:
    """The nodes NodeAffinity's PreFilter restricts a pod to, or None for every node.

    As kube-scheduler: only required node affinity terms whose matchFields name `metadata.name`
    with operator In restrict (a DaemonSet pod's term, or a policy pinning a pod to a node); the
    values of several such fields in one term intersect, the terms are ORed (their sets united),
    and one term without such a field lifts the restriction. nodeSelector never restricts."""
    req = (((pod.get("spec") or {}).get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution") or {}
    terms = req.get("nodeSelectorTerms") or []
    if not terms:
        return None
    out: set[str] = set()
    for term in terms:
        names: set[str] | None = None
        for f in term.get("matchFields") or []:
            if f.get("key") == "metadata.name" and f.get("operator") == "In":
                vals = set(f.get("values") or [])
                names = vals if names is None else names & vals
        if names is None:
            return None
        out |= names
    return out


def single_node(selector: dict | None) -> str | None:
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


def extended_requests(pod: dict, req: dict[str, Fraction], ext_classes: dict[str, str]) -> list[ExtRequest]:
    """(container index, container name, resource, count, request name) for every extended
    resource a DeviceClass backs (extendedResourceName); request names `container-<i>-request-<j>`."""
    out: list[ExtRequest] = []
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


def extended_claim(pod: dict, ext: list[ExtRequest], ext_classes: dict[str, str]) -> dict:
    """The in-memory claim DRAExtendedResource allocates for extended resources no device plugin serves."""
    requests = [{"name": e[4], "exactly": {"deviceClassName": ext_classes[e[2]], "allocationMode": "ExactCount",
                                           "count": e[3]}} for e in ext]
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": EXTENDED_RESOURCES_KEY, "namespace": meta(pod)["namespace"], "uid": "",
                         "annotations": {EXTENDED_CLAIM_ANNOTATION: "true"}},
            "spec": {"devices": {"requests": requests}}}


@dataclass
class FilterInputs:
    """What the filters need to know about one pod (computed once per attempt)."""

    pod: dict
    req: dict[str, Fraction]
    claims: list[dict]  # every claim of the pod, as PreFilter saw it
    allocated: list[dict]  # those already allocated
    pending: list[dict]  # those the allocator must allocate
    ext_classes: dict[str, str]
    ext: list[ExtRequest]
    #: does any claim have a firstAvailable request (else scoring never reads the allocations)
    first_available: bool = False
    #: the requested resource names, sorted (NodeResourcesFit reports them in this order), and
    #: those of them that are non-zero extended resources no DeviceClass backs: per pod, not per node
    req_names: list[str] = field(init=False, repr=False)
    unbacked_extended: list[str] = field(init=False, repr=False)
    #: has the pod a nodeSelector or a required node affinity (else NodeAffinity passes every node)
    node_affinity: bool = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.req_names = sorted(self.req)
        self.unbacked_extended = [r for r in self.req_names
                                  if self.req[r] and is_extended(r) and r not in self.ext_classes]
        spec = self.pod.get("spec") or {}
        self.node_affinity = bool(spec.get("nodeSelector")) or (
            ((spec.get("affinity") or {}).get("nodeAffinity") or {})
            .get("requiredDuringSchedulingIgnoredDuringExecution") is not None)


class NodeResources:
    """Per-node requests of bound pods (NodeResourcesFit's view) and the log of changed nodes.

    `log` lists the nodes whose state changed since the last cluster-wide change, each with what
    happened: "bind" (a pod and its devices were added), "pod" (a bound pod went: its cpu, memory
    and pod slot are free), "claim" (a claim on it was deallocated: devices are free). Consumers
    remember how far they have read it (their `log_pos`)."""

    def __init__(self) -> None:
        self.bound: dict[str, tuple[str, dict[str, Fraction], tuple[int, int]]] = {}  # uid -> (node, req, nonzero)
        self.usage: dict[str, dict[str, Fraction]] = {}
        self.nonzero: dict[str, tuple[int, int]] = {}  # node -> sum of kube-scheduler's nonzero cpu/memory
        self.pods_on: dict[str, int] = {}
        self.allocatable: dict[str, dict[str, Fraction]] = {}  # node -> parsed status.allocatable
        #: node -> (allocatable, used) cpu/memory as scoring counts them (milli-CPU, bytes); an
        #: entry goes when the node's pods change, all go with `allocatable`
        self.cpu_mem: dict[str, tuple[tuple[int, int], tuple[int, int]]] = {}
        self.log: list[tuple[str, str]] = []

    def allocatable_of(self, node: dict) -> dict[str, Fraction]:
        name = node["metadata"]["name"]
        alloc = self.allocatable.get(name)
        if alloc is None:
            alloc = self.allocatable[name] = node_allocatable(node)
        return alloc

    def account(self, uid: str, node: str, req: dict[str, Fraction], nonzero: tuple[int, int]) -> None:
        self.bound[uid] = (node, req, nonzero)
        self.cpu_mem.pop(node, None)
        use = self.usage.setdefault(node, {})
        for k, v in req.items():
            use[k] = use.get(k, 0) + v
        self.pods_on[node] = self.pods_on.get(node, 0) + 1
        cpu, mem = self.nonzero.get(node, (0, 0))
        self.nonzero[node] = (cpu + nonzero[0], mem + nonzero[1])
        self.log.append((node, "bind"))

    def note(self, node: str, what: str) -> None:
        self.log.append((node, what))

    def unaccount(self, uid: str) -> str:
        node, req, nonzero = self.bound.pop(uid)
        self.cpu_mem.pop(node, None)
        use = self.usage.get(node, {})
        for k, v in req.items():
            use[k] = use.get(k, 0) - v
        self.pods_on[node] = self.pods_on.get(node, 1) - 1
        cpu, mem = self.nonzero.get(node, (0, 0))
        self.nonzero[node] = (cpu - nonzero[0], mem - nonzero[1])
        self.log.append((node, "pod"))
        return node


def filter_node(inp: FilterInputs, node: dict, res: NodeResources, dra: DraState,
                dra_results: dict[str, FilterResult] | None = None, dra_twins: TwinTable | None = None) -> FilterResult:
    """Run the filter plugins for one node; reasons empty means the node fits (the Outcome then
    holds the allocations for the pod's pending claims, then for its extended-resource claim).

    `dra_results`: DynamicResources' verdicts per node for pods with the same pending claims
    (and no extended resources), still valid for this node; used and filled in. `dra_twins`: the
    twin outcomes for those claims (labkit.allocator.twins), used and filled in too."""
    pod = inp.pod
    if (node.get("spec") or {}).get("unschedulable"):
        return ["node(s) were unschedulable"], None, None
    taint = untolerated_taint(pod, node)
    if taint is not None:
        value = f"={taint['value']}" if taint.get("value") else ""
        return ["node(s) had untolerated taint(s)"], f"untolerated taint {taint.get('key')}{value}:{taint.get('effect')}", None
    if inp.node_affinity and not pod_matches_node_affinity(pod, node):
        return AFFINITY_MISMATCH
    name = node["metadata"]["name"]
    alloc = res.allocatable_of(node)
    reasons = insufficient(inp.req, res.usage.get(name, {}), alloc, res.pods_on.get(name, 0), inp.req_names)
    for r in inp.unbacked_extended:
        if r not in alloc:
            reasons.append(f"Insufficient {r}")
    if reasons:
        return reasons, None, None
    for c in inp.allocated:
        if not node_selector_matches(node, ((c.get("status") or {}).get("allocation") or {}).get("nodeSelector")):
            return ["resourceclaim not available on the node"], None, None
    # extended resources the node does not advertise (no device plugin) are served by DRA
    dra_ext = [e for e in inp.ext if e[2] not in alloc]
    ext_claim = extended_claim(pod, dra_ext, inp.ext_classes) if dra_ext else None
    claims = inp.pending + ([ext_claim] if ext_claim else [])
    if not claims:
        return [], None, None
    if dra_results is not None and ext_claim is None:
        known = dra_results.get(name)
        if known is None:
            known = _allocate(node, claims, None, dra, dra_twins)
            if not (known[0] and known[0][0].startswith("error: ")):
                dra_results[name] = known
        return known
    return _allocate(node, claims, ext_claim, dra)


def _allocate(node: dict, claims: list[dict], ext_claim: dict | None, dra: DraState,
              twins: TwinTable | None = None) -> FilterResult:
    outcome = dra.allocate(node, claims, twins)
    if outcome.status == "allocated":
        return [], outcome, ext_claim
    if outcome.status == "error":
        return [f"error: {outcome.error}"], outcome, None
    return ["cannot allocate all claims"], outcome, None
