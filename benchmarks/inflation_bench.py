"""The ATC'23 FGD paper's workload-inflation experiment at full size (run by hand; prints figures).

    python benchmarks/inflation_bench.py                                  # default trace, seed 42, sim
    python benchmarks/inflation_bench.py --seeds 42-51 --no-sim           # the paper's 10 seeds, bookkeeping only
    python benchmarks/inflation_bench.py --traces default,cpu250,gpushare100,multigpu50,gpuspec33 --no-sim
    python benchmarks/inflation_bench.py --workers 2 --plot out.png

Every policy on the trace's 1,213 nodes / 6,212 GPUs, pods inflated to 130 % of the GPUs, as
`labkit experiment inflation` runs it; per trace and policy: unallocated GPUs at 130 % (ours and
the paper's), the gap, failed pods, CPU seconds (process_time of the runs) and wall seconds.
Wall-clock figures depend on the machine's load; CPU time is printed beside them.
"""

from __future__ import annotations

import argparse
import json
import time

from labkit.experiments.inflation import POLICIES, paper_figures, plot_inflation, run_all
from labkit.experiments.sweep import parse_seeds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--traces", default="default")
    ap.add_argument("--policies", default=",".join(POLICIES))
    ap.add_argument("--seeds", default="42")
    ap.add_argument("--every", type=int, default=1, help="1 node in N of each node group (default 1: all)")
    ap.add_argument("--workers", type=int, default=1, help="local processes (default 1)")
    ap.add_argument("--address", help="a Dask scheduler to run the cells on")
    ap.add_argument("--gpus", default="shares", choices=["shares", "whole", "mig"])
    ap.add_argument("--no-sim", action="store_true", help="the policies' bookkeeping only (no DRA objects)")
    ap.add_argument("--plot", help="figure of the first trace")
    ap.add_argument("--json", help="write every result here")
    a = ap.parse_args()
    seeds = tuple(parse_seeds(a.seeds))
    results = []
    started, cpu0 = time.perf_counter(), time.process_time()
    for trace in a.traces.split(","):
        res = run_all(trace, tuple(a.policies.split(",")), seeds=seeds, every=a.every, sim=not a.no_sim,
                      workers=None if a.address else a.workers, address=a.address, gpu_mode=a.gpus)
        res["paper"] = paper_figures(trace) if a.every == 1 and a.gpus == "shares" else None
        results.append(res)
        paper = res["paper"] or {}
        print(f"\n{trace}: {res['nodes']} nodes / {res['gpus']} GPUs, seeds {a.seeds}, sim {res['sim']}, "
              f"{res['wall_s']:.1f} s wall")
        print(f"{'policy':<15}{'unalloc GPUs':>13}{'sd':>7}{'paper':>8}{'gap':>8}{'alloc %':>9}{'failed':>8}{'cpu s':>8}"
              f"{'wall s':>8}")
        for name, r in sorted(res["policies"].items(), key=lambda kv: kv[1]["unallocated_gpus"]):
            ref = paper.get(name, {}).get("unallocated_gpus_at_130")
            gap = "" if ref is None else f"{r['unallocated_gpus'] - ref:+.1f}"
            print(f"{name:<15}{r['unallocated_gpus']:>13.1f}{r['unallocated_gpus_sd']:>7.1f}{'' if ref is None else f'{ref:.1f}':>8}{gap:>8}"
                  f"{r['alloc_pct_at_saturation']:>9.2f}{r['failed_pods']:>8.0f}{r['cpu_s']:>8.1f}{r['wall_s']:>8.1f}")
    print(f"\nall: {time.perf_counter() - started:.1f} s wall, {time.process_time() - cpu0:.1f} s CPU in this process "
          f"(workers' CPU is in the cpu s column)")
    if a.plot:
        plot_inflation(results[0], a.plot)
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(results, fh, indent=1)


if __name__ == "__main__":
    main()
