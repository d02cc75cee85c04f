"""The ``cel-python`` engine (``celpy``, pure Python, e.g. for JupyterLite).

celpy has no type checker, no optional types and no ``cel.bind``. This module adds the
Kubernetes library, CEL's heterogeneous equality and cross-type numeric comparisons (by
overriding the operators), the missing-domain rule (a map subclass), ``cel.bind`` (inlined
before parsing), and a small static check (:mod:`labkit.cel.celpy_check`) for the API
server's most common compile errors. Optional syntax is refused with a clear error.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import celpy
import celpy.celtypes as ct
from celpy.celparser import CELParseError
from celpy.evaluation import CELEvalError

from labkit.api.quantity import Quantity
from labkit.cel import ipcidr, k8slib, strings_v2
from labkit.cel.celpy_check import (
    check_tree,
    precheck_text,
    rewrite_bind,
    rewrite_namespaces,
    rewrite_optionals,
)
from labkit.cel.device import DeviceInput
from labkit.cel.diagnose import no_such_key
from labkit.cel.errors import CelCompileError, CelRuntimeError
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


def to_cel(v: Any) -> Any:
    if isinstance(v, bool):
        return ct.BoolType(v)
    if isinstance(v, int):
        return ct.IntType(v)
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
             DomainMap: "map", KQuantity: "kubernetes.Quantity", KSemver: "kubernetes.Semver",
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
    return f


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


class CelpyProgram:
    """A compiled selector for cel-python (InterpretedRunner)."""

    __slots__ = ("expr", "_runner", "_cc")

    def __init__(self, expr: str, consumable_capacity: bool, list_type_attributes: bool, *,
                 type_check: Callable[[], object] | None = None) -> None:
        """celpy has no type checker: ``type_check`` (the facade's: cel-expr-python's checker, when
        it is installed) runs after this engine's own static checks, so that both engines refuse
        the same expressions at compile time and this engine's syntax errors come first."""
        self.expr = expr
        self._cc = consumable_capacity
        rewritten = rewrite_optionals(rewrite_bind(expr))
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
        self._runner = env.program(ast, functions=_functions(list_type_attributes))

    def _activation(self, dev: DeviceInput) -> dict[str, Any]:
        key = (NAME, self._cc)
        act = dev.cache.get(key)
        if act is None:
            device = {
                ct.StringType("driver"): ct.StringType(dev.driver),
                ct.StringType("attributes"): DomainMap(
                    {ct.StringType(d): to_cel(m) for d, m in dev.attributes.items()}),
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
        try:
            result = self._runner.evaluate(self._activation(dev))
        except CELEvalError as exc:
            raise _runtime_error(exc) from None
        except RecursionError:
            raise CelRuntimeError("expression too deeply nested for the cel-python engine") from None
        except Exception as exc:  # noqa: BLE001 - celpy internals: report, never a traceback
            raise CelRuntimeError(
                f"the cel-python engine failed on this expression ({type(exc).__name__}: {exc})",
                "try engine='cel-expr-python'",
            ) from None
        if isinstance(result, CELEvalError):
            raise _runtime_error(result)
        if isinstance(result, ct.BoolType):
            return bool(result)
        raise CelRuntimeError(runtime_non_bool(_tname(result)), "a selector must evaluate to true or false")
