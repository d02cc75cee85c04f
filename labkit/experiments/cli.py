"""`labkit experiment run|sweep|policies`: compare placement policies on traces and fleets (sim backend)."""

from __future__ import annotations

import argparse
import csv
import io
import math
import sys
from collections.abc import Callable
from typing import Any

from labkit.cli_types import SEED_MAX, WORKERS_PER_CPU, number, parsed_by, seed, shown, whole, workers
from labkit.errors import EXIT_INPUT, UsageError, as_input_error
from labkit.experiments import metrics, newpolicy, policies, runner, sweep
from labkit.fileio import cannot_write
from labkit.model.profiles import profile_names
from labkit.output import add_output_arg, color_enabled, print_output, resolve_format, terminal_width

EXIT_OK = 0
#: `experiment inflation --check-on`: the cluster did not do what the sim did (as diff(1) exits 1)
EXIT_DIFFERENT = 1


def register(ex: argparse.ArgumentParser) -> None:
    sub = ex.add_subparsers(dest="experiment_command", metavar="ACTION")
    run = sub.add_parser("run", help="run a trace on a fleet under one or more policies")
    run.add_argument("--trace", default="synthetic", type=parsed_by(sweep.check_trace, "trace"),
                     help="synthetic[:PODS] | alibaba-sample | alibaba-shape[:PODS] | PATH to a cluster-trace-gpu-v2023 "
                          f"pod list CSV (PODS: 1 to {sweep.MAX_PODS})")
    run.add_argument("--fleet", default="exp-small", type=parsed_by(sweep.check_fleet, "fleet"),
                     help="cluster profile name or YAML path, or "
                     "alibaba-shape[:SCALE] (SCALE in (0, 10]; default: exp-small)").completer = _complete_fleets
    run.add_argument("--policies", "--policy", dest="policy", default="whole-gpu,shared", metavar="POLICIES",
                     help="comma-separated policies: built-in names (`labkit experiment policies`), PATH.py[:Class] "
                          "or module:Class (default: whole-gpu,shared; --policy is the same)")
    add_output_arg(run, "table", extra=["csv"], name="run/POLICY per run")
    run.add_argument("--plot", metavar="FILE", help="write a PNG/SVG/PDF figure of the timelines")
    run.add_argument("--seed", type=seed, default=0, help=f"synthetic trace and sim seed, 0 to {SEED_MAX} (default 0)")
    run.add_argument("--limit", type=whole(0, sweep.MAX_PODS), metavar="N",
                     help=f"use only the first N items of the trace (0 to {sweep.MAX_PODS})")
    run.add_argument("--pods", type=whole(0, sweep.MAX_PODS), default=500,
                     help=f"synthetic trace: number of items, 0 to {sweep.MAX_PODS} (default 500)")
    run.add_argument("--rate", type=number(*sweep.RATE_RANGE), default=6.0,
                     help="synthetic trace: arrivals per minute, {:g} to {:g} (default 6)".format(*sweep.RATE_RANGE))
    run.add_argument("--tick", type=number(*sweep.TICK_RANGE), default=10.0,
                     help="sim seconds per step, {:g} to {:g} (default 10)".format(*sweep.TICK_RANGE))
    run.add_argument("--timeline", action="store_true", help="json: include the per-tick timelines")
    run_bar = run.add_mutually_exclusive_group()
    run_bar.add_argument("--progress", dest="progress", action="store_true", default=None,
                         help="progress bar on stderr (default: when stderr is a terminal)")
    run_bar.add_argument("--no-progress", dest="progress", action="store_false")
    run.set_defaults(func=run_experiment_cmd)
    sw = sub.add_parser("sweep", help="run a grid (policies x traces x seeds x fleets) in parallel processes",
                        description="Every cell is one `experiment run` of one policy; cells run in --workers "
                                    "local processes, or on the Dask scheduler at --address.")
    sw.add_argument("--policies", default=None, type=_axis("--policies", _policy),
                    help="comma-separated policies: built-in names, PATH.py[:Class] or module:Class (default: the six "
                         "`run` built-ins)")
    sw.add_argument("--traces", default="synthetic", type=_axis("--traces", sweep.check_trace),
                    help="comma-separated trace specs, as `run --trace` takes them (default: synthetic)")
    sw.add_argument("--seeds", default="0", type=parsed_by(sweep.parse_seeds, "seeds"),
                    help=f"comma-separated seeds and ranges, e.g. 0-4,9 (0 to {SEED_MAX}, at most "
                         f"{sweep.MAX_SEEDS} in all; default: 0)")
    sw.add_argument("--fleets", default="exp-small", type=_axis("--fleets", sweep.check_fleet),
                    help="comma-separated fleets: profile names/paths or alibaba-shape[:SCALE] (default: exp-small)")
    sw.add_argument("--workers", type=workers, default=None,
                    help="local processes (default: the CPU count; 1 = serially in this process; at most "
                         f"{WORKERS_PER_CPU} per CPU)")
    sw.add_argument("--address", metavar="URL",
                    help="run on an existing Dask distributed scheduler, e.g. tcp://10.0.0.5:8786 "
                         "(needs the 'dask' extra)")
    sw.add_argument("--pods", type=whole(0, sweep.MAX_PODS), default=500,
                    help=f"synthetic traces without :PODS: items, 0 to {sweep.MAX_PODS} (default 500)")
    sw.add_argument("--rate", type=number(*sweep.RATE_RANGE), default=6.0,
                    help="synthetic traces: arrivals per minute, {:g} to {:g} (default 6)".format(*sweep.RATE_RANGE))
    sw.add_argument("--tick", type=number(*sweep.TICK_RANGE), default=10.0,
                    help="sim seconds per step, {:g} to {:g} (default 10)".format(*sweep.TICK_RANGE))
    sw.add_argument("--limit", type=whole(0, sweep.MAX_PODS), metavar="N",
                    help=f"use only the first N items of each trace (0 to {sweep.MAX_PODS})")
    add_output_arg(sw, "table", extra=["csv"], name="run/TRACE/FLEET/SEED/POLICY per run, as given")
    bar = sw.add_mutually_exclusive_group()
    bar.add_argument("--progress", dest="progress", action="store_true", default=None,
                     help="progress bar on stderr (default: when stderr is a terminal)")
    bar.add_argument("--no-progress", dest="progress", action="store_false")
    sw.set_defaults(func=sweep_cmd)
    inf = sub.add_parser(
        "inflation", help="the ATC'23 FGD paper's workload-inflation experiment on the real Alibaba trace",
        description="Tasks of an Alibaba cluster-trace-gpu-v2023 pod list arrive (inflated to --ratio x the "
                    "fleet's GPUs, shuffled) and never leave; each policy of the paper places them, as real DRA "
                    "claims through the sim. -o json keys: trace, ratio, seeds, sample_every, nodes, gpus, sim, whole_gpus, "
                    "gpu_mode (shares | whole | mig), x_step_pct, engine (serial, local xN or dask URL), workers, wall_s, cpu_s (all runs), paper "
                    "(the paper's figures for this trace, when it reports them), and "
                    "policies.<name>: alloc_pct (allocated GPUs in % of the fleet at x = 0, 1, ... % arrived "
                    "workload; mean over seeds), alloc_pct_at_saturation, unallocated_gpus (at the last x; mean "
                    "over seeds), unallocated_gpus_by_seed, unallocated_gpus_sd (sample standard deviation over "
                    "seeds; 0 for one seed), unallocated_gpus_min, unallocated_gpus_max, failed_pods, served_gpus "
                    "(GPUs the placed tasks asked for; below the allocated GPUs with --whole-gpus), pods, wall_s, "
                    "cpu_s; rng (python | go); with --rng go also policies.<name>.alloc_pct_published_metric_by_seed "
                    "(allocated GPUs in % at the last x as the paper computes it: the mean over the tasks whose "
                    "arrived % rounds to it; the authors' analysis_allo_discrete.csv cells), "
                    "unallocated_gpus_published_metric (mean over seeds) and unallocated_gpus_published_metric_by_seed.")
    inf.add_argument("--trace", default="default",
                     help="openb pod list: default, cpu050, gpushare40, multigpu20, gpuspec33, ... or a csv path "
                          "(default: default)")
    inf.add_argument("--fleet", default="openb", type=parsed_by(_openb_fleet, "fleet"),
                     help="openb (the trace's 1,213 GPU nodes), openb:N (1 node in N of each node group) or a "
                          f"node-list csv(.gz) PATH[:N] (N: 1 to {MAX_SAMPLE}; default: openb)")
    inf.add_argument("--policies", default=None, type=_axis("--policies", _policy),
                     help="comma-separated policies: fgd,best-fit,dot-product,gpu-packing,gpu-clustering,random-fit "
                          "(default: these six), any other built-in, PATH.py[:Class] or module:Class")
    inf.add_argument("--seeds", default="42", type=parsed_by(sweep.parse_seeds, "seeds"),
                     help=f"comma-separated seeds and ranges (0 to {SEED_MAX}, at most {sweep.MAX_SEEDS}; default 42; "
                          "the paper: 42-51)")
    inf.add_argument("--ratio", type=number(*RATIO_RANGE), default=1.3,
                     help="inflate to this x the fleet's GPUs, {:g} to {:g} (default 1.3)".format(*RATIO_RANGE))
    inf.add_argument("--workers", type=workers, default=None,
                     help="local processes, one (policy, seed) run each at a time (default: the CPU count; "
                          f"1 = serially in this process; at most {WORKERS_PER_CPU} per CPU)")
    inf.add_argument("--address", metavar="URL",
                     help="run on an existing Dask distributed scheduler, e.g. tcp://10.0.0.5:8786 "
                          "(needs the 'dask' extra), as `experiment sweep --address` does")
    inf_bar = inf.add_mutually_exclusive_group()
    inf_bar.add_argument("--progress", dest="progress", action="store_true", default=None,
                         help="progress bar on stderr (default: when stderr is a terminal)")
    inf_bar.add_argument("--no-progress", dest="progress", action="store_false")
    inf.add_argument("--no-sim", action="store_true",
                     help="skip the sim: the policies' bookkeeping only (fast; no DRA objects)")
    inf.add_argument("--gpus", default="shares", choices=["shares", "whole", "mig"],
                     help="how a task gets part of a GPU as a DRA claim: shares (consumable capacity, the paper's "
                          "GPU sharing; default), whole (no sharing: a whole GPU), mig (dynamic MIG: every GPU "
                          "assumed an A100-SXM4-40GB, a share rounded up to the smallest MIG profile with that much "
                          "compute, placed by the catalog's placement rules; needs --no-sim); x still counts what "
                          "the tasks asked for")
    inf.add_argument("--whole-gpus", action="store_true", help="the same as --gpus whole")
    inf.add_argument("--rng", default="python", choices=["python", "go"],
                     help="the random draws (arrival order, inflation, tie-break node order): python (Python's "
                          "random, default) or go (the FGD authors' simulator's: Go's math/rand seeded as it seeds "
                          "it, with its FGD arithmetic; --seeds 42-51 then prints its published per-seed table "
                          "exactly, for fgd, best-fit, dot-product, gpu-packing and gpu-clustering; random-fit is not "
                          "reproducible: the simulator's pick depends on its goroutines' timing)")
    inf.add_argument("--plot", metavar="FILE", help="write the figure (allocation ratio vs arrived workload)")
    inf.add_argument("--check-on", choices=["sim", "local"], metavar="BACKEND",
                     help="sim | local: run each policy on the sim, then apply its placements (in arrival order, "
                          "each pod pinned as the sim pins it) to a cluster of the fleet on BACKEND (local: the real "
                          "kube-scheduler with the kit's nodes; a fleet over 32 nodes needs LABKIT_LOCAL_MAX_NODES) "
                          "and compare every task's node and devices and the curve; prints the first difference and "
                          "the time of each side; exit 1 when they differ. -o json: backend, equal, cluster_up, "
                          "runs[] (labkit.experiments.crosscheck.check_on's keys)")
    add_output_arg(inf, "table", name="run/POLICY per policy")
    inf.set_defaults(func=inflation_cmd)
    new = sub.add_parser("new-policy", help="write a policy file that starts from a built-in's code",
                         description="Writes FILE: the built-in's class, renamed NAME, with its imports; "
                                     "`--policies FILE` runs it in run, sweep and inflation (as written it gives the "
                                     "built-in's numbers).")
    new.add_argument("name", metavar="NAME", help="your policy's name, e.g. my-best-fit (lower case, digits, '-')")
    new.add_argument("--from", dest="builtin", required=True, metavar="BUILTIN",
                     help="the built-in to start from (`labkit experiment policies`)")
    new.add_argument("-o", "--output-file", dest="file", required=True, metavar="FILE", help="the .py file to write")
    new.add_argument("--force", action="store_true", help="overwrite FILE if it exists")
    new.set_defaults(func=new_policy_cmd)
    pol = sub.add_parser("policies", help="list the built-in policies (both worlds)")
    add_output_arg(pol, "table", name="policy/NAME per policy")
    pol.set_defaults(func=list_policies)
    ex.set_defaults(func=lambda args: (ex.print_help(), EXIT_INPUT)[1])


