"""`labkit experiment run|sweep|policies`: compare placement policies on traces and fleets (sim backend)."""

from __future__ import annotations

import argparse
import csv
import io
import json
import math
import sys

from labkit.errors import LabkitError
from labkit.output import color_enabled, terminal_width
from labkit.sim.profiles import profile_names

EXIT_OK, EXIT_BAD_INPUT = 0, 2


def register(subparsers: argparse._SubParsersAction) -> None:
    ex = subparsers.add_parser("experiment", help="utilisation / fragmentation experiments on the sim backend")
    sub = ex.add_subparsers(dest="experiment_command", metavar="ACTION")
    run = sub.add_parser("run", help="run a trace on a fleet under one or more policies")
    run.add_argument("--trace", default="synthetic",
                     help="synthetic[:PODS] | alibaba-sample | alibaba-shape[:PODS] | PATH to a cluster-trace-gpu-v2023 "
                          "pod list CSV")
    run.add_argument("--fleet", default="exp-small", help="cluster profile name or YAML path, or "
                     "alibaba-shape[:SCALE] (default: exp-small)").completer = _complete_fleets
    run.add_argument("--policy", default="whole-gpu,shared",
                     help="comma-separated policy names (default: whole-gpu,shared); see `labkit experiment policies`")
    run.add_argument("-o", "--output", default="table", choices=["table", "json", "csv"])
    run.add_argument("--plot", metavar="FILE", help="write a PNG/SVG/PDF figure of the timelines")
    run.add_argument("--seed", type=int, default=0, help="synthetic trace and sim seed (default 0)")
    run.add_argument("--limit", type=int, help="use only the first N items of the trace")
    run.add_argument("--pods", type=int, default=500, help="synthetic trace: number of items (default 500)")
    run.add_argument("--rate", type=float, default=6.0, help="synthetic trace: arrivals per minute (default 6)")
    run.add_argument("--tick", type=float, default=10.0, help="sim seconds per step (default 10)")
    run.add_argument("--timeline", action="store_true", help="json: include the per-tick timelines")
    run_bar = run.add_mutually_exclusive_group()
    run_bar.add_argument("--progress", dest="progress", action="store_true", default=None,
                         help="progress bar on stderr (default: when stderr is a terminal)")
    run_bar.add_argument("--no-progress", dest="progress", action="store_false")
    run.set_defaults(func=run_experiment_cmd)
    sw = sub.add_parser("sweep", help="run a grid (policies x traces x seeds x fleets) in parallel processes",
                        description="Every cell is one `experiment run` of one policy; cells run in --workers "
                                    "local processes, or on the Dask scheduler at --address.")
    sw.add_argument("--policies", default=None, help="comma-separated policy names (default: all built-in)")
    sw.add_argument("--traces", default="synthetic",
                    help="comma-separated trace specs, as `run --trace` takes them (default: synthetic)")
    sw.add_argument("--seeds", default="0", help="comma-separated seeds and ranges, e.g. 0-4,9 (default: 0)")
    sw.add_argument("--fleets", default="exp-small",
                    help="comma-separated fleets: profile names/paths or alibaba-shape[:SCALE] (default: exp-small)")
    sw.add_argument("--workers", type=int, default=None,
                    help="local processes (default: the CPU count; 1 = serially in this process)")
    sw.add_argument("--address", metavar="URL",
                    help="run on an existing Dask distributed scheduler, e.g. tcp://10.0.0.5:8786 "
                         "(needs the 'dask' extra)")
    sw.add_argument("--pods", type=int, default=500, help="synthetic traces without :PODS: items (default 500)")
    sw.add_argument("--rate", type=float, default=6.0, help="synthetic traces: arrivals per minute (default 6)")
    sw.add_argument("--tick", type=float, default=10.0, help="sim seconds per step (default 10)")
    sw.add_argument("--limit", type=int, help="use only the first N items of each trace")
    sw.add_argument("-o", "--output", default="table", choices=["table", "json", "csv"])
    bar = sw.add_mutually_exclusive_group()
    bar.add_argument("--progress", dest="progress", action="store_true", default=None,
                     help="progress bar on stderr (default: when stderr is a terminal)")
    bar.add_argument("--no-progress", dest="progress", action="store_false")
    sw.set_defaults(func=sweep_cmd)
    pol = sub.add_parser("policies", help="list the built-in policies")
    pol.set_defaults(func=list_policies)
    ex.set_defaults(func=lambda args: (ex.print_help(), EXIT_BAD_INPUT)[1])


def _complete_fleets(prefix: str, **_: object) -> list[str]:
    """Shell completion of --fleet: the cluster profiles found by name, and the Alibaba-shaped fleet."""
    return [n for n in [*profile_names(), "alibaba-shape"] if n.startswith(prefix)]


def _print_summary(summary: object, keep: int) -> None:
    """The summary as it always printed, one line per run; on a terminal, folded to its width
    (the ``keep`` columns that name a run repeated in each part)."""
    if sys.stdout.isatty():
        print(summary.table(keep).fold(terminal_width(), keep, color_enabled()))  # type: ignore[attr-defined]
    else:
        print(summary)


