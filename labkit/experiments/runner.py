"""Run a trace through the sim under each policy; collect timelines and summaries.

Time moves in ticks (default 10 s): at each tick finished pods are deleted (their claims are
released by the sim's claim controller), arriving items become objects and are applied, the sim
runs until nothing changes (its scheduler + DRA allocator place what fits), and one metrics
sample is taken. Waits are therefore measured to the tick after the arrival (resolution = tick).
Idle stretches are skipped. Pods still Pending when nothing runs and nothing arrives any more
can never be placed: the run ends and counts them as never placed.
"""

from __future__ import annotations

import gc
import heapq
import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from labkit.cluster import connect
from labkit.errors import InputError, LabkitError
from labkit.experiments.fleet import GPU_DRIVER, Fleet, build_fleet, fleet_variant
from labkit.experiments.fragmentation import FragmentationMeter
from labkit.experiments.ledger import Ledger
from labkit.experiments.metrics import PodRecord, SummaryTable, summarize_run
from labkit.experiments.plots import plot_results
from labkit.experiments.policies import Context, Policy, PolicyError, PolicyFault, exc_line, get_policy
from labkit.experiments.traces import WorkItem, request_mix
from labkit.model.podutil import claim_name_for
from labkit.model.profiles import ClusterProfile
from labkit.sim.engine import fewer_collections


class ExperimentError(InputError, ValueError):
    """Bad experiment input (trace, fleet or policy); one line naming what and how to fix it."""


@dataclass
class PolicyRun:
    policy: str
    fleet: Fleet
    records: list[PodRecord]
    timeline: list[dict]
    summary: dict
    cluster: Any = field(default=None, repr=False)  # the SimCluster (kept when keep_clusters=True)


@dataclass
class Results:
    runs: list[PolicyRun]
    trace_name: str = ""
    fleet_name: str = ""

    def summary(self) -> SummaryTable:
        """One row per policy (renders as a table in notebooks, as text elsewhere)."""
        return SummaryTable([r.summary for r in self.runs])

    def plot(self, path: str | Path | None = None):  # noqa: ANN201 - matplotlib Figure
        return plot_results(self, path)

    def to_dict(self) -> dict:
        return {"trace": self.trace_name, "fleet": self.fleet_name,
                "summary": [r.summary for r in self.runs],
                "timelines": {r.policy: r.timeline for r in self.runs}}

    def __getitem__(self, policy: str) -> PolicyRun:
        for r in self.runs:
            if r.policy == policy:
                return r
        raise KeyError(f"no run for policy {policy!r}; have {', '.join(r.policy for r in self.runs)}")


def _devices(cluster: Any, pod: dict) -> tuple[list[str], list[tuple[str, list[str]]]]:
    """GPU devices the pod's claims got, and (claim name, devices) for named (non-template) claims."""
    ns = pod["metadata"].get("namespace", "default")
    devs: list[str] = []
    named = []
    for entry in pod["spec"].get("resourceClaims") or []:
        name, templated = claim_name_for(pod, entry)
        if not name:
            continue
        claim = cluster.find("ResourceClaim", name, ns)
        alloc = ((claim or {}).get("status") or {}).get("allocation") or {}
        got = [r["device"] for r in (alloc.get("devices") or {}).get("results") or [] if r.get("driver") == GPU_DRIVER]
        devs += got
        if not templated:
            named.append((name, got))
    return devs, named


