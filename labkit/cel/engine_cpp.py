"""The ``cel-expr-python`` engine (Google's cel-cpp): type-checked like the API server.

Kubernetes types are protobuf messages (see :mod:`labkit.cel._proto`); the ``device`` object is
declared as four qualified variables (``device.driver`` ...), which the checker resolves like
fields, so ``device.capacity[d].x`` is statically a ``kubernetes.Quantity``.
"""

from __future__ import annotations

import contextlib
import re
import threading
from collections.abc import Callable
from functools import lru_cache
from typing import Any

from cel_expr_python import cel
from cel_expr_python.ext import ext_bindings, ext_optional, ext_strings

from labkit.cel import _proto, formats, ipcidr, k8slib
from labkit.cel.device import DeviceInput
from labkit.cel.diagnose import compile_error_from_text, runtime_error_from_text
from labkit.cel.errors import CelCompileError, CelRuntimeError
from labkit.cel.literals import _STRING as _STRING_LITERAL
from labkit.cel.literals import DRIVER, domain_candidates
from labkit.cel.typenames import go_type_name, runtime_non_bool

NAME = "cel-expr-python"
SORT_BY_KEYS = "labkit_sortByAssociatedKeys"
NET_STRING = "labkit_net_string"
ZIP_MAP, MERGE_ENTRIES = "labkit_zip_map", "labkit_merge_map_entries"
_NET_STRING = re.compile(r"<input>:(\d+):(\d+): found no matching overload for 'string' applied to '\(net\.(?:IP|CIDR)\)'")

T = cel.Type
Q = T(_proto.QUANTITY)
S = T(_proto.SEMVER)
U = T(_proto.URL)
IP = T(_proto.IP)
CIDR = T(_proto.CIDR)
NF = T(_proto.NAMED_FORMAT)
FORMAT_ERRORS, FORMAT_KNOWN, FORMAT_NAMED = "labkit_formatErrors", "labkit_formatKnown", "labkit_formatNamed"


def _format_message(name: str) -> Any:
    return _proto.FormatMsg(labkitValue=name)


def _format_constant(name: str) -> Callable[[], Any]:
    return lambda: _format_message(name)


def _format_errors(fmt: str, value: str) -> list[str]:
    return formats.validate(fmt, value)
LIST_DYN = T.List(T.DYN)


