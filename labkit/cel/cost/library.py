"""What a call costs: cel-go's own estimates for the standard library, its ext.Lists (v3) and
ext.Sets estimators, and Kubernetes' library CostEstimator (k8s.io/apiserver/pkg/cel/library)."""

from __future__ import annotations

import math
import re
from typing import Protocol, cast

from labkit.cel._checked import Expr
from labkit.cel.cost.model import (
    LIST_CREATE,
    NO_PATH,
    ONE,
    REGEX_FACTOR,
    STRING_FACTOR,
    U64,
    UNKNOWN,
    ZERO,
    Call,
    Entry,
    Est,
    GoPath,
    Node,
    fixed,
)

__all__ = ["Sizes", "function_cost"]


class Sizes(Protocol):
    """What the call estimators ask of the walk (:class:`labkit.cel.cost.estimator.Coster`)."""

    def estimate(self, n: Node) -> Est:
        ...

    def entry_of(self, e: Expr) -> Entry | None:
        ...

    def set_entry(self, e: Expr, entry: Entry | None) -> None:
        ...


def function_cost(c: Sizes, e: Expr, fn: str, oid: str, target: Node | None, args: list[Node],
                  arg_costs: list[Est]) -> Call:
    arg_sum = sum(arg_costs, ZERO)
    for estimator in (ext_estimate, kubernetes_estimate):
        call = estimator(c, fn, oid, target, args)
        if call is not None:
            return Call(call.cost + arg_sum, call.size)
    return builtin_cost(c, e, oid, target, args, arg_costs, arg_sum)

def ext_estimate(c: Sizes, fn: str, oid: str, target: Node | None, args: list[Node]) -> Call | None:
    """cel-go's ext.Lists (v3) and ext.Sets estimators, keyed by overload id."""
    def alloc(f: float, size: Est) -> Call:
        return Call(size.factor(f) + ONE + fixed(LIST_CREATE), size)

    if oid == "list_slice" and target is not None and len(args) == 2:
        sz = c.estimate(target)
        start, end = _uint_literal(args[0], 0), _uint_literal(args[1], sz.hi)
        return alloc(1, fixed((end - start) & U64))
    if oid == "lists_range" and target is None and len(args) == 1:
        return alloc(1, fixed(_uint_literal(args[0], U64)))
    if oid == "list_reverse" and target is not None and not args:
        return alloc(1, c.estimate(target))
    if oid in ("list_flatten", "list_flatten_int") and target is not None and len(args) <= 1:
        depth = _uint_literal(args[0], U64) if args else 1
        return alloc(float(depth), c.estimate(target))
    if oid == "list_distinct" and target is not None and not args:
        sz = c.estimate(target)
        return alloc(2.0, sz.times(sz))
    m = re.fullmatch(r"list_(\w+?)_sort(ByAssociatedKeys)?", oid)
    if m and target is not None and len(args) == (1 if m.group(2) else 0):
        sz = c.estimate(args[0] if m.group(2) else target)  # sortBy: the size of the keys
        f = 2.0 + (STRING_FACTOR if m.group(1) in ("string", "bytes") else 0.0)
        return alloc(f, sz.times(sz))
    if oid.startswith("list_sets_") and len(args) == 2:
        f = 2.0 if oid == "list_sets_equivalent_list" else 1.0
        return Call(c.estimate(args[0]).times(c.estimate(args[1])).factor(f) + ONE, None)
    return None

def element(target: Node) -> Node | None:
    """The element of a list (first type parameter), with a path if the list has one."""
    if not target.type.params:
        return None
    path = GoPath.of(*target.path.names(), "@items") if target.path.n else NO_PATH  # a copy
    return Node(None, path, target.type.params[0], None)

