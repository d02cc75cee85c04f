"""CEL selectors for the allocator: a thin, cached adapter over :mod:`labkit.cel`.

Compilation is lazy (an expression that never meets a device never fails, as upstream) and
cached per expression; the ``device`` input is converted once per device.

Results are shared between devices: when the text of an expression tells which parts of
``device`` it reads (labkit.cel.literals.device_references; e.g. the driver and one attribute),
its result is memoised per those parts' values (labkit.cel.device.projection), so the GPUs of a
fleet, which differ in uuid and PCI address, are converted and evaluated for a DeviceClass
selector about once, not once per device. Only devices that convert without error use it, and
errors are never memoised.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from labkit.cel import CelCompileError, compile_selector
from labkit.cel.device import convertible, projection, shared_device_input
from labkit.cel.literals import device_references
from labkit.errors import InputError

__all__ = ["SelectorEngine", "SelectorCompileError", "SelectorRuntimeError", "learn_device"]

#: (engine, flags, expression, projection) -> result; oldest entries dropped first
_SHARED_RESULTS: OrderedDict[tuple[Any, ...], bool] = OrderedDict()
_SHARED_RESULTS_MAX = 1 << 16
#: expression -> its device references (None: not told by its text)
_REFS: dict[str, tuple[Any, ...] | None] = {}


def _refs(expr: str) -> tuple[Any, ...] | None:
    """The parts of ``device`` that ``expr`` reads (memoised; None: its text does not tell)."""
    try:
        return _REFS[expr]
    except KeyError:
        refs = _REFS[expr] = device_references(expr) if len(_REFS) < 4096 else None
        return refs


def learn_device(driver: str, device: dict[str, Any], memo: dict[object, Any]) -> None:
    """Work out now, into ``memo`` (the device view's, see SelectorEngine.matches), what the first
    selector to meet ``device`` would otherwise: whether it converts to CEL at all."""
    if type(driver) is str and "convertible" not in memo:
        memo["convertible"] = convertible(driver, device)


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
                 list_type_attributes: bool = False, lazy_attributes: bool = False) -> None:
        """``lazy_attributes``: attribute values are converted as Kubernetes 1.38 does (a value
        CEL cannot represent fails only a selector that reads it; labkit.cel.device_input)."""
        self.engine = engine
        self.consumable_capacity = consumable_capacity
        self.list_type_attributes = list_type_attributes
        self.lazy_attributes = lazy_attributes
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

    def _input(self, driver: str, device: dict[str, Any]) -> Any:
        key = id(device)
        inp = self._inputs.get(key)
        if inp is None:
            if callable(self.engine) and not isinstance(self.engine, str):
                inp = {"driver": driver, **device}
            else:
                # shared across Allocators: identical devices convert (and match) once
                inp = shared_device_input(driver, device, lazy=self.lazy_attributes)
            self._inputs[key] = (inp, device)  # keep device alive so id() stays unique
            return inp
        return inp[0]

    def matches(self, prog: Any, driver: str, device: dict[str, Any], memo: dict[object, Any] | None = None) -> bool:
        """Evaluate; raises SelectorRuntimeError with Kubernetes' text.

        ``memo``: a dict that lives as long as ``device`` is unchanged (the allocator's DeviceInfo
        keeps one), for facts about the device worth keeping between Allocators."""
        if callable(self.engine) and not isinstance(self.engine, str):  # a custom engine: no caching here
            return self._evaluate(prog, driver, device)
        mkey = ("match", self.engine, self.consumable_capacity, self.list_type_attributes, self.lazy_attributes,
                prog.expr)
        if memo is not None:  # this device, unchanged, asked before (by any Allocator)
            hit: bool | None = memo.get(mkey)
            if hit is not None:
                return hit
        return self._decide(prog, mkey, _refs(prog.expr), driver, device, memo)

    def verdicts(self, expr: str, devices: list[Any]) -> list[Any]:
        """:meth:`matches` on each device view (``.slice.driver``, ``.raw``, ``.cel_memo``) in one
        go: True, False, or the SelectorCompileError / SelectorRuntimeError it gave."""
        prog = self.compile(expr)
        if isinstance(prog, SelectorCompileError):
            return [prog] * len(devices)
        out: list[Any] = []
        if callable(self.engine) and not isinstance(self.engine, str):
            for d in devices:
                try:
                    out.append(self._evaluate(prog, d.slice.driver, d.raw))
                except SelectorRuntimeError as exc:
                    out.append(exc)
            return out
        mkey = ("match", self.engine, self.consumable_capacity, self.list_type_attributes, self.lazy_attributes,
                expr)
        refs = _refs(expr)
        decide = self._decide
        for d in devices:
            memo = d.cel_memo
            hit = memo.get(mkey)
            if hit is None:
                try:
                    hit = decide(prog, mkey, refs, d.slice.driver, d.raw, memo)
                except SelectorRuntimeError as exc:
                    hit = exc
            out.append(hit)
        return out

    def _decide(self, prog: Any, mkey: tuple[Any, ...], refs: tuple[Any, ...] | None, driver: str,
                device: dict[str, Any], memo: dict[object, Any] | None) -> bool:
        """The result of ``prog`` on a device not in its memo: shared with every device whose
        parts the expression reads (``refs``) are equal, else evaluated (and then shared)."""
        shared = None
        if refs is not None and type(driver) is str:
            ok = memo.get("convertible") if memo is not None else None
            if ok is None:
                ok = convertible(driver, device)
                if memo is not None:
                    memo["convertible"] = ok
            if ok:
                proj = projection(refs, driver, device)
                if proj is not None:
                    shared = (mkey, proj)
                    hit: bool | None = _SHARED_RESULTS.get(shared)
                    if hit is not None:
                        if memo is not None:
                            memo[mkey] = hit
                        return hit
        result = self._evaluate(prog, driver, device)
        if memo is not None:
            memo[mkey] = result
        if shared is not None:
            if len(_SHARED_RESULTS) >= _SHARED_RESULTS_MAX:
                # the oldest goes; OrderedDict pops it in O(1) (a plain dict's first key after many
                # deletions from the front costs a scan over the holes: quadratic when every
                # device is unique, as in allocator_bench's `all`)
                _SHARED_RESULTS.popitem(last=False)
            _SHARED_RESULTS[shared] = result
        return result

    def _evaluate(self, prog: Any, driver: str, device: dict[str, Any]) -> bool:
        inp = self._input(driver, device)
        cache = getattr(inp, "cache", None)
        if cache is not None:
            # a selector's result is a function of (program, device content): memoised on the
            # shared DeviceInput; errors are not memoised (evaluated again, same outcome)
            rkey = ("match", self.engine, self.consumable_capacity, self.list_type_attributes,
                    self.lazy_attributes, prog.expr)
            hit: bool | None = cache.get(rkey)
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
    message: str | None = getattr(exc, "message", None)
    if message is None:
        return str(exc)
    hint: str = getattr(exc, "hint", "") or ""
    # Kubernetes appends its "no such key" hint verbatim (it starts with ". ")
    return message + hint if hint.startswith(".") else message
