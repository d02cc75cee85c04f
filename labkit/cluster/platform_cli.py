"""`labkit explain pod NS/NAME` and `labkit snapshot -o dump.yaml`: for a real cluster, through a kubeconfig
(`kubectl dra ...`, labkit.kubectl_dra, runs these same commands)."""

from __future__ import annotations

import argparse
import sys

from labkit.api import dump
from labkit.cluster.backends import connect
from labkit.cluster.explain_live import explain_pod_doc
from labkit.cluster.snapshot import cluster_state
from labkit.errors import UsageError
from labkit.fileio import cannot_write, write_text
from labkit.output import (
    Table,
    add_output_arg,
    on_terminal,
    print_output,
    print_table,
    print_text,
    resolve_format,
)

EXIT_OK = 0


def _attach_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG, else ~/.kube/config)")
    p.add_argument("--context", help="kubeconfig context (default: its current-context)")


def register_explain(ex: argparse.ArgumentParser) -> None:
    ex.description = ("table (the default) tells it as prose, fitted to the terminal (wide: not fitted); json/yaml "
                      "give the same verdict as data: pod, phase, node, verdict {status, plugin, plugins, "
                      "extensionPoint, message}, nodeGroups [{nodes, plugin, reasons, detail, allocator}], claims, "
                      "and scheduler {condition, events} (what kube-scheduler said); see labkit/cluster/explain.py.")
    ex.add_argument("what", choices=["pod"])
    ex.add_argument("target", metavar="NS/NAME", help="the pod: NAMESPACE/NAME, or NAME in namespace default")
    _attach_args(ex)
    add_output_arg(ex, "table", name="pod/NAME")
    ex.set_defaults(func=run_explain)


def register_snapshot(sn: argparse.ArgumentParser) -> None:
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
    fmt = resolve_format(args.output, "table")
    cluster = _attach(args)
    try:
        doc = explain_pod_doc(cluster, name, ns or "default") if fmt in ("json", "yaml") else None
        if fmt == "name":
            cluster.get("Pod", name, ns or "default")  # the pod exists, else one NotFound line
        print_output(fmt, doc, names=lambda: [f"pod/{name}"],
                     human=lambda f: print_text(cluster.explain(name, ns or "default")) if f == "table"
                     else print(cluster.explain(name, ns or "default")))
    finally:
        cluster.down()
    return EXIT_OK


def run_snapshot(args: argparse.Namespace) -> int:
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
            write_text(args.output, text)  # whole or not at all: a failed write leaves the old file
        except OSError as exc:
            raise UsageError(cannot_write(f"-o {args.output}", exc)) from None
        counts: dict[str, int] = {}
        for o in objs:
            counts[o["kind"]] = counts.get(o["kind"], 0) + 1
        if on_terminal():  # a terminal: what was saved, as a table
            print_table(Table(("kind", "count"), [*counts.items(), ("(all)", len(objs))], right=[1]), "table")
            print(f"written to {args.output} ({args.format})")
        else:
            print(f"wrote {len(objs)} objects to {args.output}: " + ", ".join(f"{n} {k}" for k, n in counts.items()),
                  file=sys.stderr)
    return EXIT_OK