def _fail(msg: str) -> int:
    print(f"error: {msg}", file=sys.stderr)
    return EXIT_BAD_INPUT


def list_policies(args: argparse.Namespace) -> int:
    # lazy: start-up (labkit --help loads this module; policies import the sim)
    from labkit.experiments.policies import POLICIES

    for name, cls in POLICIES.items():
        print(f"{name:<12} MIG {cls.mig_mode or 'as given':<8} {cls.description}")
    return EXIT_OK


def _clean(v: object) -> object:
    return None if isinstance(v, float) and math.isnan(v) else v


def run_experiment_cmd(args: argparse.Namespace) -> int:
    # lazy: start-up (labkit --help loads this module; the sim loads only when an experiment runs)
    from labkit.experiments import metrics, policies, runner, sweep

    if args.limit is not None and args.limit < 0:
        return _fail(f"--limit {args.limit}: must be >= 0")
    if args.pods < 0 or args.rate <= 0 or args.tick <= 0:
        return _fail("--pods must be >= 0, --rate and --tick > 0")
    try:
        chosen = [policies.get_policy(p.strip()) for p in args.policy.split(",") if p.strip()]
        if not chosen:
            return _fail("--policy: give at least one policy name; see `labkit experiment policies`")
        fleet = sweep.fleet_profile(args.fleet)
        trace, trace_name = sweep.load_trace(args.trace, seed=args.seed, pods=args.pods, rate=args.rate,
                                             gpu_mem_gib=sweep.reference_gpu_mem(fleet))
        res = runner.run_experiment(trace, fleet, chosen, tick=args.tick, seed=args.seed, limit=args.limit,
                                   progress=sys.stderr.isatty() if args.progress is None else args.progress)
    except (LabkitError, ValueError) as exc:
        if isinstance(exc, LabkitError) and not isinstance(exc, ValueError):
            raise  # the CLI prints it as one line with its kind's exit code (3: not found)
        return _fail(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
    res.trace_name = trace_name
    if args.plot:
        try:
            res.plot(args.plot)
        except (OSError, ValueError) as exc:
            return _fail(f"--plot {args.plot}: {exc}")
    if args.output == "json":
        doc = res.to_dict()
        if not args.timeline:
            doc.pop("timelines")
        doc["summary"] = [{k: _clean(v) for k, v in row.items()} for row in doc["summary"]]
        print(json.dumps(doc, indent=2, default=str).replace("NaN", "null"))
    elif args.output == "csv":
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=list(metrics.SUMMARY_KEYS), lineterminator="\n")
        w.writeheader()
        for r in res.runs:
            w.writerow({k: ("" if _clean(r.summary[k]) is None else r.summary[k]) for k in metrics.SUMMARY_KEYS})
        sys.stdout.write(buf.getvalue())
    else:
        print(f"trace {trace_name} on fleet {args.fleet}")
        _print_summary(res.summary(), keep=1)
    return EXIT_OK


def sweep_cmd(args: argparse.Namespace) -> int:
    # lazy: start-up (labkit --help loads this module; the sim loads only when a sweep runs)
    from labkit.experiments import metrics, policies, sweep

    if args.workers is not None and args.workers < 1:
        return _fail(f"--workers {args.workers}: give at least 1 (1 = serially in this process)")
    if args.workers is not None and args.address:
        return _fail("--workers and --address: give one (the Dask cluster has its own workers)")
    try:
        names = sweep.split_axis("--policies", args.policies) if args.policies is not None else list(policies.POLICIES)
        traces = sweep.split_axis("--traces", args.traces)
        seeds = sweep.parse_seeds(args.seeds)
        fleets = sweep.split_axis("--fleets", args.fleets)
        options = sweep.Options(pods=args.pods, rate=args.rate, tick=args.tick, limit=args.limit)
        cells = sweep.make_grid(names, traces, seeds, fleets, options)
        res = sweep.run_sweep(cells, options, workers=args.workers, address=args.address, progress=args.progress)
    except (LabkitError, ValueError) as exc:
        if isinstance(exc, LabkitError) and not isinstance(exc, ValueError):
            raise  # the CLI prints it as one line with its kind's exit code
        return _fail(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
    rows = [{k: _clean(v) for k, v in r.items()} for r in res.rows]
    if args.output == "json":
        print(json.dumps({**res.to_dict(), "rows": rows}, indent=2, default=str).replace("NaN", "null"))
    elif args.output == "csv":
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=list(sweep.ROW_KEYS), lineterminator="\n")
        w.writeheader()
        for r in rows:
            w.writerow({k: "" if r.get(k) is None else r[k] for k in sweep.ROW_KEYS})
        sys.stdout.write(buf.getvalue())
    else:
        keys = ("trace", "fleet", "seed", *(k for k in metrics.SUMMARY_KEYS if k != "pods_per_s"), "cpu_s")
        _print_summary(metrics.SummaryTable(rows, keys), keep=4)
        print(f"{len(rows)} runs on {res.engine} ({res.workers} worker{'s' if res.workers > 1 else ''}): "
              f"{res.wall_s:.1f} s wall; the runs themselves took {res.cell_wall_s:.1f} s wall, "
              f"{res.cell_cpu_s:.1f} s CPU in all")
    return EXIT_OK
