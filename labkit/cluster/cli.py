"""`labkit cluster up|down|status` and `labkit simulate`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from labkit.api.load import input_path, load
from labkit.cli_types import SEED_MAX, number, seed
from labkit.cluster import runstate
from labkit.cluster.backends import backend_class, backend_names, connect
from labkit.cluster.base import RefusedObjects, check_gpu_plugin
from labkit.cluster.describe import KINDS, describe, object_names
from labkit.cluster.report import claim_users, report_tables, simulate_report
from labkit.cluster.statuslist import status_doc, status_names, status_table
from labkit.errors import NotFoundError, UsageError
from labkit.model.profiles import load_profile, profile_names
from labkit.output import (
    HUMAN,
    add_output_arg,
    print_output,
    print_table,
    progress_bar,
    resolve_format,
    terminal_width,
)

EXIT_OK = 0
#: --advance at most: a year of simulated time (Jobs finish at their deadlines; a sim clock past
#: that is a typo, and one of 1e300 s has no date to print)
MAX_ADVANCE_S = 365 * 24 * 3600


def register_cluster(cl: argparse.ArgumentParser) -> None:
    cl.description = ("`up` leaves a local or kind cluster running after the command returns and prints how to "
                      "use it; `status` finds it from any process; `down` removes it. Notebooks and "
                      "connect(backend, profile) reuse a running cluster of the same profile.")
    cl.add_argument("action", choices=["up", "down", "status"])
    cl.add_argument("--backend", default=None, choices=backend_names(), help="sim, local or kind (default: sim; "
                    "status without --backend lists every running cluster)")
    cl.add_argument("--profile", default=None,
                    help="cluster profile name or YAML path (default: workshop)").completer = complete_profiles
    cl.add_argument("--name", default=None, help="kind only: cluster name (default: labkit-<profile>)")
    cl.add_argument("--no-swap-images", dest="swap_images", action="store_false", default=None,
                    help="kind only: run workload images as written (your cluster can pull and run them); by "
                         "default images missing on the nodes run as a small local image that prints its env")
    add_output_arg(cl, "json", name="BACKEND/PROFILE per running cluster (status only; its table: the running "
                   "clusters, with --backend local|kind that cluster's summary)")
    cl.set_defaults(func=run_cluster)


def register_simulate(sim: argparse.ArgumentParser) -> None:
    sim.add_argument("-f", "--filename", dest="files", action="extend", nargs="+", required=True,
                     help="YAML/JSON manifests (repeatable; '-' reads stdin)")
    sim.add_argument("--profile", default=None,
                     help="cluster profile name or YAML path (default: workshop)").completer = complete_profiles
    sim.add_argument("--state", metavar="DUMP",
                     help="what-if: start the sim from a real cluster's dump (`labkit snapshot -o DUMP` or "
                          "`kubectl get ... -A -o yaml`) instead of a profile; existing pods and allocations stay")
    sim.add_argument("--backend", default="sim", choices=backend_names())
    add_output_arg(sim, "json", name="the pods, then the claims")
    sim.add_argument("--seed", type=seed, default=0, help=f"sim only: seed for names and uids, 0 to {SEED_MAX} (default 0)")
    sim.add_argument("--advance", type=number(0, MAX_ADVANCE_S), default=0.0, metavar="SECONDS",
                     help=f"sim only: let this much simulated time pass after applying (Jobs finish); 0 to "
                          f"{MAX_ADVANCE_S} (a year)")
    sim.set_defaults(func=run_simulate)


def register_describe(de: argparse.ArgumentParser) -> None:
    de.description = ("Like kubectl describe, on a fresh sim with the manifests applied (-f, as `labkit simulate`), "
                      "on a state dump (--state, plus -f for what-if), or on a real cluster (--kubeconfig).")
    de.add_argument("kind", choices=sorted(KINDS), metavar="pod|claim")
    de.add_argument("name", metavar="NAME", help="NAME or NAMESPACE/NAME").completer = _complete_names
    de.add_argument("-n", "--namespace", default="default", help="namespace of NAME (default: default)")
    de.add_argument("-f", "--filename", dest="files", action="append", default=[], metavar="FILE",
                    help="manifests to apply to a fresh sim first (as `labkit simulate -f`; repeatable)")
    de.add_argument("--profile", default=None,
                    help="cluster profile for -f (default: workshop)").completer = complete_profiles
    de.add_argument("--state", metavar="DUMP", help="start the sim from this dump (`labkit snapshot -o DUMP`)")
    de.add_argument("--backend", default="sim", choices=backend_names(), help="with -f: the backend to run them on")
    de.add_argument("--seed", type=seed, default=0, help=f"sim only: seed for names and uids, 0 to {SEED_MAX} (default 0)")
    de.add_argument("--advance", type=number(0, MAX_ADVANCE_S), default=0.0, metavar="SECONDS",
                    help=f"sim only: let this much simulated time pass after applying; 0 to {MAX_ADVANCE_S} (a year)")
    de.add_argument("--kubeconfig", help="describe it on this real cluster instead (read-only)")
    de.add_argument("--context", help="kubeconfig context (default: its current-context)")
    de.set_defaults(func=run_describe)


def complete_profiles(prefix: str, **_: Any) -> list[str]:
    """Shell completion (argcomplete) of --profile: the cluster profiles found by name."""
    return [n for n in profile_names() if n.startswith(prefix)]


def _complete_names(prefix: str, parsed_args: argparse.Namespace, **_: Any) -> list[str]:
    """Shell completion of `describe KIND NAME`: the objects of that kind in the -f files or the dump."""
    kind = KINDS.get((getattr(parsed_args, "kind", None) or "pod").lower(), "Pod")
    sources = list(getattr(parsed_args, "files", None) or []) + (
        [parsed_args.state] if getattr(parsed_args, "state", None) else [])
    return [n for n in object_names(kind, sources) if n.startswith(prefix)]


def run_cluster(args: argparse.Namespace) -> int:
    """The registry's class for --backend does the work (`Cluster.manage`); errors go to
    labkit.cli, which prints them with their kind's exit code. `status` in a machine-readable form
    (-o json|yaml|name, or through a pipe) lists the running clusters (labkit.cluster.statuslist)."""
    fmt = resolve_format(args.output, "json")
    if args.action == "status" and args.backend is None and args.profile is None:
        return _status_all(fmt)
    backend, profile_arg = args.backend or "sim", args.profile or "workshop"
    if args.action == "status" and fmt not in HUMAN:
        if backend == "sim":
            if args.output is not None:
                raise UsageError(f"-o {args.output}: a sim cluster lives only inside the process that created it, "
                                 "so there is none to list; drop --backend sim and --profile to list the running "
                                 "local and kind clusters")
        else:
            return _status_all(fmt, only=(backend, load_profile(profile_arg).name))
    if args.action == "up":
        check_gpu_plugin(backend, load_profile(profile_arg))
    cls = backend_class(backend)
    return cls.manage(args.action, profile_arg, name=args.name, swap_images=args.swap_images,
                      progress=sys.stderr.isatty())


def _status_all(fmt: str, only: tuple[str, str] | None = None) -> int:
    """The running clusters (``only``: the one of this backend and profile) in ``fmt``; exit 3 when none.
    A recorded one whose state cannot be trusted or whose processes are gone is one stale line each
    (labkit.cluster.runstate.StaleState), on stderr, and is not acted on."""
    live: list[dict[str, Any]] = []
    for st in runstate.all_states():
        where = st.run_dir if isinstance(st, runstate.StaleState) else runstate.run_dir(st["backend"], st["profile"])
        backend = where.name.split("-", 1)[0]
        if backend not in backend_names() or (only is not None and where != runstate.run_dir(*only)):
            continue
        try:
            if isinstance(st, runstate.StaleState):
                raise st
            if backend_class(backend).is_running(st):
                live.append(st)
        except runstate.StaleState as exc:
            print(exc.status_line(), file=sys.stderr)
    none = ("no local or kind cluster is running (start one with `labkit cluster up --backend kind|local "
            "--profile P`)") if only is None else (
        f"{only[0]} cluster of profile {only[1]}: not running (start it with "
        f"`labkit cluster up --backend {only[0]} --profile {only[1]}`)")
    if not live and fmt in HUMAN:
        print(none)
        return runstate.EXIT_NOT_RUNNING
    print_output(fmt, status_doc(live), human=lambda f: print_table(status_table(live, wide=f == "wide"), f),
                 names=lambda: status_names(live))
    if not live:  # the empty document or no names on stdout; why, on stderr
        print(none, file=sys.stderr)
    return EXIT_OK if live else runstate.EXIT_NOT_RUNNING


def _simulated(args: argparse.Namespace) -> Any:
    """The cluster of `simulate` (and `describe -f`): the profile's or the dump's, the files applied,
    run until nothing changes. The caller ends it (cluster.down()) when it is not the sim."""
    kw = {"seed": args.seed, "progress": sys.stderr.isatty()} if args.backend == "sim" else {}
    if args.state is not None:
        if args.backend != "sim":
            raise UsageError(f"--state: a dump is replayed on the sim backend only; drop --backend {args.backend}")
        if args.profile is not None:
            raise UsageError("--state and --profile: the dump already says which nodes there are; drop --profile")
        kw["state"] = Path(args.state)
    cluster = connect(args.backend, args.profile or "workshop", **kw)
    on_change = getattr(cluster, "on_change", None)  # the sim's: a callback after every change
    bar = progress_bar("pods scheduled or refused", unit="pod") if on_change is not None else None
    if on_change is not None and bar is not None:
        on_change(_count_settled(bar), kinds=["Pod"])
    try:
        applied, refused = 0, []
        for f in args.files:
            try:
                applied += len(cluster.apply(load("-") if f == "-" else _path(f)) or ())
            except RefusedObjects as exc:  # as kubectl apply: on with the next file, every refusal reported
                applied += len(exc.stored)
                refused.append(exc if len(args.files) == 1 else  # the file named when there are several, as grep
                               RefusedObjects([f"{'stdin' if f == '-' else f}: {p}" for p in exc.problems]))
        if refused:
            # The backend stored the valid objects (kubectl's way), but a what-if answers for its whole
            # input or not at all: a report of the cluster without the refused objects (pods Pending
            # for a claim that was refused) would read as the answer for these files. So: every
            # refused object, one line per problem, exit 2, and no report.
            raise RefusedObjects.merge(refused, [])
        if args.files and not applied:  # kubectl apply refuses this too ("no objects passed to apply")
            raise UsageError(f"{', '.join(args.files)}: no objects (the input is empty or only comments); "
                         "fix: give manifests with apiVersion, kind and metadata")
        cluster.wait()
        if args.advance:
            if not hasattr(cluster, "advance"):
                raise UsageError(f"--advance: the {args.backend} backend has no simulated time; drop --advance")
            cluster.advance(args.advance)
    except BaseException:
        if args.backend != "sim":
            cluster.down()
        raise
    finally:
        if bar is not None:
            bar.close()
    return cluster


def _count_settled(bar: Any) -> Any:
    """A watch callback that counts each pod once, when the scheduler has bound it or refused it."""
    seen: set[tuple[str, str]] = set()

    def on_event(event: Any) -> None:
        pod = event.object
        m = pod.get("metadata") or {}
        key = (m.get("namespace", "default"), m.get("name", ""))
        if key in seen:
            return
        conds = (pod.get("status") or {}).get("conditions") or []
        if (pod.get("spec") or {}).get("nodeName") or any(
                c.get("type") == "PodScheduled" and c.get("status") == "False" for c in conds):
            seen.add(key)
            bar.update(1)

    return on_event


def run_simulate(args: argparse.Namespace) -> int:
    cluster = _simulated(args)
    try:
        report = simulate_report(cluster)
        users = claim_users(cluster)
    finally:
        if args.backend != "sim":
            cluster.down()
    print_report(report, resolve_format(args.output, "json"), users)
    return EXIT_OK


def run_describe(args: argparse.Namespace) -> int:
    ns, _, name = args.name.rpartition("/")
    namespace = ns or args.namespace
    if not name or "/" in ns:
        raise UsageError(f"{args.name!r}: give the object as NAME or NAMESPACE/NAME")
    if args.kubeconfig or args.context:
        if args.files or args.state or args.profile:
            raise UsageError("--kubeconfig describes what runs on that cluster; drop -f, --state and --profile")
        cluster = connect("kubeconfig", kubeconfig=args.kubeconfig, context=args.context, progress=False)
    elif args.files or args.state:
        cluster = _simulated(args)
    else:
        raise UsageError("describe what? give the manifests (-f FILE, run on a fresh sim), a state dump "
                     "(--state DUMP) or a real cluster (--kubeconfig FILE)")
    try:
        # NotFound (exit 3) goes to labkit.cli as one line
        text = describe(cluster, args.kind, name, namespace, width=terminal_width())
    finally:
        if args.backend != "sim" or args.kubeconfig or args.context:
            cluster.down()
    print(text)
    return EXIT_OK


def print_report(report: dict, fmt: str, users: dict | None = None) -> None:
    """A simulate report in ``fmt`` (labkit.output): two tables (pods, claims), the JSON/YAML
    document, or kubectl's ``kind/name`` lines."""

    def human(fmt: str) -> None:
        pods, claims = report_tables(report, wide=fmt == "wide", users=users)
        print_table(pods, fmt)
        print()
        print_table(claims, fmt)

    print_output(fmt, report, human=human,
                 names=lambda: [f"pod/{p['name']}" for p in report["pods"]]
                 + [f"resourceclaim.resource.k8s.io/{c['name']}" for c in report["claims"]])


def _path(f: str) -> Path:
    """A -f argument as a Path: read as a file whatever it holds (labkit.api.load.input_path)."""
    p = input_path(f)
    if not p.exists():
        raise NotFoundError(f"{f}: no such file; check the -f path")
    return p
