"""`Attempt`: the outcome of scheduling one pod, what the scheduler's plugins hand each other and
what explain() shows."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from functools import partial
from itertools import compress
from operator import is_not, itemgetter
from typing import Any

from labkit.sim.scoring import ScoreRow, weighted_rows

#: a kept FilterResult's reasons and detail (allocator Outcome or text; None: none)
_REASONS, _DETAIL = itemgetter(0), itemgetter(1)
_IS_SOMETHING = partial(is_not, None)


@dataclass
class Attempt:
    """The outcome of scheduling one pod (kept for explain())."""

    node: str | None = None
    prefilter: str | None = None  # PreEnqueue/PreFilter message: no node was tried
    stage: str = ""  # the plugin and extension point that gave `prefilter` ("DynamicResources PreFilter")
    # node -> reasons it failed, and node -> allocator Outcome or a detail string: the properties
    # per_node and explanations, which read the Filter stage's verdicts in walk order on first use
    _per_node: dict[str, list[str]] = field(default_factory=dict, repr=False)
    _explanations: dict[str, Any] = field(default_factory=dict, repr=False)
    #: the Filter stage's verdicts not read into them yet, by runs of consecutive nodes: [the
    #: scheduler's node names, the run's first index, its length, its FilterResults as a list, or
    #: one FilterResult (a tuple) that every node of the run got]. The names list is shared, not
    #: copied (the scheduler replaces it, never changes it), so a kept attempt costs a pointer per
    #: rejected node at most, and nothing per node for a run of one verdict (the nodes a pod
    #: pinned to one rack by a nodeSelector misses: thousands per pod, see Scheduler._walk)
    walked: list[list[Any]] = field(default_factory=list, repr=False)
    allocations: dict[str, dict] = field(default_factory=dict)  # "ns/claim" -> AllocationResult
    claims: list[dict] = field(default_factory=list)  # the pod's claims as seen
    error: str | None = None
    ext_claim: dict | None = None  # in-memory claim for DRA-backed extended resources (DRAExtendedResource)
    ext_mappings: list[dict] = field(default_factory=list)
    gated: bool = False  # PreEnqueue: no status change, like kube-scheduler
    num_nodes: int = 0
    message: str = ""
    shape: str | None = None  # the pod's signature when it reached the Filter stage
    score_nodes: list[str] = field(default_factory=list, repr=False)  # the scored nodes, in walk order
    score_rows: list[ScoreRow] = field(default_factory=list, repr=False)
    _counts: Counter[tuple[str, ...]] | None = field(default=None, repr=False)  # reason_counts(), once worked out

    @property
    def per_node(self) -> dict[str, list[str]]:
        """Node -> the reasons it failed (the nodes the Filter stage rejected, in walk order)."""
        if self.walked:
            self._read_walked()
        return self._per_node

    @per_node.setter
    def per_node(self, value: dict[str, list[str]]) -> None:
        self._read_walked()
        self._per_node, self._counts = value, None

    def reason_counts(self) -> Counter[tuple[str, ...]]:
        """How many nodes failed with each distinct reason list (per_node's), worked out without
        building per_node: a pod that fits nowhere walked every node, and nodes in the same state
        share one list object, so they are told apart by identity first (in C)."""
        if self._counts is None:
            by_id: Counter[int] = Counter(map(id, self._per_node.values()))
            lists = {id(r): r for r in self._per_node.values()}
            for _, _, count, results in self.walked:
                if isinstance(results, tuple):  # one verdict for the whole run
                    by_id[id(results[0])] += count
                    lists[id(results[0])] = results[0]
                    continue
                reasons = list(map(_REASONS, results))
                by_id.update(map(id, reasons))
                lists.update(zip(map(id, reasons), reasons))
            counts: Counter[tuple[str, ...]] = Counter()
            for i, n in by_id.items():
                counts[tuple(lists[i])] += n
            self._counts = counts
        return self._counts

    @property
    def explanations(self) -> dict[str, Any]:
        """Node -> the allocator Outcome (or a detail string) of a rejected node, where there is one."""
        if self.walked:
            self._read_walked()
        return self._explanations

    @explanations.setter
    def explanations(self, value: dict[str, Any]) -> None:
        self._read_walked()
        self._explanations = value

    def _read_walked(self) -> None:
        """Read the kept verdicts into per_node and explanations: done on demand, because a pod
        that found a node never needs the reasons of the hundreds of nodes its walk passed."""
        walked, self.walked = self.walked, []
        for all_names, lo, count, results in walked:
            names = all_names[lo:lo + count]
            if isinstance(results, tuple):  # one verdict for the whole run
                results = [results] * count
            self._per_node.update(zip(names, map(_REASONS, results)))
            details = list(map(_DETAIL, results))
            self._explanations.update(compress(zip(names, details), map(_IS_SOMETHING, details)))

    @property
    def scores(self) -> dict[str, dict[str, int]]:
        """node -> plugin -> weighted score (and "total"), for the scored nodes."""
        return dict(zip(self.score_nodes, weighted_rows(self.score_rows), strict=True))

    def again(self, claims: list[dict]) -> Attempt:
        """The same failure for another pod of the same shape (nothing changed in between)."""
        return Attempt(_per_node=self.per_node, _explanations=self.explanations, claims=claims,
                       num_nodes=self.num_nodes, message=self.message, shape=self.shape)
