"""`Attempt`: the outcome of scheduling one pod, what the scheduler's plugins hand each other and
what explain() shows."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from labkit.sim.scoring import ScoreRow, weighted_rows


@dataclass
class Attempt:
    """The outcome of scheduling one pod (kept for explain())."""

    node: str | None = None
    prefilter: str | None = None  # PreEnqueue/PreFilter message: no node was tried
    stage: str = ""  # the plugin and extension point that gave `prefilter` ("DynamicResources PreFilter")
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
    shape: str | None = None  # the pod's signature when it reached the Filter stage
    score_nodes: list[str] = field(default_factory=list, repr=False)  # the scored nodes, in walk order
    score_rows: list[ScoreRow] = field(default_factory=list, repr=False)

    @property
    def scores(self) -> dict[str, dict[str, int]]:
        """node -> plugin -> weighted score (and "total"), for the scored nodes."""
        return dict(zip(self.score_nodes, weighted_rows(self.score_rows), strict=True))

    def again(self, claims: list[dict]) -> Attempt:
        """The same failure for another pod of the same shape (nothing changed in between)."""
        return Attempt(per_node=self.per_node, explanations=self.explanations, claims=claims,
                       num_nodes=self.num_nodes, message=self.message, shape=self.shape)
