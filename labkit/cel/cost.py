"""Kubernetes' *estimated* worst-case cost of a DRA CEL selector (``CompilationResult.MaxCost``).

The API server refuses a new selector whose estimate is above 1,000,000 ("too complex, exceeds
cost limit"). This module reproduces that number for ``k8s.io/dynamic-resource-allocation/cel``
v0.37.2: cel-go's static cost estimation over the type-checked AST, with the Kubernetes CEL
library's call estimator, the estimators of the cel-go extensions Kubernetes enables (lists v3,
sets) and the DRA environment's declared sizes.

The model, in short:

* Every node has a cost range ``[min, max]``; only ``max`` is reported. Identifiers and field
  selections on maps/objects cost 1, literals 0, list/map creation 10/30 plus their elements,
  an ordinary function call 1 plus its arguments. ``has()`` costs only its operand.
* Sizes (string length, list/map entries) are tracked where CEL can know them: literals,
  concatenations, results of size-aware functions, and paths into ``device``: the driver
  name is at most 63 characters, attribute/capacity maps have at most 32 entries,
  domains 63 and names 32 characters, an attribute value at most 64 (characters or items).
  Anything else has an unknown size (up to 2^64-1), which makes size-dependent costs huge.
* Size-dependent costs: string equality and ordering (0.1 per character of the shorter
  operand), ``in`` on a list (1 per item), regexes ((length+1) * 0.1 * pattern length * 0.25),
  string functions (0.1 or 0.2 per character), list functions (per item, or per item squared
  for ``sort``/``distinct``/``sets.*``), IP/CIDR parsing, ``lists.range(n)`` (n + 11).
* A comprehension costs its range, its accumulator init and its result once, plus
  ``size(range) * (loop condition + loop step)``; ``cel.bind`` costs its (empty) range (10),
  its value and its body.

Where labkit's AST (cel-expr-python, i.e. cel-cpp) differs from cel-go's, it is mapped back:
``device.x`` is one qualified identifier in cel-cpp (counted as identifier + field selection);
``has(device.x)``, which labkit's engine compiles as ``true``, is compiled for the estimate as a
marked stand-in and counted as 1; overloads are chosen by Kubernetes' declarations, not
labkit's; and node types are repaired where labkit declares a function over ``list(dyn)``
(``sort``, ``sum``, ``reverse``...) and Kubernetes' checker knows more, or less (see
:class:`TypeInference`, which also models cel-go's free type parameters, e.g. ``sort()`` of
``dyn_list.reverse()`` is priced as a sort of ints).

Kubernetes' own quirks are reproduced: field paths are Go slices sharing their backing arrays
(so the keys of a two-variable comprehension over an attribute map are sized like its values,
and a field of a ``cel.bind`` variable used as a range can be sized like another's keys);
``url == url`` takes both sizes from the right operand; ``sort``/``distinct`` results are
sized n^2.

Approximate (checked against the Go oracle on the conformance table and a few thousand
generated selectors, which all agree, see tests/test_cel_cost.py for the known exceptions):

* Expressions cel-cpp cannot type-check (int/uint/double literals compared with each other,
  which Kubernetes' cross-type numeric comparisons accept) are costed on the parsed AST with
  :class:`TypeInference` alone; types it cannot infer count as ``dyn`` (more overloads, unknown
  sizes), which tends to make a cost larger than Kubernetes'.
* A free type parameter is bound by operators, ``in``, ``size()``, string methods and the list
  functions; others that would bind one (conversions such as ``string()``...) are not modelled.
* Should the stand-in compile for ``has(device.x)`` fail, each one counts 0 instead of 1.
"""

from __future__ import annotations

import contextlib
import math
import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import NamedTuple

from labkit.cel._checked import AST, DYN, Expr, Type, decode
from labkit.cel.facade import COST_LIMIT, compile_selector
from labkit.cel.literals import _STRING as _STRING_LITERAL

__all__ = ["COST_LIMIT", "estimate_ast", "estimate_max_cost"]

U64 = (1 << 64) - 1
_TWO_TO_64 = math.ldexp(1.0, 64)
STRING_FACTOR = 0.1          # per character of a traversed string
REGEX_FACTOR = 0.25          # per character of a regex pattern
LIST_CREATE, MAP_CREATE, STRUCT_CREATE = 10, 30, 40


# --- saturating uint64 ranges -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Est:
    """A ``[lo, hi]`` range of a cost or a size, saturating at 2^64-1 like cel-go."""

    lo: int
    hi: int

    def __add__(self, other: Est) -> Est:
        return Est(min(self.lo + other.lo, U64), min(self.hi + other.hi, U64))

    def times(self, other: Est) -> Est:
        return Est(min(self.lo * other.lo, U64), min(self.hi * other.hi, U64))

    def union(self, other: Est) -> Est:
        return Est(min(self.lo, other.lo), max(self.hi, other.hi))

    def factor(self, f: float) -> Est:
        """Each bound times ``f``, rounded up (cel-go's float arithmetic)."""
        return Est(_factor(self.lo, f), _factor(self.hi, f))


def _factor(x: int, f: float) -> int:
    xf = float(x)
    if xf > 0 and f > 0 and xf > _TWO_TO_64 / f:
        return U64
    c = math.ceil(xf * f)
    return U64 if c >= _TWO_TO_64 else int(c)


def fixed(n: int) -> Est:
    return Est(n, n)


ZERO, ONE = fixed(0), fixed(1)
MAX_FORMAT_REGEX = 128  # Kubernetes' MaxNameFormatRegexSize
UNKNOWN = Est(0, U64)


# --- the DRA environment's declared types --------------------------------------------------------


@dataclass(eq=False)
class Decl:
    """A declared type of the environment: its maximum size and how paths walk through it."""

    max: int
    type: Type
    fields: dict[str, Decl] = field(default_factory=dict)
    key: Decl | None = None
    elem: Decl | None = None


STRING, BOOL, INT, UINT, DOUBLE = Type("string"), Type("bool"), Type("int"), Type("uint"), Type("double")
QUANTITY = Type("message", "kubernetes.Quantity")
DEVICE = Type("message", "kubernetes.DRADevice")