#: --ratio of `experiment inflation`: the paper inflates to 1.3x; 10x is ~80,000 tasks on the openb fleet
RATIO_RANGE = (0.1, 10.0)
#: N of `--fleet openb:N` at most (1 node in N of each node group; past the largest group, one node per group)
MAX_SAMPLE = 10_000


def _axis(flag: str, check: Callable[[str], str]) -> Callable[[str], list[str]]:
    """An argparse type for a comma-separated axis: no empty value, none twice, each passes ``check``."""
    return parsed_by(lambda text: [check(v) for v in sweep.split_axis(flag, text)], flag.lstrip("-"))


def _policy(spec: str) -> str:
    """A --policies entry, loaded once here (a bad one is argparse's error); the spec goes on (a file
    path made absolute): each run, and each worker process, loads it again."""
    return policies.policy_spec(policies.load_policy(spec))


def _openb_fleet(spec: str) -> tuple[str, int]:
    """``--fleet`` of `experiment inflation`: (openb or a node-list csv path, N of 1 node in N)."""
    fleet, every = spec.strip(), 1
    base, _, tail = fleet.rpartition(":")
    if base and (tail.isdigit() or base == "openb"):
        if not (tail.isascii() and tail.isdigit() and len(tail) <= 6 and 1 <= int(tail) <= MAX_SAMPLE):
            raise ValueError(f"{shown(spec)}: N of {shown(base)[1:-1]}:N is 1 node in N of each node group; give a "
                             f"whole number from 1 to {MAX_SAMPLE}")
        fleet, every = base, int(tail)
    if fleet != "openb" and not fleet.endswith((".csv", ".csv.gz")):
        raise ValueError(f"{shown(spec)}: use openb, openb:N or a cluster-trace-gpu-v2023 node list csv (PATH[:N])")
    return fleet, every


