"""``labkit cel EXPR -f FILE...``: evaluate a selector against every device in ResourceSlices.

Exit 0 after listing every device (match / no match / error); exit 2 with a one-line message
when the expression does not compile, the input cannot be read, or the selector fails with a
runtime error on every device (kube-scheduler would then fail every allocation that uses it: its
allocator aborts on a selector's runtime error). Never a traceback.
"""

from __future__ import annotations

import argparse
from dataclasses import asdict
from typing import Any

from labkit.api import load_files
from labkit.cel.facade import DEFAULT_ENGINE, ENGINES, compile_selector
from labkit.cel.slices import evaluate_slices
from labkit.cel.validation import validate
from labkit.errors import InputError
from labkit.output import Table, add_output_arg, print_output, print_table, resolve_format

__all__ = ["register", "run"]


def register(parser: argparse.ArgumentParser) -> None:
    parser.description = ("Evaluate a DRA CEL device selector against every device of the ResourceSlices "
                          "in the files, like kube-scheduler would.")
    parser.add_argument("expression", metavar="EXPR", help="CEL selector, e.g. 'device.driver == \"gpu.nvidia.com\"'")
    parser.add_argument("-f", "--filename", dest="files", action="append", required=True, metavar="FILE",
                        help="manifest file with ResourceSlices (YAML/JSON); '-' = stdin; repeatable")
    add_output_arg(parser, "table", name="device/DRIVER/POOL/DEVICE of each device the selector matches")
    parser.add_argument("--engine", choices=ENGINES, default=DEFAULT_ENGINE)
    parser.add_argument("--no-consumable-capacity", dest="consumable_capacity", action="store_false",
                        help="compile as with feature gate DRAConsumableCapacity off")
    parser.add_argument("--list-type-attributes", action="store_true",
                        help="compile as with feature gate DRAListTypeAttributes on")
    parser.set_defaults(func=run)


def _refuse_invalid_slices(objs: list[dict[str, Any]]) -> None:
    """Slices the API server would refuse never reach a selector: say so instead of evaluating."""
    slices = [o for o in objs if isinstance(o, dict) and o.get("kind") == "ResourceSlice"]
    problems = validate(slices) if slices else []
    if problems:
        raise SliceInputError([str(p) for p in problems])


class SliceInputError(InputError):
    """ResourceSlices that do not validate; one line per problem."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("\n".join(problems),
                         fix="fix the slices (labkit validate -f FILE shows the same problems)")


def _table(rows: list[dict[str, str]]) -> Table:
    cols = ["node", "driver", "pool", "device", "result", "message"]
    return Table(cols, [[r[c] for c in cols] for r in rows], wrap=[5], shrink=[1, 2, 0],
                 style=lambda i, v: {"match": "green", "error": "red"}.get(v) if i == 4 else None)


def run(args: argparse.Namespace) -> int:
    # a CelCompileError or LoadError goes to labkit.cli: one line, exit 2
    program = compile_selector(args.expression, engine=args.engine,
                               consumable_capacity=args.consumable_capacity,
                               list_type_attributes=args.list_type_attributes)
    objs = load_files(args.files)
    _refuse_invalid_slices(objs)
    rows = [asdict(m) for m in evaluate_slices(program, objs)]
    if not rows:
        raise InputError("no devices found: the files contain no ResourceSlice with devices",
                         fix="pass ResourceSlices, e.g. from `python -m fake_gpus slices`")
    doc = {"expression": args.expression, "engine": args.engine, "devices": rows}
    # piped, the table has one line per device, as always
    print_output(resolve_format(args.output, "table"), doc,
                 human=lambda fmt: print_table(_table(rows), fmt, fit_pipe=False),
                 names=lambda: [f"device/{r['driver']}/{r['pool']}/{r['device']}" for r in rows
                                if r["result"] == "match"])
    if rows and all(r["result"] == "error" for r in rows):
        raise InputError(f"the selector fails on every device ({len(rows)}), first: {rows[0]['message']}; "
                         "kube-scheduler would fail every allocation that uses it",
                         fix="guard the lookup with has(...) or optional chaining (.?name.orValue(...))")
    return 0
