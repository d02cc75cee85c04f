"""Per-feature coverage of generated scenarios, written to test-artifacts/ and printed at the end."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from tests.differential.harness import REPO

ARTIFACT = REPO / "test-artifacts" / "differential-coverage.json"
FEATURES = ["counters", "firstAvailable", "constraints", "taints", "taintRules", "tolerations", "capacity",
            "multi-allocatable", "adminAccess", "all", "incomplete-pool", "obsolete-slice", "allNodes",
            "nodeSelector", "in-use", "multi-claim", "config", "gate-off", "risky-cel", "invalid-pool",
            "per-device-node", "binding-conditions", "many-devices", "fractional", "gate-on"]


class Coverage:
    def __init__(self) -> None:
        self.scenarios = 0
        self.features: Counter[str] = Counter()
        self.outcomes: Counter[str] = Counter()
        self.agreement: Counter[str] = Counter()
        self.feature_outcomes: dict[str, Counter[str]] = {}

    def record(self, tags: set[str], oracle_status: str, diff_kind: str | None) -> None:
        self.scenarios += 1
        self.features.update(tags)
        self.outcomes[oracle_status] += 1
        for t in tags:
            self.feature_outcomes.setdefault(t, Counter())[oracle_status] += 1
        if diff_kind is not None:
            self.agreement[diff_kind or "agree"] += 1

    def to_dict(self) -> dict[str, Any]:
        return {"scenarios": self.scenarios, "outcomes": dict(self.outcomes),
                "comparison": dict(self.agreement),
                "features": {f: {"scenarios": self.features.get(f, 0),
                                 **dict(self.feature_outcomes.get(f, Counter()))}
                             for f in FEATURES}}

    def write(self, path: Path = ARTIFACT) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.to_dict(), indent=2) + "\n")
        return path

    def table(self) -> str:
        d = self.to_dict()
        lines = [f"differential coverage: {d['scenarios']} generated scenarios; oracle outcomes "
                 + ", ".join(f"{k} {v}" for k, v in sorted(d["outcomes"].items()))
                 + "; comparison " + (", ".join(f"{k} {v}" for k, v in sorted(d["comparison"].items()))
                                     or "not run (labkit allocate missing)"),
                 f"  {'feature':<20} {'scenarios':>9} {'allocated':>9} {'unsat':>7} {'error':>7}"]
        for f, row in d["features"].items():
            lines.append(f"  {f:<20} {row['scenarios']:>9} {row.get('allocated', 0):>9} "
                         f"{row.get('unsatisfiable', 0):>7} {row.get('error', 0):>7}")
        return "\n".join(lines)