def _complete_fleets(prefix: str, **_: object) -> list[str]:
    """Shell completion of --fleet: the cluster profiles found by name, and the Alibaba-shaped fleet."""
    return [n for n in [*profile_names(), "alibaba-shape"] if n.startswith(prefix)]


def _print_summary(summary: object, keep: int, fmt: str = "table") -> None:
    """The summary as it always printed, one line per run (and so ``-o wide``); on a terminal,
    ``-o table`` folds it to its width (the ``keep`` columns that name a run repeated in each part)."""
    if fmt == "table" and sys.stdout.isatty():
        print(summary.table(keep).fold(terminal_width(), keep, color_enabled()))  # type: ignore[attr-defined]  # both summaries have table()
    else:
        print(summary)


def list_policies(args: argparse.Namespace) -> int:
    rows = []
    for name in policies.BUILTINS:
        cls = policies.builtin_class(name)
        run_world = name in policies.POLICIES
        node = ("scheduler" if cls.choose_node is policies.BasePolicy.choose_node and name != "frag-aware"
                else "its own") if run_world else "score()"
        rows.append({"name": name, "world": "run" if run_world else "paper",
                     "migMode": getattr(cls, "mig_mode", "none") if run_world else "none",
                     "nodeChoice": node, "experiments": ["run", "sweep", "inflation"],
                     "description": cls.description})
    doc = {"policies": rows}

    def human(_fmt: str) -> None:
        print(f"{'NAME':<15}{'WORLD':<7}{'MIG':<9}{'NODE':<11}DESCRIPTION")
        for r in rows:
            print(f"{r['name']:<15}{r['world']:<7}{r['migMode'] or 'as given':<9}{r['nodeChoice']:<11}{r['description']}")
        print("every policy runs in `experiment run`, `sweep` and `inflation` (--policies NAME,PATH.py,module:Class); "
              "run: the `run` world writes its own DRA objects; paper: the FGD paper's six, scored per node, "
              "written as claims pinned to the chosen node and GPUs")

    print_output(resolve_format(args.output, "table"), doc, human=human,
                 names=lambda: [f"policy/{name}" for name in policies.BUILTINS])
    return EXIT_OK


