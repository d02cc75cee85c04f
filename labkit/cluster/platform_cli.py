"""`labkit explain pod NS/NAME` and `labkit snapshot -o dump.yaml`: for a real cluster, through a kubeconfig
(`kubectl dra ...`, labkit.kubectl_dra, runs these same commands)."""

from __future__ import annotations

import argparse
import sys

from labkit.api import dump
from labkit.cluster.base import connect
from labkit.errors import UsageError
from labkit.output import print_text

EXIT_OK = 0


def _attach_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG, else ~/.kube/config)")
    p.add_argument("--context", help="kubeconfig context (default: its current-context)")


def register(subparsers: argparse._SubParsersAction) -> None:
    ex = subparsers.add_parser("explain", help="why a pod on a real cluster is Pending (or where it runs)")
    ex.add_argument("what", choices=["pod"])
    ex.add_argument("target", metavar="NS/NAME", help="the pod: NAMESPACE/NAME, or NAME in namespace default")
    _attach_args(ex)
    ex.set_defaults(func=run_explain)

    sn = subparsers.add_parser("snapshot", help="write a real cluster's DRA state as multi-document YAML")
    _attach_args(sn)
    sn.add_argument("-o", "--output", required=True, metavar="FILE", help="where to write it ('-': stdout)")
    sn.add_argument("--format", default="yaml", choices=["yaml", "json"], help="yaml (default) or json")
    sn.set_defaults(func=run_snapshot)


def _attach(args: argparse.Namespace):  # noqa: ANN202
    return connect("kubeconfig", kubeconfig=args.kubeconfig, context=args.context, progress=False)


def run_explain(args: argparse.Namespace) -> int:
    ns, _, name = args.target.rpartition("/")
    if not name or "/" in ns:
        raise UsageError(f"{args.target!r}: give the pod as NAMESPACE/NAME or NAME")
    cluster = _attach(args)
    try:
        print_text(cluster.explain(name, ns or "default"))
    finally:
        cluster.down()
    return EXIT_OK


def run_snapshot(args: argparse.Namespace) -> int:
    # lazy: start-up (labkit.cluster.snapshot loads labkit.model.state; labkit --help imports this module)
    from labkit.cluster.snapshot import cluster_state

    cluster = _attach(args)
    try:
        objs = cluster_state(cluster)
    finally:
        cluster.down()
    text = dump(objs, args.format)
    if args.output == "-":
        sys.stdout.write(text)
    else:
        try:
            with open(args.output, "w", encoding="utf-8") as fh:
                fh.write(text)
        except OSError as exc:
            raise UsageError(f"-o {args.output}: cannot write ({exc.strerror}); choose a writable path") from None
        counts: dict[str, int] = {}
        for o in objs:
            counts[o["kind"]] = counts.get(o["kind"], 0) + 1
        print(f"wrote {len(objs)} objects to {args.output}: " + ", ".join(f"{n} {k}" for k, n in counts.items()),
              file=sys.stderr)
    return EXIT_OK