def kubernetes_estimate(c: Sizes, fn: str, oid: str, target: Node | None, args: list[Node]) -> Call | None:
    """k8s.io/apiserver/pkg/cel/library's CostEstimator, keyed by function name."""
    s = STRING_FACTOR
    if fn in ("isSorted", "sum", "max", "min", "indexOf", "lastIndexOf", "includes") and target is not None:
        el = element(target)
        if el is not None:
            el_cost = ONE
            if el.type.kind in ("string", "bytes"):
                el_cost += c.estimate(el).factor(s)
            return Call(c.estimate(target).times(el_cost), None)
        if fn == "includes":
            return Call(c.estimate(target), None)
        return Call(c.estimate(target).factor(s), None)
    if fn == "url" and len(args) == 1:
        sz = c.estimate(args[0])
        return Call(sz.factor(s), sz)
    if fn in ("lowerAscii", "upperAscii", "substring", "trim") and target is not None:
        sz = c.estimate(target)
        return Call(sz.factor(s), sz)
    if fn == "replace" and target is not None and len(args) >= 2:
        return replace_estimate(c, target, args)
    if fn == "split" and target is not None:
        sz = c.estimate(target)
        hi = sz.hi
        if len(args) > 1 and args[1].expr is not None and args[1].expr.kind == "const" \
                and args[1].expr.const_type == "int":
            hi = cast(int, args[1].expr.value) & U64  # an int constant's value
        return Call(sz.factor(2 * s), Est(0, hi))
    if fn == "join" and target is not None:
        items = c.estimate(target)
        sz = ZERO
        el = element(target)
        if el is not None:
            sz = items.times(c.estimate(el))
        if args:
            seps = Est(max(items.lo - 1, 0), max(items.hi - 1, 0))
            sz += c.estimate(args[0]).times(seps)
        return Call(sz.factor(s), sz)
    if fn in ("find", "findAll") and target is not None and args:
        sz = c.estimate(target)
        str_cost = (sz + ONE).factor(s)
        regex_cost = c.estimate(args[0]).factor(REGEX_FACTOR)
        return Call(str_cost.times(regex_cost), Est(0, sz.hi))
    if fn in ("cidr", "isIP", "isCIDR", "quantity", "isQuantity", "semver", "isSemver") and args:
        return Call(c.estimate(args[0]).factor(s), None)
    if fn == "ip":
        if oid == "cidr_ip":
            return Call(ONE, None)
        if args:
            return Call(c.estimate(args[0]).factor(s), None)
    if fn == "ip.isCanonical" and args:
        return Call(c.estimate(args[0]).factor(2 * s), None)
    if fn in _UNIT_COST:
        return Call(ONE, None)
    if fn in ("containsIP", "containsCIDR") and args:
        ip_bytes = Est(4, 16)
        total = (ip_bytes + ip_bytes).factor(s)
        if fn == "containsCIDR":
            total += ip_bytes.factor(s) + ONE
        if oid.endswith("_string"):
            total += c.estimate(args[0]).factor(s)
        return Call(total, None)
    if fn == "_==_" and len(args) == 2 and args[0].type == args[1].type:
        t = args[0].type
        if t.kind == "message" and t.name in ("net.IP", "net.CIDR", "kubernetes.Quantity", "kubernetes.Semver"):
            return Call(ONE, None)
        if t.kind == "message" and t.name == "kubernetes.URL":
            # Kubernetes takes both sizes from the right operand
            size = args[1].size if args[1].size is not None else ONE
            return Call(Est(1, size.hi).factor(s), None)
    return None

def replace_estimate(c: Sizes, target: Node, args: list[Node]) -> Call:
    sz = c.estimate(target)
    old, new = c.estimate(args[0]), c.estimate(args[1])
    count_hi = count_lo = kept_hi = kept_lo = 0
    if old.lo == 0:
        count_hi, kept_hi = (sz.hi + 1 if sz.hi < U64 else sz.hi), sz.hi
    elif new.hi <= old.lo:
        count_hi, kept_hi = 0, sz.hi
    else:
        count_hi = math.ceil(float(sz.hi) / float(old.lo))
    if old.hi == 0:
        count_lo, kept_lo = (sz.lo + 1 if sz.lo < U64 else sz.lo), sz.lo
    elif old.hi <= new.lo:
        count_lo, kept_lo = 0, sz.lo
    else:
        count_lo = math.ceil(float(sz.lo) / float(old.hi))
    count = Est(min(count_lo, U64), min(count_hi, U64))
    size = count.times(new) + Est(kept_lo, kept_hi)
    return Call(sz.factor(2 * STRING_FACTOR), size)

