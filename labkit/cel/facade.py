"""The public facade: ``compile_selector`` (cached) and :class:`Program`.

Cost limits. Kubernetes estimates a selector's worst-case cost when the API server validates a
new expression (limit 1,000,000, "too complex, exceeds cost limit") and stops an evaluation
whose actual cost passes 1,000,000 ("operation cancelled: actual cost limit exceeded").

* The estimate is reproduced by :func:`estimate_max_cost` (:mod:`labkit.cel.cost`, cel-go's
  estimator, over cel-cpp's checked AST); ``labkit validate`` refuses new selectors above the limit.
* cel-python counts the actual cost as cel-go does (variable reads, selections, calls by their
  size, each comprehension step) and stops at the limit with Kubernetes' error.
* cel-expr-python counts no cost. A selector whose estimate is above the limit (only such a
  selector can pass it) is evaluated by cel-python instead. cel-cpp also stops after 10,000
  comprehension iterations; labkit then evaluates with cel-python, or, where cel-python cannot
  run the selector and the estimate is above the limit, reports the limit error.

Limits of the parser: cel-go's (250 levels, :mod:`labkit.cel.depth`) are checked before either
engine parses; a selector nested deeper than cel-cpp's parser allows (32) runs on cel-python.
A conversion of a constant that fails (``int(1e19)``) is a compile error, as in Kubernetes
(:func:`labkit.cel.numeric.check_constant_conversions`).

``ENGINE_LIMITS`` says this in one line per engine, for callers that want to show it.

Kubernetes 1.38 converts attribute values lazily (a value CEL cannot represent fails only an
expression that reads it: ``labkit.cel.device.device_input(..., lazy=True)``); cel-cpp's maps
cannot hold such a value, so cel-expr-python hands a device that has one to cel-python.

Composition lives here and only here: the engines (:mod:`labkit.cel.engine`) know neither each
other nor this module; cel-python is type-checked by cel-cpp, and cel-cpp hands evaluations it
cannot do like Go to cel-python, through callables given by this module.
"""

from __future__ import annotations

import contextlib
import importlib.util
import re
from collections.abc import Callable
from functools import cache, lru_cache
from types import ModuleType
from typing import TYPE_CHECKING

from labkit.cel._checked import AST
from labkit.cel.cost import COST_LIMIT, estimate_ast, mark_presence
from labkit.cel.depth import check_depth
from labkit.cel.device import DeviceInput
from labkit.cel.engine import SelectorProgram
from labkit.cel.errors import COST_LIMIT_TEXT, CelCompileError, CelRuntimeError
from labkit.cel.literals import strip_strings
from labkit.cel.numeric import check_constant_conversions
from labkit.cel.regexcheck import check_constant_patterns

if TYPE_CHECKING:  # imported lazily at run time (_cpp_engine, _celpy_engine)
    from labkit.cel.engine_celpy import CelpyProgram
    from labkit.cel.engine_cpp import CppProgram

__all__ = ["COST_LIMIT", "DEFAULT_ENGINE", "ENGINES", "ENGINE_LIMITS", "NATIVE_ENGINE", "PURE_PYTHON_LIMITS",
           "Program", "compile_new_selector", "compile_selector", "estimate_max_cost"]


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


#: cel-expr-python (C++) is installed: a learner's pip install. Without it (a browser: no
#: WebAssembly build exists) the default engine is cel-python.
NATIVE_ENGINE = _installed("cel_expr_python")
DEFAULT_ENGINE = "cel-expr-python" if NATIVE_ENGINE else "cel-python"
ENGINES = ("cel-expr-python", "cel-python")
#: what the kit cannot do without cel-expr-python, in one line
PURE_PYTHON_LIMITS = ("CEL runs on cel-python (pure Python): no type checker (labkit's static checks catch the "
                      "common compile errors) and no cost estimate; pip install cel-expr-python for both")
