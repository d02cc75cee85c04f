"""Sim scheduler benchmark (run by hand; prints figures, not a test).

    python benchmarks/sim_bench.py --part vs-local --nodes 16 --pods 128     # sim vs real kube-scheduler
    python benchmarks/sim_bench.py --part scaling                            # the scaling table
    python benchmarks/sim_bench.py --part scaling --sizes 100,1000 --pods 2000 --big-pods 0

Parts:
  vs-local  scheduler_perf's "SchedulingWithResourceClaimTemplate" shape: N nodes x 8 GPUs
            (dgx-a100), P pods that each get a one-GPU claim from a ResourceClaimTemplate, once
            plain and once with a CEL selector in the request. The same objects go to the sim and
            to the `local` backend (real kube-apiserver + kube-scheduler + kube-controller-manager);
            timed from the first apply until every pod is bound. The local backend runs one plugin
            process per node (LABKIT_LOCAL_MAX_NODES, default 32). Prints pods/s of both and the
            ratio (sim on wall time, like the real one; its CPU-time rate beside it).
  scaling   each row in a fresh child process (so its peak RSS is its own): a fleet of N dgx-a100
            nodes; "trace" = labkit.experiments' whole-gpu policy over a synthetic trace of P items
            (what benchmarks/experiments_bench.py runs: arrivals, durations, pods waiting for GPUs),
            "burst" = P one-GPU pods applied at once. Bring-up (building nodes and slices) is timed
            apart and not in pods/s. Prints pods/s on CPU time (median of --repeat runs), peak
            RSS, filter calls per pod, and the growth exponent of run time per placed pod vs nodes
            (slope of log(time/pod) over log(nodes), least squares; per pod because 100 nodes x 8
            GPUs hold only 800 of the burst's pods) and the spread of pods/s for each kind.
            `--fleet nvl72`: the nodes are GB200 NVL72 trays instead, 18 per rack (sizes rounded
            down to whole racks), one clique per rack, each tray publishing NVIDIA's
            compute-domain slice beside its GPUs and NICs:
    python benchmarks/sim_bench.py --part scaling --fleet nvl72 --sizes 1008,18000 --pods 5000 --big-pods 0
            `--kinds cd-trace` (NVL72 only): jobs of 1-18 trays arriving over time, each pod a whole
            tray (4 GPUs), all pods of a job in one rack (its clique), every multi-tray job with its
            own ComputeDomain (the pods' channel claims come from its ResourceClaimTemplate); a job
            starts once its pods run, and when it ends its pods and its domain are deleted. Counts
            as "placed" the pods of started jobs; checks that each job got one rack, each domain
            was Ready and nothing is left over at the end:
    python benchmarks/sim_bench.py --part scaling --fleet nvl72 --kinds cd-trace --sizes 1008,18000 --pods 5000 --big-pods 0
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
V1 = "resource.k8s.io/v1"
CEL = 'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("10Gi")) >= 0'


#: GB200 NVL72: 18 compute trays of 4 GPUs per rack, one NVLink domain (IMEX clique) per rack
RACK_TRAYS = 18


def fleet(nodes: int, name: str | None = None, kind: str = "dgx") -> dict[str, Any]:
    """`nodes` dgx-a100 nodes (8 GPUs each); or, kind "nvl72", nodes / 18 GB200 NVL72 racks of
    18 trays, each rack its own clique (the nvidia.com/gpu.clique label, as in the nvl72-two-racks
    profile), every tray with NVIDIA's compute-domain plugin (its ComputeDomain slice)."""
    if kind == "dgx":
        return {"name": name or f"simbench-{nodes}", "kubernetesVersion": "1.37",
                "nodes": [{"namePrefix": "gpu-", "count": nodes, "nodeProfile": "dgx-a100"}]}
    racks = max(1, nodes // RACK_TRAYS)
    width = len(str(racks - 1))
    return {"name": name or f"simbench-nvl72-{racks}", "kubernetesVersion": "1.37",
            "nodes": [{"namePrefix": f"rack-{r:0{width}d}-tray-", "count": RACK_TRAYS, "nodeProfile": "gb200-nvl72-tray",
                       "labels": {"nvidia.com/gpu.clique": f"5f0c9a3e-1d2b-4c6e-8a7f-{r:012x}.1"}}
                      for r in range(racks)]}


#: GPUs per node of each fleet kind (a burst places at most this many pods per node)
GPUS_PER_NODE = {"dgx": 8, "nvl72": 4}


def template_pods(pods: int, cel: str | None = None, prefix: str = "p") -> list[dict[str, Any]]:
    """One ResourceClaimTemplate (one GPU, optionally a CEL selector) and `pods` pods using it."""
    exactly: dict[str, Any] = {"deviceClassName": "gpu.nvidia.com"}
    if cel:
        exactly["selectors"] = [{"cel": {"expression": cel}}]
    objs: list[dict[str, Any]] = [{
        "apiVersion": V1, "kind": "ResourceClaimTemplate", "metadata": {"name": f"{prefix}-gpu"},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}}}]
    objs += [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"{prefix}-{i:05d}"},
              "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}],
                       "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": f"{prefix}-gpu"}]}}
             for i in range(pods)]
    return objs


