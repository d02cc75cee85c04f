"""The ``cel-expr-python`` engine (Google's cel-cpp): type-checked like the API server.

Kubernetes types are protobuf messages (see :mod:`labkit.cel._proto`); the ``device`` object is
declared as four qualified variables (``device.driver`` ...), which the checker resolves like
fields, so ``device.capacity[d].x`` is statically a ``kubernetes.Quantity``.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from functools import lru_cache
from typing import Any

from cel_expr_python import cel
from cel_expr_python.ext import ext_bindings, ext_optional, ext_strings

from labkit.cel import _proto, formats, ipcidr, k8slib
from labkit.cel._checked import AST, decode
from labkit.cel.cpp_rewrites import (
    FORMAT_ERRORS,
    FORMAT_KNOWN,
    FORMAT_NAMED,
    MERGE_ENTRIES,
    SORT_BY_KEYS,
    ZIP_MAP,
    rewrite_for_cpp,
    sort_by_error,
)
from labkit.cel.device import DeviceInput, invalid_attribute_text
from labkit.cel.diagnose import compile_error_from_text, runtime_error_from_text
from labkit.cel.errors import COST_LIMIT_TEXT, CelCompileError, CelRuntimeError
from labkit.cel.literals import DRIVER, domain_candidates
from labkit.cel.typecheck import kubernetes_type_errors
from labkit.cel.typenames import go_type_name, runtime_non_bool

__all__ = ["NAME", "BudgetFallback", "CppProgram", "InvalidFallback"]

NAME = "cel-expr-python"
NET_STRING = "labkit_net_string"
#: asked once, the first time an evaluation runs out of cel-cpp's iteration budget: the evaluator
#: to use for such devices from then on, or None to report the budget error (see labkit.cel.facade)
BudgetFallback = Callable[[], Callable[[DeviceInput], bool] | None]
#: asked once, the first time a device with attribute values CEL cannot represent (1.38,
#: DeviceInput.invalid) is met: the evaluator that reads them as Kubernetes does, or None
InvalidFallback = Callable[[], Callable[[DeviceInput], bool] | None]
_NET_STRING = re.compile(r"<input>:(\d+):(\d+): found no matching overload for 'string' applied to '\(net\.(?:IP|CIDR)\)'")

T = cel.Type
Q = T(_proto.QUANTITY)
S = T(_proto.SEMVER)
U = T(_proto.URL)
IP = T(_proto.IP)
CIDR = T(_proto.CIDR)
NF = T(_proto.NAMED_FORMAT)


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
    errors = re.findall(r"ERROR: <input>:\d+:\d+: (.*)", text)
    pat = re.compile(r"found no matching overload for '_(<|<=|>|>=)_' applied to '\((\w+), (\w+)\)'")
    for e in errors:
        m = pat.fullmatch(e.strip())
        if not m or m.group(2) not in _CROSS_NUMERIC or m.group(3) not in _CROSS_NUMERIC:
            return False
    return bool(errors)


_BUDGET = "Iteration budget exceeded"


def _aborted(text: str) -> CelRuntimeError:
    if _BUDGET in text:
        return CelRuntimeError(
            COST_LIMIT_TEXT,
            "cel-expr-python stops after 10,000 comprehension iterations per evaluation; "
            "Kubernetes allows a cost of 1,000,000, so it may still accept this selector",
        )
    return runtime_error_from_text(text.removesuffix("[INTERNAL]").strip())


_INTEGER_VIEW = re.compile(r"\.\s*(isInteger|asInteger)\s*\(")
class CppProgram:
    """A compiled selector for cel-expr-python.

    ``new_expression``: the API server's view of a selector it has not stored before.
    ``on_budget``: what to do past cel-cpp's iteration budget (:data:`BudgetFallback`).
    ``on_invalid``: who evaluates a device with values CEL cannot represent (:data:`InvalidFallback`;
    cel-cpp's maps cannot hold a value that fails only when read).
    """

    __slots__ = ("expr", "_env", "_prog", "_domains", "_env_key", "_keys", "_unchecked", "evaluate",
                 "_over_budget", "_on_budget", "_ast", "_on_invalid", "_invalid")

    def __init__(self, expr: str, consumable_capacity: bool, list_type_attributes: bool,
                 new_expression: bool = False, *, on_budget: BudgetFallback | None = None,
                 on_invalid: InvalidFallback | None = None) -> None:
        self.expr = expr
        self._env_key = (consumable_capacity, list_type_attributes)
        self._env = _env(consumable_capacity, list_type_attributes)
        self._unchecked = False
        self._ast: AST | None = None
        checked_text = rewrite_for_cpp(expr, consumable_capacity)
        try:
            self._prog = self._compile_net_strings(checked_text)
        except RuntimeError as exc:
            text = str(exc)
            if SORT_BY_KEYS in text:
                text = sort_by_error(expr, text)
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
        self._keys: dict[tuple[Any, ...], tuple[Any, ...]] = {}
        self.evaluate: Callable[[DeviceInput], bool] = self._evaluate
        self._on_budget = on_budget
        self._over_budget: Callable[[DeviceInput], bool] | None = None
        self._on_invalid = on_invalid
        self._invalid: Callable[[DeviceInput], bool] | None = None

    @property
    def reads_integer_form(self) -> bool:
        """Go answers isInteger()/asInteger() from how a quantity is held (1000m = 1000 * 10**-3 is
        not an integer); a cel-cpp message carries only the exact value, so this engine would
        answer them from the value. The facade has such selectors evaluated by an engine that
        keeps Go's form (:meth:`evaluate_with`)."""
        return bool(_INTEGER_VIEW.search(self.expr))

    def evaluate_with(self, evaluate: Callable[[DeviceInput], bool]) -> None:
        """Evaluate with ``evaluate`` (another engine's, for this type-checked expression)."""
        self.evaluate = evaluate

    def checked_ast(self) -> AST:
        """The type-checked AST (only parsed, ``checked`` False, when cel-cpp's checker refused
        a cross-type numeric comparison that Kubernetes accepts)."""
        if self._ast is None:
            self._ast = decode(self._prog.serialize())
        return self._ast

    def _kubernetes_checks(self, expr: str, checked_text: str, *, new_expression: bool = False) -> None:
        """Type errors Kubernetes' checker reports and cel-cpp's does not (see labkit.cel.typecheck).

        ``new_expression``: also the API server's rules for new expressions (only differs with
        DRAListTypeAttributes off)."""
        strict = new_expression and not self._env_key[1]
        try:
            errors = kubernetes_type_errors(self.checked_ast(), new_expression_without_list_types=strict)
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
        """cel-cpp gave up after 10,000 comprehension iterations (Kubernetes stops at a cost of
        1,000,000): evaluate with what ``on_budget`` gave, else report the budget error."""
        fallback = self._over_budget
        if fallback is None:
            fallback = self._on_budget() if self._on_budget is not None else None
            if fallback is None:
                fallback = _budget_exceeded
            self._over_budget = fallback
        return fallback(dev)

    def _with_invalid(self, dev: DeviceInput) -> bool:
        """1.38, a device with attribute values CEL cannot represent: evaluated by ``on_invalid``'s
        evaluator; without one, here with those attributes left out of their maps (exact unless
        the expression tests one with has(), or counts, iterates or compares its map): reading
        one reports Kubernetes' error for it instead of "no such key"."""
        fallback = self._invalid
        if fallback is None:
            fallback = self._on_invalid() if self._on_invalid is not None else None
            self._invalid = fallback = fallback or self._without_invalid
        return fallback(dev)

    def _without_invalid(self, dev: DeviceInput) -> bool:
        try:
            return self._evaluate_valid(dev)
        except CelRuntimeError as exc:
            key = exc.message.removeprefix("no such key: ")
            if key != exc.message and any(key in names for names in dev.invalid.values()):
                raise CelRuntimeError(invalid_attribute_text(key)) from None
            raise

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
        if dev.invalid:
            return self._with_invalid(dev)
        return self._evaluate_valid(dev)

    def _evaluate_valid(self, dev: DeviceInput) -> bool:
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


def _budget_exceeded(_dev: DeviceInput) -> bool:
    raise _aborted(_BUDGET)