MAX_EXPRESSION_LENGTH = 10 * 1024
ENGINE_LIMITS = {
    "cel-expr-python": "estimated cost checked like Kubernetes (limit 1,000,000); a selector estimated above "
                       "the limit, or past 10,000 comprehension iterations, is evaluated by cel-python, which "
                       "counts the actual cost (where cel-python cannot run it: the limit error)",
    "cel-python": "actual cost counted like Kubernetes, limit 1,000,000; the estimated-cost check is "
                  "the same as for cel-expr-python" if NATIVE_ENGINE else
                  "actual cost counted like Kubernetes, limit 1,000,000; " + PURE_PYTHON_LIMITS,
}


class Program:
    """A compiled selector. ``evaluate`` returns True/False or raises CelRuntimeError."""

    __slots__ = ("expr", "engine", "evaluate", "_impl")

    def __init__(self, expr: str, engine: str, impl: SelectorProgram) -> None:
        self.expr = expr
        self.engine = engine
        self._impl = impl
        # bind directly: no extra Python frame per evaluation
        self.evaluate = impl.evaluate

    def __repr__(self) -> str:
        return f"Program({self.expr!r}, engine={self.engine!r})"

    @property
    def cost_limit(self) -> str:
        """How this engine enforces (or does not enforce) Kubernetes' cost limit."""
        return ENGINE_LIMITS[self.engine]

    def matches(self, device: DeviceInput) -> bool:
        return self.evaluate(device)

    def checked_ast(self) -> AST | None:
        """The type-checked AST (cel-expr-python), None for an engine without a type checker."""
        checked = getattr(self._impl, "checked_ast", None)
        return checked() if checked is not None else None


def _precheck(expr: str) -> None:
    if not isinstance(expr, str):
        raise CelCompileError(f"selector expression must be a string, got {type(expr).__name__}")
    if len(expr.encode()) > MAX_EXPRESSION_LENGTH:
        raise CelCompileError(
            f"expression is {len(expr.encode())} bytes long, longer than the limit of {MAX_EXPRESSION_LENGTH}",
            "split the selector into several selectors",
        )
    check_depth(expr)
    check_constant_patterns(expr)


def compile_selector(
    expr: str,
    *,
    engine: str | None = None,
    consumable_capacity: bool = True,
    list_type_attributes: bool = False,
) -> Program:
    """Compile a DRA device selector (LRU-cached on all arguments). Raises CelCompileError.

    ``consumable_capacity`` / ``list_type_attributes`` mirror the feature gates
    DRAConsumableCapacity / DRAListTypeAttributes as the API server applies them to new
    expressions: with a gate off, ``device.allowMultipleAllocations`` / ``includes()`` do not
    compile. (kube-scheduler itself compiles stored expressions with both always declared.)
    """
    return _compile(expr, engine or DEFAULT_ENGINE, bool(consumable_capacity), bool(list_type_attributes))


def compile_new_selector(
    expr: str,
    *,
    engine: str | None = None,
    consumable_capacity: bool = True,
    list_type_attributes: bool = False,
) -> Program:
    """``compile_selector`` as the API server checks a selector it has not stored before.

    The only difference from the scheduler's view: with DRAListTypeAttributes off an attribute
    value is typed ``any`` (no comprehension over it, literal type messages say 'any').
    """
    return _compile(expr, engine or DEFAULT_ENGINE, bool(consumable_capacity), bool(list_type_attributes), True)


@cache
def _cpp_engine() -> ModuleType | None:
    """:mod:`labkit.cel.engine_cpp`, or None when cel-expr-python is not installed (a pure-Python
    install, e.g. JupyterLite)."""
    try:
        # lazy: optional dependency (cel-expr-python; a pure-Python install such as JupyterLite lacks it)
        from labkit.cel import engine_cpp
    except ImportError:
        return None
    return engine_cpp


def _celpy_engine() -> ModuleType:
    # lazy: start-up (celpy, with lark and pendulum, takes about 0.2 s to import)
    from labkit.cel import engine_celpy

    return engine_celpy


