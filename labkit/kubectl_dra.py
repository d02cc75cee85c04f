"""``kubectl dra ...``: the kubectl plugin (the ``kubectl-dra`` executable installed with the kit).

kubectl finds ``kubectl-dra`` on PATH and runs it with the words after ``dra``. Each subcommand is
a ``labkit`` command run through :func:`labkit.cli.main`, so the output, the errors and the exit
codes are labkit's own:

    kubectl dra explain pod NS/NAME [-o ...]   labkit explain pod NS/NAME [-o json|yaml|name]
    kubectl dra snapshot [-o yaml|json]        labkit snapshot -o - [--format json]
    kubectl dra what-if -f new.yaml [-o ...]   labkit snapshot, then labkit simulate --state DUMP -f new.yaml
    kubectl dra validate -f FILE...            labkit validate -f FILE...

kubectl's conventions: ``--kubeconfig`` and ``--context`` (else $KUBECONFIG / ~/.kube/config and
its current context), ``-n NAMESPACE`` (the pod's namespace for explain; the namespace of what-if
objects that name none), ``-o yaml|json`` where the output is data (snapshot, what-if; what-if
prints labkit's table by default; explain prints its story by default, the verdict as data with -o). kubectl passes no flags of its own to a plugin: they go after
``dra`` (``kubectl dra snapshot --context kind-lab``).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
import tempfile
from pathlib import Path

from labkit import cli
from labkit.api import dump, load
from labkit.api.load import input_path
from labkit.errors import UsageError
from labkit.fileio import write_text

PROG = "kubectl dra"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROG, description="DRA LabKit as a kubectl plugin: why a pod is "
                                     "Pending, the cluster's DRA state, what-if, offline validation.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    def cluster_flags(p: argparse.ArgumentParser, *, namespace: str, output: tuple[str, ...] = ()) -> None:
        p.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG, else ~/.kube/config)")
        p.add_argument("--context", help="kubeconfig context (default: its current-context)")
        p.add_argument("-n", "--namespace", help=namespace)
        if output:
            p.add_argument("-o", "--output", choices=output, help=f"output format ({', '.join(output)})")

    ex = sub.add_parser("explain", help="why a pod is Pending (or where it runs)")
    ex.add_argument("what", choices=["pod"])
    ex.add_argument("target", metavar="[NS/]NAME", help="the pod: NAMESPACE/NAME, or NAME with -n (default: default)")
    cluster_flags(ex, namespace="the pod's namespace when NAME has none", output=("yaml", "json", "name"))

    sn = sub.add_parser("snapshot", help="the cluster's DRA state as YAML (or JSON): the what-if input")
    cluster_flags(sn, namespace="(refused: a snapshot is the whole cluster, what a what-if needs)",
                  output=("yaml", "json"))

    wi = sub.add_parser("what-if", help="where new pods and claims would land on this cluster (nothing is applied)")
    wi.add_argument("-f", "--filename", dest="files", action="append", required=True, metavar="FILE",
                    help="manifests to try (repeatable; '-' reads stdin)")
    cluster_flags(wi, namespace="namespace of the objects in -f that name none (default: default)",
                  output=("table", "yaml", "json"))

    va = sub.add_parser("validate", help="check DRA manifests offline, like the API server would")
    va.add_argument("-f", "--filename", dest="files", action="append", required=True, metavar="FILE",
                    help="manifest file (repeatable; '-' reads stdin)")
    va.add_argument("--kubernetes-version", help="validate as this Kubernetes version (labkit validate's default)")
    va.add_argument("--feature-gates", metavar="G=true,...", help="feature gates to change from the version's defaults")
    return parser


def _cluster_args(args: argparse.Namespace) -> list[str]:
    out: list[str] = []
    if args.kubeconfig:
        out += ["--kubeconfig", args.kubeconfig]
    if args.context:
        out += ["--context", args.context]
    return out


def _labkit(argv: list[str]) -> tuple[int, str]:
    """``labkit ARGV`` in this process; its stdout captured (stderr goes straight through)."""
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        rc = cli.main(argv)
    return rc, buf.getvalue()


def run_explain(args: argparse.Namespace) -> int:
    target = args.target
    if args.namespace:
        ns, slash, _ = target.partition("/")
        if slash and ns != args.namespace:
            raise UsageError(f"{target!r} names namespace {ns!r} but -n says {args.namespace!r}; give one of them")
        if not slash:
            target = f"{args.namespace}/{target}"
    return cli.main(["explain", "pod", target, *_cluster_args(args), *(["-o", args.output] if args.output else [])])


def run_snapshot(args: argparse.Namespace) -> int:
    if args.namespace:
        raise UsageError("-n: a snapshot holds the whole cluster (nodes, slices, every claim and pod), "
                       "which a what-if needs; drop -n")
    return cli.main(["snapshot", "-o", "-", "--format", args.output or "yaml", *_cluster_args(args)])


def run_what_if(args: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory(prefix="kubectl-dra-") as tmp:
        state = Path(tmp) / "snapshot.yaml"
        said = io.StringIO()  # "wrote N objects to <temporary file>" is no news here; an error is
        with contextlib.redirect_stderr(said):
            rc = cli.main(["snapshot", "-o", str(state), *_cluster_args(args)])
        if rc:
            sys.stderr.write(said.getvalue())
            return rc
        files = args.files
        if args.namespace:  # the objects that name no namespace go to -n's, as with kubectl apply -n
            objs = [o for f in files for o in load(f if f == "-" else input_path(f),  # "-": stdin, bounded
                                                   default_namespace=args.namespace)]
            if not objs:  # said as `labkit simulate -f` says it, naming the input, not the temporary file
                raise UsageError(f"{', '.join(files)}: no objects (the input is empty or only comments); "
                                 "fix: give manifests with apiVersion, kind and metadata")
            moved = Path(tmp) / "objects.yaml"
            write_text(moved, dump(objs, "yaml"))
            files = [str(moved)]
        argv = ["simulate", "--state", str(state), *(a for f in files for a in ("-f", f))]
        if (args.output or "table") == "table":
            return cli.main([*argv, "-o", "table"])
        rc, out = _labkit([*argv, "-o", "json"])
        if rc:
            sys.stdout.write(out)
            return rc
        report = json.loads(out)
        sys.stdout.write(json.dumps(report, indent=2) + "\n" if args.output == "json" else dump(report, "yaml"))
        return 0


def run_validate(args: argparse.Namespace) -> int:
    argv = ["validate", *(a for f in args.files for a in ("-f", f))]
    if args.kubernetes_version:
        argv += ["--kubernetes-version", args.kubernetes_version]
    if args.feature_gates:
        argv += ["--feature-gates", args.feature_gates]
    return cli.main(argv)


COMMANDS = {"explain": run_explain, "snapshot": run_snapshot, "what-if": run_what_if, "validate": run_validate}


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return cli.run_guarded(PROG, lambda: COMMANDS[args.command](args))


def entry() -> int:
    """The ``kubectl-dra`` console script."""
    return main()
