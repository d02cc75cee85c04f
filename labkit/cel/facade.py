"""The public facade: ``compile_selector`` (cached) and :class:`Program`.

Cost limits. Kubernetes estimates a selector's worst-case cost when the API server validates a
new expression (limit 1,000,000, "too complex, exceeds cost limit") and stops an evaluation
whose actual cost passes 1,000,000 ("operation cancelled: actual cost limit exceeded").

* The estimate is reproduced by :func:`labkit.cel.cost.estimate_max_cost` (cel-go's estimator
  over cel-cpp's checked AST); ``labkit validate`` refuses new selectors above the limit.
* cel-expr-python aborts after 10,000 comprehension iterations per evaluation (a fixed cel-cpp
  budget). When that happens labkit asks the estimate: within the limit, Kubernetes could not
  have stopped, so the selector is evaluated again by the cel-python engine (slowly: about
  10,000 iterations per second); above it, the limit error is reported.
* cel-python enforces no runtime limit of its own: a runaway comprehension runs to the end.

``ENGINE_LIMITS`` says this in one line per engine, for callers that want to show it.
"""

from __future__ import annotations

from functools import lru_cache

from labkit.cel.device import DeviceInput
from labkit.cel.errors import CelCompileError
from labkit.cel.regexcheck import check_constant_patterns

__all__ = ["COST_LIMIT", "DEFAULT_ENGINE", "ENGINES", "ENGINE_LIMITS", "Program", "compile_new_selector",
           "compile_selector"]

DEFAULT_ENGINE = "cel-expr-python"
ENGINES = ("cel-expr-python", "cel-python")
MAX_EXPRESSION_LENGTH = 10 * 1024
COST_LIMIT = 1_000_000
ENGINE_LIMITS = {
    "cel-expr-python": "estimated cost checked like Kubernetes (limit 1,000,000); past 10,000 comprehension "
                       "iterations labkit re-evaluates with cel-python when the estimate is within the limit, "
                       "else reports the limit error",
    "cel-python": "no runtime cost limit (Kubernetes: actual cost 1,000,000); the estimated-cost check is "
                  "the same as for cel-expr-python",
}


class Program:
    """A compiled selector. ``evaluate`` returns True/False or raises CelRuntimeError."""

    __slots__ = ("expr", "engine", "evaluate", "_impl")

    def __init__(self, expr: str, engine: str, impl: object) -> None:
        self.expr = expr
        self.engine = engine
        self._impl = impl
        # bind directly: no extra Python frame per evaluation
        self.evaluate = impl.evaluate  # type: ignore[attr-defined]

    def __repr__(self) -> str:
        return f"Program({self.expr!r}, engine={self.engine!r})"

    @property
    def cost_limit(self) -> str:
        """How this engine enforces (or does not enforce) Kubernetes' cost limit."""
        return ENGINE_LIMITS[self.engine]

    def matches(self, device: DeviceInput) -> bool:
        return self.evaluate(device)


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


@lru_cache(maxsize=256)
def _compile(expr: str, engine: str, consumable_capacity: bool, list_type_attributes: bool,
             new_expression: bool = False) -> Program:
    _precheck(expr)
    if engine not in ENGINES:
        raise CelCompileError(f"unknown CEL engine {engine!r}", f"use one of: {', '.join(ENGINES)}")
    try:
        if engine == "cel-expr-python":
            from labkit.cel.engine_cpp import CppProgram

            impl: object = CppProgram(expr, consumable_capacity, list_type_attributes, new_expression)
        else:
            from labkit.cel.engine_celpy import CelpyProgram

            if new_expression and not list_type_attributes:  # the API server's typing rules
                _compile(expr, "cel-expr-python", consumable_capacity, list_type_attributes, True)

            impl = CelpyProgram(expr, consumable_capacity, list_type_attributes)
    except CelCompileError:
        raise
    except Exception as exc:  # noqa: BLE001 - engine internals: one clear line, never a traceback
        raise CelCompileError(
            f"the {engine} engine failed to compile this expression ({type(exc).__name__}: {exc})".replace("\n", " "),
            "check the syntax, or try the other engine",
        ) from None
    return Program(expr, engine, impl)