def _bound(cluster: Any, prefix: str) -> int:
    return sum(1 for p in cluster.list("Pod", "default")
               if p["metadata"]["name"].startswith(prefix + "-") and (p.get("spec") or {}).get("nodeName"))


def run_burst(cluster: Any, pods: int, cel: str | None, prefix: str, poll: float | None) -> dict[str, float]:
    """Apply the pods and wait until all are bound; wall and CPU time of this process."""
    objs = template_pods(pods, cel, prefix)
    w0, c0 = time.perf_counter(), time.process_time()
    cluster.apply(objs)
    if poll is None:  # the sim: run to quiescence
        cluster.wait()
    else:
        deadline = time.monotonic() + max(600.0, pods * 2.0)
        while _bound(cluster, prefix) < pods and time.monotonic() < deadline:
            time.sleep(poll)
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    return {"wall_s": wall, "cpu_s": cpu, "bound": _bound(cluster, prefix)}


# ---- part vs-local ------------------------------------------------------------------------------

def vs_local(nodes: int, pods: int) -> None:
    from labkit.cluster import connect

    prof = fleet(nodes, f"simbench-local-{nodes}")
    rows = []
    for variant, cel in (("plain", None), ("cel", CEL)):
        sim = connect("sim", prof, progress=False, validate=False)
        s = run_burst(sim, pods, cel, f"s{variant}", None)
        sim.down()
        rows.append((variant, s))
    print(f"local: starting {nodes} nodes (real kube-apiserver, kube-scheduler, kube-controller-manager) ...",
          flush=True)
    local = connect("local", prof, progress=False, reuse=False)
    try:
        for i, (variant, cel) in enumerate((("plain", None), ("cel", CEL))):
            r = run_burst(local, pods, cel, f"l{variant}", 0.2)
            s = rows[i][1]
            sim_wall, sim_cpu = pods / s["wall_s"], pods / s["cpu_s"]
            real = r["bound"] / r["wall_s"]
            print(f"{nodes:>5} nodes x 8 GPUs  {pods:>5} pods  {variant:<5}  sim {sim_wall:8.1f} pods/s wall "
                  f"({sim_cpu:8.1f} cpu, bound {s['bound']})   real kube-scheduler {real:7.1f} pods/s "
                  f"(bound {r['bound']})   sim/real {sim_wall / real:6.1f}x", flush=True)
            for p in local.list("Pod", "default"):
                local.delete("Pod", p["metadata"]["name"])
            local.delete("ResourceClaimTemplate", f"l{variant}-gpu")
            time.sleep(2.0)  # let the claims go before the next round
    finally:
        local.down()


# ---- part scaling -------------------------------------------------------------------------------

