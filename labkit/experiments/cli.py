"""`labkit experiment run|policies`: compare placement policies on a trace and a fleet (sim backend)."""

from __future__ import annotations

import argparse
import csv
import io
import json
import math
import sys
from pathlib import Path

from labkit.errors import NotFoundError

EXIT_OK, EXIT_BAD_INPUT = 0, 2


def register(subparsers: argparse._SubParsersAction) -> None:
    ex = subparsers.add_parser("experiment", help="utilisation / fragmentation experiments on the sim backend")
    sub = ex.add_subparsers(dest="experiment_command", metavar="ACTION")
    run = sub.add_parser("run", help="run a trace on a fleet under one or more policies")
    run.add_argument("--trace", default="synthetic",
                     help="synthetic | alibaba-sample | PATH to a cluster-trace-gpu-v2023 pod list CSV")
    run.add_argument("--fleet", default="exp-small", help="cluster profile name or YAML path (default: exp-small)")
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
    run.add_argument("--progress", action="store_true", help="show a progress bar on stderr")
    run.set_defaults(func=run_experiment_cmd)
    pol = sub.add_parser("policies", help="list the built-in policies")
    pol.set_defaults(func=list_policies)
    ex.set_defaults(func=lambda args: (ex.print_help(), EXIT_BAD_INPUT)[1])


def _fail(msg: str) -> int:
    print(f"error: {msg}", file=sys.stderr)
    return EXIT_BAD_INPUT


def list_policies(args: argparse.Namespace) -> int:
    # lazy: to hoist (labkit --help loads labkit.experiments; this file is being edited elsewhere)
    from labkit.experiments.policies import POLICIES

    for name, cls in POLICIES.items():
        print(f"{name:<12} MIG {cls.mig_mode or 'as given':<8} {cls.description}")
    return EXIT_OK


def load_trace(spec: str, *, seed: int, pods: int, rate: float, gpu_mem_gib: float) -> tuple[list, str]:
    # lazy: to hoist (labkit --help loads labkit.experiments; this file is being edited elsewhere)
    from labkit.experiments.alibaba import SAMPLE, load_alibaba
    from labkit.experiments.traces import generate

    if spec == "synthetic":
        return generate(pods, seed=seed, rate_per_min=rate), f"synthetic(n={pods}, seed={seed}, rate={rate:g}/min)"
    if spec == "alibaba-sample":
        return load_alibaba(SAMPLE, gpu_mem_gib=gpu_mem_gib), "alibaba-sample"
    if not Path(spec).exists():
        raise NotFoundError(f"--trace {spec!r}: no such file", fix="use synthetic, alibaba-sample or a CSV path")
    return load_alibaba(spec, gpu_mem_gib=gpu_mem_gib), spec


def _clean(v: object) -> object:
    return None if isinstance(v, float) and math.isnan(v) else v


def run_experiment_cmd(args: argparse.Namespace) -> int:
    # lazy: to hoist (labkit --help loads labkit.experiments; this file is being edited elsewhere)
    from labkit.cluster.base import ClusterError
    from labkit.experiments.alibaba import TraceError
    from labkit.experiments.fleet import build_fleet, fleet_variant
    from labkit.experiments.metrics import SUMMARY_KEYS
    from labkit.experiments.policies import PolicyError, get_policy
    from labkit.experiments.runner import ExperimentError, run_experiment

    if args.limit is not None and args.limit < 0:
        return _fail(f"--limit {args.limit}: must be >= 0")
    if args.pods < 0 or args.rate <= 0 or args.tick <= 0:
        return _fail("--pods must be >= 0, --rate and --tick > 0")
    try:
        policies = [get_policy(p.strip()) for p in args.policy.split(",") if p.strip()]
        if not policies:
            return _fail("--policy: give at least one policy name; see `labkit experiment policies`")
        ref_mem = build_fleet(fleet_variant(args.fleet, "none")).common_gpu_mem_gib()
        trace, trace_name = load_trace(args.trace, seed=args.seed, pods=args.pods, rate=args.rate, gpu_mem_gib=ref_mem)
        res = run_experiment(trace, args.fleet, policies, tick=args.tick, seed=args.seed, limit=args.limit,
                             progress=args.progress)
    except (TraceError, PolicyError, ExperimentError, ClusterError, ValueError) as exc:
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
        w = csv.DictWriter(buf, fieldnames=list(SUMMARY_KEYS), lineterminator="\n")
        w.writeheader()
        for r in res.runs:
            w.writerow({k: ("" if _clean(r.summary[k]) is None else r.summary[k]) for k in SUMMARY_KEYS})
        sys.stdout.write(buf.getvalue())
    else:
        print(f"trace {trace_name} on fleet {args.fleet}")
        print(res.summary())
    return EXIT_OK
