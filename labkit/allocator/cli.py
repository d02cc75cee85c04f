"""``labkit allocate``: run the allocator once for one node over manifest files.

Exit 0 allocated, 3 unsatisfiable, 2 error or bad input. JSON shape: docs/architecture.md.
"""

from __future__ import annotations

import argparse
import os
import sys
import textwrap
from collections.abc import Callable
from typing import Any

from labkit.allocator import Allocator, features_for
from labkit.api import LoadError, load_files, with_defaults
from labkit.api.features import DEFAULT_VERSION, FeatureGateError, parse_feature_gates, resolve_gates
from labkit.cel.validation import validate
from labkit.output import (
    Table,
    add_output_arg,
    escape_terminal,
    print_output,
    print_table,
    resolve_format,
    terminal_width,
)

__all__ = ["register", "run", "allocate_files", "deterministic_share_ids"]

EXIT = {"allocated": 0, "unsatisfiable": 3, "error": 2}


def register(p: argparse.ArgumentParser) -> None:
    p.description = ("Allocate the ResourceClaims in the files (those without status.allocation, in file "
                     "order) on NODE, like kube-scheduler's structured allocator.")
    p.add_argument("-f", "--filename", dest="files", action="append", required=True, metavar="FILE",
                   help="manifests: DeviceClasses, ResourceSlices, ResourceClaims, Nodes, DeviceTaintRules")
    p.add_argument("--node", required=True, help="node to allocate for (a bare Node is assumed if absent)")
    p.add_argument("--feature-gates", default="", metavar="G=true,...", help="Kubernetes gate overrides")
    p.add_argument("--kubernetes-version", default=DEFAULT_VERSION, help="1.34-1.38 (default %(default)s)")
    p.add_argument("--no-validate", action="store_true", help="hand objects straight to the allocator")
    add_output_arg(p, "json", name="the allocated claims")
    p.add_argument("--explain", action="store_true", help="add an explanation of refusals")
    p.set_defaults(func=run)


def deterministic_share_ids(allocations: dict[str, dict[str, Any]]) -> None:
    """Replace shareIDs by ``00000000-0000-0000-0000-<N>``, N counted in output order."""
    n = 0
    for alloc in allocations.values():
        for r in (alloc.get("devices") or {}).get("results") or []:
            if r.get("shareID") is not None:
                n += 1
                r["shareID"] = f"00000000-0000-0000-0000-{n:012x}"


def _bad(message: str) -> dict[str, Any]:
    return {"status": "error", "allocations": {}, "error": message, "explanation": None}


def allocate_files(files: list[str], node_name: str, *, feature_gates: str = "",
                   kubernetes_version: str = "1.37", validate_input: bool = True,
                   explain: bool = False, warn: Callable[[str], object] | None = None, require_claims: bool = False) -> dict[str, Any]:
    """The JSON document ``labkit allocate`` prints (as a dict).

    ``require_claims``: no pending claim is an error (the CLI), not an empty success (the oracle).
    """
    try:
        overrides = parse_feature_gates(feature_gates or "")
        gates, warnings = resolve_gates(kubernetes_version, overrides)
        features = features_for(kubernetes_version, overrides)
    except FeatureGateError as exc:
        return _bad(str(exc))
    for w in warnings:
        (warn or _stderr)(f"warning: {w}")
    try:
        objs = load_files(files)
    except LoadError as exc:
        return _bad(str(exc).splitlines()[0] if str(exc) else "cannot load input")
    if validate_input:
        problems = validate(objs, kubernetes_version=kubernetes_version, feature_gates=overrides)
        if problems:
            for p in problems:
                (warn or _stderr)(str(p))
            more = f" (and {len(problems) - 1} more problems)" if len(problems) > 1 else ""
            return _bad(f"{problems[0]}{more}")
    objs = [with_defaults(o) for o in objs if isinstance(o, dict)]
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for o in objs:
        by_kind.setdefault(o.get("kind", ""), []).append(o)
    claims = by_kind.get("ResourceClaim", [])
    pending = [c for c in claims if not (c.get("status") or {}).get("allocation")]
    in_use = [c for c in claims if (c.get("status") or {}).get("allocation")]
    if require_claims and not pending:
        return _bad("no ResourceClaim to allocate in the files (claims with status.allocation are "
                    "already allocated); fix: add the ResourceClaims to allocate")
    node = next((n for n in by_kind.get("Node", []) if (n.get("metadata") or {}).get("name") == node_name),
                {"apiVersion": "v1", "kind": "Node", "metadata": {"name": node_name}})
    rules = by_kind.get("DeviceTaintRule", []) if gates.get("DRADeviceTaintRules") else []
    allocator = Allocator(features, by_kind.get("DeviceClass", []), by_kind.get("ResourceSlice", []),
                          in_use, taint_rules=rules)
    outcome = allocator.allocate(node, pending)
    allocations: dict[str, dict[str, Any]] = {}
    if outcome.status == "allocated":
        for claim, result in zip(pending, outcome.allocations):
            meta = claim.get("metadata") or {}
            allocations[f"{meta.get('namespace', '')}/{meta.get('name', '')}"] = result
    if os.environ.get("LABKIT_DETERMINISTIC_SHAREID") == "1":
        deterministic_share_ids(allocations)
    doc = {"status": outcome.status, "allocations": allocations, "error": outcome.error, "explanation": None}
    if explain:
        exp = outcome.explanation
        doc["explanation"] = exp.to_dict() if exp is not None else None
        doc["_summary"] = exp.summary() if exp is not None else ""
    return doc


def _stderr(line: str) -> None:
    print(line, file=sys.stderr)


def _table(doc: dict[str, Any]) -> Table:
    rows = []
    for claim, alloc in doc["allocations"].items():
        for r in (alloc.get("devices") or {}).get("results") or []:
            note = []
            if r.get("adminAccess"):
                note.append("admin")
            if r.get("shareID"):
                note.append(f"share {r['shareID'][:8]}")
            if r.get("consumedCapacity"):
                note.append(",".join(f"{k}={v}" for k, v in r["consumedCapacity"].items()))
            rows.append((claim, r["request"], f"{r['driver']}/{r['pool']}/{r['device']}", " ".join(note)))
    return Table(("CLAIM", "REQUEST", "DEVICE", "NOTE"), rows, wrap=[3], shrink=[0, 2])


def run(args: argparse.Namespace) -> int:
    try:
        doc = allocate_files(args.files, args.node, feature_gates=args.feature_gates,
                             kubernetes_version=args.kubernetes_version, validate_input=not args.no_validate,
                             explain=args.explain, require_claims=True)
    except Exception as exc:  # noqa: BLE001 - the contract is: never a traceback
        doc = _bad(f"internal error: {type(exc).__name__}: {exc}")
    summary = doc.pop("_summary", None)

    def human(fmt: str) -> None:
        print_table(_table(doc), fmt)
        status = escape_terminal(f"status: {doc['status']}" + (f" ({doc['error']})" if doc.get("error") else ""),
                                 layout=False)
        print(status if fmt == "wide" else "\n".join(textwrap.wrap(status, terminal_width()) or [status]))
        if summary:
            print(summary)  # Explanation.summary() escapes what it quotes

    print_output(resolve_format(args.output, "json"), doc, human=human,
                 names=lambda: [f"resourceclaim.resource.k8s.io/{key.partition('/')[2]}" for key in doc["allocations"]])
    if doc["status"] == "error":  # the JSON document has it too; the user sees one line on stderr
        print(f"labkit allocate: {escape_terminal(doc['error'], layout=False)}", file=sys.stderr)
    return EXIT.get(doc["status"], 2)