@fewer_collections()  # the whole run, not each tick's sim run() alone (see labkit.sim.engine)
def run_policy(trace: list[WorkItem], profile: str | Path | dict | ClusterProfile, policy: str | Policy, *,
               tick: float = 10.0, seed: int = 0, validate: bool = False, progress: bool = False,
               keep_cluster: bool = False, max_ticks: int = 1_000_000, horizon: float | None = None) -> PolicyRun:
    """One policy on a fresh sim cluster of the fleet. `horizon` stops after that much sim time
    (pods still pending then count as not placed)."""
    pol = get_policy(policy)
    if tick <= 0:
        raise ExperimentError(f"tick={tick}: must be > 0 seconds")
    prof = fleet_variant(profile, pol.mig_mode)
    started = time.perf_counter()
    cluster = connect("sim", prof, seed=seed, validate=validate, progress=progress)
    setup = time.perf_counter() - started
    fleet = build_fleet(prof)
    ledger = Ledger(fleet)
    mix = request_mix(trace)
    items = sorted(trace, key=lambda i: (i.arrival, i.name))
    ctx = Context(fleet, ledger, mix, items=tuple(items), seed=seed)
    meter = FragmentationMeter(ledger, mix, pol.sharing)
    names = [i.name for i in items]
    if len(set(names)) != len(names):
        dup = next(n for n in names if names.count(n) > 1)
        raise ExperimentError(f"trace: item name {dup!r} appears twice; item names become pod names and must be unique")
    records = {i.name: PodRecord(i.name, i.kind, i.arrival) for i in items}
    by_name = {i.name: i for i in items}
    pending: dict[str, WorkItem] = {}
    running: list[tuple[float, str]] = []
    applied: set[tuple[str, str]] = set()
    timeline: list[dict] = []
    one_at_a_time = bool(getattr(pol, "one_at_a_time", False))
    bar = _bar(progress, len(items), pol.name)
    i = 0
    t = 0.0
    for _ in range(max_ticks):
        while running and running[0][0] <= t + 1e-9:
            _, name = heapq.heappop(running)
            cluster.delete("Pod", name)
            ledger.remove_pod(name)
            for kind, obj in pol.release(by_name[name], ctx):
                applied.discard((kind, obj))
                cluster.delete(kind, obj)
        placed = 0
        waited = 0.0

        def bind_scan(now: float) -> None:
            nonlocal placed, waited
            for name in list(pending):
                pod = cluster.find("Pod", name, "default")
                node = (pod or {}).get("spec", {}).get("nodeName")
                if not node:
                    continue
                item = pending.pop(name)
                devs, named = _devices(cluster, pod)
                for claim, got in named:
                    ctx.claim_devices[claim] = (node, got)
                rec = records[name]
                rec.start, rec.node, rec.devices = now, node, devs
                rec.end = now + item.duration
                ledger.add_pod(name, item, node, devs)
                heapq.heappush(running, (rec.end, name))
                placed += 1
                waited += now - rec.arrival

        batch: list[dict] = []
        while i < len(items) and items[i].arrival <= t + 1e-9:
            item = items[i]
            i += 1
            for obj in _checked(pol, item, ctx):
                key = (obj["kind"], obj["metadata"]["name"])
                if obj["kind"] == "Pod" or key not in applied:
                    applied.add(key)
                    batch.append(obj)
            pending[item.name] = item
            if one_at_a_time:  # the next decision sees this placement
                cluster.apply(batch)
                batch = []
                cluster.wait()
                bind_scan(t)
        if batch:
            cluster.apply(batch)
        cluster.wait()
        bind_scan(t)
        frag, free = meter.fleet()
        sample = {"t": t, **ledger.totals(), "pending": float(len(pending)), "running": float(len(running)),
                  "frag_gib": frag, "free_gib": free, "placed": float(placed),
                  "wait_mean_s": waited / placed if placed else 0.0}
        timeline.append(sample)
        if bar is not None:
            bar.update(placed)
        if (i >= len(items) and not running) or (horizon is not None and t >= horizon):
            break
        nxt = min(([items[i].arrival] if i < len(items) else []) + ([running[0][0]] if running else []))
        t = max(t + tick, math.ceil(nxt / tick - 1e-9) * tick)
        if horizon is not None:
            t = min(t, max(horizon, timeline[-1]["t"] + tick))
        # only the clock moves here (pods finish by deletion above): no extra controller rounds
        cluster.move_clock_to(t)
    else:
        raise ExperimentError(f"policy {pol.name}: gave up after {max_ticks} ticks; raise max_ticks or the tick")
    if bar is not None:
        bar.close()
    wall = time.perf_counter() - started
    recs = list(records.values())
    summary = summarize_run(pol.name, recs, timeline, wall)
    summary["setup_s"] = setup  # sim bring-up (nodes + ResourceSlices), included in wall_s
    return PolicyRun(pol.name, fleet, recs, timeline, summary, cluster if keep_cluster else None)


def collect_run_garbage() -> None:
    """Free a finished run's sim now. A run is one labkit.sim.engine.fewer_collections block: its
    objects are frozen while it runs and unfrozen at its end, but not collected; the next run's
    block would freeze the previous run's garbage cycles (its whole sim) again, so serial runs
    kept every finished sim (six policies at --workers 1 peaked at 4.7x one policy's memory).
    One full collection between runs costs a fraction of a second."""
    gc.collect()


def _checked(pol: Policy, item: WorkItem, ctx: Context) -> list[dict]:
    try:
        objs = pol.objects(item, ctx)
    except LabkitError:
        raise
    except Exception as exc:  # noqa: BLE001 - a user's policy: any error is reported in one line
        raise PolicyFault(f"policy {pol.name}: objects() failed on task {item.name}: {exc_line(exc)}") from None
    pods = [x for x in objs if isinstance(x, dict) and x.get("kind") == "Pod"]
    if len(pods) != 1 or (pods[0].get("metadata") or {}).get("name") != item.name:
        raise PolicyError(f"policy {pol.name}: objects({item.name}) must return exactly one Pod named {item.name!r} "
                          f"(got {len(pods)} Pods)")
    return objs


def _bar(progress: bool, total: int, desc: str) -> Any:
    if not progress:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=f"{desc}: pods placed", unit="pod")


def run_experiment(trace: list[WorkItem], fleet: str | Path | dict | ClusterProfile,
                   policies: str | Policy | Iterable[str | Policy] = ("whole-gpu", "shared"), *,
                   tick: float = 10.0, seed: int = 0, limit: int | None = None, validate: bool = False,
                   progress: bool = False, keep_clusters: bool = False, horizon: float | None = None,
                   on_run: Callable[[PolicyRun], None] | None = None) -> Results:
    """The same trace on the same fleet under each policy. Returns `Results` (.summary(), .plot())."""
    if isinstance(policies, str):
        policies = [p for p in policies.split(",") if p.strip()]
    elif not isinstance(policies, Iterable):
        policies = [policies]
    items = list(trace)[: limit] if limit is not None else list(trace)
    runs = []
    for p in policies:
        run = run_policy(items, fleet, p, tick=tick, seed=seed, validate=validate, progress=progress,
                         keep_cluster=keep_clusters, horizon=horizon)
        runs.append(run)
        collect_run_garbage()
        if on_run:
            on_run(run)
    fleet_name = fleet.name if isinstance(fleet, ClusterProfile) else str(fleet) if not isinstance(fleet, dict) else fleet.get("name", "")
    return Results(runs, fleet_name=fleet_name)