def builtin_cost(c: Sizes, e: Expr, oid: str, target: Node | None, args: list[Node], arg_costs: list[Est],
                 arg_sum: Est) -> Call:
    """cel-go's own estimates for the standard library, keyed by overload id."""
    s = STRING_FACTOR

    def size(n: Node) -> Est:
        return n.size if n.size is not None else UNKNOWN

    if oid == "string_format" and target is not None:
        return Call(size(target).factor(s) + arg_sum, None)
    if oid in ("string_to_bytes", "bytes_to_string", "strings_quote") and len(args) == 1:
        sz = size(args[0])
        result = {"string_to_bytes": Est(sz.lo, (sz.hi * 4) & U64),
                  "bytes_to_string": Est(sz.lo // 4, sz.hi),
                  "strings_quote": Est((sz.lo + 2) & U64, (sz.hi * 2 + 2) & U64)}[oid]
        return Call(sz.factor(s) + arg_sum, result)
    if oid in ("starts_with_string", "ends_with_string") and len(args) == 1:
        return Call(size(args[0]).factor(s) + arg_sum, None)
    if oid == "in_list" and len(args) == 2:
        return Call(size(args[1]).factor(1) + arg_sum, None)
    if oid in ("matches", "matches_string"):
        pair = (target, args[0]) if oid == "matches_string" and target is not None and len(args) == 1 \
            else (args[0], args[1]) if oid == "matches" and target is None and len(args) == 2 else None
        if pair is not None:
            str_cost = (size(pair[0]) + ONE).factor(s)
            regex_cost = size(pair[1]).factor(REGEX_FACTOR)
            return Call(str_cost.times(regex_cost) + arg_sum, None)
    if oid == "contains_string" and target is not None and len(args) == 1:
        return Call(size(target).factor(s).times(size(args[0]).factor(s)) + arg_sum, None)
    if oid in ("logical_or", "logical_and"):
        lhs, rhs = arg_costs[0], arg_costs[1]
        return Call(Est(lhs.lo, (lhs + rhs).hi), None)
    if oid == "conditional":
        result = size(args[1]).union(size(args[2]))
        e1, e2 = c.entry_of(args[1].expr), c.entry_of(args[2].expr)  # type: ignore[arg-type]  # an operand has its Expr
        c.set_entry(e, e1.union(e2) if e1 is not None else None)
        return Call(arg_costs[0] + arg_costs[1].union(arg_costs[2]), result)
    if oid in ("add_string", "add_bytes", "add_list") and len(args) == 2:
        result = size(args[0]) + size(args[1])
        e1, e2 = c.entry_of(args[0].expr), c.entry_of(args[1].expr)  # type: ignore[arg-type]  # an operand has its Expr
        c.set_entry(e, e1.union(e2) if e1 is not None else None)
        if oid == "add_list":
            return Call(ONE + arg_sum, result)
        return Call(result.factor(s) + arg_sum, result)
    if oid in ("equals", "not_equals") or (oid.startswith("_") and oid.endswith((":string", ":bytes"))):
        lhs, rhs = size(args[0]), size(args[1])
        smallest = min(lhs.hi, rhs.hi)
        return Call(Est(1 if smallest > 0 else 0, smallest).factor(s) + arg_sum, None)
    return Call(ONE + arg_sum, None)



_UNIT_COST = frozenset({
    "masked", "prefixLength", "family", "isUnspecified", "isLoopback", "isLinkLocalMulticast",
    "isLinkLocalUnicast", "isGlobalUnicast", "sign", "asInteger", "isInteger", "asApproximateFloat",
    "isGreaterThan", "isLessThan", "compareTo", "add", "sub", "major", "minor", "patch",
    "getScheme", "getHostname", "getHost", "getPort", "getEscapedPath", "getQuery", "format.named",
})


def _uint_literal(n: Node, default: int) -> int:
    """An int literal argument as a size (negative -> 0), else ``default``."""
    e = n.expr
    if e is None or e.kind != "const" or e.const_type != "int":
        return default
    return max(cast(int, e.value), 0)  # an int constant's value