@lru_cache(maxsize=256)
def _compile(expr: str, engine: str, consumable_capacity: bool, list_type_attributes: bool,
             new_expression: bool = False) -> Program:
    _precheck(expr)
    if engine not in ENGINES:
        raise CelCompileError(f"unknown CEL engine {engine!r}", f"use one of: {', '.join(ENGINES)}")
    try:
        if engine == "cel-expr-python":
            impl: SelectorProgram = _compile_cpp(expr, consumable_capacity, list_type_attributes, new_expression)
        else:
            impl = _compile_celpy(expr, consumable_capacity, list_type_attributes, new_expression)
    except CelCompileError:
        raise
    except Exception as exc:  # noqa: BLE001 - engine internals: one clear line, never a traceback
        raise CelCompileError(
            f"the {engine} engine failed to compile this expression ({type(exc).__name__}: {exc})".replace("\n", " "),
            "check the syntax, or try the other engine",
        ) from None
    # after the checker, as in cel-go: the program is built from a checked expression
    check_constant_conversions(expr)
    return Program(expr, engine, impl)


def _compile_cpp(expr: str, cc: bool, lt: bool, new_expression: bool) -> SelectorProgram:
    """cel-cpp checks the types; cel-python evaluates what cel-cpp cannot evaluate like Go."""
    engine = _cpp_engine()
    if engine is None:
        raise CelCompileError("the cel-expr-python engine is not installed here (a pure-Python install, e.g. "
                              "the browser)", "use the cel-python engine, or pip install cel-expr-python")
    try:
        program: CppProgram = engine.CppProgram(expr, cc, lt, new_expression,
                                                on_budget=lambda: _past_budget(expr, cc, lt),
                                                on_invalid=lambda: _celpy_or_none(expr, cc, lt))
    except CelCompileError as exc:
        if not _CPP_PARSER_LIMIT.search(exc.message):
            raise
        # cel-cpp's parser stops 32 deep; Kubernetes' allows 250 (check_depth passed): cel-python
        # runs it, with its own static checks only
        try:
            return _tracked_celpy(expr, cc, lt)
        except CelCompileError as refused:
            raise CelCompileError(refused.message, "the selector nests deeper than cel-expr-python's parser "
                                  "goes (32), so cel-python runs it: nest less") from None
    if program.reads_integer_form:
        # Go answers isInteger()/asInteger() from how a quantity is held; cel-python keeps that
        # form. Kept on cel-cpp when cel-python cannot run the expression.
        with contextlib.suppress(CelCompileError):
            program.evaluate_with(_tracked_celpy(expr, cc, lt).evaluate)
    elif _may_pass_cost_limit(expr, program, cc, lt):
        # cel-cpp counts no cost: Kubernetes could stop this selector at run time, so it runs on
        # cel-python, which counts the actual cost as Kubernetes does
        with contextlib.suppress(CelCompileError):
            program.evaluate_with(_tracked_celpy(expr, cc, lt).evaluate)
    return program


#: cel-cpp's parser refusing to nest deeper than its own limit (32)
_CPP_PARSER_LIMIT = re.compile(r"[Rr]ecursion limit exceeded|Exceeded max recursion depth")


def _tracked_celpy(expr: str, cc: bool, lt: bool) -> SelectorProgram:
    program: CelpyProgram = _celpy_engine().CelpyProgram(expr, cc, lt, cost_limit=COST_LIMIT)
    return program


def _celpy_or_none(expr: str, cc: bool, lt: bool) -> Callable[[DeviceInput], bool] | None:
    """cel-python's evaluator for ``expr`` (1.38: it holds attribute values that fail only when
    read), None where cel-python cannot run it."""
    try:
        return _tracked_celpy(expr, cc, lt).evaluate
    except CelCompileError:
        return None


def _may_pass_cost_limit(expr: str, program: SelectorProgram, cc: bool, lt: bool) -> bool:
    """Kubernetes' estimated worst-case cost of ``expr`` is above the limit (an expression without
    calls cannot get there: it is not estimated)."""
    if "(" not in strip_strings(expr):
        return False
    checked = getattr(program, "checked_ast", None)
    try:
        cost = _estimate(expr, checked(), cc, lt) if checked is not None else None
    except Exception:  # noqa: BLE001 - no estimate: cel-cpp's iteration budget still applies
        return False
    return cost is not None and cost > COST_LIMIT


