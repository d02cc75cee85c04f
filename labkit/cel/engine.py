"""What an engine gives the facade: one compiled selector (:class:`SelectorProgram`).

The two engines, :mod:`labkit.cel.engine_cpp` (cel-expr-python, type-checked) and
:mod:`labkit.cel.engine_celpy` (cel-python, pure Python), import neither each other nor the
facade (an import-linter contract holds that). Where one needs the other (cel-python has no
type checker; cel-cpp stops after 10,000 comprehension iterations and cannot see how Go holds a
quantity) each takes a plain callable, and :mod:`labkit.cel.facade` composes them.
"""

from __future__ import annotations

from typing import Protocol

from labkit.cel._checked import AST
from labkit.cel.device import DeviceInput

__all__ = ["CheckedProgram", "SelectorProgram"]


class SelectorProgram(Protocol):
    """A selector compiled by one engine for one CEL environment (the gates that change it)."""

    expr: str

    def evaluate(self, dev: DeviceInput) -> bool:
        """True/False for ``dev``; raises :class:`labkit.cel.errors.CelRuntimeError`."""
        ...


class CheckedProgram(SelectorProgram, Protocol):
    """A program of an engine with a type checker: its checked AST is public (the cost estimate
    reads it)."""

    def checked_ast(self) -> AST:
        ...
