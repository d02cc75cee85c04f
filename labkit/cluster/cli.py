"""`labkit cluster up|down|status` and `labkit simulate`."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from labkit.cluster.base import ClusterError, backend_class, backends, connect
from labkit.cluster.report import report_table, simulate_report
from labkit.sim.profiles import ProfileError, load_profile

EXIT_OK, EXIT_BAD_INPUT = 0, 2


def register(subparsers: argparse._SubParsersAction) -> None:
    cl = subparsers.add_parser("cluster", help="start, stop or show a cluster of a profile")
    cl.add_argument("action", choices=["up", "down", "status"])
    cl.add_argument("--backend", default="sim", choices=backends())
    cl.add_argument("--profile", default="workshop", help="cluster profile name or YAML path (default: workshop)")
    cl.set_defaults(func=run_cluster)

    sim = subparsers.add_parser("simulate", help="apply manifests to a fresh cluster and print where pods landed")
    sim.add_argument("-f", "--filename", dest="files", action="extend", nargs="+", required=True,
                     help="YAML/JSON manifests (repeatable; '-' reads stdin)")
    sim.add_argument("--profile", default=None, help="cluster profile name or YAML path (default: workshop)")
    sim.add_argument("--state", metavar="DUMP",
                     help="what-if: start the sim from a real cluster's dump (`labkit snapshot -o DUMP` or "
                          "`kubectl get ... -A -o yaml`) instead of a profile; existing pods and allocations stay")
    sim.add_argument("--backend", default="sim", choices=backends())
    sim.add_argument("-o", "--output", default="json", choices=["json", "table"])
    sim.add_argument("--seed", type=int, default=0, help="sim only: seed for names and uids (default 0)")
    sim.add_argument("--advance", type=float, default=0.0, metavar="SECONDS",
                     help="sim only: let this much simulated time pass after applying (Jobs finish)")
    sim.set_defaults(func=run_simulate)


def _fail(msg: str) -> int:
    print(f"error: {msg}", file=sys.stderr)
    return EXIT_BAD_INPUT


def run_cluster(args: argparse.Namespace) -> int:
    try:
        if args.backend == "sim":
            profile = load_profile(args.profile)
            if args.action == "down":
                print("sim: nothing to stop - a sim cluster lives inside the Python process that created it.")
                return EXIT_OK
            c = connect("sim", profile, progress=sys.stderr.isatty())
            print(c.inventory())
            print("note: the sim backend runs in-process; this cluster ends with this command. Notebooks and "
                  "`labkit simulate` each create their own (identical, deterministic) sim cluster.")
            return EXIT_OK
        cls = backend_class(args.backend)
        if args.action == "up":
            c = connect(args.backend, args.profile)
            _print_status(c.status())
        elif args.action == "status":
            c = cls()
            c.profile = load_profile(args.profile)
            _print_status(c.status())
        else:
            c = cls()
            c.profile = load_profile(args.profile)
            c.down()
            print(f"{args.backend}: cluster of profile {c.profile.name} is down")
        return EXIT_OK
    except (ClusterError, ProfileError) as exc:
        return _fail(str(exc))


def _print_status(status: object) -> None:
    print(status if isinstance(status, str) else json.dumps(status, indent=2, default=str))


def run_simulate(args: argparse.Namespace) -> int:
    kw = {"seed": args.seed, "progress": sys.stderr.isatty()} if args.backend == "sim" else {}
    if args.state is not None:
        if args.backend != "sim":
            return _fail(f"--state: a dump is replayed on the sim backend only; drop --backend {args.backend}")
        if args.profile is not None:
            return _fail("--state and --profile: the dump already says which nodes there are; drop --profile")
        kw["state"] = Path(args.state)
    try:
        cluster = connect(args.backend, args.profile or "workshop", **kw)
    except ClusterError as exc:
        return _fail(str(exc))
    try:
        for f in args.files:
            cluster.apply(sys.stdin.read() if f == "-" else _path(f))
        cluster.wait()
        if args.advance:
            if not hasattr(cluster, "advance"):
                return _fail(f"--advance: the {args.backend} backend has no simulated time; drop --advance")
            cluster.advance(args.advance)
        report = simulate_report(cluster)
    except ClusterError as exc:
        return _fail(str(exc))
    finally:
        if args.backend != "sim":
            cluster.down()
    if args.output == "json":
        print(json.dumps(report, indent=2, sort_keys=False))
    else:
        print(report_table(report))
    return EXIT_OK


def _path(f: str):  # noqa: ANN202
    from pathlib import Path

    p = Path(f)
    if not p.exists():
        raise ClusterError(f"{f}: no such file; check the -f path")
    return p