def _wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Convert message arguments to Python values and back; LibError -> CEL error value."""

    def impl(*args: Any) -> Any:
        try:
            return _proto.to_cel(fn(*(_proto.from_msg(a) for a in args)))
        except k8slib.LibError as exc:
            raise ValueError(str(exc)) from None
        except (TypeError, AttributeError):
            raise ValueError("no such overload") from None

    return impl


def _constructor(fn: Callable[..., Any]) -> Callable[..., Any]:
    """quantity()/semver() with constant arguments run once per evaluation: memoise them."""

    @lru_cache(maxsize=2048)
    def cached(*args: Any) -> Any:
        return _proto.to_cel(fn(*args))

    def impl(*args: Any) -> Any:
        try:
            return cached(*args)
        except k8slib.LibError as exc:
            raise ValueError(str(exc)) from None

    return impl


def _ov(oid: str, ret: Any, params: list[Any], member: bool, fn: Callable[..., Any] | None) -> Any:
    if fn is None:  # the runtime dispatches on value kind: one impl per kind signature
        return cel.Overload(oid, ret, params, member)
    return cel.Overload(oid, ret, params, member, _wrap(fn))


def _declarations(list_type_attributes: bool) -> tuple[list[Any], list[Any]]:
    """(functions, extension functions merged with strings ext names) for one environment."""
    F = cel.FunctionDecl
    cmp_ids = {"compareTo": (T.INT, k8slib.compare_to), "isGreaterThan": (T.BOOL, k8slib.is_greater_than),
               "isLessThan": (T.BOOL, k8slib.is_less_than)}
    funcs = [
        F("quantity", [cel.Overload("string_to_quantity", Q, [T.STRING], False, _constructor(k8slib.quantity))]),
        F("isQuantity", [_ov("is_quantity_string", T.BOOL, [T.STRING], False, k8slib.is_quantity)]),
        F("sign", [_ov("quantity_sign", T.INT, [Q], False, lambda q: q.sign())]),
        F("asApproximateFloat", [_ov("quantity_get_float", T.DOUBLE, [Q], True, k8slib.q_as_float)]),
        F("asInteger", [_ov("quantity_get_int", T.INT, [Q], True, k8slib.q_as_integer)]),
        F("isInteger", [_ov("quantity_is_integer", T.BOOL, [Q], True, k8slib.q_is_integer)]),
        F("add", [_ov("quantity_add", Q, [Q, Q], True, k8slib.q_add),
                  _ov("quantity_add_int", Q, [Q, T.INT], True, k8slib.q_add)]),
        F("sub", [_ov("quantity_sub", Q, [Q, Q], True, k8slib.q_sub),
                  _ov("quantity_sub_int", Q, [Q, T.INT], True, k8slib.q_sub)]),
        F("semver", [cel.Overload("string_to_semver", S, [T.STRING], False, _constructor(k8slib.semver)),
                     cel.Overload("string_bool_to_semver", S, [T.STRING, T.BOOL], False,
                                  _constructor(k8slib.semver))]),
        F("isSemver", [_ov("is_semver_string", T.BOOL, [T.STRING], False, k8slib.is_semver_),
                       _ov("is_semver_string_bool", T.BOOL, [T.STRING, T.BOOL], False, k8slib.is_semver_)]),
        F("major", [_ov("semver_major", T.INT, [S], True, lambda s: s.major)]),
        F("minor", [_ov("semver_minor", T.INT, [S], True, lambda s: s.minor)]),
        F("patch", [_ov("semver_patch", T.INT, [S], True, lambda s: s.patch)]),
        F("find", [_ov("string_find_string", T.STRING, [T.STRING, T.STRING], True, k8slib.find)]),
        F("findAll", [_ov("string_find_all_string", T.List(T.STRING), [T.STRING, T.STRING], True, k8slib.find_all),
                      _ov("string_find_all_string_int", T.List(T.STRING), [T.STRING, T.STRING, T.INT], True,
                          k8slib.find_all)]),
        F("url", [_ov("string_to_url", U, [T.STRING], False, _proto.url_msg)]),
        # the format library: format.<name>() values, and the targets of the validate()/named() rewrites
        *[F(f"format.{name}", [cel.Overload(f"format.{name}", NF, [], False, _format_constant(name))])
          for name in formats.FORMATS],
        F(FORMAT_ERRORS, [_ov("labkit_format_errors", T.List(T.STRING), [NF, T.STRING], True, _format_errors)]),
        F(FORMAT_KNOWN, [_ov("labkit_format_known", T.BOOL, [T.STRING], False, formats.FORMATS.__contains__)]),
        F(FORMAT_NAMED, [cel.Overload("labkit_format_named", NF, [T.STRING], False, _format_message)]),
        F("isURL", [_ov("is_url_string", T.BOOL, [T.STRING], False, k8slib.is_url)]),
        F("getScheme", [_ov("url_get_scheme", T.STRING, [U], True, k8slib.url_scheme)]),
        F("getHost", [_ov("url_get_host", T.STRING, [U], True, k8slib.url_host)]),
        F("getHostname", [_ov("url_get_hostname", T.STRING, [U], True, k8slib.url_hostname)]),
        F("getPort", [_ov("url_get_port", T.STRING, [U], True, k8slib.url_port)]),
        F("getEscapedPath", [_ov("url_get_escaped_path", T.STRING, [U], True, k8slib.url_escaped_path)]),
        F("getQuery", [_ov("url_get_query", T.Map(T.STRING, T.List(T.STRING)), [U], True, k8slib.url_query)]),
        F("ip", [_ov("string_to_ip", IP, [T.STRING], False, ipcidr.ip),
                 _ov("cidr_ip", IP, [CIDR], True, ipcidr.prefix_ip)]),
        F("isIP", [_ov("is_ip", T.BOOL, [T.STRING], False, ipcidr.is_ip)]),
        F(NET_STRING, [_ov("labkit_ip_string", T.STRING, [IP], False, str),
                       _ov("labkit_cidr_string", T.STRING, [CIDR], False, None)]),
        F("ip.isCanonical", [_ov("ip_is_canonical", T.BOOL, [T.STRING], False, ipcidr.is_canonical)]),
        F("family", [_ov("ip_family", T.INT, [IP], True, ipcidr.family)]),
        F("isUnspecified", [_ov("ip_is_unspecified", T.BOOL, [IP], True, ipcidr.is_unspecified)]),
        F("isLoopback", [_ov("ip_is_loopback", T.BOOL, [IP], True, ipcidr.is_loopback)]),
        F("isLinkLocalMulticast", [_ov("ip_is_link_local_multicast", T.BOOL, [IP], True,
                                       ipcidr.is_link_local_multicast)]),
        F("isLinkLocalUnicast", [_ov("ip_is_link_local_unicast", T.BOOL, [IP], True,
                                     ipcidr.is_link_local_unicast)]),
        F("isGlobalUnicast", [_ov("ip_is_global_unicast", T.BOOL, [IP], True, ipcidr.is_global_unicast)]),
        F("cidr", [_ov("string_to_cidr", CIDR, [T.STRING], False, ipcidr.cidr)]),
        F("isCIDR", [_ov("is_cidr", T.BOOL, [T.STRING], False, ipcidr.is_cidr)]),
        F("containsIP", [_ov("cidr_contains_ip_ip", T.BOOL, [CIDR, IP], True, ipcidr.contains_ip),
                         _ov("cidr_contains_ip_string", T.BOOL, [CIDR, T.STRING], True, ipcidr.contains_ip)]),
        F("containsCIDR", [_ov("cidr_contains_cidr", T.BOOL, [CIDR, CIDR], True, ipcidr.contains_cidr),
                           _ov("cidr_contains_cidr_string", T.BOOL, [CIDR, T.STRING], True,
                               ipcidr.contains_cidr)]),
        F("masked", [_ov("cidr_masked", CIDR, [CIDR], True, ipcidr.masked)]),
        F("prefixLength", [_ov("cidr_prefix_length", T.INT, [CIDR], True, ipcidr.prefix_length)]),
        F("sets.contains", [_ov("list_sets_contains_list", T.BOOL, [LIST_DYN, LIST_DYN], False,
                                k8slib.sets_contains)]),
        F("sets.equivalent", [_ov("list_sets_equivalent_list", T.BOOL, [LIST_DYN, LIST_DYN], False,
                                  k8slib.sets_equivalent)]),
        F("sets.intersects", [_ov("list_sets_intersects_list", T.BOOL, [LIST_DYN, LIST_DYN], False,
                                  k8slib.sets_intersects)]),
    ]
    for name, (ret, fn) in cmp_ids.items():
        funcs.append(F(name, [
            _ov(f"quantity_{name}", ret, [Q, Q], True, fn),
            _ov(f"semver_{name}", ret, [S, S], True, None),
        ]))
    comparable = [("int", T.INT), ("uint", T.UINT), ("double", T.DOUBLE), ("bool", T.BOOL),
                  ("string", T.STRING), ("bytes", T.BYTES), ("duration", T.DURATION),
                  ("timestamp", T.TIMESTAMP)]
    # cel-cpp converts an impl's result with the declared return type of the overload that
    # carries the impl, and allows one impl per receiver kind (list): so sum/min/max are
    # declared once, list(dyn) -> dyn (Kubernetes: list(T) -> T, checked per element type).
    funcs += [
        F("isSorted", [_ov(f"list_{t}_is_sorted_bool", T.BOOL, [T.List(ty)], True,
                           k8slib.is_sorted if i == 0 else None) for i, (t, ty) in enumerate(comparable)]),
        F("sum", [_ov("list_dyn_sum_dyn", T.DYN, [LIST_DYN], True, k8slib.list_sum)]),
        F("min", [_ov("list_dyn_min_dyn", T.DYN, [LIST_DYN], True, k8slib.list_min)]),
        F("max", [_ov("list_dyn_max_dyn", T.DYN, [LIST_DYN], True, k8slib.list_max)]),
        F("lists.range", [_ov("lists_range", T.List(T.INT), [T.INT], False, k8slib.lists_range)]),
        F("sort", [_ov("list_sort", LIST_DYN, [LIST_DYN], True, k8slib.list_sort)]),
        F("slice", [_ov("list_slice", LIST_DYN, [LIST_DYN, T.INT, T.INT], True, k8slib.list_slice)]),
        F("flatten", [_ov("list_flatten", LIST_DYN, [LIST_DYN], True, k8slib.list_flatten),
                      _ov("list_flatten_int", LIST_DYN, [LIST_DYN, T.INT], True, k8slib.list_flatten)]),
        F("distinct", [_ov("list_distinct", LIST_DYN, [LIST_DYN], True, k8slib.list_distinct)]),
        F("reverse", [_ov("list_reverse", LIST_DYN, [LIST_DYN], True, k8slib.list_reverse)]),
        # targets of the transformMap()/transformMapEntry() rewrites
        F(ZIP_MAP, [_ov("labkit_zip_map", T.Map(T.DYN, T.DYN), [LIST_DYN, LIST_DYN], False, k8slib.zip_map)]),
        F(MERGE_ENTRIES, [_ov("labkit_merge_map_entries", T.Map(T.DYN, T.DYN), [LIST_DYN], False,
                              k8slib.merge_map_entries)]),
        # target of the sortBy() rewrite (Kubernetes: @sortByAssociatedKeys), keys of one orderable type
        F(SORT_BY_KEYS, [_ov(f"list_sort_by_{t}_keys", LIST_DYN, [LIST_DYN, T.List(ty)], True,
                             k8slib.sort_by_keys if i == 0 else None)
                         for i, (t, ty) in enumerate(comparable)]),
    ]
    if list_type_attributes:
        # Kubernetes declares includes(dyn, dyn); cel-cpp dispatches on the receiver's kind, so
        # register one overload per kind an attribute value can have.
        receivers = [("list", LIST_DYN), ("int", T.INT), ("bool", T.BOOL), ("string", T.STRING),
                     ("double", T.DOUBLE), ("semver", S)]
        extra = [F("includes", [_ov(f"{n}_includes_dyn", T.BOOL, [t, T.DYN], True, k8slib.includes)
                                for n, t in receivers])]
    else:
        extra = []
    # names the strings extension also declares must be merged into one extension
    merged = [

        F("indexOf", [_ov("list_a_index_of_int", T.INT, [LIST_DYN, T.DYN], True, k8slib.index_of)]),
        F("lastIndexOf", [_ov("list_a_last_index_of_int", T.INT, [LIST_DYN, T.DYN], True,
                              k8slib.last_index_of)]),
    ] + extra
    return funcs, merged


_ENVS: dict[tuple[bool, bool], Any] = {}
# all/exists/existsOne/transformList with (index|key, value); cel-cpp's map-building ones
# (transformMap, transformMapEntry) need an internal cel.@mapInsert it does not bind from Python
_TWO_VARIABLE_COMPREHENSIONS = cel.NewEnvConfigFromYaml("extensions:\n  - name: two-var-comprehensions\n")
_ENV_LOCK = threading.Lock()


def _env(consumable_capacity: bool, list_type_attributes: bool) -> Any:
    key = (consumable_capacity, list_type_attributes)
    env = _ENVS.get(key)
    if env is None:
        with _ENV_LOCK:
            env = _ENVS.get(key)
            if env is None:
                funcs, merged = _declarations(list_type_attributes)
                variables = {
                    "device.driver": T.STRING,
                    "device.attributes": T.Map(T.STRING, T.Map(T.STRING, T.DYN)),
                    "device.capacity": T.Map(T.STRING, T.Map(T.STRING, Q)),
                }
                if consumable_capacity:
                    variables["device.allowMultipleAllocations"] = T.BOOL
                env = cel.NewEnv(
                    descriptor_pool=_proto.POOL,
                    config=_TWO_VARIABLE_COMPREHENSIONS,
                    variables=variables,
                    extensions=[ext_strings.ExtStrings(2), ext_optional.ExtOptional(),
                                ext_bindings.ExtBindings(), cel.CelExtension("kubernetes.lists", merged)],
                    functions=funcs,
                )
                _ENVS[key] = env
    return env


_CROSS_NUMERIC = ("int", "uint", "double")
_SHAPE = (NAME, "shape")


def _only_cross_numeric(text: str) -> bool:
    """True if every checker error is an int/uint/double mix in a relational operator.

    cel-go (CrossTypeNumericComparisons, on in Kubernetes) accepts ``1 < 1.5``; cel-cpp's
    checker does not, but its runtime does, so such expressions are compiled unchecked.
    """
    import re

    errors = re.findall(r"ERROR: <input>:\d+:\d+: (.*)", text)
    pat = re.compile(r"found no matching overload for '_(<|<=|>|>=)_' applied to '\((\w+), (\w+)\)'")
    for e in errors:
        m = pat.fullmatch(e.strip())
        if not m or m.group(2) not in _CROSS_NUMERIC or m.group(3) not in _CROSS_NUMERIC:
            return False
    return bool(errors)


_BUDGET = "Iteration budget exceeded"
_COST_LIMIT_TEXT = "operation cancelled: actual cost limit exceeded"


def _aborted(text: str) -> CelRuntimeError:
    if _BUDGET in text:
        return CelRuntimeError(
            _COST_LIMIT_TEXT,
            "cel-expr-python stops after 10,000 comprehension iterations per evaluation; "
            "Kubernetes allows a cost of 1,000,000, so it may still accept this selector",
        )
    return runtime_error_from_text(text.removesuffix("[INTERNAL]").strip())


_INTEGER_VIEW = re.compile(r"\.\s*(isInteger|asInteger)\s*\(")
_HAS_DEVICE_FIELD = re.compile(r"\bhas\s*\(\s*device\s*\.\s*(driver|attributes|capacity|allowMultipleAllocations)\s*\)")


def _rewrite_device_presence(expr: str, consumable_capacity: bool) -> str:
    """``has(device.driver)`` is always true in Kubernetes; ``device`` is not a value here.

    Replaced by ``(true   )`` of the same length, so error columns stay right.
    """
    out, pos = [], 0
    spans = [(m.start(), m.end()) for m in _STRING_LITERAL.finditer(expr)]
    for m in _HAS_DEVICE_FIELD.finditer(expr):
        if any(a <= m.start() < b for a, b in spans):
            continue
        if m.group(1) == "allowMultipleAllocations" and not consumable_capacity:
            continue
        out.append(expr[pos : m.start()])
        out.append("(true" + " " * (m.end() - m.start() - 6) + ")")
        pos = m.end()
    out.append(expr[pos:])
    return "".join(out)


_SORT_BY = re.compile(r"\.\s*sortBy\s*\(")
_EXPANDED_MACROS = re.compile(r"\.\s*(sortBy|transformMap|transformMapEntry|validate)\s*\(")


def _expand_sort_by(v: str, args: list[str]) -> str | None:
    """cel-go: ``cel.bind(v, R, v.@sortByAssociatedKeys(v.map(x, key)))``."""
    if len(args) != 2:
        return None
    return f"{v}.{SORT_BY_KEYS}({v}.map({args[0]}, {args[1]}))"


def _expand_transform_map(v: str, args: list[str]) -> str | None:
    """keys and values from two transformList passes over the same value, zipped into a map."""
    if len(args) not in (3, 4):
        return None
    head = ", ".join(args[:-1])
    return f"{ZIP_MAP}({v}.transformList({head}, {args[0]}), {v}.transformList({head}, {args[-1]}))"


def _expand_transform_map_entry(v: str, args: list[str]) -> str | None:
    """the entry maps from one transformList pass, merged (a repeated key is an error, as in Go)."""
    if len(args) not in (3, 4):
        return None
    return f"{MERGE_ENTRIES}({v}.transformList({', '.join(args)}))"


def _expand_format_validate(v: str, args: list[str]) -> str | None:
    """``F.validate(s)`` -> optional list of messages (cel-cpp cannot return optionals from Python)."""
    if len(args) != 1:
        return None
    e = f"{v}_errors"
    return f"cel.bind({e}, {v}.{FORMAT_ERRORS}({args[0]}), {e}.size() == 0 ? optional.none() : optional.of({e}))"


_EXPANSIONS = {
    "validate": (_expand_format_validate, "format.dns1123Label().validate(<string>)"),
    "sortBy": (_expand_sort_by, "list.sortBy(x, <key of x>)"),
    "transformMap": (_expand_transform_map, "m.transformMap(k, v, [<filter>,] <value>)"),
    "transformMapEntry": (_expand_transform_map_entry, "m.transformMapEntry(k, v, [<filter>,] {<key>: <value>})"),
}


_BIND_DEVICE = re.compile(r"\bcel\s*\.\s*bind\s*\(\s*([A-Za-z_]\w*)\s*,\s*device\s*,")


def _inline_device_binds(expr: str) -> str:
    """``cel.bind(d, device, body)`` -> ``body`` with ``d`` replaced by ``device``: labkit declares
    ``device.driver``, ``device.attributes``... as variables, so ``device`` alone is no value."""
    from labkit.cel.celpy_check import _split_call, _string_spans, _substitute, first_outside_strings

    while True:
        spans = _string_spans(expr)
        m = first_outside_strings(_BIND_DEVICE, expr, spans)
        if m is None:
            return expr
        split = _split_call(expr, expr.index("(", m.start()), spans)
        if split is None or len(split[0]) != 3:
            return expr
        body = _substitute(split[0][2].strip(), m.group(1), "device")
        expr = f"{expr[:m.start()]}({body}){expr[split[1]:]}"


_FORMAT_NAMED = re.compile(r"(?<![.\w])format\s*\.\s*named\s*\(")


def _rewrite_format_named(expr: str) -> str:
    """``format.named(n)`` -> ``optional.of(<format n>)`` or ``optional.none()``."""
    from labkit.cel.celpy_check import _split_call, _string_spans, first_outside_strings

    n = 0
    while True:
        spans = _string_spans(expr)
        m = first_outside_strings(_FORMAT_NAMED, expr, spans)
        if m is None:
            return expr
        split = _split_call(expr, m.end() - 1, spans)
        if split is None or len(split[0]) != 1:
            raise CelCompileError("compilation failed: format.named() takes one string", 'write format.named("dns1123Label")')
        v = f"__labkit_formatName{n}__"
        n += 1
        expr = (f"{expr[:m.start()]}cel.bind({v}, {split[0][0].strip()}, {FORMAT_KNOWN}({v}) ? "
                f"optional.of({FORMAT_NAMED}({v})) : optional.none()){expr[split[1]:]}")


def _rewrite_macros(expr: str) -> str:
    """Expand, as text, the macros cel-cpp cannot run for labkit, the way cel-go expands them:

    * ``sortBy``: cel-cpp has it only in its own lists extension, whose other functions behave
      unlike Kubernetes';
    * ``transformMap`` / ``transformMapEntry``: cel-cpp's expansion needs an internal
      ``cel.@mapInsert`` it does not bind from Python.

    The receiver is bound once with ``cel.bind``.
    """
    from labkit.cel.celpy_check import _receiver_start, _split_call, _string_spans, first_outside_strings

    n = 0
    while True:
        spans = _string_spans(expr)
        m = first_outside_strings(_EXPANDED_MACROS, expr, spans)
        if m is None:
            return expr
        expand, usage = _EXPANSIONS[m.group(1)]
        split = _split_call(expr, m.end() - 1, spans)
        start = _receiver_start(expr, m.start(), spans)
        v = f"__labkit_{m.group(1)}{n}__"
        body = expand(v, [a.strip() for a in split[0]]) if split and start < m.start() else None
        if body is None or split is None:
            raise CelCompileError(f"compilation failed: {m.group(1)}() needs a receiver and the right arguments",
                                  f"write {usage}")
        n += 1
        expr = f"{expr[:start]}cel.bind({v}, {expr[start:m.start()]}, {body}){expr[split[1]:]}"


_SORT_BY_ERROR = re.compile(r"<input>:(\d+):(\d+): found no matching overload for '"
                            + SORT_BY_KEYS + r"' applied to '\((.*), (list\(.*\))\)'")


def _sort_by_error(expr: str, text: str) -> str:
    """Point a key-type error at the original sortBy( and name it as cel-go does."""
    m = _SORT_BY.search(expr)
    line = expr.count("\n", 0, m.end()) + 1 if m else 1
    col = m.end() - (expr.rfind("\n", 0, m.end()) + 1) if m else 1
    return _SORT_BY_ERROR.sub(
        lambda e: f"<input>:{line}:{col}: found no matching overload for '@sortByAssociatedKeys' "
                  f"applied to '{e.group(3)}.({e.group(4)})'", text)


class CppProgram:
    """A compiled selector for cel-expr-python."""

    __slots__ = ("expr", "_env", "_prog", "_domains", "_env_key", "_keys", "_unchecked", "evaluate",
                 "_over_budget")

    def __init__(self, expr: str, consumable_capacity: bool, list_type_attributes: bool,
                 new_expression: bool = False) -> None:
        """``new_expression``: the API server's view of a selector it has not stored before."""
        self.expr = expr
        self._env_key = (consumable_capacity, list_type_attributes)
        self._env = _env(consumable_capacity, list_type_attributes)
        self._unchecked = False
        checked_text = _inline_device_binds(expr) if "bind" in expr else expr
        if "has" in checked_text:
            checked_text = _rewrite_device_presence(checked_text, consumable_capacity)
        if "format" in checked_text and _FORMAT_NAMED.search(checked_text):
            checked_text = _rewrite_format_named(checked_text)
        if _EXPANDED_MACROS.search(checked_text):
            checked_text = _rewrite_macros(checked_text)
        try:
            self._prog = self._compile_net_strings(checked_text)
        except RuntimeError as exc:
            text = str(exc)
            if SORT_BY_KEYS in text:
                text = _sort_by_error(expr, text)
            if not _only_cross_numeric(text):
                raise compile_error_from_text(expr, text) from None
            self._prog = self._env.compile(checked_text, disable_check=True)
            self._unchecked = True
        if not self._unchecked:
            self._kubernetes_checks(expr, checked_text, new_expression=new_expression)
        rtype = go_type_name(self._prog.return_type().name())
        if rtype not in ("bool", "dyn"):
            raise CelCompileError(
                f"must evaluate to bool or the unknown type, not {rtype}",
                "a selector must be a condition, e.g. compare the value with ==",
            )
        self._domains = domain_candidates(expr)
        self._keys: dict[tuple, tuple] = {}
        self.evaluate = self._evaluate
        self._over_budget: Callable[[DeviceInput], bool] | None = None
        if _INTEGER_VIEW.search(expr):
            self._use_go_quantity_form(expr, consumable_capacity, list_type_attributes)

    def _use_go_quantity_form(self, expr: str, consumable_capacity: bool, list_type_attributes: bool) -> None:
        """Go answers isInteger()/asInteger() from how a quantity is held (1000m = 1000 * 10**-3 is
        not an integer). A cel-cpp message carries only the exact value (its equality is the
        message's), so such selectors are evaluated by the cel-python engine, which keeps Go's form;
        cel-cpp still type-checks them. Kept as is when cel-python cannot run the expression."""
        from labkit.cel.engine_celpy import CelpyProgram

        with contextlib.suppress(CelCompileError):
            self.evaluate = CelpyProgram(expr, consumable_capacity, list_type_attributes, type_check=False).evaluate

    def _kubernetes_checks(self, expr: str, checked_text: str, *, new_expression: bool = False) -> None:
        """Type errors Kubernetes' checker reports and cel-cpp's does not (see labkit.cel.typecheck).

        ``new_expression``: also the API server's rules for new expressions (only differs with
        DRAListTypeAttributes off)."""
        from labkit.cel._checked import decode
        from labkit.cel.typecheck import kubernetes_type_errors

        strict = new_expression and not self._env_key[1]
        try:
            errors = kubernetes_type_errors(decode(self._prog.serialize()), new_expression_without_list_types=strict)
        except Exception:  # noqa: BLE001 - an AST labkit cannot read: keep cel-cpp's verdict
            return
        if not errors:
            return
        lines = []
        for offset, message in errors:
            line = checked_text.count("\n", 0, offset) + 1
            col = offset - (checked_text.rfind("\n", 0, offset) + 1) + 1
            lines.append(f"ERROR: <input>:{line}:{col}: {message}")
        raise compile_error_from_text(expr, "INVALID_ARGUMENT: " + "\n".join(lines))

    def _beyond_budget(self, dev: DeviceInput) -> bool:
        """cel-cpp gave up after 10,000 comprehension iterations; Kubernetes stops at a cost of
        1,000,000. If Kubernetes' estimated worst-case cost is within that, its evaluation can
        never hit the limit, so the result is computed by the cel-python engine instead (no
        budget). Above it, Kubernetes' limit error is reported (it may in fact finish early)."""
        fallback = self._over_budget
        if fallback is None:
            fallback = self._over_budget = self._budget_fallback()
        return fallback(dev)

    def _budget_fallback(self) -> Callable[[DeviceInput], bool]:
        from labkit.cel.cost import COST_LIMIT, estimate_max_cost
        from labkit.cel.engine_celpy import CelpyProgram

        cc, lt = self._env_key
        try:
            cost: int | None = estimate_max_cost(self.expr, consumable_capacity=cc, list_type_attributes=lt)
        except Exception:  # noqa: BLE001 - no estimate: keep the plain limit error
            cost = None
        if cost is not None and cost <= COST_LIMIT:
            with contextlib.suppress(CelCompileError):
                return CelpyProgram(self.expr, cc, lt, type_check=False).evaluate

        def over(dev: DeviceInput) -> bool:
            if cost is None or cost <= COST_LIMIT:
                raise _aborted(_BUDGET)
            raise CelRuntimeError(
                _COST_LIMIT_TEXT,
                f"Kubernetes estimates this selector's cost at up to {cost:,} (limit {COST_LIMIT:,}); "
                "nest fewer comprehensions or iterate over smaller lists",
            )

        return over

    def _compile_net_strings(self, text: str) -> Any:
        """Compile; ``string(<IP or CIDR>)`` calls the checker rejects are renamed and retried.

        cel-cpp's built-in string() cannot take another overload from Python, so each such call
        (found by the checker, so by type) becomes ``labkit_net_string(...)``.
        """
        for _ in range(64):
            try:
                return self._env.compile(text)
            except RuntimeError as exc:
                m = _NET_STRING.search(str(exc))
                if not m:
                    raise
                line, col = int(m.group(1)), int(m.group(2))
                lines = text.split("\n")
                offset = sum(len(x) + 1 for x in lines[: line - 1]) + col
                call = text.rfind("string", 0, offset)
                if call < 0 or text[call:offset].strip() not in ("string", "string("):
                    raise
                text = f"{text[:call]}{NET_STRING}{text[call + len('string'):]}"
        return self._env.compile(text)

    def _activation(self, dev: DeviceInput) -> Any:
        """The cel-cpp Activation for ``dev``, shared by all programs with the same needs.

        Cached on the device under (engine, environment, pre-filled domains): a handful of
        entries per device however many selectors are evaluated on it.
        """
        shape = dev.cache.get(_SHAPE)
        if shape is None:
            shape = dev.cache[_SHAPE] = (dev.driver, frozenset(dev.attributes), frozenset(dev.capacity))
        key = self._keys.get(shape)
        if key is None:
            domains = self._domains
            if DRIVER in domains:
                domains = domains.difference((DRIVER,)).union((dev.driver,))
            key = self._keys[shape] = (NAME, self._env_key, domains - shape[1], domains - shape[2],
                                       self._unchecked)
        act = dev.cache.get(key)
        if act is None:
            act = dev.cache[key] = self._build_activation(dev, key[2], key[3])
        return act

    def _build_activation(self, dev: DeviceInput, extra_a: frozenset[str], extra_c: frozenset[str]) -> Any:
        data = dev.cache.get((NAME, "data"))
        if data is None:
            data = {
                "device.driver": dev.driver,
                "device.attributes": {d: {k: _proto.to_cel(v) for k, v in m.items()}
                                      for d, m in dev.attributes.items()},
                "device.capacity": {d: {k: _proto.q_to_msg(v) for k, v in m.items()}
                                    for d, m in dev.capacity.items()},
                "device.allowMultipleAllocations": dev.allow_multiple_allocations,
            }
            dev.cache[(NAME, "data")] = data
        if extra_a or extra_c:
            data = dict(data)
            data["device.attributes"] = {**{d: {} for d in extra_a}, **data["device.attributes"]}
            data["device.capacity"] = {**{d: {} for d in extra_c}, **data["device.capacity"]}
        if not self._env_key[0]:
            data = {k: v for k, v in data.items() if k != "device.allowMultipleAllocations"}
        if self._unchecked:
            # without the checker, cel-cpp resolves `device.x` as a field of a `device` value
            data = {**data, "device": {k.partition(".")[2]: v for k, v in data.items()}}
        return self._env.Activation(data)

    def _evaluate(self, dev: DeviceInput) -> bool:
        if dev.error:
            raise CelRuntimeError(dev.error)
        try:
            value = self._prog.eval(self._activation(dev))
        except RuntimeError as exc:  # cel-cpp aborts evaluation (iteration budget, internal errors)
            if _BUDGET in str(exc):
                return self._beyond_budget(dev)
            raise _aborted(str(exc)) from None
        result = value.value()
        if result is True or result is False:
            return result
        tname = value.type().name()
        if tname == "ERROR":
            raise runtime_error_from_text(str(result))
        raise CelRuntimeError(runtime_non_bool(go_type_name(tname).split("(")[0]), "a selector must evaluate to true or false")
