"""The ``cel-python`` engine (``celpy``, pure Python, e.g. for JupyterLite).

celpy has no type checker, no optional types and no ``cel.bind``. This module adds the
Kubernetes library, CEL's heterogeneous equality and cross-type numeric comparisons (by
overriding the operators), cel-go's integer rules (:mod:`labkit.cel.numeric`), the
missing-domain rule (a map subclass), and a small static check (:mod:`labkit.cel.celpy_check`)
for the API server's most common compile errors. Optional syntax is refused with a clear error.

Its evaluator (:class:`_Evaluator`) does what cel-go does where celpy does not: ``&&``/``||``
stop at the deciding term, the comprehension macros and ``cel.bind`` (lazy, once) follow cel-go's
expansions, Kubernetes' actual cost is counted (cel-go interpreter/runtimecost.go) and stops the
evaluation past the limit, and nesting as deep as Kubernetes' parser allows evaluates without
Python's recursion limit getting in the way.
"""

from __future__ import annotations

import logging
import math
import operator
import sys
import threading
from collections.abc import Callable
from typing import Any, cast

import celpy
import celpy.celtypes as ct
from celpy.celparser import CELParseError
from celpy.evaluation import CELEvalError, Evaluator, base_functions
from lark import Token, Tree

from labkit.api.quantity import Quantity
from labkit.cel import ipcidr, k8slib, numeric, strings_v2
from labkit.cel.celpy_check import (
    check_tree,
    is_cel_namespace,
    precheck_text,
    rewrite_namespaces,
    rewrite_optionals,
)
from labkit.cel.device import DeviceInput
from labkit.cel.diagnose import no_such_key
from labkit.cel.errors import COST_LIMIT_TEXT, CelCompileError, CelRuntimeError
from labkit.cel.semver import Semver
from labkit.cel.typenames import runtime_non_bool

NAME = "cel-python"
logging.getLogger("celpy").setLevel(logging.WARNING)


class KQuantity:
    """A Quantity as celpy sees it: equality by value, no ordering operators (like cel-go)."""

    __slots__ = ("q",)

    def __init__(self, q: Quantity) -> None:
        self.q = q

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, KQuantity):
            raise TypeError("no such overload")
        return self.q.value == other.q.value

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        return hash(self.q.value)


class KSemver:
    __slots__ = ("s",)

    def __init__(self, s: Semver) -> None:
        self.s = s

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, KSemver):
            raise TypeError("no such overload")
        return self.s == other.s

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        return hash(self.s)


class DomainMap(ct.MapType):
    """``device.attributes``/``device.capacity``: an unknown domain reads as an empty map."""

    def __getitem__(self, key: Any) -> Any:
        try:
            return super().__getitem__(key)
        except KeyError:
            return _EMPTY


_EMPTY = ct.MapType()


class InvalidAttribute(CELEvalError):
    """1.38: the value of an attribute CEL cannot represent (labkit.cel.device.DeviceInput.invalid),
    an error value wherever it is read."""


class AttributeMap(ct.MapType):
    """1.38: one domain's attributes, some of which CEL cannot represent
    (k8s.io/dynamic-resource-allocation@v0.38.0-beta.0: cel/compile.go nameToAttributes). Reading
    such a value is an error (has() too: cel-go's presence test reports Find's error); its key
    counts in size() and iteration; ``in`` is false for it (Contains: not found)."""

    def __init__(self, values: dict[ct.StringType, Any], invalid: dict[str, str]) -> None:
        bad = {ct.StringType(k): InvalidAttribute(text, KeyError, None) for k, text in invalid.items()}
        super().__init__({**values, **bad})
        self.invalid = frozenset(bad)


def _attribute_map(values: dict[str, Any], invalid: dict[str, str] | None) -> Any:
    return to_cel(values) if not invalid else AttributeMap(to_cel(values), invalid)


def _in(item: Any, container: Any) -> Any:
    if isinstance(container, AttributeMap) and isinstance(item, ct.StringType) and item in container.invalid:
        return ct.BoolType(False)
    return base_functions["_in_"](item, container)


def _conditional(cond: Any, left: Any, right: Any) -> Any:
    """``c ? a : b``: an error as the condition is the result (cel-go), not "no such overload"
    (e.g. the optional idiom's has() of an attribute CEL cannot represent)."""
    if isinstance(cond, CELEvalError):
        return cond
    return base_functions["_?_:_"](cond, left, right)


def _map_equal(a: Any, b: Any) -> Any:
    """``a == b`` where either is an :class:`AttributeMap`, as cel-go compares maps (equalMaps /
    baseMap.Equal): an invalid value read on the left is an error; the right side's Find of an
    invalid value does not find it. (Go walks the keys in random order; unequal values are
    looked at first here.)"""
    if not isinstance(a, ct.MapType) or not isinstance(b, ct.MapType) or len(a) != len(b):
        return ct.BoolType(False)
    left_bad = a.invalid if isinstance(a, AttributeMap) else frozenset()
    right_bad = b.invalid if isinstance(b, AttributeMap) else frozenset()
    error: Any = None
    for key in a:
        if key in left_bad:
            error = error or a[key]
            continue
        if key not in b or key in right_bad:
            return ct.BoolType(False)
        same = _eq(a[key], b[key])
        if isinstance(same, CELEvalError):
            error = error or same
        elif not same:
            return ct.BoolType(False)
    return error if error is not None else ct.BoolType(True)


_SCALAR_TO_PY: dict[type, Any] = {
    ct.BoolType: bool, ct.IntType: int, ct.UintType: int, ct.DoubleType: float, ct.StringType: str,
}