@lru_cache(maxsize=4)
def _device_decl(consumable_capacity: bool, list_type_attributes: bool) -> tuple[Decl, Decl]:
    """(device, attribute value) declarations, with the limits of the resource.k8s.io API."""
    domain, ident = Decl(63, STRING), Decl(32, STRING)
    # an attribute value: 64 characters, or (list-type attributes) at most max(64, 48) items
    attribute = Decl(64, DYN if list_type_attributes else Type("any"))
    inner_attrs = Decl(32, Type("map", params=(STRING, attribute.type)), key=ident, elem=attribute)
    attrs = Decl(32, Type("map", params=(STRING, inner_attrs.type)), key=domain, elem=inner_attrs)
    quantity = Decl(0, QUANTITY)
    inner_caps = Decl(32, Type("map", params=(STRING, QUANTITY)), key=ident, elem=quantity)
    caps = Decl(32, Type("map", params=(STRING, inner_caps.type)), key=domain, elem=inner_caps)
    fields = {"driver": Decl(63, STRING), "attributes": attrs, "capacity": caps}
    if consumable_capacity:
        fields["allowMultipleAllocations"] = Decl(1, BOOL)
    return Decl(0, DEVICE, fields=fields), attribute


def _walk(root: Decl, attribute: Decl, path: tuple[str, ...]) -> Decl | None:
    """The declaration a field path (``device``, field names, @items/@values/@keys) reaches."""
    if not path or path[0] != "device":
        return None
    node = root
    for name in path[1:]:
        if name in ("@items", "@values"):
            nxt = node.elem
        elif name == "@keys":
            nxt = node.key
        else:
            nxt = node.fields.get(name)
            if nxt is None and node.elem is attribute:
                nxt = attribute  # any name in an attribute map: the attribute value limit
        if nxt is None:
            return None
        node = nxt
    return node


# --- types ----------------------------------------------------------------------------------------

_SCALARS = {"bool", "double", "duration", "int", "timestamp", "uint"}
_OPAQUE_MESSAGES = {"net.IP", "net.CIDR"}  # opaque types in Kubernetes, messages in labkit
_DYNAMIC = {"dyn", "any", "type_param", "error"}


def kind(t: Type) -> str:
    """cel-go's kind of a type: messages are structs, except labkit's stand-ins for opaque types;
    a type parameter left free is dyn in the checked AST."""
    if t.kind == "message":
        return "opaque" if t.name in _OPAQUE_MESSAGES else "struct"
    return "dyn" if t.kind == "type_param" else t.kind


def is_scalar(t: Type) -> bool:
    if t.kind in _SCALARS:
        return True
    if t.kind == "opaque" and t.name == "optional_type" and t.params:
        return is_scalar(t.params[0])
    return False


_ALL_KINDS = frozenset({"string", "bytes", "list", "map", "int", "uint", "double", "bool", "other"})


def _possible(t: Type) -> frozenset[str]:
    """The value kinds an argument of type ``t`` may have when overloads are matched."""
    if t.kind in _DYNAMIC:
        return _ALL_KINDS
    k = t.kind if t.kind in _ALL_KINDS else "other"
    return frozenset({k})


_NUMERIC = frozenset({"int", "uint", "double"})
_RELATIONAL = {"_<_", "_<=_", "_>_", "_>=_"}


def overload_ids(fn: str, target: Type | None, args: list[Type]) -> list[str]:
    """The cel-go overload ids Kubernetes' checker would record for a call (cost-relevant ones
    by name, every other overload under one generic id), in declaration order."""
    if fn in _RELATIONAL and len(args) == 2:
        both = _possible(args[0]) & _possible(args[1])
        out = [f"{fn}:{k}" for k in ("bytes", "string") if k in both]
        numeric = bool(_possible(args[0]) & _NUMERIC and _possible(args[1]) & _NUMERIC)
        if numeric or both - {"string", "bytes"}:
            out.insert(0, fn)
        return out or [fn]
    if fn == "_+_" and len(args) == 2:
        both = _possible(args[0]) & _possible(args[1])
        ids = {"bytes": "add_bytes", "list": "add_list", "string": "add_string"}
        out = [ids[k] for k in ("bytes", "list", "string") if k in both]
        if both - set(ids):
            out.insert(0, fn)
        return out or [fn]
    if fn == "@in" and len(args) == 2:
        container = _possible(args[1])
        return [i for k, i in (("list", "in_list"), ("map", "in_map")) if k in container] or [fn]
    if fn == "_[_]" and len(args) == 2:
        container = _possible(args[0])
        return [i for k, i in (("list", "index_list"), ("map", "index_map")) if k in container] or [fn]
    simple = {"_==_": "equals", "_!=_": "not_equals", "_&&_": "logical_and", "_||_": "logical_or",
              "_?_:_": "conditional", "startsWith": "starts_with_string", "endsWith": "ends_with_string",
              "contains": "contains_string", "format": "string_format", "strings.quote": "strings_quote",
              "slice": "list_slice", "lists.range": "lists_range", "reverse": "list_reverse",
              "distinct": "list_distinct", "sets.contains": "list_sets_contains_list",
              "sets.intersects": "list_sets_intersects_list", "sets.equivalent": "list_sets_equivalent_list"}
    if fn in simple and (target is not None) == (fn in _MEMBER_SIMPLE):
        return [simple[fn]]
    if fn == "matches":
        return ["matches_string" if target is not None else "matches"]
    if fn in _SORT_BY_KEYS and target is not None and len(args) == 1:
        return [f"list_{k}_sortByAssociatedKeys" for k in _sort_kinds(args[0])] or [fn]
    if fn == "flatten" and target is not None:
        return ["list_flatten_int" if args else "list_flatten"]
    if fn == "sort" and target is not None:
        return [f"list_{k}_sort" for k in _sort_kinds(target)] or [fn]
    if fn in ("bytes", "string") and target is None and len(args) == 1:
        special, source = ("string_to_bytes", "string") if fn == "bytes" else ("bytes_to_string", "bytes")
        arg = _possible(args[0])
        return ([special] if source in arg else []) + ([fn] if arg - {source} else [])
    if fn == "ip":
        return ["cidr_ip"] if target is not None else ["string_to_ip"]
    if fn in ("containsIP", "containsCIDR") and len(args) == 1:
        base = "cidr_contains_ip" if fn == "containsIP" else "cidr_contains_cidr"
        arg = _possible(args[0])
        out = [f"{base}_string"] if "string" in arg else []
        if arg - {"string"}:
            out.append(base)
        return out
    return [fn]


#: cel-go's sortBy() expands to ``@sortByAssociatedKeys``; labkit's engine names it differently
_SORT_BY_KEYS = {"@sortByAssociatedKeys", "labkit_sortByAssociatedKeys"}
_ORDERABLE = ("int", "uint", "double", "bool", "duration", "timestamp", "string", "bytes")