def new_policy_cmd(args: argparse.Namespace) -> int:
    path = newpolicy.write_policy(args.name, args.builtin, args.file, force=args.force)
    print(f"wrote {path}: policy {args.name!r} from {args.builtin!r}; run it with "
          f"labkit experiment inflation --policies {path} --fleet openb:40 --no-sim")
    return EXIT_OK


def _clean(v: object) -> object:
    return None if isinstance(v, float) and math.isnan(v) else v


def _plot(draw: Callable[[], object], path: str) -> None:
    """``--plot FILE``: draw the figure into it; an unwritable path or an unknown format is one line."""
    try:
        draw()
    except OSError as exc:
        raise UsageError(cannot_write(f"--plot {path}", exc)) from None
    except ValueError as exc:  # matplotlib: an unknown format (the name's suffix)
        raise UsageError(f"--plot {path}: {exc}") from None


def run_experiment_cmd(args: argparse.Namespace) -> int:
    try:
        chosen = [policies.get_policy(p.strip()) for p in args.policy.split(",") if p.strip()]
        if not chosen:
            raise UsageError("--policy: give at least one policy name; see `labkit experiment policies`")
        fleet = sweep.fleet_profile(args.fleet)
        trace, trace_name = sweep.load_trace(args.trace, seed=args.seed, pods=args.pods, rate=args.rate,
                                             gpu_mem_gib=sweep.reference_gpu_mem(fleet))
        res = runner.run_experiment(trace, fleet, chosen, tick=args.tick, seed=args.seed, limit=args.limit,
                                   progress=sys.stderr.isatty() if args.progress is None else args.progress)
    except ValueError as exc:  # a LabkitError keeps its kind; a plain ValueError is bad input
        raise as_input_error(exc) from None
    res.trace_name = trace_name
    if args.plot:
        _plot(lambda: res.plot(args.plot), args.plot)
    fmt = resolve_format(args.output, "table")
    if fmt == "csv":
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=list(metrics.SUMMARY_KEYS), lineterminator="\n")
        w.writeheader()
        for r in res.runs:
            w.writerow({k: ("" if _clean(r.summary[k]) is None else r.summary[k]) for k in metrics.SUMMARY_KEYS})
        sys.stdout.write(buf.getvalue())
        return EXIT_OK
    doc = res.to_dict()
    if not args.timeline:
        doc.pop("timelines")

    def human(fmt: str) -> None:
        print(f"trace {trace_name} on fleet {args.fleet}")
        _print_summary(res.summary(), keep=1, fmt=fmt)

    print_output(fmt, doc, human=human, names=lambda: [f"run/{r.policy}" for r in res.runs])
    return EXIT_OK


