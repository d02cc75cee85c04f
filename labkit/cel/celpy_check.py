"""Static checks for the cel-python engine, which has no type checker.

They reject, at compile time, what the API server rejects most often: unknown functions and
``device`` fields, relational operators on Quantity/Semver, member ``sign()``, and selectors
whose result is obviously not a bool. Constructs celpy cannot run are refused with a message
pointing at the cel-expr-python engine.
"""

from __future__ import annotations

import re
from typing import Any, cast

from lark import Token, Tree

from labkit.cel.diagnose import relational_hint
from labkit.cel.errors import CelCompileError
from labkit.cel.literals import (
    STRING_LITERAL,
    first_outside_strings,
    receiver_start,
    split_call,
    string_spans,
    strip_strings,
)

_UNSUPPORTED = [
    (re.compile(r"\boptional\s*\."), "optional types (optional.of/none)"),
    (re.compile(r"\.\s*(orValue|hasValue|value|or)\s*\("), "optional values (orValue/hasValue/value)"),
    (re.compile(r"\.\s*(transformList|transformMap|transformMapEntry)\s*\("), "two-variable comprehensions"),
    (re.compile(r"\.\s*sortBy\s*\("), "the sortBy() macro"),
    (re.compile(r"(?<![.\w])format\s*\.\s*\w+\s*\("), "the format library (format.dns1123Label() ...)"),
    (re.compile(r"\.\s*(first|last)\s*\(\s*\)"), "first()/last() (they return optional values)"),
]
_NAMESPACED = re.compile(
    r"\b(sets)\s*\.\s*(contains|equivalent|intersects)\s*\(|\b(strings)\s*\.\s*(quote)\s*\(|\.\s*()(min|max)\s*\(|\b(lists)\s*\.\s*(range)\s*\(|\b(ip)\s*\.\s*(isCanonical)\s*\("
)

MACROS = {"all", "exists", "exists_one", "map", "filter"}
GLOBALS = {
    "has", "size", "int", "uint", "double", "string", "bytes", "bool", "dyn", "type", "duration",
    "timestamp", "matches", "quantity", "isQuantity", "sign", "semver", "isSemver", "url", "isURL",
    "labkit_sets_contains", "labkit_sets_equivalent", "labkit_sets_intersects", "labkit_strings_quote",
    "labkit_lists_range", "labkit_ip_isCanonical", "ip", "isIP", "cidr", "isCIDR",
}
MEMBERS = MACROS | {
    "size", "contains", "startsWith", "endsWith", "matches",
    "getDate", "getDayOfMonth", "getDayOfWeek", "getDayOfYear", "getFullYear", "getMonth", "getHours",
    "getMilliseconds", "getMinutes", "getSeconds",
    "asApproximateFloat", "asInteger", "isInteger", "add", "sub", "compareTo", "isGreaterThan",
    "isLessThan", "major", "minor", "patch", "isSorted", "sum", "min", "max", "indexOf", "lastIndexOf",
    "find", "findAll", "getScheme", "getHost", "getHostname", "getPort", "getEscapedPath", "getQuery",
    "labkit_min", "labkit_max", "sort", "slice", "flatten", "distinct", "reverse",
    "ip", "family", "isUnspecified", "isLoopback", "isLinkLocalMulticast", "isLinkLocalUnicast",
    "isGlobalUnicast", "containsIP", "containsCIDR", "masked", "prefixLength",
    "charAt", "lowerAscii", "upperAscii", "replace", "split", "substring", "trim", "join", "format",
}
TYPE_NAMES = {"int", "uint", "double", "string", "bytes", "bool", "list", "map", "null_type", "type", "dyn"}
_SCALARS = {"int", "uint", "double", "string", "bytes", "bool", "null_type"}
DEVICE_FIELDS = {"driver", "attributes", "capacity"}
_RELATIONAL = {"relation_lt": "<", "relation_le": "<=", "relation_gt": ">", "relation_ge": ">="}
_LITERAL_TYPES = {"INT_LIT": "int", "UINT_LIT": "uint", "FLOAT_LIT": "double", "STRING_LIT": "string",
                  "MLSTRING_LIT": "string", "BYTES_LIT": "bytes", "NULL_LIT": "null_type",
                  "BOOL_LIT": "bool"}


