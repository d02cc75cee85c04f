"""CEL selectors for the allocator: a thin, cached adapter over :mod:`labkit.cel`.

Compilation is lazy (an expression that never meets a device never fails, as upstream) and
cached per expression; the ``device`` input is converted once per device.
"""

from __future__ import annotations

from typing import Any

from labkit.cel import CelCompileError, compile_selector
from labkit.cel.device import shared_device_input
from labkit.errors import InputError

__all__ = ["SelectorEngine", "SelectorCompileError", "SelectorRuntimeError"]


class SelectorCompileError(InputError):
    pass


class SelectorRuntimeError(InputError):
    pass


class SelectorEngine:
    """Compiles and evaluates selector expressions.

    ``engine`` is passed to ``labkit.cel.compile_selector``; a callable ``engine(expr)`` returning
    an object with ``evaluate(device_dict_with_driver)`` is also accepted (tests, experiments).
    """

    def __init__(self, engine: Any = None, *, consumable_capacity: bool = True,
                 list_type_attributes: bool = False) -> None:
        self.engine = engine
        self.consumable_capacity = consumable_capacity
        self.list_type_attributes = list_type_attributes
        self._programs: dict[str, Any] = {}
        self._inputs: dict[int, Any] = {}

    def compile(self, expr: str) -> Any:
        """Return the program, or an exception instance when it does not compile."""
        prog = self._programs.get(expr)
        if prog is not None:
            return prog
        if callable(self.engine) and not isinstance(self.engine, str):
            try:
                prog = self.engine(expr)
            except Exception as exc:  # noqa: BLE001 - reported as compile error text
                prog = SelectorCompileError(str(exc))
        else:
            try:
                prog = compile_selector(expr, engine=self.engine,
                                        consumable_capacity=self.consumable_capacity,
                                        list_type_attributes=self.list_type_attributes)
            except CelCompileError as exc:
                prog = SelectorCompileError(_text(exc))
        self._programs[expr] = prog
        return prog

    def _input(self, driver: str, device: dict) -> Any:
        key = id(device)
        inp = self._inputs.get(key)
        if inp is None:
            if callable(self.engine) and not isinstance(self.engine, str):
                inp = {"driver": driver, **device}
            else:
                # shared across Allocators: identical devices convert (and match) once
                inp = shared_device_input(driver, device)
            self._inputs[key] = (inp, device)  # keep device alive so id() stays unique
            return inp
        return inp[0]

    def matches(self, prog: Any, driver: str, device: dict) -> bool:
        """Evaluate; raises SelectorRuntimeError with Kubernetes' text."""
        inp = self._input(driver, device)
        cache = getattr(inp, "cache", None)
        if cache is not None:
            # a selector's result is a function of (program, device content): memoised on the
            # shared DeviceInput; errors are not memoised (evaluated again, same outcome)
            rkey = ("match", self.engine, self.consumable_capacity, self.list_type_attributes, prog.expr)
            hit = cache.get(rkey)
            if hit is not None:
                return hit
            try:
                result = bool(prog.evaluate(inp))
            except SelectorRuntimeError:
                raise
            except Exception as exc:  # noqa: BLE001
                raise SelectorRuntimeError(_text(exc)) from exc
            cache[rkey] = result
            return result
        try:
            return bool(prog.evaluate(inp))
        except SelectorRuntimeError:
            raise
        except Exception as exc:  # noqa: BLE001
            raise SelectorRuntimeError(_text(exc)) from exc


def _text(exc: Exception) -> str:
    message = getattr(exc, "message", None)
    if message is None:
        return str(exc)
    hint = getattr(exc, "hint", "") or ""
    # Kubernetes appends its "no such key" hint verbatim (it starts with ". ")
    return message + hint if hint.startswith(".") else message