def _compile_celpy(expr: str, cc: bool, lt: bool, new_expression: bool) -> SelectorProgram:
    """cel-python has no type checker: cel-cpp's (when installed) refuses what the API server refuses."""
    if _cpp_engine() is None:  # the pure-Python install: celpy_check's static checks only
        return _tracked_celpy(expr, cc, lt)
    if new_expression and not lt:  # the API server's typing rules for new expressions
        _compile(expr, "cel-expr-python", cc, lt, True)

    def type_check() -> None:
        # through the cache: the same expression is often compiled for both engines
        _compile(expr, "cel-expr-python", cc, lt)

    program: CelpyProgram = _celpy_engine().CelpyProgram(expr, cc, lt, type_check=type_check,
                                                         cost_limit=COST_LIMIT)
    return program


def _past_budget(expr: str, cc: bool, lt: bool) -> Callable[[DeviceInput], bool] | None:
    """cel-cpp gave up after 10,000 comprehension iterations; Kubernetes stops at a cost of
    1,000,000. If Kubernetes' estimated worst-case cost is within that, its evaluation can never
    hit the limit, so the result is computed by cel-python instead. Above it, Kubernetes' limit
    error is reported (it may in fact finish early): that happens only where cel-python cannot
    run the selector (selectors estimated above the limit run on cel-python from the start).
    None: no estimate, or cel-python cannot run it: the engine reports its own budget error."""
    try:
        cost: int | None = estimate_max_cost(expr, consumable_capacity=cc, list_type_attributes=lt)
    except Exception:  # noqa: BLE001 - no estimate: keep the plain limit error
        cost = None
    if cost is None:
        return None
    if cost <= COST_LIMIT:
        try:
            return _tracked_celpy(expr, cc, lt).evaluate
        except CelCompileError:
            return None

    def over(_dev: DeviceInput) -> bool:
        raise CelRuntimeError(
            COST_LIMIT_TEXT,
            f"Kubernetes estimates this selector's cost at up to {cost:,} (limit {COST_LIMIT:,}); "
            "nest fewer comprehensions or iterate over smaller lists",
        )

    return over


@lru_cache(maxsize=1024)
def estimate_max_cost(expr: str, *, consumable_capacity: bool = False, list_type_attributes: bool = False) -> int:
    """Kubernetes' estimated worst-case cost of the selector ``expr`` (``CompilationResult.MaxCost``
    for a new expression): :mod:`labkit.cel.cost` over cel-cpp's checked AST. Raises
    :class:`labkit.cel.errors.CelCompileError` if ``expr`` does not compile, or nests deeper than
    cel-cpp's parser goes (no checked AST: no estimate). Compare with :data:`COST_LIMIT`."""
    program = compile_selector(expr, engine="cel-expr-python", consumable_capacity=consumable_capacity,
                               list_type_attributes=list_type_attributes)
    ast = program.checked_ast()
    if ast is None:  # nested deeper than cel-cpp's parser goes: run by cel-python, not estimated
        raise CelCompileError("no cost estimate: the expression nests deeper than cel-expr-python's parser "
                              "allows (32)")
    return _estimate(expr, ast, consumable_capacity, list_type_attributes)


def _estimate(expr: str, ast: AST, consumable_capacity: bool, list_type_attributes: bool) -> int:
    """:func:`estimate_max_cost` from cel-cpp's checked AST of ``expr``."""
    marked = mark_presence(expr, consumable_capacity)
    engine = _cpp_engine()
    if marked != expr and engine is not None:
        # should that fail, keep the unmarked AST: each has(device.x) then counts 0 instead of 1
        with contextlib.suppress(Exception):
            ast = engine.CppProgram(marked, consumable_capacity, list_type_attributes).checked_ast()
    return estimate_ast(ast, consumable_capacity=consumable_capacity, list_type_attributes=list_type_attributes)
