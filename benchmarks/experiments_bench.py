"""labkit.experiments at fleet scale (run by hand; prints figures, not a test).

    python benchmarks/experiments_bench.py                       # all parts
    python benchmarks/experiments_bench.py --part big --pods 10000 --policy whole-gpu
    python benchmarks/experiments_bench.py --part sizes --sizes 100,1000,5000 --size-pods 2000
    python benchmarks/experiments_bench.py --part sweep --workers 2        # speed-up of `experiment sweep`
    python benchmarks/experiments_bench.py --part full                     # the full-size experiment
    python benchmarks/experiments_bench.py --part full --scale 0.1         # a labelled 1/10 subset

Parts:
  big    the fleet-1000 profile (1,000 DGX nodes, 8,000 GPUs) with a synthetic trace of --pods items
         (default 10,000) and a tqdm bar: sim bring-up time, run time, pods scheduled per second.
  sizes  the same trace (--size-pods items) on fleets of 100 / 1,000 / 5,000 dgx-a100 nodes: how
         bring-up and run time grow with fleet size.
  sweep  a grid of --sweep-policies x seeds 0..--sweep-seeds-1 on exp-small (synthetic trace of
         --sweep-pods items) run serially in this process, then in --workers local processes, then
         (with the dask extra installed) on a local Dask cluster of --workers processes: wall time,
         speed-up over serial, overhead per cell = (wall x workers - serial wall) / cells, and a
         check that every engine's simulated figures equal the serial ones.
  full   every policy (--sweep-policies) on the Alibaba-shaped trace (8,152 rows x --scale) and fleet
         (1,213 nodes / 6,212 GPUs x --scale), as `labkit experiment sweep --traces alibaba-shape:N
         --fleets alibaba-shape:SCALE` runs it, in --workers processes: the per-policy table and the
         total. Scale 1 is the full-size experiment (the same as `labkit experiment sweep --traces
         alibaba-shape --fleets alibaba-shape`); a smaller scale is a subset, labelled as such.
         Each policy's row is printed and appended to --out as soon as it finishes; a rerun with
         the same --out skips the policies already there (an interrupted run loses only the
         policies still running) and the final table is assembled from the file.
Wall-clock figures depend on the machine's load; CPU time (process_time) is printed beside them.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from labkit.experiments import POLICIES, generate, run_policy
from labkit.experiments.alibaba import SHAPE_PODS
from labkit.experiments.metrics import SUMMARY_KEYS, SummaryTable
from labkit.experiments.sweep import Cell, Options, RowLog, SweepResult, make_grid, run_logged, run_sweep


def fleet(nodes: int) -> dict:
    return {"name": f"bench-{nodes}", "kubernetesVersion": "1.37",
            "nodes": [{"namePrefix": "a100-", "count": nodes, "nodeProfile": "dgx-a100"}]}


def timed_run(trace, profile, policy: str, progress: bool) -> dict:  # noqa: ANN001
    w0, c0 = time.perf_counter(), time.process_time()
    run = run_policy(trace, profile, policy, progress=progress)
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    s = run.summary
    return {"policy": policy, "pods": s["pods"], "placed": s["placed"], "wall_s": wall, "cpu_s": cpu,
            "pods_per_s_wall": s["placed"] / wall, "pods_per_s_cpu": s["placed"] / cpu, "ticks": len(run.timeline),
            "mem_util_pct": s["mem_util_pct"], "gpus_busy_mean": s["gpus_busy_mean"], "gpus": run.fleet.gpu_count,
            "setup_s": s["setup_s"]}


def show(row: dict, label: str) -> None:
    print(f"{label:<22} {row['policy']:<11} pods {row['pods']:>6} placed {row['placed']:>6} GPUs {row['gpus']:>6}  "
          f"wall {row['wall_s']:8.1f} s (bring-up {row['setup_s']:6.1f} s)  cpu {row['cpu_s']:8.1f} s  "
          f"{row['pods_per_s_wall']:7.1f} pods/s (wall)  {row['pods_per_s_cpu']:7.1f} pods/s (cpu)  "
          f"ticks {row['ticks']:>5}  mem util {row['mem_util_pct']:5.1f}%  busy GPUs {row['gpus_busy_mean']:7.1f}",
          flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", choices=["all", "big", "sizes", "sweep", "full"], default="all",
                    help="all = big + sizes (sweep and full are run by name)")
    ap.add_argument("--policy", default="whole-gpu", help="comma-separated policies (default whole-gpu)")
    ap.add_argument("--pods", type=int, default=10_000)
    ap.add_argument("--rate", type=float, default=120.0, help="arrivals per minute for the big run (default 120)")
    ap.add_argument("--sizes", default="100,1000,5000")
    ap.add_argument("--size-pods", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workers", type=int, default=2, help="sweep/full: processes (default 2)")
    ap.add_argument("--sweep-policies", default=",".join(POLICIES))
    ap.add_argument("--sweep-seeds", type=int, default=2, help="sweep: seeds 0..N-1 (default 2)")
    ap.add_argument("--sweep-pods", type=int, default=300)
    ap.add_argument("--no-dask", action="store_true", help="sweep: skip the Dask engine")
    ap.add_argument("--scale", type=float, default=1.0, help="full: fraction of the full size (default 1)")
    ap.add_argument("--out", help="full: JSON-lines file of finished rows (default "
                    "test-artifacts/experiments-full-x<SCALE>-seed<SEED>.jsonl); policies already in it are skipped")
    ap.add_argument("--fresh", action="store_true", help="full: start --out afresh (rerun every policy)")
    args = ap.parse_args(argv)
    if args.part == "sweep":
        return sweep_part(args)
    if args.part == "full":
        return full_part(args)
    policies = [p for p in args.policy.split(",") if p]
    if args.part in ("all", "big"):
        trace = generate(args.pods, seed=args.seed, rate_per_min=args.rate)
        for pol in policies:
            show(timed_run(trace, "fleet-1000", pol, progress=True), "fleet-1000")
    if args.part in ("all", "sizes"):
        trace = generate(args.size_pods, seed=args.seed, rate_per_min=args.rate)
        rows: dict[str, list[tuple[int, float]]] = {}
        for n in (int(x) for x in args.sizes.split(",")):
            for pol in policies:
                row = timed_run(trace, fleet(n), pol, progress=False)
                show(row, f"{n} nodes")
                rows.setdefault(pol, []).append((n, row["cpu_s"]))
        for pol, points in rows.items():
            if len(points) > 1:
                print(f"{pol}: run CPU time grows as nodes^{growth_exponent(points):.2f} "
                      f"(least-squares fit of log cpu on log nodes; 0 = flat, 1 = linear)")
    return 0


def sweep_part(args: argparse.Namespace) -> int:
    opts = Options(pods=args.sweep_pods, rate=args.rate)
    cells = make_grid(args.sweep_policies.split(","), ["synthetic"], list(range(args.sweep_seeds)), ["exp-small"], opts)
    print(f"grid: {len(cells)} cells ({args.sweep_policies} x seeds 0-{args.sweep_seeds - 1} x synthetic "
          f"n={args.sweep_pods} x exp-small)", flush=True)
    c0 = time.process_time()
    serial = run_sweep(cells, opts, workers=1, progress=True)
    print(f"serial: {serial.wall_s:.1f} s wall, {time.process_time() - c0:.1f} s CPU "
          f"(load average {os.getloadavg()[0]:.1f})", flush=True)
    results = [serial]
    results.append(run_sweep(cells, opts, workers=args.workers, progress=True))
    if not args.no_dask:
        try:  # optional dependency (the dask extra)
            from distributed import LocalCluster
        except ImportError:
            print("dask: not installed (pip install 'dra-labkit[dask]'); skipped")
        else:
            t0 = time.perf_counter()
            with LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True,
                              dashboard_address=None) as cluster:
                up = time.perf_counter() - t0
                res = run_sweep(cells, opts, address=cluster.scheduler_address, progress=True)
            print(f"dask LocalCluster({args.workers} processes) start-up: {up:.1f} s (not in its wall time)")
            results.append(res)
    for res in results[1:]:
        same = res.sim_rows() == serial.sim_rows()
        print(f"{res.engine:<28} {res.wall_s:7.1f} s wall  speed-up x{serial.wall_s / res.wall_s:4.2f}  "
              f"overhead per cell {overhead_per_cell(res, serial):5.2f} s (wall), "
              f"{(res.cell_cpu_s - serial.cell_cpu_s) / len(res.rows):5.2f} s (CPU in the workers)  "
              f"figures equal to serial: {same}  (load average {os.getloadavg()[0]:.1f})")
        if not same:
            return 1
    return 0


def overhead_per_cell(res: SweepResult, serial: SweepResult) -> float:
    """What each cell cost beyond its share of the serial run: (wall x workers - serial wall) / cells."""
    return (res.wall_s * res.workers - serial.wall_s) / len(res.rows)


def full_part(args: argparse.Namespace) -> int:
    pods = max(1, round(SHAPE_PODS * args.scale))
    trace, fleet = (("alibaba-shape", "alibaba-shape") if args.scale == 1
                    else (f"alibaba-shape:{pods}", f"alibaba-shape:{args.scale:g}"))
    label = "FULL SIZE" if args.scale == 1 else f"SUBSET x{args.scale:g} of the full size"
    out = Path(args.out or f"test-artifacts/experiments-full-x{args.scale:g}-seed{args.seed}.jsonl")
    if args.fresh and out.exists():
        out.unlink()
    print(f"{label}: labkit experiment sweep --traces {trace} --fleets {fleet} --workers {args.workers}; "
          f"rows -> {out}", flush=True)
    opts = Options()
    cells = make_grid(args.sweep_policies.split(","), [trace], [args.seed], [fleet], opts)
    log = RowLog(out)
    keys = ("trace_items",) + tuple(k for k in SUMMARY_KEYS if k != "pods_per_s") + ("cpu_s",)
    kept = [c.policy for c in cells if log.key(c, opts) in log.done]
    if kept:
        print(f"kept from {out} (an earlier run; --fresh reruns them): {', '.join(kept)}", flush=True)

    def finished(cell: Cell, row: dict) -> None:
        print(f"done {cell.policy:<11} placed {row['placed']}/{row['pods']}  mem util {row['mem_util_pct']:.1f}%  "
              f"busy GPUs {row['gpus_busy_mean']:.1f}  wait p95 {row['wait_p95_s']:.0f} s  "
              f"frag {row['frag_pct_of_free']:.1f}% of free  wall {row['wall_s']:.1f} s  cpu {row['cpu_s']:.1f} s "
              f"(saved to {out})", flush=True)

    c0 = time.process_time()
    res, _ = run_logged(cells, opts, log, on_row=finished, workers=args.workers, progress=True)
    print(SummaryTable(res.rows, keys))
    print(f"{label}: {len(res.rows)} policies ({len(kept)} from the log) in {res.wall_s:.1f} s wall on "
          f"{res.engine} (runs: {res.cell_wall_s:.1f} s wall, {res.cell_cpu_s:.1f} s CPU summed; "
          f"this process {time.process_time() - c0:.1f} s CPU); rows in {out}")
    return 0


def growth_exponent(points: list[tuple[float, float]]) -> float:
    """Slope of log(y) against log(x): y ~ x^slope."""
    import math

    xs = [math.log(x) for x, _ in points]
    ys = [math.log(max(y, 1e-9)) for _, y in points]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    den = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / den if den else 0.0


if __name__ == "__main__":
    sys.exit(main())