def unsupported(what: str) -> CelCompileError:
    return CelCompileError(
        f"{what} is not supported by the cel-python engine",
        "use engine='cel-expr-python'",
    )


_OPTIONAL_LEFT = re.compile(r"\.\s*\?|\[\s*\?")


def precheck_text(expr: str) -> None:
    """Refuse what celpy cannot run; call after the rewrites."""
    text = strip_strings(expr)
    if _OPTIONAL_LEFT.search(text):
        raise unsupported("optional syntax (.? and [?]) other than .orValue(x) / .hasValue()")
    for pattern, what in _UNSUPPORTED:
        if pattern.search(text):
            raise unsupported(what)
    for m in _TWO_VAR.finditer(text):
        split = split_call(text, m.end() - 1, [])
        if split is not None and len(split[0]) == 3:
            raise unsupported(f"the two-variable form of {m.group(1)}(i, v, ...)")


_TWO_VAR = re.compile(r"\.\s*(all|exists|exists_one|existsOne)\s*\(")


_OPT_FIELD = re.compile(r"\.\s*\?\s*([A-Za-z_]\w*)\s*\.\s*(orValue|hasValue)\s*\(")
_OPT_INDEX = re.compile(r"\[\s*\?")
_DEVICE_MAPS = ("device.attributes", "device.capacity")


def rewrite_optionals(expr: str) -> str:
    """The common optional idioms, for celpy (no optional types):

    ``R.?f.orValue(D)`` -> ``(has(R.f) ? R.f : D)``, ``R.?f.hasValue()`` -> ``has(R.f)``,
    ``R[?k].orValue(D)`` -> ``(k in R ? R[k] : D)``, ``R[?k].hasValue()`` -> ``(k in R)``;
    on ``device.attributes``/``device.capacity`` a missing domain is found (as an empty map),
    as in Kubernetes. Other optional forms stay unsupported.
    """
    while True:
        spans = string_spans(expr)
        m = first_outside_strings(_OPT_FIELD, expr, spans)
        if m is not None:
            start = receiver_start(expr, m.start(), spans)
            recv, field, fn = expr[start : m.start()].strip(), m.group(1), m.group(2)
            split = split_call(expr, m.end() - 1, spans)
            if not recv or split is None:
                return expr
            args, end = split
            if fn == "hasValue":
                new = f"has({recv}.{field})"
            elif len(args) == 1:
                new = f"(has({recv}.{field}) ? {recv}.{field} : {args[0].strip()})"
            else:
                return expr
            expr = expr[:start] + new + expr[end:]
            continue
        m = first_outside_strings(_OPT_INDEX, expr, spans)
        if m is None:
            return expr
        start = receiver_start(expr, m.start(), spans)
        recv = expr[start : m.start()].strip()
        close = split_call(expr, m.start(), spans)
        if not recv or close is None:
            return expr
        key_args, after = close
        key = key_args[0].strip().lstrip("?").strip() if len(key_args) == 1 else ""
        tail = re.match(r"\s*\.\s*(orValue|hasValue)\s*\(", expr[after:])
        if not key or tail is None:
            return expr
        call = split_call(expr, after + tail.end() - 1, spans)
        if call is None:
            return expr
        args, end = call
        device_map = re.sub(r"\s+", "", recv) in _DEVICE_MAPS
        if tail.group(1) == "hasValue":
            new = "true" if device_map else f"({key} in {recv})"
        elif len(args) == 1:
            new = f"{recv}[{key}]" if device_map else f"({key} in {recv} ? {recv}[{key}] : {args[0].strip()})"
        else:
            return expr
        expr = expr[:start] + new + expr[end:]


def rewrite_namespaces(expr: str) -> str:
    """``sets.contains(`` -> ``labkit_sets_contains(`` outside string literals (celpy has no namespaces)."""
    out, pos = [], 0
    for m in STRING_LITERAL.finditer(expr):
        out.append(_NAMESPACED.sub(_namespaced, expr[pos : m.start()]))
        out.append(m.group(0))
        pos = m.end()
    out.append(_NAMESPACED.sub(_namespaced, expr[pos:]))
    return "".join(out)


