"""The ``labkit`` command. Each subcommand lives next to the code it drives.

A subcommand module exposes ``register(subparsers)``, which adds its parser and sets
``func`` to a callable taking the parsed args and returning the exit code.
"""

from __future__ import annotations

import argparse
import importlib
import sys

#: modules that add subcommands, in the order they appear in ``labkit --help``
SUBCOMMAND_MODULES = [
    "labkit.api.cli",          # validate
    "labkit.cel.cli",          # cel
    "labkit.allocator.cli",    # allocate
    "labkit.cluster.cli",      # cluster, simulate
    "labkit.cluster.platform_cli",  # explain, snapshot (a real cluster, through a kubeconfig)
    "labkit.topology.cli",     # topology
    "labkit.experiments.cli",  # experiment
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="labkit", description="DRA LabKit command line")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in SUBCOMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:  # a part of the kit not installed/built yet
            if exc.name == name:
                continue
            raise
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