def one(kind: str, nodes: int, pods: int, seed: int, fleet_kind: str = "dgx") -> dict[str, Any]:
    """One measurement in this process (the parent starts a child per row)."""
    from labkit.cluster import connect
    from labkit.experiments import generate, run_policy, runner
    from labkit.sim.engine import fewer_collections

    prof = fleet(nodes, kind=fleet_kind)
    if kind == "trace":
        trace = generate(pods, seed=seed, rate_per_min=120.0)
        bring_up = {"wall": 0.0, "cpu": 0.0}

        def timed_connect(*a: Any, **kw: Any) -> Any:  # bring-up, timed apart
            w, c = time.perf_counter(), time.process_time()
            try:
                return connect(*a, **kw)
            finally:
                bring_up["wall"] += time.perf_counter() - w
                bring_up["cpu"] += time.process_time() - c

        runner.connect = timed_connect
        w0, c0 = time.perf_counter(), time.process_time()
        run = run_policy(trace, prof, "whole-gpu", keep_cluster=True)
        wall, cpu = time.perf_counter() - w0, time.process_time() - c0
        sched = run.cluster.sim.scheduler
        out = {"wall_s": wall - bring_up["wall"], "cpu_s": cpu - bring_up["cpu"], "placed": run.summary["placed"],
               "setup_s": bring_up["cpu"]}
    elif kind == "cd-trace":
        if fleet_kind != "nvl72":
            raise SystemExit("--kinds cd-trace: ComputeDomains need --fleet nvl72")
        jobs = cd_jobs(pods, seed)
        c0 = time.process_time()
        cluster = connect("sim", prof, progress=False, validate=False)
        setup = time.process_time() - c0
        with fewer_collections():
            w0, c0 = time.perf_counter(), time.process_time()
            res = run_cd_trace(cluster, jobs)
            wall, cpu = time.perf_counter() - w0, time.process_time() - c0
        sched = cluster.sim.scheduler
        out = {"wall_s": wall, "cpu_s": cpu, "setup_s": setup, **res}
    else:
        c0 = time.process_time()
        cluster = connect("sim", prof, progress=False, validate=False)
        setup = time.process_time() - c0
        r = run_burst(cluster, min(pods, GPUS_PER_NODE[fleet_kind] * nodes), None, "p", None)  # every pod fits
        sched = cluster.sim.scheduler
        out = {"wall_s": r["wall_s"], "cpu_s": r["cpu_s"], "placed": r["bound"], "setup_s": setup}
    out["filter_calls"] = sched.filter_calls
    out["maxrss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return out


# ---- the NVL72 ComputeDomain trace ---------------------------------------------------------------

CLIQUE_LABEL = "nvidia.com/gpu.clique"
CD_LABEL = "resource.nvidia.com/computeDomain"
CD_DRIVER_NS = "dra-driver-nvidia-gpu"
#: trays per job (each tray: one pod with its 4 GPUs) and how often; every multi-tray job gets a ComputeDomain
JOB_TRAYS = ((1, 0.35), (2, 0.25), (4, 0.20), (8, 0.12), (16, 0.05), (18, 0.03))
TRAY_GPUS = "tray-gpus"


def cd_jobs(pods: int, seed: int, rate_per_min: float = 30.0, median_s: float = 1200.0) -> list[dict[str, Any]]:
    """Jobs of 1-18 trays (JOB_TRAYS) until `pods` pods (trays): Poisson arrivals, lognormal durations
    (median 20 min, sigma 0.7), seeded."""
    import random

    rng = random.Random(seed)
    sizes, weights = zip(*JOB_TRAYS, strict=True)
    jobs: list[dict[str, Any]] = []
    t = 0.0
    left = pods
    while left > 0:
        t += rng.expovariate(rate_per_min / 60.0)
        k = min(left, rng.choices(sizes, weights)[0])
        jobs.append({"name": f"j{len(jobs):05d}", "trays": k, "arrival": t,
                     "duration": min(86_400.0, rng.lognormvariate(math.log(median_s), 0.7))})
        left -= k
    return jobs


def cd_job_objects(job: dict[str, Any], clique: str) -> list[dict[str, Any]]:
    """A job's objects, as NVIDIA's ComputeDomain docs write them: a multi-tray job gets a
    ComputeDomain (numNodes = its trays) whose channel ResourceClaimTemplate every pod's claim
    names; each pod takes a whole tray's 4 GPUs (the shared template TRAY_GPUS); all pods of a
    job are pinned to one rack by its clique label (the sim has no inter-pod affinity)."""
    name, k = job["name"], job["trays"]
    objs: list[dict[str, Any]] = []
    claims = [{"name": "gpus", "resourceClaimTemplateName": TRAY_GPUS}]
    if k > 1:
        objs.append({"apiVersion": "resource.nvidia.com/v1beta1", "kind": "ComputeDomain",
                     "metadata": {"name": name},
                     "spec": {"numNodes": k, "channel": {"resourceClaimTemplate": {"name": f"{name}-channel"}}}})
        claims.append({"name": "channel", "resourceClaimTemplateName": f"{name}-channel"})
    objs += [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"{name}-{i:02d}", "labels": {"job": name}},
              "spec": {"nodeSelector": {CLIQUE_LABEL: clique}, "resourceClaims": claims,
                       "containers": [{"name": "w", "image": "registry.k8s.io/pause:3.10",
                                       "resources": {"claims": [{"name": c["name"]} for c in claims]}}]}}
             for i in range(k)]
    return objs


