"""Node scoring: which feasible node kube-scheduler 1.37's default profile prefers.

kube-scheduler scores every feasible node with its Score plugins, multiplies each plugin's
normalised score (0-100) by the plugin's weight and binds to the highest total. The sim does
the same with the plugins that decide the common cases:

=================================  ======  ==================================================
plugin                             weight  prefers
=================================  ======  ==================================================
TaintToleration                    3       fewer PreferNoSchedule taints the pod does not tolerate
NodeAffinity                       2       more matching preferredDuringScheduling terms (by weight)
NodeResourcesFit (LeastAllocated)  1       more free cpu/memory; a container without requests
                                           counts as 100m CPU and 200Mi memory, so empty nodes win
NodeResourcesBalancedAllocation    1       cpu and memory used in the same proportion (not for
                                           best-effort pods)
DynamicResources                   2       (1.35+) nodes where a claim gets an earlier
                                           ``firstAvailable`` alternative: 8 - index per request
=================================  ======  ==================================================

Not modelled: PodTopologySpread's default spreading of a workload's replicas, InterPodAffinity
and ImageLocality.

Which nodes are scored: below 100 nodes (:data:`SCORE_ALL_BELOW`) every feasible node. From 100
nodes on, kube-scheduler stops filtering once it has found ``numFeasibleNodesToFind`` feasible
nodes (labkit.sim.filters.num_feasible_nodes_to_find: max(5, 50 - nodes/125) percent of the
nodes, at least 100) and scores only those; each search starts where the previous one stopped
(``nextStartNodeIndex``), so successive pods see different parts of the fleet. The sim does the
same, walking the nodes in name order from that rotating index.

Ties: kube-scheduler picks one of the best nodes at random (reservoir sampling in selectHost);
the sim takes the first one in the order the nodes were filtered - by name in clusters under
100 nodes, by name from the rotating start index above - so runs stay reproducible.

The plugin scores that depend only on the pod's shape and one node's state are computed per
node (:func:`score_row`) and can be cached until that node changes; normalisation across the
scored nodes (:func:`weighted_rows`, :func:`totals`) is redone per pod.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from labkit.allocator.nodes import term_matches
from labkit.allocator.taints import tolerates
from labkit.api.features import normalize_version
from labkit.sim.resources import container_requests

__all__ = ["SCORE_ALL_BELOW", "Candidate", "ScoreRow", "best", "nonzero_requests", "prioritized_list_scoring",
           "score_row", "simple_total", "total_scores", "totals", "weighted_rows"]

MAX_SCORE = 100
SCORE_ALL_BELOW = 100  # kube-scheduler's minFeasibleNodesToFind
DEFAULT_MILLI_CPU = 100
DEFAULT_MEMORY = 200 * 1024 * 1024
FIRST_AVAILABLE_MAX = 8  # resourceapi.FirstAvailableDeviceRequestMaxSize
WEIGHTS = {"TaintToleration": 3, "NodeAffinity": 2, "NodeResourcesFit": 1,
           "NodeResourcesBalancedAllocation": 1, "DynamicResources": 2}


@dataclass
class Candidate:
    """A feasible node with what the scorers need."""

    name: str
    node: dict
    allocatable: tuple[int, int]  # milli-CPU, memory bytes
    nonzero_used: tuple[int, int]  # sum of the nonzero requests of the pods bound to it
    used: tuple[int, int]  # sum of their actual requests
    allocations: list[dict]  # AllocationResults for the pod's unallocated claims, in claim order


def _milli(v: Fraction | None) -> int:
    return math.ceil(v * 1000) if v else 0


def _bytes(v: Fraction | None) -> int:
    return math.ceil(v) if v else 0


def cpu_memory(req: dict[str, Fraction]) -> tuple[int, int]:
    return _milli(req.get("cpu")), _bytes(req.get("memory"))


def nonzero_requests(pod: dict) -> tuple[int, int]:
    """kube-scheduler's non-zero requests: a container without a cpu (memory) request counts
    100m (200Mi); summed over containers, at least the largest init container."""
    spec = pod.get("spec") or {}

    def of(c: dict) -> tuple[int, int]:
        req = container_requests(c)
        cpu = _milli(req["cpu"]) if "cpu" in req else DEFAULT_MILLI_CPU
        mem = _bytes(req["memory"]) if "memory" in req else DEFAULT_MEMORY
        return cpu, mem

    cpu = mem = 0
    for c in spec.get("containers") or []:
        a, b = of(c)
        cpu, mem = cpu + a, mem + b
    for c in spec.get("initContainers") or []:
        a, b = of(c)
        cpu, mem = max(cpu, a), max(mem, b)
    return cpu, mem


def least_allocated(requested: tuple[int, int], allocatable: tuple[int, int]) -> int:
    total = weights = 0
    for req, cap in zip(requested, allocatable, strict=True):
        if cap == 0:
            continue
        total += 0 if req > cap else (cap - req) * MAX_SCORE // cap
        weights += 1
    return total // weights if weights else 0


def _balance(requested: tuple[int, int], allocatable: tuple[int, int]) -> int:
    (cpu, mem), (cpu_cap, mem_cap) = requested, allocatable
    if not (cpu_cap and mem_cap):  # one fraction or none: no spread
        return MAX_SCORE
    std = abs(min(cpu / cpu_cap, 1.0) - min(mem / mem_cap, 1.0)) / 2
    return int((1 - std) * MAX_SCORE)


def balanced_allocation(pod_req: tuple[int, int], used: tuple[int, int], allocatable: tuple[int, int]) -> int:
    with_pod = _balance((used[0] + pod_req[0], used[1] + pod_req[1]), allocatable)
    without = _balance(used, allocatable)
    return MAX_SCORE // 2 + (MAX_SCORE // 2 + with_pod - without) // 2


def _intolerable_prefer_no_schedule(pod: dict, node: dict) -> int:
    taints = (node.get("spec") or {}).get("taints")
    if not taints:
        return 0
    tols = [t for t in (pod.get("spec") or {}).get("tolerations") or []
            if t.get("effect") in (None, "", "PreferNoSchedule")]
    return sum(1 for taint in taints
               if taint.get("effect") == "PreferNoSchedule" and not any(tolerates(t, taint) for t in tols))


def _preferred_affinity(pod: dict, node: dict) -> int:
    terms = ((((pod.get("spec") or {}).get("affinity") or {}).get("nodeAffinity") or {})
             .get("preferredDuringSchedulingIgnoredDuringExecution") or [])
    return sum(int(t.get("weight") or 0) for t in terms
               if term_matches(t.get("preference") or {}, node))


def prioritized_list(claims: list[dict], allocations: list[dict]) -> int:
    """DynamicResources' Score: for each firstAvailable request, 8 minus the chosen alternative's index."""
    score, pending = 0, iter(allocations)
    for claim in claims:
        allocation = (claim.get("status") or {}).get("allocation") or next(pending, None) or {}
        requests = ((claim.get("spec") or {}).get("devices") or {}).get("requests") or []
        if not any(req.get("firstAvailable") for req in requests):
            continue  # nothing to score (the allocation's results need not be read)
        chosen = {r.get("request", "") for r in (allocation.get("devices") or {}).get("results") or []
                  if "/" in r.get("request", "")}
        for req in requests:
            for i, sub in enumerate(req.get("firstAvailable") or []):
                if f"{req.get('name')}/{sub.get('name')}" in chosen:
                    score += FIRST_AVAILABLE_MAX - i
    return score


def prioritized_list_scoring(features: Any, kubernetes_version: str) -> bool:
    """DynamicResources scores firstAvailable choices from Kubernetes 1.35, with DRAPrioritizedList."""
    major, minor = (int(x) for x in normalize_version(kubernetes_version).split(".")[:2])
    return bool(getattr(features, "PrioritizedList", False)) and (major, minor) >= (1, 35)


def _normalize(scores: list[int], reverse: bool) -> list[int]:
    top = max(scores, default=0)
    if top == 0:
        return [MAX_SCORE] * len(scores) if reverse else scores
    out = [MAX_SCORE * s // top for s in scores]
    return [MAX_SCORE - s for s in out] if reverse else out


#: one node's raw plugin scores before normalisation: untolerated PreferNoSchedule taints,
#: matching preferred-affinity weight, LeastAllocated, BalancedAllocation (None for best-effort
#: pods), DynamicResources' firstAvailable score (None when not scored)
ScoreRow = tuple[int, int, int, int | None, int | None]


def score_row(pod: dict, claims: list[dict], c: Candidate, pod_nonzero: tuple[int, int], pod_req: tuple[int, int],
              *, prioritized_list_scoring: bool = True, first_available: bool = True) -> ScoreRow:
    """The raw scores of one candidate node (they depend on the pod and that node only).
    ``first_available`` False: no claim has a firstAvailable request (DynamicResources scores 0)."""
    least = least_allocated((c.nonzero_used[0] + pod_nonzero[0], c.nonzero_used[1] + pod_nonzero[1]), c.allocatable)
    balanced = balanced_allocation(pod_req, c.used, c.allocatable) if pod_req != (0, 0) else None
    plist = ((prioritized_list(claims, c.allocations) if first_available else 0)
             if prioritized_list_scoring and claims else None)
    return (_intolerable_prefer_no_schedule(pod, c.node), _preferred_affinity(pod, c.node), least, balanced, plist)


def _normalized_columns(rows: list[ScoreRow]) -> tuple[list[int], list[int], list[int] | None]:
    taint = _normalize([r[0] for r in rows], True)
    affinity = _normalize([r[1] for r in rows], False)
    plist = _normalize([r[4] or 0 for r in rows], False) if rows and rows[0][4] is not None else None
    return taint, affinity, plist


def simple_total(row: ScoreRow) -> int | None:
    """The row's weighted total when nothing needs normalising (no untolerated PreferNoSchedule
    taint, no preferred affinity, no firstAvailable score): :func:`totals` gives this value for
    every row when all rows are like that. None otherwise."""
    if row[0] or row[1] or row[4]:
        return None
    w = WEIGHTS
    return (w["TaintToleration"] * MAX_SCORE + w["NodeResourcesFit"] * row[2]
            + (w["NodeResourcesBalancedAllocation"] * row[3] if row[3] is not None else 0))


def totals(rows: list[ScoreRow]) -> list[int]:
    """Each node's weighted total over the scored nodes (normalised like kube-scheduler's NormalizeScore)."""
    w = WEIGHTS
    if not any(r[0] or r[1] or r[4] for r in rows):  # the common case: only the resource scores differ
        taint_all = w["TaintToleration"] * MAX_SCORE  # every node: no untolerated PreferNoSchedule taint
        fit, bal = w["NodeResourcesFit"], w["NodeResourcesBalancedAllocation"]
        return [taint_all + fit * r[2] + (bal * r[3] if r[3] is not None else 0) for r in rows]
    taint, affinity, plist = _normalized_columns(rows)
    out = []
    for i, r in enumerate(rows):
        t = w["TaintToleration"] * taint[i] + w["NodeAffinity"] * affinity[i] + w["NodeResourcesFit"] * r[2]
        if r[3] is not None:
            t += w["NodeResourcesBalancedAllocation"] * r[3]
        if plist is not None:
            t += w["DynamicResources"] * plist[i]
        out.append(t)
    return out


def weighted_rows(rows: list[ScoreRow]) -> list[dict[str, int]]:
    """Per node: each plugin's weighted score and the total (key "total")."""
    taint, affinity, plist = _normalized_columns(rows)
    out = []
    for i, r in enumerate(rows):
        row = {"TaintToleration": WEIGHTS["TaintToleration"] * taint[i],
               "NodeAffinity": WEIGHTS["NodeAffinity"] * affinity[i],
               "NodeResourcesFit": WEIGHTS["NodeResourcesFit"] * r[2]}
        if r[3] is not None:
            row["NodeResourcesBalancedAllocation"] = WEIGHTS["NodeResourcesBalancedAllocation"] * r[3]
        if plist is not None:
            row["DynamicResources"] = WEIGHTS["DynamicResources"] * plist[i]
        row["total"] = sum(row.values())
        out.append(row)
    return out


def total_scores(pod: dict, claims: list[dict], candidates: list[Candidate], pod_nonzero: tuple[int, int],
                 pod_req: tuple[int, int], *, prioritized_list_scoring: bool = True) -> dict[str, dict[str, int]]:
    """Per candidate: each plugin's weighted score and the total (key "total")."""
    rows = [score_row(pod, claims, c, pod_nonzero, pod_req, prioritized_list_scoring=prioritized_list_scoring)
            for c in candidates]
    return {c.name: row for c, row in zip(candidates, weighted_rows(rows), strict=True)}


def best(scores: dict[str, dict[str, int]], order: list[str]) -> str:
    """The highest total; among equals the first in ``order`` (kube-scheduler: a random one)."""
    return max(order, key=lambda name: (scores[name]["total"], -order.index(name)))
