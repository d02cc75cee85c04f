"""The public facade: ``compile_selector`` (cached) and :class:`Program`.

Cost limits. Kubernetes estimates a selector's worst-case cost when the API server validates a
new expression (limit 1,000,000, "too complex, exceeds cost limit") and stops an evaluation
whose actual cost passes 1,000,000 ("operation cancelled: actual cost limit exceeded").

* The estimate is reproduced by :func:`estimate_max_cost` (:mod:`labkit.cel.cost`, cel-go's
  estimator, over cel-cpp's checked AST); ``labkit validate`` refuses new selectors above the limit.
* cel-expr-python aborts after 10,000 comprehension iterations per evaluation (a fixed cel-cpp
  budget). When that happens labkit asks the estimate: within the limit, Kubernetes could not
  have stopped, so the selector is evaluated again by the cel-python engine (slowly: about
  10,000 iterations per second); above it, the limit error is reported.
* cel-python enforces no runtime limit of its own: a runaway comprehension runs to the end.

``ENGINE_LIMITS`` says this in one line per engine, for callers that want to show it.

Composition lives here and only here: the engines (:mod:`labkit.cel.engine`) know neither each
other nor this module; cel-python is type-checked by cel-cpp, and cel-cpp hands evaluations it
cannot do like Go to cel-python, through callables given by this module.
"""

from __future__ import annotations

import contextlib
import importlib.util
from collections.abc import Callable
from functools import cache, lru_cache
from types import ModuleType

from labkit.cel._checked import AST
from labkit.cel.cost import COST_LIMIT, estimate_ast, mark_presence
from labkit.cel.device import DeviceInput
from labkit.cel.engine import SelectorProgram
from labkit.cel.errors import COST_LIMIT_TEXT, CelCompileError, CelRuntimeError
from labkit.cel.regexcheck import check_constant_patterns

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
    "cel-expr-python": "estimated cost checked like Kubernetes (limit 1,000,000); past 10,000 comprehension "
                       "iterations labkit re-evaluates with cel-python when the estimate is within the limit, "
                       "else reports the limit error",
    "cel-python": "no runtime cost limit (Kubernetes: actual cost 1,000,000); the estimated-cost check is "
                  "the same as for cel-expr-python" if NATIVE_ENGINE else
                  "no runtime cost limit (Kubernetes: actual cost 1,000,000); " + PURE_PYTHON_LIMITS,
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
    return Program(expr, engine, impl)


def _compile_cpp(expr: str, cc: bool, lt: bool, new_expression: bool) -> SelectorProgram:
    """cel-cpp checks the types; cel-python evaluates what cel-cpp cannot evaluate like Go."""
    engine = _cpp_engine()
    if engine is None:
        raise CelCompileError("the cel-expr-python engine is not installed here (a pure-Python install, e.g. "
                              "the browser)", "use the cel-python engine, or pip install cel-expr-python")
    program = engine.CppProgram(expr, cc, lt, new_expression, on_budget=lambda: _past_budget(expr, cc, lt))
    if program.reads_integer_form:
        # Go answers isInteger()/asInteger() from how a quantity is held; cel-python keeps that
        # form. Kept on cel-cpp when cel-python cannot run the expression.
        with contextlib.suppress(CelCompileError):
            program.evaluate_with(_celpy_engine().CelpyProgram(expr, cc, lt).evaluate)
    return program


def _compile_celpy(expr: str, cc: bool, lt: bool, new_expression: bool) -> SelectorProgram:
    """cel-python has no type checker: cel-cpp's (when installed) refuses what the API server refuses."""
    if _cpp_engine() is None:  # the pure-Python install: celpy_check's static checks only
        return _celpy_engine().CelpyProgram(expr, cc, lt)
    if new_expression and not lt:  # the API server's typing rules for new expressions
        _compile(expr, "cel-expr-python", cc, lt, True)

    def type_check() -> None:
        # through the cache: the same expression is often compiled for both engines
        _compile(expr, "cel-expr-python", cc, lt)

    return _celpy_engine().CelpyProgram(expr, cc, lt, type_check=type_check)


def _past_budget(expr: str, cc: bool, lt: bool) -> Callable[[DeviceInput], bool] | None:
    """cel-cpp gave up after 10,000 comprehension iterations; Kubernetes stops at a cost of
    1,000,000. If Kubernetes' estimated worst-case cost is within that, its evaluation can never
    hit the limit, so the result is computed by cel-python instead (no budget). Above it,
    Kubernetes' limit error is reported (it may in fact finish early). None: no estimate, or
    cel-python cannot run it: the engine reports its own budget error."""
    try:
        cost: int | None = estimate_max_cost(expr, consumable_capacity=cc, list_type_attributes=lt)
    except Exception:  # noqa: BLE001 - no estimate: keep the plain limit error
        cost = None
    if cost is None:
        return None
    if cost <= COST_LIMIT:
        try:
            return _celpy_engine().CelpyProgram(expr, cc, lt).evaluate
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
    :class:`labkit.cel.errors.CelCompileError` if ``expr`` does not compile. Compare with
    :data:`COST_LIMIT`."""
    program = compile_selector(expr, engine="cel-expr-python", consumable_capacity=consumable_capacity,
                               list_type_attributes=list_type_attributes)
    ast = program.checked_ast()
    assert ast is not None  # cel-expr-python type-checks
    marked = mark_presence(expr, consumable_capacity)
    engine = _cpp_engine()
    if marked != expr and engine is not None:
        # should that fail, keep the unmarked AST: each has(device.x) then counts 0 instead of 1
        with contextlib.suppress(Exception):
            ast = engine.CppProgram(marked, consumable_capacity, list_type_attributes).checked_ast()
    return estimate_ast(ast, consumable_capacity=consumable_capacity, list_type_attributes=list_type_attributes)