def to_py(v: Any) -> Any:
    conv = _SCALAR_TO_PY.get(type(v))
    if conv is not None:
        return conv(v)
    if isinstance(v, KQuantity):
        return v.q
    if isinstance(v, KSemver):
        return v.s
    if isinstance(v, ct.BoolType):
        return bool(v)
    if isinstance(v, ct.IntType | ct.UintType):
        return int(v)
    if isinstance(v, ct.DoubleType):
        return float(v)
    if isinstance(v, ct.StringType):
        return str(v)
    if isinstance(v, ct.ListType | list):
        return [to_py(x) for x in v]
    if isinstance(v, ct.MapType | dict):
        return {to_py(k): to_py(x) for k, x in v.items()}
    return v


_INT_NEW = int.__new__


def to_cel(v: Any) -> Any:
    if isinstance(v, bool):
        return ct.BoolType(v)
    if isinstance(v, int):
        # IntType(v) builds a functools wrapper per call (celpy's int64 check): 40 µs an int
        return _INT_NEW(ct.IntType, v) if numeric.INT64_MIN <= v <= numeric.INT64_MAX else ct.IntType(v)
    if isinstance(v, float):
        return ct.DoubleType(v)
    if isinstance(v, str):
        return ct.StringType(v)
    if isinstance(v, Quantity):
        return KQuantity(v)
    if isinstance(v, Semver):
        return KSemver(v)
    if isinstance(v, list):
        return ct.ListType([to_cel(x) for x in v])
    if isinstance(v, dict):
        return ct.MapType({to_cel(k): to_cel(x) for k, x in v.items()})
    return v