def _sort_kinds(list_type: Type) -> list[str]:
    """The orderable element kinds a list of this type matches: all for dyn elements, the first
    (int) for a free type parameter, which that first overload binds."""
    elem = list_type.params[0] if list_type.kind == "list" and list_type.params else DYN
    if elem.kind == "type_param":
        return _ORDERABLE[:1]
    return list(_ORDERABLE) if elem.kind in _DYNAMIC else [k for k in _ORDERABLE if k == elem.kind]


_MEMBER_SIMPLE = {"startsWith", "endsWith", "contains", "format", "slice", "reverse", "distinct"}


# --- the estimator --------------------------------------------------------------------------------


class GoPath:
    """A field path with Go slice semantics: ``append`` writes into spare capacity in place."""

    __slots__ = ("buf", "n")

    def __init__(self, buf: list[str], n: int) -> None:
        self.buf, self.n = buf, n

    @classmethod
    def of(cls, *names: str) -> GoPath:
        return cls(list(names), len(names))

    def names(self) -> tuple[str, ...]:
        return tuple(self.buf[: self.n])

    def append(self, name: str) -> GoPath:
        if self.n < len(self.buf):
            self.buf[self.n] = name  # shared with every other path appended to the same prefix
            return GoPath(self.buf, self.n + 1)
        cap = max(2 * len(self.buf), self.n + 1)  # Go's growth for small slices of strings
        return GoPath(self.buf[: self.n] + [name] + [""] * (cap - self.n - 1), self.n + 1)


NO_PATH = GoPath([], 0)


@dataclass
class Entry:
    """Sizes of a container's keys (or indices) and values, where both are known."""

    container: str  # "list" or "map"
    key: Est
    val: Est

    def union(self, other: Entry | None) -> Entry | None:
        if other is None:
            return None
        return Entry(self.container, self.key.union(other.key), self.val.union(other.val))


@dataclass
class Var:
    path: GoPath
    size: Est | None
    entry: Entry | None


@dataclass
class Node:
    """What the call estimators see of an argument: path, type, computed size."""

    expr: Expr | None
    path: GoPath
    type: Type
    size: Est | None


class Call(NamedTuple):
    cost: Est
    size: Est | None


_ACCUMULATORS = {"__result__", "@result"}


