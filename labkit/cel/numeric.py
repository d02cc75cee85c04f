"""CEL's int, uint and double rules as cel-go applies them, on Python numbers.

A CEL ``int`` is a signed 64-bit integer and a ``uint`` an unsigned one: an arithmetic result or a
conversion outside the range is an error ("integer overflow", "unsigned integer overflow"), never
a larger Python integer (cel-go common/types/overflow.go: ``addInt64Checked``,
``doubleToInt64Checked``...; its text: common/types/err.go). Conversions from strings follow Go's
``strconv`` (common/types/string.go ``ConvertToType``).

:func:`check_constant_conversions`: Kubernetes plans programs with ``cel.OptOptimize``
(k8s.io/apiserver pkg/cel/environment/base.go), which evaluates a type conversion of a constant
when the program is built (cel-go interpreter/decorators.go ``maybeOptimizeConstUnary``), so
``int(1e19)`` is a compile error, "program instantiation failed: integer overflow", even where the
conversion is never reached. Both engines ask it after compiling.

The cel-python engine evaluates with these functions; cel-expr-python's own checks are the same
(its messages are translated in :mod:`labkit.cel.diagnose`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable

from labkit.cel.depth import tokens
from labkit.cel.errors import CelCompileError
from labkit.cel.regexcheck import unescape

__all__ = ["INT64_MAX", "INT64_MIN", "INT_OVERFLOW", "UINT64_MAX", "UINT_OVERFLOW", "NumericError", "add",
           "check_constant_conversions", "divide", "modulo", "multiply", "negate", "subtract", "to_bool",
           "to_double", "to_int", "to_uint"]

INT64_MIN, INT64_MAX, UINT64_MAX = -(1 << 63), (1 << 63) - 1, (1 << 64) - 1
INT_OVERFLOW = "integer overflow"
UINT_OVERFLOW = "unsigned integer overflow"
_TWO_TO_63 = float(1 << 63)
_TWO_TO_64 = float(1 << 64)


class NumericError(ValueError):
    """A CEL runtime error of arithmetic or a conversion; ``str()`` is cel-go's text."""


def _conversion_error(source: str, target: str) -> NumericError:
    return NumericError(f"type conversion error from '{source}' to '{target}'")


def _int(v: int) -> int:
    if v < INT64_MIN or v > INT64_MAX:
        raise NumericError(INT_OVERFLOW)
    return v


def _uint(v: int) -> int:
    if v < 0 or v > UINT64_MAX:
        raise NumericError(UINT_OVERFLOW)
    return v


def _checked(unsigned: bool) -> Callable[[int], int]:
    return _uint if unsigned else _int


# -- arithmetic: ``unsigned`` says whether both operands are uint ----------------------------------
def add(x: int, y: int, unsigned: bool) -> int:
    return _checked(unsigned)(x + y)


def subtract(x: int, y: int, unsigned: bool) -> int:
    return _checked(unsigned)(x - y)


def multiply(x: int, y: int, unsigned: bool) -> int:
    return _checked(unsigned)(x * y)


def divide(x: int, y: int, unsigned: bool) -> int:
    """Go's integer division: truncated toward zero."""
    if y == 0:
        raise NumericError("division by zero")
    q = abs(x) // abs(y)
    return _checked(unsigned)(q if (x < 0) == (y < 0) else -q)


def modulo(x: int, y: int, unsigned: bool) -> int:
    """Go's remainder: the sign of the dividend; MinInt64 % -1 overflows, as in cel-go."""
    if y == 0:
        raise NumericError("modulus by zero")
    if not unsigned and x == INT64_MIN and y == -1:
        raise NumericError(INT_OVERFLOW)
    r = abs(x) % abs(y)
    return r if x >= 0 else -r


def negate(x: int) -> int:
    return _int(-x)


# -- conversions ----------------------------------------------------------------------------------
def to_int(v: int | float | str, source: str) -> int:
    """``int(v)``; ``source`` is v's CEL type: int, uint, double or string."""
    if source == "double":
        f = float(v)
        if math.isnan(f) or f <= -_TWO_TO_63 or f >= _TWO_TO_63:
            raise NumericError(INT_OVERFLOW)
        return int(f)
    if source == "string":
        s = str(v)
        if not re.fullmatch(r"[+-]?[0-9]+", s) or not INT64_MIN <= int(s) <= INT64_MAX:
            raise _conversion_error("string", "int")
        return int(s)
    return _int(int(v))


def to_uint(v: int | float | str, source: str) -> int:
    """``uint(v)``; ``source`` is v's CEL type: int, uint, double or string."""
    if source == "double":
        f = float(v)
        if math.isnan(f) or f < 0 or f >= _TWO_TO_64:
            raise NumericError(UINT_OVERFLOW)
        return int(f)
    if source == "string":
        s = str(v)
        if not re.fullmatch(r"[0-9]+", s) or int(s) > UINT64_MAX:
            raise _conversion_error("string", "uint")
        return int(s)
    return _uint(int(v))


_GO_DECIMAL = re.compile(r"[+-]?(?:[0-9_]+(?:\.[0-9_]*)?|\.[0-9_]+)(?:[eE][+-]?[0-9_]+)?")
_GO_HEX = re.compile(r"[+-]?0[xX](?:[0-9a-fA-F_]+(?:\.[0-9a-fA-F_]*)?|\.[0-9a-fA-F_]+)[pP][+-]?[0-9_]+")
_SPECIAL = {"inf": math.inf, "+inf": math.inf, "-inf": -math.inf, "infinity": math.inf,
            "+infinity": math.inf, "-infinity": -math.inf, "nan": math.nan}
