"""The ``labkit`` command. Each subcommand lives next to the code it drives.

A subcommand module exposes ``register(subparsers)``, which adds its parser and sets
``func`` to a callable taking the parsed args and returning the exit code. Errors it lets
escape are printed here, one line each, with the exit code of their kind (labkit.errors):
2 bad input, 3 not found, 1 the work failed, 70 a LabKit bug.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from types import ModuleType

import argcomplete

from fake_gpus.errors import FakeGpusError
from labkit.allocator import cli as allocator_cli
from labkit.api import cli as api_cli
from labkit.cel import cli as cel_cli
from labkit.cel.validation import CEL_CHECKS
from labkit.cluster import cli as cluster_cli
from labkit.cluster import platform_cli
from labkit.errors import LabkitError, exit_code, one_line
from labkit.experiments import cli as experiments_cli
from labkit.topology import cli as topology_cli

#: modules that add subcommands, in the order they appear in ``labkit --help``
SUBCOMMAND_MODULES: list[ModuleType] = [
    api_cli,          # validate
    cel_cli,          # cel
    allocator_cli,    # allocate
    cluster_cli,      # cluster, simulate
    platform_cli,     # explain, snapshot (a real cluster, through a kubeconfig)
    topology_cli,     # topology
    experiments_cli,  # experiment
]

#: what a subcommand of a lower layer needs from the layers above it: `labkit validate`
#: (labkit.api) checks CEL selectors with labkit.cel, which labkit.api cannot import
REGISTER_OPTIONS: dict[ModuleType, dict[str, object]] = {api_cli: {"cel": CEL_CHECKS}}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="labkit", description="DRA LabKit command line")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in SUBCOMMAND_MODULES:
        module.register(sub, **REGISTER_OPTIONS.get(module, {}))
    comp = sub.add_parser(
        "completion", help="print the shell completion script (bash, zsh or fish)",
        description="Tab completion of subcommands, options, profile names and object names. "
                    "bash: `source <(labkit completion bash)` (or save it under "
                    "~/.local/share/bash-completion/completions/labkit); zsh: `source <(labkit completion zsh)` "
                    "after compinit; fish: `labkit completion fish > ~/.config/fish/completions/labkit.fish`.")
    comp.add_argument("shell", choices=SHELLS)
    comp.set_defaults(func=run_completion)
    return parser


#: the shells `labkit completion` writes a script for (argcomplete's shell code)
SHELLS = ("bash", "zsh", "fish")


def run_completion(args: argparse.Namespace) -> int:
    sys.stdout.write(argcomplete.shellcode(["labkit"], shell=args.shell))
    return 0


def main(argv: list[str] | None = None) -> int:
    try:
        parser = build_parser()
        if argv is None:  # the console script: under the shell's completion, answer it and exit
            argcomplete.autocomplete(parser)
        args = parser.parse_args(argv)
    except KeyboardInterrupt:
        return 130
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    return run_guarded(f"labkit {args.command}", lambda: args.func(args))


def run_guarded(prog: str, command: Callable[[], int | None]) -> int:
    """Run ``command`` and turn what it raises into the exit code of its kind, printed as
    ``prog: <one line>`` on stderr: the one place where errors meet exit codes (every labkit
    command and ``kubectl dra`` come through here)."""
    try:
        return int(command() or 0)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0
    except Exception as exc:  # noqa: BLE001 - the contract: one line per problem, never a traceback
        if os.environ.get("LABKIT_DEBUG") == "1" and not isinstance(exc, LabkitError | FakeGpusError):
            raise
        for line in error_lines(exc):
            print(f"{prog}: {line}", file=sys.stderr)
        return error_exit_code(exc)


def error_lines(exc: BaseException) -> list[str]:
    """What the user sees for ``exc``: one line per problem (a LoadError may hold several)."""
    if isinstance(exc, LabkitError | FakeGpusError):
        problems = getattr(exc, "problems", None)
        if isinstance(problems, list) and len(problems) > 1:
            return [str(p) for p in problems]
        return [one_line(exc)]
    return [f"internal error: {type(exc).__name__}: {one_line(exc)} "
            "(a LabKit bug: please report it; LABKIT_DEBUG=1 shows the traceback)"]


def error_exit_code(exc: BaseException) -> int:
    """The one table from error kinds to exit codes (see labkit.errors)."""
    if isinstance(exc, FakeGpusError):
        return exc.exit_code
    return exit_code(exc)


if __name__ == "__main__":
    sys.exit(main())
