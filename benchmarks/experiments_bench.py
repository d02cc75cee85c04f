"""labkit.experiments at fleet scale (run by hand; prints figures, not a test).

    python benchmarks/experiments_bench.py                       # all parts
    python benchmarks/experiments_bench.py --part big --pods 10000 --policy whole-gpu
    python benchmarks/experiments_bench.py --part sizes --sizes 100,1000,5000 --size-pods 2000

Parts:
  big    the fleet-1000 profile (1,000 DGX nodes, 8,000 GPUs) with a synthetic trace of --pods items
         (default 10,000) and a tqdm bar: sim bring-up time, run time, pods scheduled per second.
  sizes  the same trace (--size-pods items) on fleets of 100 / 1,000 / 5,000 dgx-a100 nodes: how
         bring-up and run time grow with fleet size.
Wall-clock figures depend on the machine's load; CPU time (process_time) is printed beside them.
"""

from __future__ import annotations

import argparse
import sys
import time

from labkit.experiments import generate, run_policy


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
    ap.add_argument("--part", choices=["all", "big", "sizes"], default="all")
    ap.add_argument("--policy", default="whole-gpu", help="comma-separated policies (default whole-gpu)")
    ap.add_argument("--pods", type=int, default=10_000)
    ap.add_argument("--rate", type=float, default=120.0, help="arrivals per minute for the big run (default 120)")
    ap.add_argument("--sizes", default="100,1000,5000")
    ap.add_argument("--size-pods", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
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