_BAD_UNDERSCORE = re.compile(r"(?:^|[^0-9a-fA-F])_|_(?:$|[^0-9a-fA-F])")


def to_double(v: int | float | str, source: str) -> float:
    """``double(v)``; a string is read like Go's strconv.ParseFloat (hexadecimal mantissas with a
    p exponent, '_' between digits, inf and nan; out of range is an error)."""
    if source != "string":
        return float(v)
    s = str(v)
    special = _SPECIAL.get(s.lower())
    if special is not None:
        return special
    hexadecimal = _GO_HEX.fullmatch(s) is not None
    if not (hexadecimal or _GO_DECIMAL.fullmatch(s)) or _BAD_UNDERSCORE.search(s):
        raise _conversion_error("string", "double")
    plain = s.replace("_", "")
    try:
        f = float.fromhex(plain) if hexadecimal else float(plain)
    except (ValueError, OverflowError):
        raise _conversion_error("string", "double") from None
    if math.isinf(f):
        raise _conversion_error("string", "double")
    return f


_GO_BOOLS = {"1": True, "t": True, "T": True, "TRUE": True, "true": True, "True": True,
             "0": False, "f": False, "F": False, "FALSE": False, "false": False, "False": False}


def to_bool(s: str) -> bool:
    """``bool(string)``: Go's strconv.ParseBool."""
    try:
        return _GO_BOOLS[s]
    except KeyError:
        raise _conversion_error("string", "bool") from None


# -- conversions of constants, done when Kubernetes builds the program ---------------------------
_NUMBERS = ("int", "uint", "double", "string")
_CONVERSIONS = frozenset({"int", "uint", "double", "bool", "dyn"})
_Token = tuple[str, str]
_CONVERSION_CALL = re.compile(r"(?<![.\w])(?:int|uint|double|bool|dyn)\s*\(")


def _convert(function: str, value: object, source: str) -> tuple[object, str] | None:
    """``function(value)`` for a constant of CEL type ``source``: (value, type), or None where this
    module does not fold it (the engines then judge it)."""
    if function == "dyn":
        return value, source
    if function == "bool":
        if source == "string":
            return to_bool(str(value)), "bool"
        return (value, source) if source == "bool" else None
    if source not in _NUMBERS:
        return None
    number = value if isinstance(value, int | float | str) else str(value)
    if function == "int":
        return to_int(number, source), "int"
    if function == "uint":
        return to_uint(number, source), "uint"
    return to_double(number, source), "double"


def _literal(toks: list[_Token], i: int) -> tuple[object, str, int] | None:
    """The value, CEL type and end of the literal at toks[i] (a leading '-' included)."""
    sign = 1
    if toks[i] == ("op", "-"):
        sign, i = -1, i + 1
    kind, text = toks[i]
    if kind != "lit" or text[:1] in "bB" or text[:2].lower() == "rb":
        return None  # bytes: not folded here
    if text in ("true", "false", "null"):
        return (text == "true", "bool", i + 1) if sign > 0 and text != "null" else None
    if text[:1] in "\"'rR":
        if sign < 0:
            return None
        raw = text[:1] in "rR"
        body = text[1:] if raw else text
        quote = 3 if body[:3] in ('"""', "'''") else 1
        return unescape(body[quote:-quote], raw), "string", i + 1
    if text[-1] in "uU":
        return None if sign < 0 else (int(text[:-1], 0), "uint", i + 1)
    if re.fullmatch(r"0[xX][0-9a-fA-F]+", text):
        return sign * int(text, 16), "int", i + 1
    if text.isdigit():
        return sign * int(text), "int", i + 1
    return sign * float(text), "double", i + 1


def _fold(toks: list[_Token], i: int) -> tuple[object, str, int] | None:
    """The constant starting at toks[i] (a literal, or a conversion of one, in any parentheses):
    (value, type, end), or None; raises NumericError where a conversion fails."""
    opened = 0
    while toks[i] == ("op", "("):
        opened, i = opened + 1, i + 1
    kind, text = toks[i]
    if kind == "id" and text in _CONVERSIONS and toks[i + 1] == ("op", "("):
        inner = _fold(toks, i + 2)
        if inner is None or toks[inner[2]] != ("op", ")"):
            return None
        converted = _convert(text, inner[0], inner[1])
        if converted is None:
            return None
        (value, typ), end = converted, inner[2] + 1
    else:
        literal = _literal(toks, i)
        if literal is None:
            return None
        value, typ, end = literal
    for _ in range(opened):
        if toks[end] != ("op", ")"):
            return None
        end += 1
    return value, typ, end


def check_constant_conversions(expr: str) -> None:
    """Raise Kubernetes' "program instantiation failed: ..." CelCompileError when ``expr`` converts
    a constant that cannot be converted (``int(1e19)``, ``uint(-1)``, ``int("x")``)."""
    if not _CONVERSION_CALL.search(expr):
        return
    try:
        toks = tokens(expr)
    except ValueError:
        return
    for i, (kind, text) in enumerate(toks):
        if kind != "id" or text not in _CONVERSIONS or (i and toks[i - 1] == ("op", ".")):
            continue
        try:
            _fold(toks, i)
        except NumericError as exc:
            raise CelCompileError(f"program instantiation failed: {exc}",
                                  "Kubernetes converts constants when it compiles a selector, and this "
                                  "conversion fails: change the constant") from None
        except (IndexError, ValueError, OverflowError):
            continue