def sweep_cmd(args: argparse.Namespace) -> int:
    if args.workers is not None and args.address:
        raise UsageError("--workers and --address: give one (the Dask cluster has its own workers)")
    try:  # the axes are lists already (their argparse types checked them)
        names = args.policies if args.policies is not None else list(policies.POLICIES)
        traces, seeds, fleets = args.traces, args.seeds, args.fleets
        options = sweep.Options(pods=args.pods, rate=args.rate, tick=args.tick, limit=args.limit)
        cells = sweep.make_grid(names, traces, seeds, fleets, options)
        res = sweep.run_sweep(cells, options, workers=args.workers, address=args.address, progress=args.progress)
    except ValueError as exc:  # a LabkitError keeps its kind; a plain ValueError is bad input
        raise as_input_error(exc) from None
    rows = [{k: _clean(v) for k, v in r.items()} for r in res.rows]
    fmt = resolve_format(args.output, "table")
    if fmt == "csv":
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=list(sweep.ROW_KEYS), lineterminator="\n")
        w.writeheader()
        for r in rows:
            w.writerow({k: "" if r.get(k) is None else r[k] for k in sweep.ROW_KEYS})
        sys.stdout.write(buf.getvalue())
        return EXIT_OK

    def human(fmt: str) -> None:
        keys = ("trace", "fleet", "seed", *(k for k in metrics.SUMMARY_KEYS if k != "pods_per_s"), "cpu_s")
        _print_summary(metrics.SummaryTable(rows, keys), keep=4, fmt=fmt)
        print(f"{len(rows)} runs on {res.engine} ({res.workers} worker{'s' if res.workers > 1 else ''}): "
              f"{res.wall_s:.1f} s wall; the runs themselves took {res.cell_wall_s:.1f} s wall, "
              f"{res.cell_cpu_s:.1f} s CPU in all")

    print_output(fmt, {**res.to_dict(), "rows": rows}, human=human,
                 names=lambda: [f"run/{c.trace}/{c.fleet}/{c.seed}/{c.policy}" for c in cells])  # rows: in cell order
    return EXIT_OK


