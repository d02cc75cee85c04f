"""The node types Kubernetes' checker (cel-go) would give, and the overloads it would record."""

from __future__ import annotations

from collections.abc import Sequence

from labkit.cel._checked import AST, DYN, Expr, Type
from labkit.cel.cost.declarations import BOOL, DEVICE, DOUBLE, INT, QUANTITY, STRING, UINT, Decl
from labkit.cel.cpp_rewrites import SORT_BY_KEYS

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
_SORT_BY_KEYS = {"@sortByAssociatedKeys", SORT_BY_KEYS}
_ORDERABLE = ("int", "uint", "double", "bool", "duration", "timestamp", "string", "bytes")


def _sort_kinds(list_type: Type) -> Sequence[str]:
    """The orderable element kinds a list of this type matches: all for dyn elements, the first
    (int) for a free type parameter, which that first overload binds."""
    elem = list_type.params[0] if list_type.kind == "list" and list_type.params else DYN
    if elem.kind == "type_param":
        return _ORDERABLE[:1]
    return list(_ORDERABLE) if elem.kind in _DYNAMIC else [k for k in _ORDERABLE if k == elem.kind]


_MEMBER_SIMPLE = {"startsWith", "endsWith", "contains", "format", "slice", "reverse", "distinct"}


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