class Coster:
    """One estimation over one AST (cel-go's coster, with the Kubernetes estimators)."""

    def __init__(self, ast: AST, consumable_capacity: bool, list_type_attributes: bool) -> None:
        self.ast = ast
        self.device, self.attribute = _device_decl(consumable_capacity, list_type_attributes)
        self.types = TypeInference(ast, self.device).run()
        self.paths: dict[int, GoPath] = {}
        self.sizes: dict[int, Est] = {}
        self.entries: dict[int, Entry] = {}
        self.scopes: dict[str, list[Var]] = {}

    # -- bookkeeping

    def type_of(self, e: Expr) -> Type:
        return self.types.get(e.id, DYN)

    def var(self, name: str) -> Var | None:
        stack = self.scopes.get(name)
        return stack[-1] if stack else None

    def push(self, name: str, var: Var) -> None:
        self.scopes.setdefault(name, []).append(var)

    def pop(self, name: str) -> None:
        self.scopes[name].pop()

    def path_of(self, e: Expr) -> GoPath:
        if e.kind == "ident":
            v = self.var(e.name)
            if v is not None:
                return v.path
        return self.paths.get(e.id, NO_PATH)

    def path_size(self, path: GoPath) -> Est | None:
        decl = _walk(self.device, self.attribute, path.names())
        return None if decl is None else Est(0, decl.max)

    def size_of(self, e: Expr) -> Est | None:
        """cel-go's computeSize: recorded size, literal size, declared size, scalar, variable."""
        if e.id in self.sizes:
            return self.sizes[e.id]
        lit = _literal_size(e)
        if lit is not None:
            return lit
        declared = self.path_size(self.path_of(e))
        if declared is not None:
            self.sizes[e.id] = declared
            return declared
        if is_scalar(self.type_of(e)):
            return ONE
        if e.kind == "ident":
            v = self.var(e.name)
            if v is not None and v.size is not None:
                return v.size
        return None

    def entry_of(self, e: Expr) -> Entry | None:
        if e.id in self.entries:
            return self.entries[e.id]
        if e.kind == "ident":
            v = self.var(e.name)
            if v is not None:
                return v.entry
        return None

    def set_size(self, e: Expr, size: Est | None) -> None:
        if size is not None:
            self.sizes[e.id] = size

    def set_entry(self, e: Expr, entry: Entry | None) -> None:
        if entry is not None:
            self.entries[e.id] = entry

    def node(self, e: Expr) -> Node:
        path = self.path_of(e)
        if path.n and path.buf[0] in _ACCUMULATORS:
            path = NO_PATH
        return Node(e, path, self.type_of(e), self.size_of(e))

    def estimate(self, n: Node) -> Est:
        """A node's size for the call estimators: computed, else declared, else unknown."""
        if n.size is not None:
            return n.size
        return self.path_size(n.path) or UNKNOWN

    # -- the walk

    def cost(self, e: Expr | None) -> Est:
        if e is None:
            return ZERO
        k = e.kind
        if k == "const":
            return ZERO
        if k == "ident":
            return self.cost_ident(e)
        if k == "select":
            return self.cost_select(e)
        if k == "call":
            return self.cost_call(e)
        if k == "list":
            return self.cost_list(e)
        if k == "map":
            return self.cost_map(e)
        if k == "struct":
            return sum((self.cost(v) for _k, v in e.entries), ZERO) + fixed(STRUCT_CREATE)
        if k == "comprehension":
            if _is_bind(e):
                if e.accu_var.startswith(("__labkit_validate", "__labkit_formatName")):
                    return self.cost_format(e)
                expanded = _cel_go_map_transform(e)
                return self.cost(expanded) if expanded is not None else self.cost_bind(e)
            return self.cost_comprehension(e)
        return ZERO

    def cost_ident(self, e: Expr) -> Est:
        v = self.var(e.name)
        if v is not None:
            self.paths[e.id] = v.path
            return ONE
        if e.name.startswith("device.") and self.ast.checked:
            # cel-cpp resolved `device.x` to one identifier; Kubernetes selects a field of `device`
            self.paths[e.id] = GoPath.of("device").append(e.name.removeprefix("device."))
            return fixed(2)
        self.paths[e.id] = GoPath.of(e.name)
        return ONE

    def cost_select(self, e: Expr) -> Est:
        assert e.operand is not None
        if e.test_only:
            return self.cost(e.operand)  # Kubernetes: presence tests cost nothing themselves
        total = self.cost(e.operand)
        if kind(self.type_of(e.operand)) in ("map", "struct"):
            total += ONE
        self.paths[e.id] = self.path_of(e.operand).append(e.name)
        return total

    def cost_list(self, e: Expr) -> Est:
        total = ZERO
        item = Est(U64, 0) if e.args else ZERO
        for el in e.args:
            total += self.cost(el)
            item = item.union(self.size_of(el) or UNKNOWN)
        self.set_entry(e, Entry("list", ONE, item))
        return total + fixed(LIST_CREATE)

    def cost_map(self, e: Expr) -> Est:
        total = ZERO
        key = val = Est(U64, 0) if e.entries else ZERO
        for k, v in e.entries:
            total += self.cost(k) + self.cost(v)
            key = key.union((self.size_of(k) if k is not None else None) or UNKNOWN)
            val = val.union(self.size_of(v) or UNKNOWN)
        self.set_entry(e, Entry("map", key, val))
        return total + fixed(MAP_CREATE)

    def cost_comprehension(self, e: Expr) -> Est:
        assert e.iter_range is not None and e.accu_init is not None
        total = self.cost(e.iter_range) + self.cost(e.accu_init)
        self.push_local(e.accu_var, e.accu_init)
        if e.iter_var2:
            self.push_iter(e.iter_var, e.iter_range, keys=True)
            self.push_iter(e.iter_var2, e.iter_range, keys=False)
        else:
            self.push_iter(e.iter_var, e.iter_range, keys=None)
        per_item = self.cost(e.loop_step) + self.cost(e.loop_condition)
        self.pop(e.iter_var)
        if e.iter_var2:
            self.pop(e.iter_var2)
        total += self.cost(e.result)
        self.pop(e.accu_var)
        count = self.size_of(e.iter_range) or UNKNOWN
        total += count.times(per_item)
        init = e.accu_init
        if init.kind == "const":
            self.set_size(e, self.size_of(init))
        elif init.kind in ("list", "map"):
            self.set_size(e, count)
            if e.loop_step is not None:
                self.set_entry(e, self.entry_of(e.loop_step))
        return total

    def cost_format(self, e: Expr) -> Est:
        """labkit's text expansions of the format library, priced as Kubernetes' calls:
        ``R.validate(S)`` = R + S + size(S) * 0.1 * (128 * 0.25); ``format.named(N)`` = N + 1."""
        assert e.accu_init is not None and e.result is not None
        if e.accu_var.startswith("__labkit_formatName"):
            return self.cost(e.accu_init) + ONE
        inner = e.result
        call = inner.accu_init if inner.kind == "comprehension" else None
        if call is None or call.kind != "call" or len(call.args) != 1:
            return self.cost_bind(e)
        string = call.args[0]
        total = self.cost(e.accu_init) + self.cost(string)
        size = self.size_of(string) or self.path_size(self.path_of(string)) or UNKNOWN
        return total + size.factor(STRING_FACTOR).factor(MAX_FORMAT_REGEX * REGEX_FACTOR)

    def cost_bind(self, e: Expr) -> Est:
        assert e.accu_init is not None and e.result is not None
        total = self.cost(e.iter_range) + self.cost(e.accu_init)  # the empty range is still built
        self.push_local(e.accu_var, e.accu_init)
        total += self.cost(e.result)
        self.pop(e.accu_var)
        self.set_size(e, self.size_of(e.result))
        self.set_entry(e, self.entry_of(e.result))
        return total

    def push_local(self, name: str, init: Expr) -> None:
        self.push(name, Var(self.path_of(init), self.size_of(init), self.entry_of(init)))

    def push_iter(self, name: str, rng: Expr, keys: bool | None) -> None:
        """Iteration variable: ``keys`` True (first of two), False (second), None (single)."""
        entry = self.entry_of(rng)
        container = entry.container if entry is not None else kind(self.type_of(rng))
        is_list = container == "list"
        if keys is True:
            size, sub = (entry.key if entry else None), ("@indices" if is_list else "@keys")
        elif keys is False:
            size, sub = (entry.val if entry else None), ("@items" if is_list else "@values")
        elif is_list:
            size, sub = (entry.val if entry else None), "@items"
        else:
            size, sub = (entry.key if entry else None), "@keys"
        self.push(name, Var(self.path_of(rng).append(sub), size, None))

    def cost_call(self, e: Expr) -> Est:
        if _is_presence_marker(e):
            return ONE  # has(device.x): Kubernetes counts the `device` identifier only
        if e.name == MAP_INSERT:  # in cel-go's transformMap expansion: 1 plus its arguments
            return sum((self.cost(a) for a in e.args), ONE)
        if e.name == "dyn" and len(e.args) == 1 and e.operand is None:
            arg = e.args[0]
            total = self.cost(arg) + ONE
            self.set_size(e, self.size_of(arg))
            self.set_entry(e, self.entry_of(arg))
            return total
        arg_costs = []
        args = []
        for a in e.args:
            arg_costs.append(self.cost(a))
            args.append(self.node(a))
        total = ZERO
        target = None
        if e.operand is not None:
            total += self.cost(e.operand)
            target = self.node(e.operand)
        ids = overload_ids(e.name, target.type if target else None, [a.type for a in args])
        fn_cost = Est(U64, 0)
        result: Est | None = None
        for oid in ids:
            call = self.function_cost(e, e.name, oid, target, args, arg_costs)
            fn_cost = fn_cost.union(call.cost)
            if call.size is not None:
                result = call.size if result is None else result.union(call.size)
            if oid in ("index_list", "index_map") and args:
                entry = self.entry_of(args[0].expr) if args[0].expr is not None else None
                result = entry.val if entry is not None else None
                sub = "@items" if oid == "index_list" else "@values"
                base = self.path_of(args[0].expr) if args[0].expr is not None else NO_PATH
                self.paths[e.id] = base.append(sub)
            if result is None:
                result = self.size_of(e)
        self.set_size(e, result)
        return total + fn_cost

    # -- call costs

    def function_cost(self, e: Expr, fn: str, oid: str, target: Node | None, args: list[Node],
                      arg_costs: list[Est]) -> Call:
        arg_sum = sum(arg_costs, ZERO)
        for estimator in (self.ext_estimate, self.kubernetes_estimate):
            call = estimator(fn, oid, target, args)
            if call is not None:
                return Call(call.cost + arg_sum, call.size)
        return self.builtin_cost(e, oid, target, args, arg_costs, arg_sum)

    def ext_estimate(self, fn: str, oid: str, target: Node | None, args: list[Node]) -> Call | None:
        """cel-go's ext.Lists (v3) and ext.Sets estimators, keyed by overload id."""
        def alloc(f: float, size: Est) -> Call:
            return Call(size.factor(f) + ONE + fixed(LIST_CREATE), size)

        if oid == "list_slice" and target is not None and len(args) == 2:
            sz = self.estimate(target)
            start, end = _uint_literal(args[0], 0), _uint_literal(args[1], sz.hi)
            return alloc(1, fixed((end - start) & U64))
        if oid == "lists_range" and target is None and len(args) == 1:
            return alloc(1, fixed(_uint_literal(args[0], U64)))
        if oid == "list_reverse" and target is not None and not args:
            return alloc(1, self.estimate(target))
        if oid in ("list_flatten", "list_flatten_int") and target is not None and len(args) <= 1:
            depth = _uint_literal(args[0], U64) if args else 1
            return alloc(float(depth), self.estimate(target))
        if oid == "list_distinct" and target is not None and not args:
            sz = self.estimate(target)
            return alloc(2.0, sz.times(sz))
        m = re.fullmatch(r"list_(\w+?)_sort(ByAssociatedKeys)?", oid)
        if m and target is not None and len(args) == (1 if m.group(2) else 0):
            sz = self.estimate(args[0] if m.group(2) else target)  # sortBy: the size of the keys
            f = 2.0 + (STRING_FACTOR if m.group(1) in ("string", "bytes") else 0.0)
            return alloc(f, sz.times(sz))
        if oid.startswith("list_sets_") and len(args) == 2:
            f = 2.0 if oid == "list_sets_equivalent_list" else 1.0
            return Call(self.estimate(args[0]).times(self.estimate(args[1])).factor(f) + ONE, None)
        return None

    def element(self, target: Node) -> Node | None:
        """The element of a list (first type parameter), with a path if the list has one."""
        if not target.type.params:
            return None
        path = GoPath.of(*target.path.names(), "@items") if target.path.n else NO_PATH  # a copy
        return Node(None, path, target.type.params[0], None)

    def kubernetes_estimate(self, fn: str, oid: str, target: Node | None, args: list[Node]) -> Call | None:
        """k8s.io/apiserver/pkg/cel/library's CostEstimator, keyed by function name."""
        s = STRING_FACTOR
        if fn in ("isSorted", "sum", "max", "min", "indexOf", "lastIndexOf", "includes") and target is not None:
            el = self.element(target)
            if el is not None:
                el_cost = ONE
                if el.type.kind in ("string", "bytes"):
                    el_cost += self.estimate(el).factor(s)
                return Call(self.estimate(target).times(el_cost), None)
            if fn == "includes":
                return Call(self.estimate(target), None)
            return Call(self.estimate(target).factor(s), None)
        if fn == "url" and len(args) == 1:
            sz = self.estimate(args[0])
            return Call(sz.factor(s), sz)
        if fn in ("lowerAscii", "upperAscii", "substring", "trim") and target is not None:
            sz = self.estimate(target)
            return Call(sz.factor(s), sz)
        if fn == "replace" and target is not None and len(args) >= 2:
            return self.replace_estimate(target, args)
        if fn == "split" and target is not None:
            sz = self.estimate(target)
            hi = sz.hi
            if len(args) > 1 and args[1].expr is not None and args[1].expr.kind == "const" \
                    and args[1].expr.const_type == "int":
                hi = int(args[1].expr.value) & U64  # type: ignore[call-overload]
            return Call(sz.factor(2 * s), Est(0, hi))
        if fn == "join" and target is not None:
            items = self.estimate(target)
            sz = ZERO
            el = self.element(target)
            if el is not None:
                sz = items.times(self.estimate(el))
            if args:
                seps = Est(max(items.lo - 1, 0), max(items.hi - 1, 0))
                sz += self.estimate(args[0]).times(seps)
            return Call(sz.factor(s), sz)
        if fn in ("find", "findAll") and target is not None and args:
            sz = self.estimate(target)
            str_cost = (sz + ONE).factor(s)
            regex_cost = self.estimate(args[0]).factor(REGEX_FACTOR)
            return Call(str_cost.times(regex_cost), Est(0, sz.hi))
        if fn in ("cidr", "isIP", "isCIDR", "quantity", "isQuantity", "semver", "isSemver") and args:
            return Call(self.estimate(args[0]).factor(s), None)
        if fn == "ip":
            if oid == "cidr_ip":
                return Call(ONE, None)
            if args:
                return Call(self.estimate(args[0]).factor(s), None)
        if fn == "ip.isCanonical" and args:
            return Call(self.estimate(args[0]).factor(2 * s), None)
        if fn in _UNIT_COST:
            return Call(ONE, None)
        if fn in ("containsIP", "containsCIDR") and args:
            ip_bytes = Est(4, 16)
            total = (ip_bytes + ip_bytes).factor(s)
            if fn == "containsCIDR":
                total += ip_bytes.factor(s) + ONE
            if oid.endswith("_string"):
                total += self.estimate(args[0]).factor(s)
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

    def replace_estimate(self, target: Node, args: list[Node]) -> Call:
        sz = self.estimate(target)
        old, new = self.estimate(args[0]), self.estimate(args[1])
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

    def builtin_cost(self, e: Expr, oid: str, target: Node | None, args: list[Node], arg_costs: list[Est],
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
            e1, e2 = self.entry_of(args[1].expr), self.entry_of(args[2].expr)  # type: ignore[arg-type]
            self.set_entry(e, e1.union(e2) if e1 is not None else None)
            return Call(arg_costs[0] + arg_costs[1].union(arg_costs[2]), result)
        if oid in ("add_string", "add_bytes", "add_list") and len(args) == 2:
            result = size(args[0]) + size(args[1])
            e1, e2 = self.entry_of(args[0].expr), self.entry_of(args[1].expr)  # type: ignore[arg-type]
            self.set_entry(e, e1.union(e2) if e1 is not None else None)
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


def _literal_size(e: Expr) -> Est | None:
    if e.kind == "const":
        if e.const_type == "string":
            return fixed(len(str(e.value)))
        if e.const_type == "bytes":
            return fixed(len(e.value))  # type: ignore[arg-type]
        if e.const_type in ("bool", "double", "duration", "int", "timestamp", "uint", "null"):
            return ONE
        return None
    if e.kind == "list":
        return fixed(len(e.args))
    if e.kind == "map":
        return fixed(len(e.entries))
    return None


def _uint_literal(n: Node, default: int) -> int:
    """An int literal argument as a size (negative -> 0), else ``default``."""
    e = n.expr
    if e is None or e.kind != "const" or e.const_type != "int":
        return default
    return max(int(e.value), 0)  # type: ignore[call-overload]


MAP_INSERT = "cel.@mapInsert"
_SYNTHETIC_IDS = iter(range(-1, -(2**62), -1))


def _synthetic(**fields: object) -> Expr:
    return Expr(id=next(_SYNTHETIC_IDS), **fields)  # type: ignore[arg-type]


def _appended_item(step: Expr | None) -> tuple[Expr | None, Expr | None]:
    """(filter, item) of a transformList loop step ``[c ? ] @result + [item] [: @result]``."""
    cond = None
    if step is not None and step.kind == "call" and step.name == "_?_:_" and len(step.args) == 3:
        cond, step = step.args[0], step.args[1]
    if (step is None or step.kind != "call" or step.name != "_+_" or len(step.args) != 2
            or step.args[1].kind != "list" or len(step.args[1].args) != 1):
        return None, None
    return cond, step.args[1].args[0]


def _cel_go_map_transform(e: Expr) -> Expr | None:
    """labkit runs ``R.transformMap(k, v, [c,] f)`` as ``cel.bind(V, R, zip(V.transformList(k, v,
    [c,] k), V.transformList(k, v, [c,] f)))`` (and transformMapEntry as a merge of one
    transformList); this rebuilds cel-go's single comprehension, which inserts into a map, so
    that the cost is Kubernetes'. None for any other bind."""
    from labkit.cel.engine_cpp import MERGE_ENTRIES, ZIP_MAP

    body, rng = e.result, e.accu_init
    if body is None or rng is None or body.kind != "call" or body.name not in (ZIP_MAP, MERGE_ENTRIES):
        return None
    passes = body.args
    if not passes or any(p.kind != "comprehension" or not p.iter_var2 for p in passes):
        return None
    cond, item = _appended_item(passes[-1].loop_step)
    if item is None:
        return None
    accu = passes[-1].accu_var

    def result() -> Expr:
        return _synthetic(kind="ident", name=accu)

    if body.name == ZIP_MAP:
        key = _synthetic(kind="ident", name=passes[-1].iter_var)
        insert_args = [result(), key, item]
    else:
        insert_args = [result(), item]
    step = _synthetic(kind="call", name=MAP_INSERT, args=insert_args)
    if cond is not None:
        step = _synthetic(kind="call", name="_?_:_", args=[cond, step, result()])
    return _synthetic(kind="comprehension", iter_range=rng, iter_var=passes[-1].iter_var,
                      iter_var2=passes[-1].iter_var2, accu_var=accu, accu_init=_synthetic(kind="map"),
                      loop_condition=_synthetic(kind="const", value=True, const_type="bool"),
                      loop_step=step, result=result())


def _is_bind(e: Expr) -> bool:
    rng, cond = e.iter_range, e.loop_condition
    return (rng is not None and rng.kind == "list" and not rng.args and cond is not None
            and cond.kind == "const" and cond.value is False and e.accu_var != "__result__")


# --- Kubernetes' types for labkit's AST ----------------------------------------------------------

_NAMESPACES = {"ip", "sets", "lists", "optional", "strings", "math", "base64"}
_BOOL_FUNCS = {
    "_==_", "_!=_", "_<_", "_<=_", "_>_", "_>=_", "!_", "_&&_", "_||_", "@in", "@not_strictly_false",
    "startsWith", "endsWith", "contains", "matches", "isQuantity", "isSemver", "isURL", "isIP", "isCIDR",
    "ip.isCanonical", "isInteger", "isGreaterThan", "isLessThan", "containsIP", "containsCIDR", "isSorted",
    "includes", "sets.contains", "sets.intersects", "sets.equivalent", "hasValue", "isUnspecified",
    "isLoopback", "isLinkLocalMulticast", "isLinkLocalUnicast", "isGlobalUnicast", "bool",
}
_RESULT_TYPES = {
    **dict.fromkeys(("size", "compareTo", "sign", "asInteger", "major", "minor", "patch", "indexOf",
                     "lastIndexOf", "family", "prefixLength", "int"), INT),
    **dict.fromkeys(("asApproximateFloat", "double"), DOUBLE),
    **dict.fromkeys(("charAt", "lowerAscii", "upperAscii", "replace", "substring", "trim", "join", "format",
                     "strings.quote", "string", "getScheme", "getHost", "getHostname", "getPort",
                     "getEscapedPath", "find"), STRING),
    **dict.fromkeys(("split", "findAll"), Type("list", params=(STRING,))),
    **dict.fromkeys(("quantity", "add", "sub"), QUANTITY),
    "uint": UINT, "bytes": Type("bytes"),
    "semver": Type("message", "kubernetes.Semver"), "url": Type("message", "kubernetes.URL"),
    "ip": Type("message", "net.IP"), "cidr": Type("message", "net.CIDR"), "masked": Type("message", "net.CIDR"),
    "lists.range": Type("list", params=(INT,)),
}


_NUMBERS = ("int", "uint", "double")
_STRING_METHODS = frozenset({"startsWith", "endsWith", "contains", "matches", "lowerAscii", "upperAscii", "trim",
                             "substring", "replace", "split", "charAt", "find", "findAll", "format"})
_ADDABLE = ("bytes", "double", "int", "string", "uint")  # scalar kinds _+_ has an overload for
_ORDERED = ("string", "bytes", "bool", "timestamp", "duration")


def is_free(t: Type) -> bool:
    """A type parameter the checker has not bound (dyn in the checked AST)."""
    return t.kind == "type_param"


def _vaguer(a: Type, b: Type) -> bool:
    """True if ``a`` is ``b`` with some part replaced by dyn (so ``b`` says more)."""
    if a.kind in _DYNAMIC:
        return b.kind not in _DYNAMIC or (is_free(b) and a.kind == "dyn")
    return (a.kind == b.kind and a.name == b.name and len(a.params) == len(b.params)
            and any(_vaguer(x, y) for x, y in zip(a.params, b.params))
            and all(x == y or _vaguer(x, y) for x, y in zip(a.params, b.params)))


def _list_of(t: Type) -> Type:
    return Type("list", params=(t,))


class TypeInference:
    """The node types Kubernetes' checker (cel-go) would give.

    For a checked AST these are cel-cpp's, except where cel-cpp says ``dyn`` only because labkit
    declares a function over ``list(dyn)`` (``sort``, ``sum``...): there the type follows from the
    receiver and is carried through variables, comprehensions and operators. For a parsed
    (unchecked) AST everything is inferred here: literals, ``device`` paths, variables and the
    result types of common functions; the rest is ``dyn``. Namespaced calls (``ip.isCanonical``)
    are folded into qualified global functions the way the checker does.

    Like cel-go, a generic function applied to a dyn value (``dyn_list.reverse()``, and ``[]``)
    yields a free type parameter, which the first overload that accepts it binds: ``sort()`` to
    int, ``x < 1`` to int, ``x + dyn_value`` to bytes... Only the binding rules that change a cost
    are modelled.
    """

    def __init__(self, ast: AST, device: Decl) -> None:
        self.ast, self.device = ast, device
        self.types: dict[int, Type] = dict(ast.types)
        self.scope: dict[str, list[Type]] = {}
        self.bound: dict[str, Type] = {}
        self.params = 0

    def run(self) -> dict[int, Type]:
        self.visit(self.ast.expr)
        return {k: self.resolve(v) for k, v in self.types.items()}

    # -- type parameters

    def fresh(self) -> Type:
        self.params += 1
        return Type("type_param", f"_T{self.params}")

    def resolve(self, t: Type) -> Type:
        while is_free(t) and t.name in self.bound:
            t = self.bound[t.name]
        if t.params:
            return Type(t.kind, t.name, tuple(self.resolve(p) for p in t.params))
        return t

    def bind(self, t: Type, to: Type) -> None:
        t = self.resolve(t)
        if is_free(t) and t != self.resolve(to):
            self.bound[t.name] = to

    def elem(self, t: Type) -> Type | None:
        t = self.resolve(t)
        return t.params[0] if t.kind == "list" and t.params else None

    # -- the walk

    def visit(self, e: Expr) -> Type:
        types, scope = self.types, self.scope
        checked = types.get(e.id, DYN)
        t = DYN
        if e.kind == "const":
            t = Type(e.const_type)
        elif e.kind == "list":
            items = [self.visit(a) for a in e.args]
            if not items:  # list(T), T free (cel-cpp may have bound it its own way)
                t = types[e.id] = _list_of(self.fresh())
                return t
            if all(i == items[0] for i in items):
                t = _list_of(items[0])
        elif e.kind == "map":
            keys = [self.visit(k) for k, _ in e.entries if k is not None]
            vals = [self.visit(v) for _, v in e.entries]
            if keys and vals:
                t = Type("map", params=(keys[0], vals[0]))
        elif e.kind == "struct":
            for _k, v in e.entries:
                self.visit(v)
            t = Type("message", e.name)
        elif e.kind == "ident":
            if scope.get(e.name):  # a variable has the type of what it ranges over or is bound to
                types[e.id] = scope[e.name][-1]
                return scope[e.name][-1]
            if e.name == "device" and not self.ast.checked:
                t = DEVICE
        elif e.kind == "select":
            assert e.operand is not None
            op = self.resolve(self.visit(e.operand))
            if e.test_only:
                t = BOOL
            elif op == DEVICE and e.name in self.device.fields:
                t = self.device.fields[e.name].type
            elif op.kind == "map" and len(op.params) == 2:
                t = op.params[1]
        elif e.kind == "call":
            if not self.ast.checked and e.operand is not None and e.operand.kind == "ident" \
                    and e.operand.name in _NAMESPACES and not scope.get(e.operand.name):
                e.name, e.operand = f"{e.operand.name}.{e.name}", None
            target = self.visit(e.operand) if e.operand is not None else None
            args = [self.visit(a) for a in e.args]
            k8s = self.list_function(e.name, target, args) if target is not None else None
            if k8s is not None:  # labkit declares these over list(dyn): Kubernetes' type wins
                types[e.id] = k8s
                return k8s
            t = self.call(e.name, target, args)
            if t != DYN:  # follows the (possibly repaired) operands
                types[e.id] = t
                return t
        elif e.kind == "comprehension":  # the type of its result, whatever cel-cpp made of it
            t = types[e.id] = self.comprehension(e)
            return t
        best = t if _vaguer(checked, self.resolve(t)) else checked
        types[e.id] = best
        return best

    def comprehension(self, e: Expr) -> Type:
        assert e.iter_range is not None and e.accu_init is not None
        scope = self.scope
        rng = self.resolve(self.visit(e.iter_range))
        accu = self.visit(e.accu_init)
        if rng.kind == "list" and rng.params:
            var_types = (INT, rng.params[0]) if e.iter_var2 else (rng.params[0],)
        elif rng.kind == "map" and len(rng.params) == 2:
            var_types = rng.params if e.iter_var2 else (rng.params[0],)
        else:
            var_types = (DYN, DYN)
        names = [e.iter_var] + ([e.iter_var2] if e.iter_var2 else [])
        for name, vt in zip(names, var_types):
            scope.setdefault(name, []).append(vt)
        scope.setdefault(e.accu_var, []).append(accu)
        for part in (e.loop_condition, e.loop_step):
            if part is not None:
                self.visit(part)
        for name in names:
            scope[name].pop()
        t = self.visit(e.result) if e.result is not None else DYN
        scope[e.accu_var].pop()
        return t

    # -- result types

    def list_function(self, fn: str, target: Type, args: list[Type]) -> Type | None:
        """Kubernetes' result type of an ext-lists / Kubernetes-lists function on ``target``.

        cel-go takes the first matching overload's result type, and dyn once another matching
        overload gives a different one.
        """
        target = self.resolve(target)
        elem = self.elem(target)
        dynamic = target.kind in _DYNAMIC or (elem is not None and elem.kind in _DYNAMIC and not is_free(elem))
        if fn in ("sort", "sum", "min", "max"):  # one overload per element type
            if elem is None or dynamic:
                return DYN
            if is_free(elem):
                self.bind(elem, INT)  # the first overload (int) takes it
                elem = INT
            return _list_of(elem) if fn == "sort" else elem
        if fn in ("reverse", "distinct", "slice") or (fn == "flatten" and not args):  # list(T) -> list(T)
            if elem is None:
                return _list_of(self.fresh()) if target.kind in _DYNAMIC else None
            if fn != "flatten":
                return target
            inner = self.elem(elem)
            if inner is not None:
                return _list_of(inner)
            return _list_of(self.fresh()) if elem.kind in _DYNAMIC else None
        if fn == "flatten":
            return _list_of(DYN)
        if fn in _SORT_BY_KEYS and args:  # (list(T), list(U)) -> list(T), one overload per key type U
            keys = self.elem(args[0])
            if keys is not None and is_free(keys):
                self.bind(keys, INT)
            if elem is None:
                if target.kind not in _DYNAMIC:
                    return None
                # one matching overload leaves T free; several (dyn keys) give different list(T)s
                return DYN if len(_sort_kinds(self.resolve(args[0]))) > 1 else _list_of(self.fresh())
            return target
        return None

    def call(self, fn: str, target: Type | None, args: list[Type]) -> Type:
        args = [self.resolve(a) for a in args]
        if target is not None and fn in _STRING_METHODS:
            self.bind(target, STRING)  # the only receiver type these functions have
        if fn == "size" and len(args) + (target is not None) == 1:
            self.bind(target if target is not None else args[0], Type("bytes"))  # its first overload
        if fn in _RELATIONAL and len(args) == 2:
            self.bind_relational(*args)
            return BOOL
        if fn in ("_==_", "_!=_") and len(args) == 2:
            self.bind(args[0], args[1])
            self.bind(args[1], args[0])
            return BOOL
        if fn == "@in" and len(args) == 2:  # in_list(A, list(A)), in_map(A, map(A, B))
            c = args[1]
            key = c.params[0] if c.kind in ("list", "map") and c.params else None
            if key is not None:
                self.bind(args[0], key)
                self.bind(key, args[0])
            return BOOL
        if fn in _BOOL_FUNCS:
            return BOOL
        if fn in _RESULT_TYPES:
            return _RESULT_TYPES[fn]
        if fn == "_[_]" and len(args) == 2:
            c = args[0]
            if c.kind == "list" and c.params:
                return c.params[0]
            if c.kind == "map" and len(c.params) == 2:
                return c.params[1]
            return DYN
        if fn == "_+_" and len(args) == 2:
            return self.add(*args)
        if fn in ("_-_", "_*_", "_/_", "_%_") and len(args) == 2:
            a, b = args
            if a == b:
                return a
            first = INT if fn == "_%_" else DOUBLE  # the operator's first overload
            for x, y in ((a, b), (b, a)):
                if is_free(x):
                    to = y if y.kind in _NUMBERS else first
                    self.bind(x, to)
                    return to
                if x.kind in _NUMBERS and y.kind in _DYNAMIC:
                    return x
            return DYN
        if fn == "-_" and args:
            if is_free(args[0]):
                self.bind(args[0], DOUBLE)
                return DOUBLE
            return args[0]
        if fn == "_?_:_" and len(args) == 3:
            return args[1] if args[1] == args[2] else DYN
        return DYN

    def bind_relational(self, a: Type, b: Type) -> None:
        """Bind a free operand of ``<`` the way the first matching overload does."""
        if is_free(a):
            to = INT if b.kind in _NUMBERS else b if b.kind in _ORDERED else BOOL if b.kind in _DYNAMIC else None
            if to is not None:
                self.bind(a, to)
        elif is_free(b):
            to = a if a.kind in _NUMBERS or a.kind in _ORDERED else BOOL if a.kind in _DYNAMIC else None
            if to is not None:
                self.bind(b, to)

    def add(self, a: Type, b: Type) -> Type:
        """The result type of ``a + b`` (binding a free operand like the first overload)."""
        if a == b:
            return a
        for x, y in ((a, b), (b, a)):
            if is_free(x):
                to = y if y.kind in _ADDABLE or y.kind == "list" else Type("bytes") if y.kind in _DYNAMIC else None
                if to is None:
                    return DYN
                self.bind(x, to)
                return to
        ea, eb = self.elem(a), self.elem(b)
        if ea is not None and eb is not None:  # list(A) + list(A)
            if is_free(ea):
                self.bind(ea, eb)
                return b
            if is_free(eb):
                self.bind(eb, ea)
                return a
            return DYN
        for x, y in ((a, b), (b, a)):
            if y.kind in _DYNAMIC and (x.kind in _ADDABLE or x.kind == "list"):
                return x
        return DYN


# --- entry point ----------------------------------------------------------------------------------

_HAS_DEVICE_FIELD = re.compile(
    r"\bhas\s*\(\s*device\s*\.\s*(driver|attributes|capacity|allowMultipleAllocations)\s*\)")
#: stands in for ``has(device.x)`` when compiling for the estimate (cel-cpp has no ``device``
#: value to test; labkit's engine rewrites it to ``true``, which would cost 0 instead of 1)
PRESENCE_MARKER = "@labkit:has(device.x)@"


def _mark_presence(expr: str, consumable_capacity: bool) -> str:
    """``expr`` with each ``has(device.<field>)`` replaced by a recognisable constant call."""
    if "has" not in expr:
        return expr
    strings = [(m.start(), m.end()) for m in _STRING_LITERAL.finditer(expr)]
    out, pos = [], 0
    for m in _HAS_DEVICE_FIELD.finditer(expr):
        if any(a <= m.start() < b for a, b in strings):
            continue
        if m.group(1) == "allowMultipleAllocations" and not consumable_capacity:
            continue
        out += [expr[pos:m.start()], f'("{PRESENCE_MARKER}".startsWith(""))']
        pos = m.end()
    return "".join(out) + expr[pos:] if out else expr


def _is_presence_marker(e: Expr) -> bool:
    t = e.operand
    return (e.name == "startsWith" and t is not None and t.kind == "const" and t.value == PRESENCE_MARKER
            and len(e.args) == 1 and e.args[0].value == "")


def estimate_ast(ast: AST, *, consumable_capacity: bool = False, list_type_attributes: bool = False) -> int:
    """The estimated maximum cost of a decoded AST."""
    return Coster(ast, consumable_capacity, list_type_attributes).cost(ast.expr).hi


@lru_cache(maxsize=1024)
def estimate_max_cost(expr: str, *, consumable_capacity: bool = False, list_type_attributes: bool = False) -> int:
    """Kubernetes' estimated worst-case cost of the selector ``expr`` (``CompilationResult.MaxCost``
    for a new expression). Raises :class:`labkit.cel.errors.CelCompileError` if ``expr`` does
    not compile. Compare with :data:`COST_LIMIT`."""
    program = compile_selector(expr, engine="cel-expr-python", consumable_capacity=consumable_capacity,
                               list_type_attributes=list_type_attributes)
    compiled = program._impl._prog  # type: ignore[attr-defined]
    marked = _mark_presence(expr, consumable_capacity)
    if marked != expr:
        from labkit.cel.engine_cpp import CppProgram

        # should that fail, keep the unmarked AST: each has(device.x) then counts 0 instead of 1
        with contextlib.suppress(Exception):
            compiled = CppProgram(marked, consumable_capacity, list_type_attributes)._prog
    return estimate_ast(decode(compiled.serialize()), consumable_capacity=consumable_capacity,
                        list_type_attributes=list_type_attributes)