def inflation_cmd(args: argparse.Namespace) -> int:
    # lazy: start-up (numpy and the openb trace: only `experiment inflation` needs them)
    from labkit.experiments import crosscheck, inflation

    fleet, every = args.fleet  # (openb or a csv path, N): its argparse type checked it
    nodes = inflation.NODES_PATH if fleet == "openb" else fleet
    if args.check_on:
        return _check_on_cmd(args, crosscheck, every, nodes)
    if args.workers is not None and args.address:
        raise UsageError("--workers and --address: give one (the Dask cluster has its own workers)")
    try:
        pols = tuple(args.policies) if args.policies else inflation.POLICIES
        seeds = tuple(args.seeds)
        res = inflation.run_all(args.trace, pols, seeds=seeds, every=every, ratio=args.ratio,
                                sim=not args.no_sim, workers=args.workers, address=args.address,
                                gpu_mode="whole" if args.whole_gpus else args.gpus, nodes=nodes,
                                progress=args.progress, rng=args.rng)
    except ValueError as exc:  # a LabkitError keeps its kind; a plain ValueError is bad input
        raise as_input_error(exc) from None
    res["paper"] = (inflation.paper_figures(args.trace) if every == 1 and args.ratio == 1.3
                    and res["gpu_mode"] == "shares" and fleet == "openb" else None)
    if args.plot:
        _plot(lambda: inflation.plot_inflation(res, args.plot), args.plot)
    fmt = resolve_format(args.output, "table")
    if fmt not in ("table", "wide"):
        print_output(fmt, res, human=lambda _: None, names=lambda: [f"run/{p}" for p in res["policies"]])
        return EXIT_OK
    paper = res["paper"] or {}
    print(f"trace {res['trace']} on {res['nodes']} nodes / {res['gpus']} GPUs, inflated to {res['ratio']:g}x, "
          f"seeds {','.join(map(str, res['seeds']))}{'' if res['sim'] else ' (no sim)'}"
          f"{'' if res['gpu_mode'] == 'shares' else ', GPUs: ' + res['gpu_mode']}")
    print(f"{'policy':<15}{'alloc % at sat.':>16}{'unallocated GPUs':>18}{'paper':>9}{'failed pods':>13}{'wall s':>9}")
    for name, r in sorted(res["policies"].items(), key=lambda kv: kv[1]["unallocated_gpus"]):
        ref = paper.get(name, {}).get("unallocated_gpus_at_130")
        print(f"{name:<15}{r['alloc_pct_at_saturation']:>16.2f}{r['unallocated_gpus']:>18.1f}"
              f"{'' if ref is None else f'{ref:.1f}':>9}{r['failed_pods']:>13.1f}{r['wall_s']:>9.1f}")
    if res.get("rng") == "go":
        _print_published(res)
    print(f"{res['wall_s']:.1f} s wall")
    return EXIT_OK


