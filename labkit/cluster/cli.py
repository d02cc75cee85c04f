"""`labkit cluster up|down|status` and `labkit simulate`."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from labkit.cluster import runstate
from labkit.cluster.base import ClusterError, backend_class, backends, connect
from labkit.cluster.describe import KINDS, describe, object_names
from labkit.cluster.report import claim_users, report_tables, simulate_report
from labkit.cluster.runstate import usage_lines
from labkit.cluster.statuslist import status_doc, status_names, status_table
from labkit.output import (
    HUMAN,
    add_output_arg,
    print_output,
    print_table,
    print_text,
    progress_bar,
    resolve_format,
    terminal_width,
)
from labkit.sim.profiles import ProfileError, load_profile, profile_names

EXIT_OK, EXIT_BAD_INPUT = 0, 2
#: `labkit cluster status`: no such cluster is running
EXIT_NOT_RUNNING = 3


def register(subparsers: argparse._SubParsersAction) -> None:
    cl = subparsers.add_parser(
        "cluster", help="start, stop or show a cluster of a profile",
        description="`up` leaves a local or kind cluster running after the command returns and prints how to "
                    "use it; `status` finds it from any process; `down` removes it. Notebooks and "
                    "connect(backend, profile) reuse a running cluster of the same profile.")
    cl.add_argument("action", choices=["up", "down", "status"])
    cl.add_argument("--backend", default=None, choices=backends(), help="sim, local or kind (default: sim; "
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

    sim = subparsers.add_parser("simulate", help="apply manifests to a fresh cluster and print where pods landed")
    sim.add_argument("-f", "--filename", dest="files", action="extend", nargs="+", required=True,
                     help="YAML/JSON manifests (repeatable; '-' reads stdin)")
    sim.add_argument("--profile", default=None,
                     help="cluster profile name or YAML path (default: workshop)").completer = complete_profiles
    sim.add_argument("--state", metavar="DUMP",
                     help="what-if: start the sim from a real cluster's dump (`labkit snapshot -o DUMP` or "
                          "`kubectl get ... -A -o yaml`) instead of a profile; existing pods and allocations stay")
    sim.add_argument("--backend", default="sim", choices=backends())
    add_output_arg(sim, "json", name="the pods, then the claims")
    sim.add_argument("--seed", type=int, default=0, help="sim only: seed for names and uids (default 0)")
    sim.add_argument("--advance", type=float, default=0.0, metavar="SECONDS",
                     help="sim only: let this much simulated time pass after applying (Jobs finish)")
    sim.set_defaults(func=run_simulate)

    de = subparsers.add_parser(
        "describe", help="the whole story of one pod or claim: conditions, devices, explanation, events",
        description="Like kubectl describe, on a fresh sim with the manifests applied (-f, as `labkit simulate`), "
                    "on a state dump (--state, plus -f for what-if), or on a real cluster (--kubeconfig).")
    de.add_argument("kind", choices=sorted(KINDS), metavar="pod|claim")
    de.add_argument("name", metavar="NAME", help="NAME or NAMESPACE/NAME").completer = _complete_names
    de.add_argument("-n", "--namespace", default="default", help="namespace of NAME (default: default)")
    de.add_argument("-f", "--filename", dest="files", action="append", default=[], metavar="FILE",
                    help="manifests to apply to a fresh sim first (as `labkit simulate -f`; repeatable)")
    de.add_argument("--profile", default=None,
                    help="cluster profile for -f (default: workshop)").completer = complete_profiles
    de.add_argument("--state", metavar="DUMP", help="start the sim from this dump (`labkit snapshot -o DUMP`)")
    de.add_argument("--backend", default="sim", choices=backends(), help="with -f: the backend to run them on")
    de.add_argument("--seed", type=int, default=0, help="sim only: seed for names and uids (default 0)")
    de.add_argument("--advance", type=float, default=0.0, metavar="SECONDS",
                    help="sim only: let this much simulated time pass after applying")
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


def _fail(msg: str) -> int:
    print(f"error: {msg}", file=sys.stderr)
    return EXIT_BAD_INPUT


def run_cluster(args: argparse.Namespace) -> int:
    try:
        if args.action == "status" and args.backend is None and args.profile is None:
            return _status_all(resolve_format(args.output, "json"))
        backend = args.backend or "sim"
        profile_arg = args.profile or "workshop"
        if args.action == "status" and backend != "sim" and resolve_format(args.output, "json") not in HUMAN:
            return _status_all(resolve_format(args.output, "json"), only=(backend, load_profile(profile_arg).name))
        if backend == "sim":
            if args.action == "status" and args.output not in (None, *HUMAN):
                return _fail(f"-o {args.output}: a sim cluster lives only inside the process that created it, so "
                             "there is none to list; drop --backend sim and --profile to list the running local "
                             "and kind clusters")
            profile = load_profile(profile_arg)
            if args.action == "down":
                print("sim: nothing to stop - a sim cluster lives inside the Python process that created it.")
                return EXIT_OK
            c = connect("sim", profile, progress=sys.stderr.isatty())
            print_text(c.inventory())
            print_text("note: the sim backend runs in-process; this cluster ends with this command. Notebooks "
                       "and `labkit simulate` each create their own (identical, deterministic) sim cluster.")
            return EXIT_OK
        if backend == "local":
            return _local(args.action, profile_arg)
        if backend == "kind":
            return _kind(args, profile_arg)
        cls = backend_class(backend)
        c = cls()
        c.profile = load_profile(profile_arg)
        if args.action == "up":
            c = connect(backend, profile_arg)
        elif args.action == "down":
            c.down()
        _print_status(c.status())
        return EXIT_OK
    except (ClusterError, ProfileError) as exc:
        return _fail(str(exc))


def _usage(backend: str, profile: str, kubeconfig: str) -> None:
    print("\n".join(usage_lines(backend, profile, kubeconfig)))


def _local(action: str, profile_arg: str) -> int:
    # lazy: start-up (the local backend loads the kubernetes client, grpc and the sim)
    from labkit.cluster.local import serve

    name = load_profile(profile_arg).name
    if action == "up":
        already = serve.running_state(name) is not None
        state = serve.start(profile_arg)
        if already:
            print(f"local cluster of profile {name} was already running (server pid {state['pid']})")
        else:
            total = (state.get("timings") or {}).get("total")
            print(f"local cluster of profile {name} is up" + (f" in {total:.1f}s" if total else "")
                  + f" (server pid {state['pid']}, log {state['log']})")
        _usage("local", name, state["kubeconfig"])
    elif action == "down":
        stopped = serve.stop(name)
        print(f"local cluster of profile {name} " + ("is down" if stopped else "was not running"))
    else:
        # lazy: start-up (the local backend loads the kubernetes client, grpc and the sim)
        from labkit.cluster.local import LocalCluster

        c = LocalCluster()
        c.profile = load_profile(profile_arg)
        print(c.status())
        return EXIT_OK if serve.running_state(name) else EXIT_NOT_RUNNING
    return EXIT_OK


def _kind(args: argparse.Namespace, profile_arg: str) -> int:
    # lazy: start-up (the kind backend and its preflight are not needed by labkit --help)
    from labkit.cluster.kind import KindCluster
    from labkit.cluster.kind.preflight import check_host

    profile = load_profile(profile_arg)
    c = KindCluster(cluster_name=args.name, swap_images=args.swap_images, keep=True,
                    progress=sys.stderr.isatty(), log=_stderr if args.action == "up" else None)
    if args.action == "up":
        checks = check_host(profile.kubernetes_version)
        for check in checks:
            print(check, file=sys.stderr)
        failed = [ch for ch in checks if not ch.ok]
        if failed:
            return _fail(f"kind cannot run on this machine yet: {len(failed)} check(s) failed (fixes above)")
        c.up(profile)
        if c.attached:
            print(f"kind cluster {c.cluster_name} (profile {profile.name}) was already running")
        else:
            t = c.timings
            print(f"kind cluster {c.cluster_name} (profile {profile.name}) is up in {t.get('total', 0):.0f}s "
                  f"(create {t.get('create kind cluster', 0):.0f}s, images {t.get('driver images', 0):.0f}s, "
                  f"driver DaemonSets ready {t.get('driver DaemonSets ready', 0):.0f}s, "
                  f"slices {t.get('ResourceSlices published', 0):.0f}s)")
        _usage("kind", profile.name, str(c.kubeconfig))
        return EXIT_OK
    c.profile = profile
    if args.action == "down":
        c.select_profile(profile)
        running = c.cluster_name in c.running_clusters()
        c.down()
        print(f"kind cluster {c.cluster_name} (profile {profile.name}) " + ("is down" if running else "was not running"))
        return EXIT_OK
    text = c.status()
    print(text)
    return EXIT_NOT_RUNNING if "not running" in text else EXIT_OK


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _status_all(fmt: str, only: tuple[str, str] | None = None) -> int:
    """The running clusters (``only``: the one of this backend and profile) in ``fmt``; exit 3 when none."""
    states = [st for st in runstate.all_states() if only is None or (st.get("backend"), st.get("profile")) == only]
    live = []
    kind_running: list[str] | None = None
    for st in states:
        if st.get("backend") == "local":
            # lazy: start-up (the local backend loads the kubernetes client, grpc and the sim)
            from labkit.cluster.local import serve

            if serve.running_state(st["profile"]) is None:
                continue
        elif st.get("backend") == "kind":
            if kind_running is None:
                # lazy: start-up (the kind backend and its preflight are not needed by labkit --help)
                from labkit.cluster.kind import KindCluster

                kind_running = KindCluster().running_clusters()
            if st.get("cluster") not in kind_running:
                continue
        live.append(st)
    none = ("no local or kind cluster is running (start one with `labkit cluster up --backend kind|local "
            "--profile P`)") if only is None else (
        f"{only[0]} cluster of profile {only[1]}: not running (start it with "
        f"`labkit cluster up --backend {only[0]} --profile {only[1]}`)")
    if not live and fmt in ("table", "wide"):
        print(none)
        return EXIT_NOT_RUNNING
    print_output(fmt, status_doc(live), human=lambda f: print_table(status_table(live, wide=f == "wide"), f),
                 names=lambda: status_names(live))
    if not live:  # the empty document or no names on stdout; why, on stderr
        print(none, file=sys.stderr)
    return EXIT_OK if live else EXIT_NOT_RUNNING


def _print_status(status: object) -> None:
    print(status if isinstance(status, str) else json.dumps(status, indent=2, default=str))


def _simulated(args: argparse.Namespace) -> Any:
    """The cluster of `simulate` (and `describe -f`): the profile's or the dump's, the files applied,
    run until nothing changes. The caller ends it (cluster.down()) when it is not the sim."""
    kw = {"seed": args.seed, "progress": sys.stderr.isatty()} if args.backend == "sim" else {}
    if args.state is not None:
        if args.backend != "sim":
            raise _Usage(f"--state: a dump is replayed on the sim backend only; drop --backend {args.backend}")
        if args.profile is not None:
            raise _Usage("--state and --profile: the dump already says which nodes there are; drop --profile")
        kw["state"] = Path(args.state)
    cluster = connect(args.backend, args.profile or "workshop", **kw)
    bar = progress_bar("pods scheduled or refused", unit="pod") if hasattr(cluster, "watch") else None
    if bar is not None:
        cluster.watch(_count_settled(bar), kinds=["Pod"])
    try:
        applied = 0
        for f in args.files:
            applied += len(cluster.apply(sys.stdin.read() if f == "-" else _path(f)) or ())
        if args.files and not applied:  # kubectl apply refuses this too ("no objects passed to apply")
            raise _Usage(f"{', '.join(args.files)}: no objects (the input is empty or only comments); "
                         "fix: give manifests with apiVersion, kind and metadata")
        cluster.wait()
        if args.advance:
            if not hasattr(cluster, "advance"):
                raise _Usage(f"--advance: the {args.backend} backend has no simulated time; drop --advance")
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


class _Usage(Exception):
    """A bad combination of options: `error: ...`, exit 2 (as `_fail`)."""


def run_simulate(args: argparse.Namespace) -> int:
    try:
        cluster = _simulated(args)
        try:
            report = simulate_report(cluster)
            users = claim_users(cluster)
        finally:
            if args.backend != "sim":
                cluster.down()
    except (ClusterError, _Usage) as exc:
        return _fail(str(exc))
    print_report(report, resolve_format(args.output, "json"), users)
    return EXIT_OK


def run_describe(args: argparse.Namespace) -> int:
    ns, _, name = args.name.rpartition("/")
    namespace = ns or args.namespace
    if not name or "/" in ns:
        return _fail(f"{args.name!r}: give the object as NAME or NAMESPACE/NAME")
    if args.kubeconfig or args.context:
        if args.files or args.state or args.profile:
            return _fail("--kubeconfig describes what runs on that cluster; drop -f, --state and --profile")
        cluster = connect("kubeconfig", kubeconfig=args.kubeconfig, context=args.context, progress=False)
    elif args.files or args.state:
        try:
            cluster = _simulated(args)
        except _Usage as exc:
            return _fail(str(exc))
    else:
        return _fail("describe what? give the manifests (-f FILE, run on a fresh sim), a state dump "
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


def _path(f: str):  # noqa: ANN202
    from pathlib import Path

    p = Path(f)
    if not p.exists():
        raise ClusterError(f"{f}: no such file; check the -f path")
    return p
