"""``labkit validate -f FILE...``: exit 0 (valid), 1 (problems on stdout), 2 (unreadable input)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from labkit.api.context import CelChecks
from labkit.api.features import DEFAULT_VERSION, parse_feature_gates, resolve_gates
from labkit.api.load import load_files
from labkit.api.validate import validate

__all__ = ["register", "run"]


def register(subparsers: Any, *, cel: CelChecks | None = None) -> None:
    """``cel``: how to check CEL selectors (labkit.cli passes labkit.cel's; without, their
    length only)."""
    parser = subparsers.add_parser(
        "validate", help="check manifests like the API server would",
        description="Validate resource.k8s.io/v1 objects (and Pods, Nodes, Namespaces) offline.")
    parser.add_argument("-f", "--filename", dest="files", action="append", required=True,
                        metavar="FILE", help="manifest file (YAML/JSON, multi-document); '-' = stdin; repeatable")
    parser.add_argument("--kubernetes-version", default=DEFAULT_VERSION,
                        help="validate as this Kubernetes version (1.34-1.37; default %(default)s)")
    parser.add_argument("--feature-gates", default="", metavar="G=true,...",
                        help="feature gates to change from the version's defaults")
    parser.set_defaults(func=run, cel_checks=cel)


def run(args: argparse.Namespace) -> int:
    """Errors (bad options, unreadable files) go to labkit.cli, which prints them and exits 2."""
    gates = parse_feature_gates(args.feature_gates or "")
    _, warnings = resolve_gates(args.kubernetes_version, gates)
    for warning in warnings:
        print(f"warning: {warning}", file=sys.stderr)
    objs = load_files(args.files)
    problems = validate(objs, kubernetes_version=args.kubernetes_version, feature_gates=gates,
                        cel=getattr(args, "cel_checks", None))
    if problems:
        sys.stdout.write("".join(f"{p}\n" for p in problems))
        return 1
    noun = "object" if len(objs) == 1 else "objects"
    print(f"{len(objs)} {noun} valid", file=sys.stderr)
    return 0