def _check_on_cmd(args: argparse.Namespace, crosscheck: Any, every: int, nodes: Any) -> int:
    """`experiment inflation --check-on BACKEND` (see labkit.experiments.crosscheck)."""
    given = [flag for flag, on in (("--no-sim", args.no_sim), (f"--gpus {args.gpus}", args.gpus != "shares"),
                                   ("--whole-gpus", args.whole_gpus), ("--workers", args.workers is not None),
                                   ("--address", bool(args.address)), ("--plot", bool(args.plot))) if on]
    if given:
        raise UsageError(f"--check-on {args.check_on}: leave out {given[0]} (the check runs each policy with GPU "
                         "shares on the sim, then on one cluster, one after the other)")
    try:
        res = crosscheck.check_all(args.check_on, tuple(args.policies) if args.policies else None,
                                   args.trace, seeds=tuple(args.seeds), every=every, ratio=args.ratio, nodes=nodes,
                                   rng=getattr(args, "rng", "python"),
                                   progress=sys.stderr.isatty() if args.progress is None else args.progress)
    except ValueError as exc:  # a LabkitError keeps its kind; a plain ValueError is bad input
        raise as_input_error(exc) from None
    fmt = resolve_format(args.output, "table")
    if fmt not in ("table", "wide"):
        print_output(fmt, res, human=lambda _: None, names=lambda: [f"run/{r['policy']}" for r in res["runs"]])
        return EXIT_OK if res["equal"] else EXIT_DIFFERENT
    up, name = res["cluster_up"], res["backend"] if res["backend"] != "sim" else "check"
    print(f"trace {res['trace']} on {res['nodes']} nodes / {res['gpus']} GPUs, inflated to {res['ratio']:g}x, "
          f"checked on {res['backend']} (up in {up['wall_s']:.1f} s wall, {up['cpu_s']:.1f} s CPU)")
    print(f"{'policy':<15}{'seed':>5}{'tasks':>7}{'equal':>7}{'curve':>7}{'sim wall s':>12}{'sim CPU s':>11}"
          f"{name + ' wall s':>14}{name + ' CPU s':>13}{'machine CPU s':>15}")
    for r in res["runs"]:
        print(f"{r['policy']:<15}{r['seed']:>5}{r['tasks']:>7}{r['equal_tasks']:>7}"
              f"{'same' if r['curve_equal'] else 'DIFF':>7}{r['sim']['wall_s']:>12.1f}{r['sim']['cpu_s']:>11.1f}"
              f"{r['cluster']['wall_s']:>14.1f}{r['cluster']['cpu_s']:>13.1f}{r['cluster']['machine_cpu_s']:>15.1f}")
    for r in res["runs"]:
        d = r["first_difference"]
        if d:
            print(f"{r['policy']} seed {r['seed']}: first difference at task {d['task']} (pod {d['pod']}, "
                  f"{d['trace_pod']}): expected {d['expected']['node']} {','.join(d['expected']['devices']) or '-'}, "
                  f"got {d['got']['node'] or 'no node'} {','.join(d['got']['devices']) or '-'}: {d['reason']}")
    print("every task's node and devices and the curve: " + ("the same" if res["equal"] else "DIFFERENT"))
    return EXIT_OK if res["equal"] else EXIT_DIFFERENT


def _print_published(res: dict) -> None:
    """--rng go: the paper's own metric per policy and seed, each cell as the authors' analysis_allo_discrete.csv
    prints it (allocated GPUs, % of the fleet, at the last x), and its unallocated GPUs averaged over the seeds."""
    x = round(res["ratio"] * 100)
    print(f"the paper's metric (merge_alloc_discrete.py): allocated GPUs % at {x} % arrived, per seed")
    print(f"{'policy':<15}" + "".join(f"{s:>8}" for s in res["seeds"]) + f"{'unallocated GPUs':>18}")
    for name, r in res["policies"].items():
        cells = "".join(f"{'-' if v is None else repr(v):>8}" for v in r["alloc_pct_published_metric_by_seed"])
        mean = r["unallocated_gpus_published_metric"]
        print(f"{name:<15}{cells}{'-' if mean is None else f'{mean:.1f}':>18}")