def run_cd_trace(cluster: Any, jobs: list[dict[str, Any]], tick: float = 10.0) -> dict[str, Any]:
    """The jobs on an NVL72 fleet, tick by tick (as labkit.experiments' runner): finished jobs
    are deleted (pods, then their ComputeDomain), arriving jobs wait in FIFO order for a rack
    with enough free trays (first fit), then the sim runs until nothing changes. A job starts
    once all its pods run (and its ComputeDomain is Ready). Returns counts and what is left
    over after the last job's cleanup."""
    import heapq

    racks: dict[str, list[str]] = {}
    for n in cluster.list("Node"):
        racks.setdefault(n["metadata"]["labels"].get(CLIQUE_LABEL, ""), []).append(n["metadata"]["name"])
    free = {c: len(trays) for c, trays in sorted(racks.items()) if c}
    cluster.apply([{"apiVersion": V1, "kind": "ResourceClaimTemplate", "metadata": {"name": TRAY_GPUS},
                    "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                        "deviceClassName": "gpu.nvidia.com", "allocationMode": "ExactCount", "count": 4}}]}}}}])
    waiting: list[dict[str, Any]] = []
    started: dict[str, tuple[dict[str, Any], str]] = {}  # job -> (job, clique), applied, not yet running
    running: list[tuple[float, str]] = []
    by_name = {j["name"]: j for j in jobs}
    out = {"jobs": len(jobs), "placed": 0, "jobs_started": 0, "jobs_one_rack": 0, "domains": 0, "domains_ready": 0}
    i, t = 0, 0.0
    while i < len(jobs) or waiting or started or running:
        done = False
        while running and running[0][0] <= t + 1e-9:
            _, name = heapq.heappop(running)
            job = by_name[name]
            for p in range(job["trays"]):
                cluster.delete("Pod", f"{name}-{p:02d}")
            if job["trays"] > 1:
                cluster.delete("ComputeDomain", name)
            free[job["clique"]] += job["trays"]
            done = True
        if done:
            cluster.wait()  # the domains' cleanup (node labels) before their trays are handed out again
        while i < len(jobs) and jobs[i]["arrival"] <= t + 1e-9:
            waiting.append(jobs[i])
            i += 1
        batch: list[dict[str, Any]] = []
        while waiting:
            job = waiting[0]
            clique = next((c for c, f in free.items() if f >= job["trays"]), None)
            if clique is None:
                break  # FIFO: the head waits, and everything behind it
            waiting.pop(0)
            free[clique] -= job["trays"]
            job["clique"] = clique
            batch += cd_job_objects(job, clique)
            started[job["name"]] = (job, clique)
        if batch:
            cluster.apply(batch)
        cluster.wait()
        for name, (job, clique) in list(started.items()):
            pods = [cluster.find("Pod", f"{name}-{p:02d}", "default") for p in range(job["trays"])]
            if not all(p and (p.get("status") or {}).get("phase") == "Running" for p in pods):
                continue
            del started[name]
            nodes = {p["spec"]["nodeName"] for p in pods}
            out["placed"] += job["trays"]
            out["jobs_started"] += 1
            out["jobs_one_rack"] += len(nodes) == job["trays"] and nodes <= set(racks[clique])
            if job["trays"] > 1:
                cd = cluster.find("ComputeDomain", name, "default") or {}
                out["domains"] += 1
                out["domains_ready"] += (cd.get("status") or {}).get("status") == "Ready"
            heapq.heappush(running, (t + job["duration"], name))
        if not (i < len(jobs) or waiting or started or running):
            break
        nxt = ([jobs[i]["arrival"]] if i < len(jobs) else []) + ([running[0][0]] if running else []) + \
            ([t + tick] if started else [])  # pods not running yet: look again next tick
        if not nxt:
            raise SystemExit(f"job {waiting[0]['name']} ({waiting[0]['trays']} trays) can never start")
        t = max(t + tick, math.ceil(min(nxt) / tick - 1e-9) * tick)
        cluster.move_clock_to(t)
    out["left_over"] = {
        "ComputeDomain": len(cluster.list("ComputeDomain")),
        "DaemonSet": len(cluster.list("DaemonSet", CD_DRIVER_NS)),
        "Pod": len(cluster.list("Pod")),
        "ResourceClaim": len(cluster.list("ResourceClaim")),
        "ResourceClaimTemplate": len(cluster.list("ResourceClaimTemplate")) - 1,  # TRAY_GPUS stays
        "labelled nodes": sum(1 for n in cluster.list("Node") if CD_LABEL in n["metadata"].get("labels", {})),
    }
    return out


def child(kind: str, nodes: int, pods: int, seed: int, fleet_kind: str = "dgx") -> dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, __file__, "--one", kind, str(nodes), str(pods), str(seed), fleet_kind],
                          capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise SystemExit(f"child {kind} {nodes} {pods} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def slope(xs: list[float], ys: list[float]) -> float:
    """Least-squares slope of log(y) over log(x)."""
    lx, ly = [math.log(x) for x in xs], [math.log(y) for y in ys]
    mx, my = statistics.fmean(lx), statistics.fmean(ly)
    den = sum((a - mx) ** 2 for a in lx)
    return sum((a - mx) * (b - my) for a, b in zip(lx, ly, strict=True)) / den if den else float("nan")


def scaling(sizes: list[int], pods: int, big_pods: int, kinds: list[str], repeat: int, seed: int,
            fleet_kind: str = "dgx") -> None:
    if fleet_kind == "nvl72":
        print(f"fleet: GB200 NVL72 racks of {RACK_TRAYS} trays x 4 GPUs, with ComputeDomain slices; "
              f"nodes rounded down to whole racks", flush=True)
        sizes = [max(1, n // RACK_TRAYS) * RACK_TRAYS for n in sizes]
    print(f"{'kind':<6} {'nodes':>6} {'pods':>6} {'placed':>6} {'bring-up cpu s':>14} {'run cpu s':>9} "
          f"{'pods/s cpu':>10} {'pods/s wall':>11} {'filters/pod':>11} {'peak RSS MB':>11}", flush=True)
    for kind in kinds:
        xs, ys = [], []
        jobs = [(n, pods) for n in sizes] + ([(1000, big_pods)] if big_pods else [])
        for n, p in jobs:
            runs = [child(kind, n, p, seed, fleet_kind) for _ in range(repeat)]
            cpu = statistics.median(r["cpu_s"] for r in runs)
            wall = statistics.median(r["wall_s"] for r in runs)
            r = runs[0]
            if p == pods:
                xs.append(n)
                ys.append(cpu / max(1, r["placed"]))  # per placed pod: 100 nodes hold only 800
            print(f"{kind:<6} {n:>6} {p:>6} {r['placed']:>6} {r['setup_s']:>14.1f} {cpu:>9.2f} "
                  f"{r['placed'] / cpu:>10.1f} {r['placed'] / wall:>11.1f} {r['filter_calls'] / max(1, r['placed']):>11.2f} "
                  f"{max(x['maxrss_mb'] for x in runs):>11.0f}", flush=True)
        if len(xs) >= 2:
            rates = [1 / y for y in ys]
            mid = (max(rates) + min(rates)) / 2
            print(f"{kind:<6} growth exponent of run CPU time per placed pod vs nodes ({pods} pods, "
                  f"{min(xs)}-{max(xs)} nodes): {slope(xs, ys):+.3f}  (0 = flat, 1 = linear); pods/s cpu "
                  f"{min(rates):.0f}-{max(rates):.0f} = {mid:.0f} +-{100 * (max(rates) - mid) / mid:.0f} %",
                  flush=True)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--one"]:
        kind, nodes, pods, seed = argv[1], int(argv[2]), int(argv[3]), int(argv[4])
        print(json.dumps(one(kind, nodes, pods, seed, argv[5] if len(argv) > 5 else "dgx")))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", choices=["all", "vs-local", "scaling"], default="all")
    ap.add_argument("--nodes", type=int, default=16, help="vs-local: nodes (default 16)")
    ap.add_argument("--pods", type=int, default=None, help="vs-local: pods (default 8 per node); scaling: pods per row (2000)")
    ap.add_argument("--sizes", default="100,500,1000,2000,5000")
    ap.add_argument("--big-pods", type=int, default=10_000, help="scaling: pods of the extra fleet-1000 row (0: none)")
    ap.add_argument("--kinds", default="trace,burst",
                    help="trace, burst; cd-trace (--fleet nvl72): multi-tray jobs with ComputeDomains")
    ap.add_argument("--fleet", choices=["dgx", "nvl72"], default="dgx",
                    help="scaling: dgx-a100 nodes (8 GPUs), or GB200 NVL72 racks (18 trays x 4 GPUs, ComputeDomains)")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    if args.part in ("all", "vs-local"):
        vs_local(args.nodes, args.pods or args.nodes * 8)
    if args.part in ("all", "scaling"):
        scaling([int(s) for s in args.sizes.split(",") if s], args.pods or 2000, args.big_pods,
                [k for k in args.kinds.split(",") if k], args.repeat, args.seed, args.fleet)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
