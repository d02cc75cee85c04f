"""The ``labkit`` command. Each subcommand lives next to the code it drives.

:data:`COMMANDS` is the table of subcommands: name, the one line ``labkit --help`` shows, and the
``module:function`` that adds the command's options to its parser. A command's module is imported
only when that command runs (or is completed): ``labkit validate`` never loads the sim, the
allocator or networkx, and ``labkit --help`` loads none of them. The function sets ``func`` to a
callable taking the parsed args and returning the exit code. Errors it lets escape are printed
here, one line each, with the exit code of their kind (labkit.errors): 2 bad input, 3 not found,
1 the work failed, 70 a LabKit bug.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fake_gpus.errors import FakeGpusError
from labkit.errors import LabkitError, exit_code, one_line
from labkit.output import escape_terminal


@dataclass(frozen=True)
class Command:
    """One ``labkit`` subcommand. ``register`` and the values of ``options`` are ``module:name``
    references, imported when the command is used; ``options`` are keyword arguments for
    ``register``: what a command of a lower layer needs from the layers above it."""

    name: str
    help: str
    register: str
    options: Mapping[str, str] = field(default_factory=dict)


#: the subcommands, in the order ``labkit --help`` lists them
COMMANDS: tuple[Command, ...] = (
    # labkit.api cannot import labkit.cel (a layer above it): labkit.cli hands it the CEL checks
    Command("validate", "check manifests like the API server would", "labkit.api.cli:register",
            {"cel": "labkit.cel.validation:CEL_CHECKS"}),
    Command("cel", "evaluate a device selector against ResourceSlices", "labkit.cel.cli:register"),
    Command("allocate", "run kube-scheduler's DRA allocator for one node", "labkit.allocator.cli:register"),
    Command("cluster", "start, stop or show a cluster of a profile", "labkit.cluster.cli:register_cluster"),
    Command("simulate", "apply manifests to a fresh cluster and print where pods landed",
            "labkit.cluster.cli:register_simulate"),
    Command("describe", "the whole story of one pod or claim: conditions, devices, explanation, events",
            "labkit.cluster.cli:register_describe"),
    # a real cluster, through a kubeconfig (`kubectl dra` runs these too)
    Command("explain", "why a pod on a real cluster is Pending (or where it runs)",
            "labkit.cluster.platform_cli:register_explain"),
    Command("snapshot", "write a real cluster's DRA state as multi-document YAML",
            "labkit.cluster.platform_cli:register_snapshot"),
    Command("topology", "draw or describe a node's NVLink / PCIe / NUMA topology", "labkit.topology.cli:register"),
    Command("experiment", "utilisation / fragmentation experiments on the sim backend",
            "labkit.experiments.cli:register"),
    Command("completion", "print the shell completion script (bash, zsh or fish)", "labkit.cli:register_completion"),
)


def resolve(ref: str) -> Any:
    """The object a ``module:name`` reference of :data:`COMMANDS` names (importing its module)."""
    module, _, name = ref.partition(":")
    return getattr(importlib.import_module(module), name)


def command_named(words: Sequence[str]) -> str | None:
    """The subcommand a command line names: its first word that is not an option (labkit's own
    options take no value), when that is a command; else None (``labkit``, ``labkit --help``,
    a misspelt command)."""
    first = next((w for w in words if not w.startswith("-")), None)
    return first if first in {c.name for c in COMMANDS} else None


def build_parser(only: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The ``labkit`` parser. Every command is listed (``labkit --help``); the options of those in
    ``only`` are added (None: of all, which imports every command's module)."""
    parser = argparse.ArgumentParser(prog="labkit", description="DRA LabKit command line")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for cmd in COMMANDS:
        p = sub.add_parser(cmd.name, help=cmd.help)
        if only is None or cmd.name in only:
            resolve(cmd.register)(p, **{k: resolve(v) for k, v in cmd.options.items()})
    return parser


def register_completion(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Tab completion of subcommands, options, profile names and object names. "
        "bash: `source <(labkit completion bash)` (or save it under "
        "~/.local/share/bash-completion/completions/labkit); zsh: `source <(labkit completion zsh)` "
        "after compinit; fish: `labkit completion fish > ~/.config/fish/completions/labkit.fish`.")
    parser.add_argument("shell", choices=SHELLS)
    parser.set_defaults(func=run_completion)


#: the shells `labkit completion` writes a script for (argcomplete's shell code)
SHELLS = ("bash", "zsh", "fish")


def run_completion(args: argparse.Namespace) -> int:
    import argcomplete  # only here and under completion: the other commands never need it

    sys.stdout.write(argcomplete.shellcode(["labkit"], shell=args.shell))
    return 0


def main(argv: list[str] | None = None) -> int:
    try:
        if argv is None and "_ARGCOMPLETE" in os.environ:
            # the console script under the shell's completion: answer it (the options of the command
            # on the line, if one is there yet) and exit
            line = os.environ.get("COMP_LINE", "")
            line = line[: int(os.environ.get("COMP_POINT") or len(line))]
            parser = build_parser(_only(line.split()[1:]))
            import argcomplete  # only here and in `labkit completion`: the other commands never need it

            argcomplete.autocomplete(parser)
        words = sys.argv[1:] if argv is None else argv
        parser = build_parser(_only(words))
        args = parser.parse_args(argv)
    except KeyboardInterrupt:
        return 130
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    return run_guarded(f"labkit {args.command}", lambda: args.func(args))


def _only(words: Sequence[str]) -> list[str]:
    """The commands whose options a parse of ``words`` needs: the one named, if any."""
    name = command_named(words)
    return [name] if name else []


def run_guarded(prog: str, command: Callable[[], int | None]) -> int:
    """Run ``command`` and turn what it raises into the exit code of its kind, printed as
    ``prog: <one line>`` on stderr: the one place where errors meet exit codes (every labkit
    command and ``kubectl dra`` come through here). What a message quotes is escaped for the
    terminal (labkit.output.escape_terminal), its newlines too: one line per problem."""
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
            print(f"{prog}: {escape_terminal(line, layout=False)}", file=sys.stderr)
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