def _namespaced(m: re.Match[str]) -> str:
    if m.group(6):  # celpy treats .min()/.max() as its own macros
        return f".labkit_{m.group(6)}("
    groups = [g for g in m.groups() if g]
    ns, name = groups[0], groups[1]
    return f"labkit_{ns}_{name}("


_WRAPPERS = frozenset({"expr", "conditionalor", "conditionaland", "relation", "addition", "multiplication",
                       "unary", "member", "primary", "paren_expr"})


def _unwrap(node: Any) -> Any:
    """Descend through single-child wrapper nodes (expr -> conditionalor -> ... -> primary)."""
    while isinstance(node, Tree) and len(node.children) == 1 and node.data in _WRAPPERS:
        node = node.children[0]
    return node


def _name(node: Tree[Any], index: int = 0) -> str:
    tok = [c for c in node.children if isinstance(c, Token)]
    return str(tok[index]) if len(tok) > index else ""


def _is_device_map(node: Any, field: str) -> bool:
    node = _unwrap(node)
    if not (isinstance(node, Tree) and node.data == "member_dot" and _name(node) == field):
        return False
    base = _unwrap(node.children[0])
    return isinstance(base, Tree) and base.data == "ident" and _name(base) == "device"


def _kind(node: Any) -> str | None:
    """'kubernetes.Quantity'/'kubernetes.Semver'/literal type when statically evident."""
    node = _unwrap(node)
    if isinstance(node, Token):
        return _LITERAL_TYPES.get(node.type)
    if not isinstance(node, Tree):
        return None
    if node.data == "literal":
        return _LITERAL_TYPES.get(cast(Token, node.children[0]).type) if node.children else None
    if node.data == "ident_arg":
        return {"quantity": "kubernetes.Quantity", "semver": "kubernetes.Semver", "ip": "net.IP",
                "cidr": "net.CIDR"}.get(_name(node))
    if node.data == "member_dot_arg" and _name(node) in ("add", "sub"):
        return _kind(node.children[0])
    if node.data in ("member_dot", "member_index"):
        inner = _unwrap(node.children[0])
        if isinstance(inner, Tree) and inner.data == "member_index" and _is_device_map(inner.children[0], "capacity"):
            return "kubernetes.Quantity"
    if node.data == "list_lit":
        return "list"
    if node.data == "map_lit":
        return "map"
    return None


