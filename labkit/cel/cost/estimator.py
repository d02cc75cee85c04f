"""cel-go's coster over labkit's AST: walks the expression, tracking sizes and field paths, and
prices each call with :mod:`labkit.cel.cost.library`."""

from __future__ import annotations

from typing import cast

from labkit.cel._checked import AST, DYN, Expr, Type
from labkit.cel.cost.declarations import device_decl, walk
from labkit.cel.cost.library import function_cost
from labkit.cel.cost.model import (
    ACCUMULATORS,
    LIST_CREATE,
    MAP_CREATE,
    MAX_FORMAT_REGEX,
    NO_PATH,
    ONE,
    REGEX_FACTOR,
    STRING_FACTOR,
    STRUCT_CREATE,
    U64,
    UNKNOWN,
    ZERO,
    Entry,
    Est,
    GoPath,
    Node,
    Var,
    fixed,
)
from labkit.cel.cost.types import TypeInference, is_scalar, kind, overload_ids
from labkit.cel.cpp_rewrites import MERGE_ENTRIES, ZIP_MAP
from labkit.cel.literals import HAS_DEVICE_FIELD, STRING_LITERAL

__all__ = ["PRESENCE_MARKER", "Coster", "estimate_ast", "mark_presence"]


class Coster:
    """One estimation over one AST (cel-go's coster, with the Kubernetes estimators)."""

    def __init__(self, ast: AST, consumable_capacity: bool, list_type_attributes: bool) -> None:
        self.ast = ast
        self.device, self.attribute = device_decl(consumable_capacity, list_type_attributes)
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
        decl = walk(self.device, self.attribute, path.names())
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
        if path.n and path.buf[0] in ACCUMULATORS:
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
            call = function_cost(self, e, e.name, oid, target, args, arg_costs)
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



def _literal_size(e: Expr) -> Est | None:
    if e.kind == "const":
        if e.const_type == "string":
            return fixed(len(str(e.value)))
        if e.const_type == "bytes":
            return fixed(len(cast(bytes, e.value)))  # a bytes constant's value
        if e.const_type in ("bool", "double", "duration", "int", "timestamp", "uint", "null"):
            return ONE
        return None
    if e.kind == "list":
        return fixed(len(e.args))
    if e.kind == "map":
        return fixed(len(e.entries))
    return None



MAP_INSERT = "cel.@mapInsert"
_SYNTHETIC_IDS = iter(range(-1, -(2**62), -1))


def _synthetic(**fields: object) -> Expr:
    return Expr(id=next(_SYNTHETIC_IDS), **fields)  # type: ignore[arg-type]  # callers pass Expr's own fields


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



# --- entry point ----------------------------------------------------------------------------------

#: stands in for ``has(device.x)`` when compiling for the estimate (cel-cpp has no ``device``
#: value to test; labkit's engine rewrites it to ``true``, which would cost 0 instead of 1)
PRESENCE_MARKER = "@labkit:has(device.x)@"


def mark_presence(expr: str, consumable_capacity: bool) -> str:
    """``expr`` with each ``has(device.<field>)`` replaced by a recognisable constant call."""
    if "has" not in expr:
        return expr
    strings = [(m.start(), m.end()) for m in STRING_LITERAL.finditer(expr)]
    out, pos = [], 0
    for m in HAS_DEVICE_FIELD.finditer(expr):
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

