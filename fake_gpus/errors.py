"""The root of every error ``fake_gpus`` raises on purpose (it imports nothing from ``labkit``).

Two kinds, each with the exit code ``python -m fake_gpus`` uses for it: :class:`InputError`
(exit 2: a bad argument, profile, catalog or claim) and :class:`EngineError` (exit 1: the
kubelet, the API server, a socket or the checkpoint failed). The kinds do not derive from
built-in exceptions; each class keeps its own (``CatalogError(InputError, ValueError)``).
"""

from __future__ import annotations

__all__ = ["EngineError", "FakeGpusError", "InputError"]


class FakeGpusError(Exception):
    """Root of fake_gpus' errors."""

    exit_code = 1


class InputError(FakeGpusError):
    """A bad argument, profile, catalog file or claim."""

    exit_code = 2


class EngineError(FakeGpusError):
    """The kubelet, the API server, a socket or the checkpoint failed."""

    exit_code = 1