def check_tree(ast: Tree[Any], expr: str, *, consumable_capacity: bool, list_type_attributes: bool) -> None:
    fields = DEVICE_FIELDS | ({"allowMultipleAllocations"} if consumable_capacity else set())
    members = MEMBERS | ({"includes"} if list_type_attributes else set())
    bound = {"device"} | _comprehension_variables(ast)
    binds = "bind" in expr
    for node in ast.iter_subtrees():
        kind = node.data
        if kind == "member_dot_arg":
            name = _name(node)
            if name == "sign":
                raise CelCompileError(
                    "compilation failed: found no matching overload for 'sign' applied to 'kubernetes.Quantity.()'",
                    "sign is a global function in Kubernetes: write sign(<quantity>)",
                )
            if name == "reverse" and _kind(node.children[0]) == "string":
                raise CelCompileError(
                    "compilation failed: found no matching overload for 'reverse' applied to 'string.()'",
                    "reverse() on strings is not in the strings library version Kubernetes uses (version 2)",
                )
            if name == "bind" and is_cel_namespace(node.children[0]):
                _check_bind(node)
            elif name not in members:
                raise CelCompileError(f"compilation failed: undeclared reference to '{name}' (in container '')",
                                      _member_hint(name))
        elif kind == "ident_arg":
            name = _name(node)
            if name not in GLOBALS:
                raise CelCompileError(f"compilation failed: undeclared reference to '{name}' (in container '')")
        elif kind == "member_dot":
            base = _unwrap(node.children[0])
            if isinstance(base, Tree) and base.data == "ident" and _name(base) == "device":
                field = _name(node)
                if field not in fields:
                    hint = ("device.allowMultipleAllocations exists only with consumable capacity "
                            "(feature gate DRAConsumableCapacity)") if field == "allowMultipleAllocations" else ""
                    raise CelCompileError(f"compilation failed: undefined field '{field}'", hint)
        elif kind == "ident":
            name = _name(node)
            if name not in bound and name not in TYPE_NAMES and not (name == "cel" and binds):
                raise CelCompileError(f"compilation failed: undeclared reference to '{name}' (in container '')")
        elif kind == "relation" and len(node.children) == 2:
            op_node = node.children[0]
            if isinstance(op_node, Tree) and op_node.data in ("relation_eq", "relation_ne"):
                left, right = _kind(op_node.children[0]), _kind(node.children[1])
                if left is not None and right is not None and left != right:
                    op = "==" if op_node.data == "relation_eq" else "!="
                    raise CelCompileError(
                        f"compilation failed: found no matching overload for '_{op}_' applied to '({left}, {right})'",
                        "compare values of the same type, or wrap one side in dyn()",
                    )
            if isinstance(op_node, Tree) and op_node.data in _RELATIONAL:
                left, right = _kind(op_node.children[0]), _kind(node.children[1])
                opaque = {"kubernetes.Quantity", "kubernetes.Semver", "net.IP", "net.CIDR"}
                if left in opaque or right in opaque:
                    op = _RELATIONAL[op_node.data]
                    comparable = {"kubernetes.Quantity", "kubernetes.Semver"} & {left, right}
                    raise CelCompileError(
                        f"compilation failed: found no matching overload for '_{op}_' applied to "
                        f"'({left or 'dyn'}, {right or 'dyn'})'",
                        _hint_for(expr, op) if comparable else "",
                    )
    root = _kind(ast)
    if root is not None and root != "bool":
        raise CelCompileError(f"must evaluate to bool or the unknown type, not {root}",
                              "a selector must be a condition, e.g. compare the value with ==")


def is_cel_namespace(node: Any) -> bool:
    """``node`` is the ``cel`` of ``cel.bind(...)``."""
    base = _unwrap(node)
    return isinstance(base, Tree) and base.data == "ident" and _name(base) == "cel"


def _comprehension_variables(ast: Tree[Any]) -> set[str]:
    """The variables of comprehensions and of cel.bind."""
    names = set()
    for node in ast.iter_subtrees():
        if node.data == "member_dot_arg" and (_name(node) in MACROS
                                              or _name(node) == "bind" and is_cel_namespace(node.children[0])):
            args = [c for c in node.children if isinstance(c, Tree) and c.data == "exprlist"]
            if args and args[0].children:
                first = _unwrap(args[0].children[0])
                if isinstance(first, Tree) and first.data == "ident":
                    names.add(_name(first))
    return names


def _check_bind(node: Tree[Any]) -> None:
    args = [c for c in node.children if isinstance(c, Tree) and c.data == "exprlist"]
    first = _unwrap(args[0].children[0]) if args and args[0].children else None
    if len(args[0].children if args else []) != 3 or not (isinstance(first, Tree) and first.data == "ident"):
        raise CelCompileError("compilation failed: cel.bind needs (name, value, expression)",
                              "write cel.bind(x, <value>, <expression using x>)")


def _member_hint(name: str) -> str:
    if name == "includes":
        return "includes() exists only with list-type attributes (feature gate DRAListTypeAttributes)"
    return ""


def _hint_for(expr: str, op: str) -> str:
    stripped = strip_strings(expr)
    # find the operator in the original text: same offsets when no strings, else best effort
    for m in re.finditer(r"(?<![<>=!])" + re.escape(op) + r"(?![=<>])", expr):
        before = stripped if len(stripped) == len(expr) else None
        if before is not None and before[m.start() : m.end()] != op:
            continue
        hint = relational_hint(expr, 1, m.start() + 1, op) if "\n" not in expr else ""
        if hint and any(k in hint for k in ("quantity", "semver", "capacity", "add(", "sub(")):
            return hint
    return f"use a.compareTo(b) {op} 0"
