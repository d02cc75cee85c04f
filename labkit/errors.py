"""The one root of every error LabKit raises on purpose, and the exit code each kind maps to.

Every exception class in ``labkit`` derives from :class:`LabkitError` through one of three
kinds (the CLI turns them into exit codes in one place, :func:`labkit.cli.main`):

- :class:`InputError` (exit 2): what the user typed or loaded is wrong. It may name the
  ``obj`` (``ResourceClaim default/gpu``, a file), the ``field`` path (``spec.devices.requests[0]``)
  and the ``fix``; :meth:`LabkitError.line` joins them into the one line the user sees.
- :class:`NotFoundError` (exit 3): something the user named does not exist.
- :class:`EngineError` (exit 1): the kit could not do the work (a cluster, a tool, a process,
  the allocator's search budget) although the input was fine.

The kinds do not derive from built-in exceptions: each existing class keeps its own
(``LoadError(InputError, ValueError)``), so ``except ValueError`` catches what it caught before.
This module is the lowest layer: it imports nothing from ``labkit``.
"""

from __future__ import annotations

__all__ = ["EXIT_ENGINE", "EXIT_INPUT", "EXIT_INTERNAL", "EXIT_NOT_FOUND", "EngineError",
           "InputError", "LabkitError", "NotFoundError", "UsageError", "as_input_error", "exit_code",
           "one_line"]

EXIT_ENGINE = 1
EXIT_INPUT = 2
EXIT_NOT_FOUND = 3
#: a bug in LabKit (any exception that is not a LabkitError), reported as one line
EXIT_INTERNAL = 70


class LabkitError(Exception):
    """Root of LabKit's errors. ``obj``, ``field`` and ``fix`` are optional context."""

    exit_code = EXIT_ENGINE

    def __init__(self, *args: object, obj: str | None = None, field: str | None = None,
                 fix: str | None = None) -> None:
        super().__init__(*args)
        self.obj = obj
        self.field = field
        self.fix = fix

    def line(self) -> str:
        """``obj: field: message (fix)`` on one line (the message's first line if it has several)."""
        return one_line(self)


class InputError(LabkitError):
    """The user's input (a file, an argument, a profile, a trace) is wrong."""

    exit_code = EXIT_INPUT


class UsageError(InputError):
    """A bad command-line option or combination of options (what argparse cannot see)."""


class NotFoundError(LabkitError):
    """A named thing (object, profile, node, file) does not exist."""

    exit_code = EXIT_NOT_FOUND


class EngineError(LabkitError):
    """The work could not be done (cluster, external tool, process, search budget)."""

    exit_code = EXIT_ENGINE


def one_line(exc: BaseException) -> str:
    """The message a CLI prints for ``exc``: object, field path, message, fix — one line. Its lines
    are those ``\\n`` ends: a CR or another control character it quotes (a file's name) is data, kept
    for the printer to escape (labkit.output.escape_terminal), not taken for a line break."""
    text = str(exc).strip()
    lines = [ln.removesuffix("\r") for ln in text.split("\n") if ln.strip()]
    message = lines[0] if lines else type(exc).__name__
    if len(lines) > 1:
        message += f" (and {len(lines) - 1} more)"
    obj = getattr(exc, "obj", None)
    field = getattr(exc, "field", None)
    fix = getattr(exc, "fix", None)
    parts = [p for p in (obj, field) if p and p not in message]
    out = ": ".join([*parts, message])
    if fix and fix not in message:
        out += f"; fix: {fix}"
    return out


def exit_code(exc: BaseException) -> int:
    """The process exit code for ``exc`` (70 for anything that is not a LabkitError)."""
    if isinstance(exc, LabkitError):
        return exc.exit_code
    return EXIT_INTERNAL


def as_input_error(exc: BaseException) -> LabkitError:
    """``exc`` itself when it is a LabkitError (its kind kept), else an InputError with its first
    line (a plain ``ValueError`` from parsing what the user gave)."""
    if isinstance(exc, LabkitError):
        return exc
    text = str(exc).strip()
    return InputError(text.splitlines()[0] if text else type(exc).__name__)
