"""``labkit validate -f FILE...`` (or ``labkit validate FILE...``, as pre-commit passes files):
exit 0 (valid), 1 (problems on stdout), 2 (unreadable input)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from labkit.api.context import CelChecks
from labkit.api.features import DEFAULT_VERSION, SUPPORTED_VERSIONS, parse_feature_gates, resolve_gates
from labkit.api.load import LoadError, load, load_files, read_documents
from labkit.api.validate import check_objects, server_warnings
from labkit.errors import InputError
from labkit.output import escape_terminal

__all__ = ["register", "run"]


def register(parser: argparse.ArgumentParser, *, cel: CelChecks | None) -> None:
    """``cel``: how to check CEL selectors (labkit.cli passes labkit.cel's; None checks their
    length only)."""
    parser.description = "Validate resource.k8s.io/v1 objects (and Pods, Nodes, Namespaces) offline."
    parser.add_argument("-f", "--filename", dest="files", action="append", default=[],
                        metavar="FILE", help="manifest file (YAML/JSON, multi-document); '-' = stdin; repeatable")
    parser.add_argument("paths", nargs="*", metavar="FILE", help="more manifest files (what pre-commit passes)")
    parser.add_argument("--kubernetes-version", default=DEFAULT_VERSION,
                        help=f"validate as this Kubernetes version ({SUPPORTED_VERSIONS[0]}-{SUPPORTED_VERSIONS[-1]}; "
                             "default %(default)s)")
    parser.add_argument("--feature-gates", default="", metavar="G=true,...",
                        help="feature gates to change from the version's defaults")
    parser.add_argument("--skip-non-kubernetes", action="store_true",
                        help="skip YAML documents that are not Kubernetes objects (no apiVersion and kind: CI "
                             "configs, Compose files) and files with none, instead of refusing them "
                             "(the pre-commit hook sets it)")
    parser.set_defaults(func=run, cel_checks=cel)


def run(args: argparse.Namespace) -> int:
    """Errors (bad options, unreadable files) go to labkit.cli, which prints them and exits 2."""
    gates = parse_feature_gates(args.feature_gates or "")
    _, warnings = resolve_gates(args.kubernetes_version, gates)
    for warning in warnings:
        print(f"warning: {escape_terminal(warning, layout=False)}", file=sys.stderr)
    files = [*args.files, *args.paths]
    if not files:
        raise InputError("no manifests given", fix="name them with -f FILE or as arguments")
    objs = _kubernetes_objects(files) if args.skip_non_kubernetes else load_files(files)
    if not objs:
        print(f"no Kubernetes objects in {len(files)} file(s): nothing to validate", file=sys.stderr)
        return 0
    problems = check_objects(objs, kubernetes_version=args.kubernetes_version, feature_gates=gates,
                        cel=args.cel_checks)
    for warning in server_warnings(objs, kubernetes_version=args.kubernetes_version):
        # what kubectl prints for the API server's warning header
        print(f"Warning: {escape_terminal(warning, layout=False)}", file=sys.stderr)
    if problems:
        # one line each, what they quote escaped for a terminal (as the error lines: labkit.cli)
        sys.stdout.write("".join(f"{escape_terminal(str(p), layout=False)}\n" for p in problems))
        return 1
    noun = "object" if len(objs) == 1 else "objects"
    print(f"{len(objs)} {noun} valid", file=sys.stderr)
    return 0


def _kubernetes_objects(files: list[str]) -> list[dict[str, Any]]:
    """The documents of ``files`` that are Kubernetes objects (a mapping with apiVersion and kind),
    loaded as ``load_files`` loads them; the others are left out. Unreadable YAML is still refused."""
    docs: list[Any] = []
    problems: list[str] = []
    for path in files:
        try:
            docs += [d for d in (read_documents(path) if path != "-" else load("-"))
                     if isinstance(d, dict) and isinstance(d.get("apiVersion"), str) and isinstance(d.get("kind"), str)]
        except LoadError as exc:
            problems.extend(exc.problems)
    if problems:
        raise LoadError(problems)
    return load(docs) if docs else []
