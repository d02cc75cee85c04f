"""Per-policy metrics: a timeline sampled at every tick and a summary row.

Timeline columns (one sample per tick, after the scheduler settled):
  t, alloc_mem_gib / need_mem_gib (GPU memory held by allocated devices vs what the running pods
  need), alloc_compute / need_compute (in GPUs; a MIG device counts g/7), gpus_busy (physical GPUs
  with any allocated device), pending, running, frag_gib (free memory no typical request can use,
  see fragmentation.py), free_gib, placed (pods bound at this tick) and wait_mean_s (their mean wait).
Summary: mean utilisation of allocated memory (time-average of need/alloc over samples with
anything allocated), mean busy GPUs, p50/p95 wait (bind time - arrival), pods never placed,
mean fragmentation (GiB and % of free memory).
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass, field

from labkit.output import Table

TIMELINE_KEYS = ("t", "alloc_mem_gib", "need_mem_gib", "alloc_compute", "need_compute", "gpus_busy",
                 "pending", "running", "frag_gib", "free_gib", "placed", "wait_mean_s")
SUMMARY_KEYS = ("policy", "pods", "placed", "never_placed", "mem_util_pct", "compute_util_pct", "gpus_busy_mean",
                "wait_p50_s", "wait_p95_s", "frag_gib_mean", "frag_pct_of_free", "sim_seconds", "wall_s",
                "pods_per_s", "setup_s")

#: measured on this machine, not simulated: left out of the notebook view of the table
WALL_CLOCK_KEYS = ("wall_s", "pods_per_s", "setup_s")


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in [0, 100]); nan for no values."""
    if not values:
        return math.nan
    s = sorted(values)
    k = max(1, math.ceil(q / 100 * len(s)))
    return s[k - 1]


def time_average(timeline: list[dict], num: str, den: str) -> float:
    """Mean of num/den over samples, weighted by the time until the next sample (den > 0 only)."""
    acc = weight = 0.0
    for a, b in zip(timeline, timeline[1:], strict=False):
        dt = b["t"] - a["t"]
        if a[den] > 1e-9 and dt > 0:
            acc += dt * a[num] / a[den]
            weight += dt
    return acc / weight if weight else math.nan


def time_mean(timeline: list[dict], key: str) -> float:
    acc = weight = 0.0
    for a, b in zip(timeline, timeline[1:], strict=False):
        dt = b["t"] - a["t"]
        acc += dt * a[key]
        weight += dt
    return acc / weight if weight else (timeline[0][key] if timeline else math.nan)


@dataclass
class PodRecord:
    name: str
    kind: str
    arrival: float
    start: float | None = None
    end: float | None = None
    node: str = ""
    devices: list[str] = field(default_factory=list)

    @property
    def wait(self) -> float | None:
        return None if self.start is None else max(0.0, self.start - self.arrival)


def summarize_run(policy: str, records: list[PodRecord], timeline: list[dict], wall_s: float) -> dict:
    waits = [r.wait for r in records if r.wait is not None]
    placed = len(waits)
    frag = time_mean(timeline, "frag_gib") if timeline else math.nan
    free = time_mean(timeline, "free_gib") if timeline else math.nan
    return {
        "policy": policy,
        "pods": len(records),
        "placed": placed,
        "never_placed": len(records) - placed,
        "mem_util_pct": 100 * time_average(timeline, "need_mem_gib", "alloc_mem_gib"),
        "compute_util_pct": 100 * time_average(timeline, "need_compute", "alloc_compute"),
        "gpus_busy_mean": time_mean(timeline, "gpus_busy") if timeline else math.nan,
        "wait_p50_s": percentile(waits, 50),
        "wait_p95_s": percentile(waits, 95),
        "frag_gib_mean": frag,
        "frag_pct_of_free": 100 * frag / free if free and free > 0 else math.nan,
        "sim_seconds": timeline[-1]["t"] if timeline else 0.0,
        "wall_s": wall_s,
        "pods_per_s": placed / wall_s if wall_s > 0 else math.nan,
    }


def _fmt(v: object) -> str:
    if isinstance(v, float):
        return "nan" if math.isnan(v) else f"{v:.1f}" if abs(v) >= 10 else f"{v:.2f}"
    return str(v)


class SummaryTable:
    """Rows of summary dicts; prints as a text table, renders as HTML in notebooks."""

    def __init__(self, rows: list[dict], keys: tuple[str, ...] = SUMMARY_KEYS) -> None:
        self.rows = rows
        self.keys = keys

    def __str__(self) -> str:
        cells = [[_fmt(r.get(k, "")) for k in self.keys] for r in self.rows]
        widths = [max([len(k)] + [len(c[i]) for c in cells]) for i, k in enumerate(self.keys)]
        lines = ["  ".join(k.ljust(w) if i == 0 else k.rjust(w) for i, (k, w) in enumerate(zip(self.keys, widths, strict=True)))]
        for c in cells:
            lines.append("  ".join(v.ljust(w) if i == 0 else v.rjust(w) for i, (v, w) in enumerate(zip(c, widths, strict=True))))
        return "\n".join(lines)

    __repr__ = __str__

    def table(self, keep: int = 1) -> Table:
        """The same rows for a terminal (labkit.output): names left, numbers right; ``keep``: the
        columns that name a run, repeated when the table is folded to the terminal's width."""
        return Table(list(self.keys), [[_fmt(r.get(k, "")) for k in self.keys] for r in self.rows],
                     right=range(keep, len(self.keys)))

    def _repr_html_(self) -> str:
        """The notebook view: fits a ~900 px notebook (headers wrap at the underscores, small type);
        the wall-clock columns, which change from run to run and machine to machine, are left to
        the text table (print(results.summary()))."""
        keys = [k for k in self.keys if k not in WALL_CLOCK_KEYS]
        head = "".join(f"<th style='white-space:normal;max-width:6.5em;text-align:right'>"
                       f"{html.escape(k.replace('_', ' '))}</th>" for k in keys)
        body = "".join("<tr>" + "".join(f"<td>{html.escape(_fmt(r.get(k, '')))}</td>" for k in keys) + "</tr>"
                       for r in self.rows)
        left = [k for k in self.keys if k in WALL_CLOCK_KEYS]
        note = (f"<div style='font-size:11px;color:#666'>not shown: {', '.join(left)} (wall clock of this "
                "machine): print(results.summary())</div>") if left else ""
        return (f"<table class='labkit-summary' style='font-size:12px;table-layout:auto'><thead><tr>{head}</tr>"
                f"</thead><tbody>{body}</tbody></table>{note}")