def _fn(impl: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap a library function: celpy values in, celpy value out, errors as CEL error values."""

    def call(*args: Any) -> Any:
        for a in args:
            if isinstance(a, CELEvalError):
                return a
        try:
            return to_cel(impl(*(to_py(a) for a in args)))
        except k8slib.LibError as exc:
            return CELEvalError(str(exc), k8slib.LibError, None)
        except (TypeError, AttributeError, ValueError):
            return CELEvalError("no such overload", TypeError, None)

    return call


def _typed(kind: type, impl: Callable[..., Any]) -> Callable[..., Any]:
    def check(first: Any, *rest: Any) -> Any:
        if not isinstance(first, kind):
            raise TypeError
        return impl(first, *rest)

    return check


def _either(str_impl: Callable[..., Any], list_impl: Callable[..., Any]) -> Callable[..., Any]:
    def call(first: Any, *rest: Any) -> Any:
        return (str_impl if isinstance(first, str) else list_impl)(first, *rest)

    return call


# -- CEL operators with heterogeneous equality and cross-type numeric ordering -------------------
_NUM = (ct.IntType, ct.UintType, ct.DoubleType)


_SAME_TYPE_FAST = frozenset({ct.IntType, ct.UintType, ct.DoubleType, ct.StringType, ct.BoolType})


def _eq(a: Any, b: Any) -> Any:
    if type(a) is type(b) and type(a) in _SAME_TYPE_FAST:
        return ct.BoolType(a == b)
    if isinstance(a, CELEvalError):
        return a
    if isinstance(b, CELEvalError):
        return b
    if isinstance(a, AttributeMap) or isinstance(b, AttributeMap):
        return _map_equal(a, b)
    return ct.BoolType(k8slib.cel_equal(to_py(a), to_py(b)))


def _ne(a: Any, b: Any) -> Any:
    r = _eq(a, b)
    return r if isinstance(r, CELEvalError) else ct.BoolType(not r)


def _ordering(op: Callable[[Any, Any], bool], name: str) -> Callable[[Any, Any], Any]:
    def cmp(a: Any, b: Any) -> Any:
        if type(a) is type(b) and type(a) in _SAME_TYPE_FAST and type(a) is not ct.BoolType:
            return ct.BoolType(op(a, b))
        if isinstance(a, CELEvalError):
            return a
        if isinstance(b, CELEvalError):
            return b
        if isinstance(a, _NUM) and isinstance(b, _NUM):
            return ct.BoolType(op(to_py(a), to_py(b)))
        if type(a) is not type(b) or isinstance(a, KQuantity | KSemver | ct.ListType | ct.MapType
                                                  | ipcidr.IPAddr | ipcidr.CIDRPrefix):
            return CELEvalError(f"no such overload: {_tname(a)} {name} {_tname(b)}", TypeError, None)
        try:
            return ct.BoolType(op(a, b))
        except TypeError:
            return CELEvalError(f"no such overload: {_tname(a)} {name} {_tname(b)}", TypeError, None)

    return cmp


def _tname(v: Any) -> str:
    names = {ct.BoolType: "bool", ct.IntType: "int", ct.UintType: "uint", ct.DoubleType: "double",
             ct.StringType: "string", ct.BytesType: "bytes", ct.ListType: "list", ct.MapType: "map",
             DomainMap: "map", AttributeMap: "map", KQuantity: "kubernetes.Quantity", KSemver: "kubernetes.Semver",
             type(None): "null_type", ipcidr.IPAddr: "net.IP", ipcidr.CIDRPrefix: "net.CIDR", ct.DurationType: "google.protobuf.Duration",
             ct.TimestampType: "google.protobuf.Timestamp"}
    return names.get(type(v), type(v).__name__)


def _functions(list_type_attributes: bool) -> dict[str, Callable[..., Any]]:
    lib = k8slib
    f: dict[str, Callable[..., Any]] = {
        "_==_": _eq, "_!=_": _ne,
        "_<_": _ordering(lambda a, b: a < b, "<"), "_<=_": _ordering(lambda a, b: a <= b, "<="),
        "_>_": _ordering(lambda a, b: a > b, ">"), "_>=_": _ordering(lambda a, b: a >= b, ">="),
        "quantity": _fn(lib.quantity), "isQuantity": _fn(lib.is_quantity),
        "sign": _fn(_typed(Quantity, lambda q: q.sign())),
        "asApproximateFloat": _fn(_typed(Quantity, lib.q_as_float)),
        "asInteger": _fn(_typed(Quantity, lib.q_as_integer)),
        "isInteger": _fn(_typed(Quantity, lib.q_is_integer)),
        "add": _fn(_typed(Quantity, lib.q_add)), "sub": _fn(_typed(Quantity, lib.q_sub)),
        "compareTo": _fn(lib.compare_to), "isGreaterThan": _fn(lib.is_greater_than),
        "isLessThan": _fn(lib.is_less_than),
        "semver": _fn(lib.semver), "isSemver": _fn(lib.is_semver_),
        "major": _fn(_typed(Semver, lambda s: s.major)), "minor": _fn(_typed(Semver, lambda s: s.minor)),
        "patch": _fn(_typed(Semver, lambda s: s.patch)),
        "isSorted": _fn(_typed(list, lib.is_sorted)), "sum": _fn(_typed(list, lib.list_sum)),
        "labkit_min": _fn(_typed(list, lib.list_min)), "labkit_max": _fn(_typed(list, lib.list_max)),
        "indexOf": _fn(_either(strings_v2.index_of, _typed(list, lib.index_of))),
        "lastIndexOf": _fn(_either(strings_v2.last_index_of, _typed(list, lib.last_index_of))),
        "find": _fn(_typed(str, lib.find)), "findAll": _fn(_typed(str, lib.find_all)),
        "matches": _fn(_typed(str, lib.matches)),
        "url": _fn(lib.url), "isURL": _fn(lib.is_url),
        "getScheme": _fn(lib.url_scheme), "getHost": _fn(lib.url_host), "getHostname": _fn(lib.url_hostname),
        "getPort": _fn(lib.url_port), "getEscapedPath": _fn(lib.url_escaped_path),
        "getQuery": _fn(lib.url_query),
        "labkit_sets_contains": _fn(lib.sets_contains), "labkit_sets_equivalent": _fn(lib.sets_equivalent),
        "labkit_sets_intersects": _fn(lib.sets_intersects),
        "labkit_strings_quote": _fn(_typed(str, strings_v2.quote)),
        "charAt": _fn(_typed(str, strings_v2.char_at)), "lowerAscii": _fn(_typed(str, strings_v2.lower_ascii)),
        "upperAscii": _fn(_typed(str, strings_v2.upper_ascii)), "replace": _fn(_typed(str, strings_v2.replace)),
        "split": _fn(_typed(str, strings_v2.split)), "substring": _fn(_typed(str, strings_v2.substring)),
        "trim": _fn(_typed(str, strings_v2.trim)), "join": _fn(_typed(list, strings_v2.join)),
        "format": _fn(_typed(str, strings_v2.format_)),
        "labkit_lists_range": _fn(_typed(int, lib.lists_range)),
        "sort": _fn(_typed(list, lib.list_sort)), "slice": _fn(_typed(list, lib.list_slice)),
        "flatten": _fn(_typed(list, lib.list_flatten)), "distinct": _fn(_typed(list, lib.list_distinct)),
        "reverse": _fn(_typed(list, lib.list_reverse)),
        "ip": _fn(lambda x: ipcidr.prefix_ip(x) if isinstance(x, ipcidr.CIDRPrefix) else ipcidr.ip(x)),
        "isIP": _fn(ipcidr.is_ip), "labkit_ip_isCanonical": _fn(ipcidr.is_canonical),
        "family": _fn(_typed(ipcidr.IPAddr, ipcidr.family)),
        "isUnspecified": _fn(_typed(ipcidr.IPAddr, ipcidr.is_unspecified)),
        "isLoopback": _fn(_typed(ipcidr.IPAddr, ipcidr.is_loopback)),
        "isLinkLocalMulticast": _fn(_typed(ipcidr.IPAddr, ipcidr.is_link_local_multicast)),
        "isLinkLocalUnicast": _fn(_typed(ipcidr.IPAddr, ipcidr.is_link_local_unicast)),
        "isGlobalUnicast": _fn(_typed(ipcidr.IPAddr, ipcidr.is_global_unicast)),
        "cidr": _fn(ipcidr.cidr), "isCIDR": _fn(ipcidr.is_cidr),
        "containsIP": _fn(_typed(ipcidr.CIDRPrefix, ipcidr.contains_ip)),
        "containsCIDR": _fn(_typed(ipcidr.CIDRPrefix, ipcidr.contains_cidr)),
        "masked": _fn(_typed(ipcidr.CIDRPrefix, ipcidr.masked)),
        "prefixLength": _fn(_typed(ipcidr.CIDRPrefix, ipcidr.prefix_length)),
    }
    if list_type_attributes:
        f["includes"] = _fn(lib.includes)
    f["_in_"] = _in
    f["_?_:_"] = _conditional
    f.update(_NUMERIC)
    return f


# -- int/uint arithmetic and conversions as cel-go does them (labkit.cel.numeric) ----------------
def _numeric_error(exc: numeric.NumericError) -> CELEvalError:
    return CELEvalError(str(exc), ValueError, None)


def _arithmetic(checked: Callable[[int, int, bool], int], other: Callable[[Any, Any], Any]) -> Callable[..., Any]:
    """``checked`` for two ints or two uints (the result in range, else an error), ``other`` (celpy's
    operator) for every other pair."""

    def call(a: Any, b: Any) -> Any:
        kind = type(a)
        if kind is type(b) and (kind is ct.IntType or kind is ct.UintType):
            try:
                return kind(checked(int(a), int(b), kind is ct.UintType))
            except numeric.NumericError as exc:
                return _numeric_error(exc)
        return other(a, b)

    return call


def _negate(a: Any) -> Any:
    if type(a) is ct.IntType:
        try:
            return ct.IntType(numeric.negate(int(a)))
        except numeric.NumericError as exc:
            return _numeric_error(exc)
    return operator.neg(a)


def _source(v: Any) -> str | None:
    """The CEL type int(), uint() and double() convert from, None for another value."""
    if isinstance(v, ct.UintType):
        return "uint"
    if isinstance(v, bool | ct.BoolType):
        return None
    if isinstance(v, int):
        return "int"
    if isinstance(v, float):
        return "double"
    return "string" if isinstance(v, str) else None


def _convert(name: str, v: Any) -> Any:
    """int()/uint()/double()/bool() with cel-go's range and parsing rules; NotImplemented where
    celpy's own conversion applies (timestamps, bools...)."""
    if name == "bool":
        if not isinstance(v, ct.StringType):
            return NotImplemented
        try:
            return ct.BoolType(numeric.to_bool(str(v)))
        except numeric.NumericError as exc:
            return _numeric_error(exc)
    source = _source(v)
    if source is None:
        return NotImplemented
    convert, result = _CONVERSIONS[name]
    try:
        return result(convert(str(v) if source == "string" else v, source))
    except numeric.NumericError as exc:
        return _numeric_error(exc)


_CONVERSIONS: dict[str, tuple[Callable[[Any, str], Any], type]] = {
    "int": (numeric.to_int, ct.IntType), "uint": (numeric.to_uint, ct.UintType),
    "double": (numeric.to_double, ct.DoubleType),
}
_CONVERTED = frozenset({*_CONVERSIONS, "bool"})


_NUMERIC: dict[str, Callable[..., Any]] = {
    "_+_": _arithmetic(numeric.add, operator.add),
    "_-_": _arithmetic(numeric.subtract, operator.sub),
    "_*_": _arithmetic(numeric.multiply, operator.mul),
    "_/_": _arithmetic(numeric.divide, operator.truediv),
    "_%_": _arithmetic(numeric.modulo, operator.mod),
    "-_": _negate,
}


_ENV: Any = None


def _environment() -> Any:
    global _ENV
    if _ENV is None:
        _ENV = celpy.Environment()
        # celpy adds the protobuf wrapper types (google.protobuf.Int32Value, ...) to every
        # activation; selectors never name them, and hashing them dominates evaluation time.
        _ENV.annotations.clear()
    return _ENV


def _runtime_error(err: CELEvalError) -> CelRuntimeError:
    msg = err.args[0] if err.args else str(err)
    if isinstance(msg, str) and msg.startswith("no such member in mapping: "):
        return no_such_key(msg.split(": ", 1)[1].strip("'\""))
    if msg == "return error for overflow":
        detail = err.args[2] if len(err.args) > 2 and err.args[2] else ()
        text = str(detail[0]) if detail else "overflow"
        return CelRuntimeError("integer overflow" if text == "overflow" else text)
    if msg == "modulus or divide by zero":
        return CelRuntimeError("division by zero")
    if isinstance(msg, str) and msg.startswith(("found no matching overload", "no such overload")):
        return CelRuntimeError("no such overload")
    return CelRuntimeError(str(msg))


# -- evaluation: Kubernetes' actual cost, short-circuits and nesting as cel-go has them -----------
class _CostLimit(Exception):
    """The evaluation's cost passed the limit (raised through celpy, caught by CelpyProgram)."""


class _Meter:
    """Kubernetes' actual cost of one evaluation (cel-go interpreter/runtimecost.go)."""

    __slots__ = ("cost", "limit")

    def __init__(self, limit: int | None) -> None:
        self.cost = 0
        self.limit = limit

    def charge(self, n: int) -> None:
        self.cost += n
        if self.limit is not None and self.cost > self.limit:
            raise _CostLimit


_CURRENT = threading.local()


def _meter() -> _Meter | None:
    return getattr(_CURRENT, "meter", None)


def _size(v: Any) -> int:
    """cel-go's actualSize: a string's code points, bytes, a list's or map's entries; else 1."""
    return len(v) if isinstance(v, str | bytes | list | dict) else 1


def _traversal(v: Any) -> int:
    """Kubernetes' traversalCost (k8s.io/apiserver pkg/cel/library/cost.go)."""
    if isinstance(v, str | bytes):
        return int(len(v) * 0.1)
    if isinstance(v, list):
        return sum(_traversal(x) for x in v)
    if isinstance(v, dict):
        return sum(_traversal(k) + _traversal(x) for k, x in v.items())
    return 1


def _tenth(n: float) -> int:
    return math.ceil(n * 0.1)


_K8S_EQUAL = (KQuantity, KSemver, ipcidr.IPAddr, ipcidr.CIDRPrefix)
_PER_CHAR = frozenset({"lowerAscii", "upperAscii", "substring", "trim", "url", "isURL", "quantity",
                       "isQuantity", "semver", "isSemver", "cidr", "isIP", "isCIDR"})
_TRAVERSAL = frozenset({"isSorted", "sum", "labkit_min", "labkit_max", "indexOf", "lastIndexOf", "includes"})
_ALLOCATING = frozenset({"labkit_lists_range", "slice", "reverse"})


def _call_cost(name: str, args: tuple[Any, ...], result: Any) -> int:
    """What cel-go charges for a call (CostTracker.costCall, with Kubernetes' library costs and the
    lists extension's trackers): 1 unless the work grows with a string's or list's size."""
    if name in ("_==_", "_!=_"):
        if args and isinstance(args[0], _K8S_EQUAL):
            return 1
        return _tenth(min(_size(args[0]), _size(args[1]))) if len(args) == 2 else 1
    if name in ("_<_", "_<=_", "_>_", "_>=_"):
        return _tenth(min(len(args[0]), len(args[1]))) if isinstance(args[0], str | bytes) else 1
    if name == "_+_" and isinstance(args[0], str | bytes):
        return _tenth(_size(args[0]) + _size(args[1]))
    if name == "_in_":
        return _size(args[1]) if isinstance(args[1], list) else 1
    if name == "contains":
        return _tenth(_size(args[0])) * _tenth(_size(args[1]))
    if name in ("startsWith", "endsWith"):
        return _tenth(_size(args[1]))
    if name in ("matches", "find", "findAll"):
        return _tenth(1 + _size(args[0])) * math.ceil(_size(args[1]) * 0.25)
    if name in _PER_CHAR or (name == "ip" and isinstance(args[0], str)):
        return _tenth(_size(args[0]))
    if name in ("replace", "split"):
        return math.ceil(_size(args[0]) * 0.2)
    if name == "join":
        return math.ceil(_size(result) * 0.2)
    if name == "labkit_ip_isCanonical":
        return math.ceil(_size(args[0]) * 0.2)
    if name in _TRAVERSAL:
        return _traversal(args[0])
    if name in _ALLOCATING:
        return _size(result) + 11
    if name == "flatten":
        return _size(args[0]) * (int(args[1]) if len(args) > 1 else 1) + 11
    return 1


#: not calls in cel-go (logical operators and the conditional are planned as their own steps)
_FREE = frozenset({"_&&_", "_||_", "_?_:_"})


def _costed(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    if name in _FREE:
        return fn

    def call(*args: Any) -> Any:
        try:
            result = fn(*args)
        except BaseException:
            meter = _meter()
            if meter is not None:  # cel-go charges a call that fails too
                meter.charge(_call_cost(name, args, None))
            raise
        meter = _meter()
        if meter is not None:
            meter.charge(_call_cost(name, args, result))
        return result

    return call


#: tree nodes that only pass their one child on
_PASS = frozenset({"expr", "conditionalor", "conditionaland", "relation", "addition", "multiplication",
                   "unary", "member"})
_CONSTANT_NODES = frozenset({*_PASS, "primary", "literal", "list_lit", "map_lit", "exprlist", "mapinits",
                             "paren_expr"})
#: Go's comprehension macros: what each loop step costs beyond the predicate (cel-go parser/macro.go
#: expansions: the loop condition, the accumulator read, the list built by map/filter)
_MACROS = frozenset({"all", "exists", "exists_one", "map", "filter"})
_EVAL_ERRORS = (ValueError, KeyError, TypeError, ZeroDivisionError, OverflowError, IndexError)


def _passed_to(tree: Tree[Any]) -> Tree[Any] | None:
    """The one node ``tree`` only passes on to (its one child, what its parentheses hold, its literal), or None
    when ``tree`` does the work itself."""
    data = tree.data
    if data in _PASS and len(tree.children) == 1:
        return tree.children[0]
    if data == "primary" and tree.children[0].data == "paren_expr":
        return tree.children[0].children[0]
    if data == "primary" and tree.children[0].data == "literal":
        return tree.children[0]
    return None


def _step(tree: Tree[Any]) -> tuple[Tree[Any], str]:
    """The node under ``tree`` that does the work (past nodes that only pass one child on, and
    parentheses) and the name of its method, as a plain str."""
    while (nxt := _passed_to(tree)) is not None:
        tree = nxt
    return tree, str(tree.data)


def _plan(ast: Tree[Any]) -> dict[int, tuple[Tree[Any], str]]:
    """_step for every node of ``ast``, worked out once per program. Every node on the way from a node to
    its _step shares that answer, so each chain is walked once: 250 nested parentheses are a chain of
    ~2,500 nodes, which _step from each node walked ~2,500 times over (seconds of a compile)."""
    plan: dict[int, tuple[Tree[Any], str]] = {}
    for node in ast.iter_subtrees():
        chain: list[Tree[Any]] = []
        tree = node
        while id(tree) not in plan:
            chain.append(tree)
            nxt = _passed_to(tree)
            if nxt is None:
                plan[id(tree)] = (tree, str(tree.data))
                break
            tree = nxt
        answer = plan[id(tree)]
        for passed in chain:
            plan[id(passed)] = answer
    return plan


def _constant_node(node: Tree[Any]) -> bool:
    """``node`` itself (not its children) may be part of a literal of constants."""
    return node.data in _CONSTANT_NODES and not (node.data in _PASS and len(node.children) != 1)


def _constant(tree: Tree[Any]) -> bool:
    """A list or map literal of constants, which cel-go builds once (OptOptimize): no cost."""
    return all(_constant_node(node) for node in tree.iter_subtrees())


def _constants(ast: Tree[Any]) -> dict[int, bool]:
    """_constant for every node of ``ast``, worked out once per program, each node from its children's
    answers (iter_subtrees lists children first): nested literals are not walked again per level and per
    evaluation."""
    out: dict[int, bool] = {}
    for node in ast.iter_subtrees():
        out[id(node)] = _constant_node(node) and all(out[id(c)] if id(c) in out else _constant(c)
                                                     for c in node.children if isinstance(c, Tree))
    return out


def _truth(v: Any) -> bool | None:
    return bool(v) if isinstance(v, ct.BoolType) else None


_UNBOUND = object()


class _Lazy:
    """A cel.bind variable: its value's tree and the variables in scope where bind was written
    (None once the value is known)."""

    __slots__ = ("tree", "scope", "value")

    def __init__(self, tree: Tree[Any], scope: dict[str, Any]) -> None:
        self.tree = tree
        self.scope: dict[str, Any] | None = scope
        self.value: Any = None


_RELATIONS = {"relation_lt": "_<_", "relation_le": "_<=_", "relation_ge": "_>=_", "relation_gt": "_>_",
              "relation_eq": "_==_", "relation_ne": "_!=_", "relation_in": "_in_"}
_ADDITIONS = {"addition_add": "_+_", "addition_sub": "_-_"}
_MULTIPLICATIONS = {"multiplication_mul": "_*_", "multiplication_div": "_/_", "multiplication_mod": "_%_"}


class _Evaluator(Evaluator):
    """celpy's evaluator with cel-go's behaviour where celpy differs: ``&&``/``||`` stop at the
    first deciding term, ``!!x`` is ``x``, the comprehension macros stop like cel-go's loops, every
    step is charged as Kubernetes charges it, and nesting costs few Python frames."""

    #: the comprehension variables in scope (name -> value), looked up before the activation
    _scope: dict[str, Any] = {}
    #: inside has(): the next selection is the presence test (lark's Interpreter answers any
    #: unknown attribute, so every attribute read here is declared on the class)
    _presence = False

    #: id(node) -> (the node that does the work, its method name): see _plan
    _steps: dict[int, tuple[Tree[Any], str]] = {}
    #: id(literal node) -> its value
    _literals: dict[int, Any] = {}
    #: id(node) -> whether it is a literal of constants: see _constants
    _constant_nodes: dict[int, bool] = {}

    def _is_constant(self, tree: Tree[Any]) -> bool:
        known = self._constant_nodes.get(id(tree))
        return _constant(tree) if known is None else known

    def _visit_tree(self, tree: Tree[Any]) -> Any:  # lark's Interpreter: every visit goes through it
        step = self._steps.get(id(tree))
        if step is None:
            step = _step(tree)
        node, method = step
        if method == "literal":
            value = self._literals.get(id(node))
            if value is None:
                value = self._literals[id(node)] = super().literal(node)
            return value
        return getattr(self, method)(node)

    def sub_evaluator(self, ast: Tree[Any]) -> Evaluator:
        return _Evaluator(ast, activation=self.activation)

    def _logical(self, tree: Tree[Any], decides: bool) -> Any:
        """``a && b && ...`` (decides False) or ``a || b || ...`` (decides True), as cel-go: the
        terms left to right until one decides; else the first error, else the other value."""
        if len(tree.children) == 1:
            return self.visit(tree.children[0])
        terms, node = [], tree
        while node.data == tree.data and len(node.children) == 2:
            terms.append(node.children[1])
            node = node.children[0]
        terms.append(node)
        error: Any = None
        for term in reversed(terms):
            value = self.visit(term)
            truth = _truth(value)
            if truth is decides:
                return ct.BoolType(decides)
            if truth is None and error is None:
                error = value if isinstance(value, CELEvalError) else CELEvalError("no such overload", TypeError, None)
        return error if error is not None else ct.BoolType(not decides)

    def conditionaland(self, tree: Tree[Any]) -> Any:
        return self._logical(tree, False)

    def conditionalor(self, tree: Tree[Any]) -> Any:
        return self._logical(tree, True)

    def unary(self, tree: Tree[Any]) -> Any:
        """A run of the same prefix operator: an even number is no operator (cel-go's parser)."""
        if len(tree.children) == 1:
            return self.visit(tree.children[0])
        op = tree.children[0].data
        count, node = 0, tree
        while node.data == "unary" and len(node.children) == 2 and node.children[0].data == op:
            count += 1
            node = node.children[1]
            while node.data in _PASS and node.data != "unary" and len(node.children) == 1:
                node = node.children[0]
        value = self.visit(node)
        if count % 2 == 0 or isinstance(value, CELEvalError):
            return value
        func = self.activation.resolve_function("!_" if op == "unary_not" else "-_")
        try:
            return func(value)
        except TypeError:
            return CELEvalError("no such overload", TypeError, None)
        except ValueError as exc:
            return CELEvalError("return error for overflow", ValueError, exc.args)

    def primary(self, tree: Tree[Any]) -> Any:
        child = tree.children[0]
        kind = child.data
        meter = _meter()
        if kind == "ident":
            if meter is not None:
                meter.charge(1)
            scope = self._scope
            if scope:
                name = cast(Token, child.children[0]).value
                if name in scope:
                    value = scope[name]
                    return self._force(value) if type(value) is _Lazy else value
        elif meter is not None and kind in ("list_lit", "map_lit") and child.children and not self._is_constant(child):
            meter.charge(10 if kind == "list_lit" else 30)
        return super().primary(tree)

    def _binary(self, tree: Tree[Any], names: dict[str, str]) -> Any:
        """``a OP b`` (celpy's relation/addition/multiplication, without its per-call typing casts)."""
        if len(tree.children) == 1:
            return self.visit(tree.children[0])
        left_op, right_tree = tree.children
        func = self.activation.resolve_function(names[left_op.data])
        if left_op.data == "relation_in":
            target, method = self._steps.get(id(right_tree)) or _step(right_tree)
            if method == "primary" and target.children[0].data == "list_lit" and self._is_constant(target.children[0]):
                # cel-go turns `in` a constant list into a set lookup, which costs nothing
                func = base_functions["_in_"]
        left = self.visit(left_op.children[0])
        right = self.visit(right_tree)
        try:
            return func(left, right)
        except TypeError as exc:
            return CELEvalError(f"found no matching overload for {left_op.data!r}", TypeError, exc.args)
        except ZeroDivisionError as exc:
            return CELEvalError("modulus or divide by zero", ZeroDivisionError, exc.args)
        except (ValueError, OverflowError) as exc:
            return CELEvalError("return error for overflow", type(exc), exc.args)

    def relation(self, tree: Tree[Any]) -> Any:
        return self._binary(tree, _RELATIONS)

    def addition(self, tree: Tree[Any]) -> Any:
        return self._binary(tree, _ADDITIONS)

    def multiplication(self, tree: Tree[Any]) -> Any:
        return self._binary(tree, _MULTIPLICATIONS)

    def member_dot(self, tree: Tree[Any]) -> Any:
        meter = _meter()
        if meter is not None:
            if self._presence:
                self._presence = False  # has(x.f): the test itself costs nothing in Kubernetes
            else:
                meter.charge(1)
        return super().member_dot(tree)

    def member_index(self, tree: Tree[Any]) -> Any:
        """``x[i]``; cel-go charges an identifier used as the index only as the index (1)."""
        member_tree, index_tree = tree.children
        target, method = self._steps.get(id(index_tree)) or _step(index_tree)
        member = self.visit(member_tree)
        if method == "primary" and target.children[0].data == "ident" and self._scope:
            name = cast(Token, target.children[0].children[0]).value
            index = self._scope.get(name, _UNBOUND)
            index = self.visit(index_tree) if index is _UNBOUND else self._force(index) if type(index) is _Lazy else index
        else:
            index = self.visit(index_tree)
        func = self.activation.resolve_function("_[_]")
        try:
            return func(member, index)
        except TypeError as exc:
            return CELEvalError("found no matching overload for _[_]", TypeError, exc.args)
        except KeyError as exc:
            return CELEvalError("no such key", KeyError, exc.args)
        except IndexError as exc:
            return CELEvalError("invalid_argument", IndexError, exc.args)

    def macro_has_eval(self, exprlist: Tree[Any]) -> Any:
        self._presence = True
        try:
            values = self.visit_children(exprlist)
        finally:
            self._presence = False
        if values and isinstance(values[0], InvalidAttribute):
            return values[0]  # cel-go: the presence test reports the attribute's error
        return ct.BoolType(not (values and isinstance(values[0], CELEvalError)))

    def function_eval(self, name_token: Any, exprlist: Any = None) -> Any:
        name = name_token.value
        if name in _CONVERTED:
            args = list(exprlist or [])
            if len(args) == 1 and not isinstance(args[0], CELEvalError):
                converted = _convert(name, args[0])
                if converted is not NotImplemented:
                    meter = _meter()
                    if meter is not None:
                        meter.charge(1)
                    return converted
        return super().function_eval(name_token, exprlist)

    def member_dot_arg(self, tree: Tree[Any]) -> Any:
        name = cast(Token, tree.children[1]).value
        if len(tree.children) < 3 or not (name in _MACROS or (name == "bind" and is_cel_namespace(tree.children[0]))):
            return super().member_dot_arg(tree)
        args = tree.children[2].children
        variables = list(args[0].find_data("ident"))
        if name == "bind":
            if len(args) != 3 or len(variables) != 1:
                return CELEvalError("no such overload", TypeError, None)
            # cel-go evaluates the value when the variable is first read, once, where bind is written
            return self._bound(args[2], variables[0].children[0].value, _Lazy(args[1], dict(self._scope)))
        if len(args) not in (2, 3) or len(variables) != 1 or (len(args) == 3 and name != "map"):
            return super().member_dot_arg(tree)
        target = self.visit(tree.children[0])
        if isinstance(target, CELEvalError):
            return target
        if not isinstance(target, list | dict):
            return CELEvalError("no such overload", TypeError, None)
        return self._loop(name, list(target), variables[0].children[0].value, args[1:])

    def _force(self, lazy: _Lazy) -> Any:
        """The value of a cel.bind variable, computed on first use in the scope bind was written in."""
        if lazy.scope is not None:
            saved, self._scope = self._scope, lazy.scope
            try:
                lazy.value = self.visit(lazy.tree)
            except _EVAL_ERRORS as exc:
                lazy.value = CELEvalError("no such overload", type(exc), exc.args)
            finally:
                self._scope = saved
            lazy.scope = None
        return lazy.value

    def _bound(self, tree: Tree[Any], name: str, value: Any) -> Any:
        """``tree`` evaluated with ``name`` bound to ``value`` (a loop step)."""
        if self._scope is _Evaluator._scope:
            self._scope = {}
        scope = self._scope
        shadowed = scope.get(name, _UNBOUND)
        scope[name] = value
        try:
            return self.visit(tree)
        except _EVAL_ERRORS as exc:
            return CELEvalError("return error for overflow" if isinstance(exc, ValueError | OverflowError)
                                else "no such overload", type(exc), exc.args)
        finally:
            if shadowed is _UNBOUND:
                del scope[name]
            else:
                scope[name] = shadowed

    def _loop(self, name: str, items: list[Any], var: str, body: list[Tree[Any]]) -> Any:
        """cel-go's expansion of the macro (parser/macro.go) and what each step costs."""
        meter = _meter()
        charge = meter.charge if meter is not None else (lambda n: None)
        if name in ("all", "exists"):
            decides = name == "exists"
            result: Any = ct.BoolType(not decides)
            for item in items:
                charge(2 if name == "all" else 3)  # @not_strictly_false(@result) / (!@result)
                if _truth(result) is decides:
                    break
                value = self._bound(body[0], var, item)
                charge(1)  # @result
                truth = _truth(value)
                if truth is decides:
                    result = ct.BoolType(decides)
                elif truth is None and not isinstance(result, CELEvalError):
                    result = value if isinstance(value, CELEvalError) else CELEvalError("no such overload", TypeError, None)
            charge(1)
            return result
        if name == "exists_one":
            count: Any = 0
            for item in items:
                truth = _truth(value := self._bound(body[0], var, item))
                if truth is None:
                    count = value if isinstance(value, CELEvalError) else CELEvalError("no such overload", TypeError, None)
                elif truth:  # @result + 1 (the other branch, @result, costs nothing)
                    charge(2)
                    if not isinstance(count, CELEvalError):
                        count += 1
            charge(2)  # @result == 1
            return count if isinstance(count, CELEvalError) else ct.BoolType(count == 1)
        out: Any = []
        for item in items:
            if name == "filter" or len(body) == 2:
                truth = _truth(value := self._bound(body[0], var, item))
                if truth is None:
                    out = value if isinstance(value, CELEvalError) else CELEvalError("no such overload", TypeError, None)
                    continue
                if not truth:
                    continue
            value = item if name == "filter" else self._bound(body[-1], var, item)
            charge(13 if name == "filter" else 12)  # @result + [x] (the x read included for filter)
            if isinstance(value, CELEvalError):
                out = value if not isinstance(out, CELEvalError) else out
            elif not isinstance(out, CELEvalError):
                out.append(value)
        charge(1)
        return out if isinstance(out, CELEvalError) else ct.ListType(out)


class _Runner(celpy.InterpretedRunner):
    def __init__(self, environment: Any, ast: Tree[Any], functions: dict[str, Callable[..., Any]]) -> None:
        super().__init__(environment, ast, functions)
        self.steps = _plan(ast)
        self.constant_nodes = _constants(ast)
        self.literals: dict[int, Any] = {}

    def evaluate(self, context: Any) -> Any:
        evaluator = _Evaluator(ast=self.ast, activation=self.new_activation())
        evaluator._steps, evaluator._literals = self.steps, self.literals
        evaluator._constant_nodes = self.constant_nodes
        return evaluator.evaluate(context)


def _frames_needed(ast: Tree[Any]) -> int:
    """Python frames an evaluation of ``ast`` may take (about 6 per node that _Evaluator visits)."""
    deepest, stack = 0, [(ast, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        for child in node.children:
            if isinstance(child, Tree):
                skip = child.data in _PASS and len(child.children) == 1
                stack.append((child, depth if skip else depth + 1))
    return 6 * deepest + 400


_COSTED: dict[bool, dict[str, Callable[..., Any]]] = {}


def _costed_functions(list_type_attributes: bool) -> dict[str, Callable[..., Any]]:
    functions = _COSTED.get(list_type_attributes)
    if functions is None:
        merged = {**base_functions, **_functions(list_type_attributes)}
        functions = _COSTED[list_type_attributes] = {n: _costed(n, f) for n, f in merged.items()}
    return functions


class CelpyProgram:
    """A compiled selector for cel-python (celpy's interpreter, see :class:`_Evaluator`)."""

    __slots__ = ("expr", "_runner", "_cc", "_cost_limit", "_frames")

    def __init__(self, expr: str, consumable_capacity: bool, list_type_attributes: bool, *,
                 type_check: Callable[[], object] | None = None, cost_limit: int | None = None) -> None:
        """celpy has no type checker: ``type_check`` (the facade's: cel-expr-python's checker, when
        it is installed) runs after this engine's own static checks, so that both engines refuse
        the same expressions at compile time and this engine's syntax errors come first.

        ``cost_limit``: an evaluation whose actual cost, counted as Kubernetes counts it, passes
        this fails with Kubernetes' "actual cost limit exceeded" (None: no limit)."""
        self.expr = expr
        self._cc = consumable_capacity
        self._cost_limit = cost_limit
        rewritten = rewrite_optionals(expr)
        precheck_text(rewritten)
        env = _environment()
        try:
            ast = env.compile(rewrite_namespaces(rewritten))
        except CELParseError as exc:
            first = str(exc).splitlines()[0] if str(exc) else "syntax error"
            raise CelCompileError(f"compilation failed: Syntax error: {first}") from None
        check_tree(ast, expr, consumable_capacity=consumable_capacity,
                   list_type_attributes=list_type_attributes)
        if type_check is not None:
            type_check()
        self._runner = _Runner(env, ast, _costed_functions(list_type_attributes))
        self._frames = _frames_needed(ast)

    def _activation(self, dev: DeviceInput) -> dict[str, Any]:
        key = (NAME, self._cc)
        act = dev.cache.get(key)
        if act is None:
            device: dict[ct.StringType, ct.Value] = {
                ct.StringType("driver"): ct.StringType(dev.driver),
                ct.StringType("attributes"): DomainMap(
                    {ct.StringType(d): _attribute_map(m, dev.invalid.get(d)) for d, m in dev.attributes.items()}),
                ct.StringType("capacity"): DomainMap(
                    {ct.StringType(d): to_cel(m) for d, m in dev.capacity.items()}),
            }
            if self._cc:
                device[ct.StringType("allowMultipleAllocations")] = ct.BoolType(dev.allow_multiple_allocations)
            act = {"device": ct.MapType(device)}
            dev.cache[key] = act
        return act

    def evaluate(self, dev: DeviceInput) -> bool:
        if dev.error:
            raise CelRuntimeError(dev.error)
        if sys.getrecursionlimit() < self._frames:
            # what Kubernetes' parser accepts nests up to 250 deep: celpy recurses in Python for it
            sys.setrecursionlimit(self._frames)
        outer = _meter()
        _CURRENT.meter = _Meter(self._cost_limit)
        try:
            result = self._runner.evaluate(self._activation(dev))
        except _CostLimit:
            raise CelRuntimeError(COST_LIMIT_TEXT, f"Kubernetes stops a selector once its actual cost passes "
                                  f"{self._cost_limit:,}: iterate over smaller lists, or nest fewer "
                                  "comprehensions") from None
        except CELEvalError as exc:
            raise _runtime_error(exc) from None
        except RecursionError:
            raise CelRuntimeError("expression too deeply nested for the cel-python engine") from None
        except Exception as exc:  # noqa: BLE001 - celpy internals: report, never a traceback
            raise CelRuntimeError(
                f"the cel-python engine failed on this expression ({type(exc).__name__}: {exc})",
                "try engine='cel-expr-python'",
            ) from None
        finally:
            _CURRENT.meter = outer
        if isinstance(result, CELEvalError):
            raise _runtime_error(result)
        if isinstance(result, ct.BoolType):
            return bool(result)
        raise CelRuntimeError(runtime_non_bool(_tname(result)), "a selector must evaluate to true or false")
