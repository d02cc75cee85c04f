"""A minimal reader for the ``cel.expr`` protos that cel-expr-python serializes.

``CompiledExpression.serialize()`` returns a ``google.protobuf.Any`` holding a
``cel.expr.CheckedExpr`` (type-checked) or a ``cel.expr.ParsedExpr`` (compiled without the
checker). No Python package ships these protos, so this module decodes the protobuf wire format
directly, keeping only what the cost estimator needs. Field numbers follow cel-spec's
``proto/cel/expr/syntax.proto`` and ``checked.proto``.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any

__all__ = ["AST", "Expr", "Type", "decode"]

# wire types
_VARINT, _I64, _LEN, _I32 = 0, 1, 2, 5


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7


def _fields(buf: bytes) -> list[tuple[int, int, Any]]:
    """(field number, wire type, value) for each field of one message, in order."""
    out: list[tuple[int, int, Any]] = []
    pos, end = 0, len(buf)
    while pos < end:
        key, pos = _varint(buf, pos)
        num, wt = key >> 3, key & 7
        value: Any
        if wt == _VARINT:
            value, pos = _varint(buf, pos)
        elif wt == _I64:
            value, pos = buf[pos:pos + 8], pos + 8
        elif wt == _LEN:
            n, pos = _varint(buf, pos)
            value, pos = buf[pos:pos + n], pos + n
        elif wt == _I32:
            value, pos = buf[pos:pos + 4], pos + 4
        else:
            raise ValueError(f"unsupported wire type {wt}")
        out.append((num, wt, value))
    return out


def _signed(v: int) -> int:
    return v - (1 << 64) if v >= 1 << 63 else v


@dataclass(frozen=True)
class Type:
    """A CEL type: ``kind`` is one of dyn, null, bool, int, uint, double, string, bytes, any,
    timestamp, duration, list, map, function, message, opaque, type_param, type, error, wrapper."""

    kind: str
    name: str = ""
    params: tuple[Type, ...] = ()

    def __str__(self) -> str:
        base = self.name or self.kind
        return f"{base}({', '.join(map(str, self.params))})" if self.params else base


DYN = Type("dyn")
_PRIMITIVES = {1: "bool", 2: "int", 3: "uint", 4: "double", 5: "string", 6: "bytes"}
_WELL_KNOWN = {1: "any", 2: "timestamp", 3: "duration"}


def _type(buf: bytes) -> Type:
    for num, _wt, v in _fields(buf):
        if num == 1:
            return DYN
        if num == 2:
            return Type("null")
        if num == 3:
            return Type(_PRIMITIVES.get(v, "dyn"))
        if num == 4:
            return Type("wrapper", _PRIMITIVES.get(v, "dyn"))
        if num == 5:
            return Type(_WELL_KNOWN.get(v, "dyn"))
        if num == 6:
            elem = [_type(x) for n, _, x in _fields(v) if n == 1]
            return Type("list", params=(elem[0] if elem else DYN,))
        if num == 7:
            kv = {n: _type(x) for n, _, x in _fields(v)}
            return Type("map", params=(kv.get(1, DYN), kv.get(2, DYN)))
        if num == 8:
            return Type("function")
        if num == 9:
            return Type("message", bytes(v).decode())
        if num == 10:
            return Type("type_param", bytes(v).decode())
        if num == 11:
            return Type("type")
        if num == 12:
            return Type("error")
        if num == 14:
            name, params = "", []
            for n, _, x in _fields(v):
                if n == 1:
                    name = bytes(x).decode()
                elif n == 2:
                    params.append(_type(x))
            return Type("opaque", name, tuple(params))
    return DYN


@dataclass(eq=False)
class Expr:
    """One node. ``kind``: const, ident, select, call, list, map, struct, comprehension."""

    id: int
    kind: str = ""
    value: object = None           # const: the Python value
    const_type: str = ""           # const: null, bool, int, uint, double, string, bytes
    name: str = ""                 # ident name / select field / call function / struct message
    operand: Expr | None = None    # select operand / call target
    test_only: bool = False
    args: list[Expr] = field(default_factory=list)              # call args / list elements
    entries: list[tuple[Expr | None, Expr]] = field(default_factory=list)  # map/struct entries
    iter_var: str = ""
    iter_var2: str = ""
    accu_var: str = ""
    iter_range: Expr | None = None
    accu_init: Expr | None = None
    loop_condition: Expr | None = None
    loop_step: Expr | None = None
    result: Expr | None = None

    def children(self) -> list[Expr]:
        out = [self.operand] if self.operand is not None else []
        out += self.args
        for k, v in self.entries:
            if k is not None:
                out.append(k)
            out.append(v)
        out += [e for e in (self.iter_range, self.accu_init, self.loop_condition, self.loop_step, self.result)
                if e is not None]
        return out


def _constant(e: Expr, buf: bytes) -> None:
    e.kind = "const"
    e.const_type, e.value = "null", None
    for num, _wt, v in _fields(buf):
        if num == 1:
            e.const_type, e.value = "null", None
        elif num == 2:
            e.const_type, e.value = "bool", bool(v)
        elif num == 3:
            e.const_type, e.value = "int", _signed(v)
        elif num == 4:
            e.const_type, e.value = "uint", v
        elif num == 5:
            e.const_type, e.value = "double", struct.unpack("<d", v)[0]
        elif num == 6:
            e.const_type, e.value = "string", bytes(v).decode()
        elif num == 7:
            e.const_type, e.value = "bytes", bytes(v)
        elif num in (8, 9):
            e.const_type, e.value = "timestamp" if num == 9 else "duration", None


def _expr(buf: bytes) -> Expr:
    e = Expr(id=0)
    for num, _wt, v in _fields(buf):
        if num == 2:
            e.id = _signed(v)
        elif num == 3:
            _constant(e, v)
        elif num == 4:
            e.kind = "ident"
            e.name = next((bytes(x).decode() for n, _, x in _fields(v) if n == 1), "")
        elif num == 5:
            e.kind = "select"
            for n, _, x in _fields(v):
                if n == 1:
                    e.operand = _expr(x)
                elif n == 2:
                    e.name = bytes(x).decode()
                elif n == 3:
                    e.test_only = bool(x)
        elif num == 6:
            e.kind = "call"
            for n, _, x in _fields(v):
                if n == 1:
                    e.operand = _expr(x)
                elif n == 2:
                    e.name = bytes(x).decode()
                elif n == 3:
                    e.args.append(_expr(x))
        elif num == 7:
            e.kind = "list"
            e.args = [_expr(x) for n, _, x in _fields(v) if n == 1]
        elif num == 8:
            _struct(e, v)
        elif num == 9:
            _comprehension(e, v)
    return e


def _struct(e: Expr, buf: bytes) -> None:
    e.kind = "map"
    for n, _, x in _fields(buf):
        if n == 1 and x:
            e.kind, e.name = "struct", bytes(x).decode()
        elif n == 2:
            key: Expr | None = None
            value = Expr(id=0)
            for m, _, y in _fields(x):
                if m == 3:
                    key = _expr(y)
                elif m == 4:
                    value = _expr(y)
            e.entries.append((key, value))


def _comprehension(e: Expr, buf: bytes) -> None:
    e.kind = "comprehension"
    for n, _, x in _fields(buf):
        if n == 1:
            e.iter_var = bytes(x).decode()
        elif n == 8:
            e.iter_var2 = bytes(x).decode()
        elif n == 2:
            e.iter_range = _expr(x)
        elif n == 3:
            e.accu_var = bytes(x).decode()
        elif n == 4:
            e.accu_init = _expr(x)
        elif n == 5:
            e.loop_condition = _expr(x)
        elif n == 6:
            e.loop_step = _expr(x)
        elif n == 7:
            e.result = _expr(x)


@dataclass
class AST:
    """A decoded expression: ``checked`` is False for a ParsedExpr (no types, no references)."""

    expr: Expr
    checked: bool
    types: dict[int, Type] = field(default_factory=dict)
    #: expr id -> (referenced name, overload ids)
    references: dict[int, tuple[str, tuple[str, ...]]] = field(default_factory=dict)
    #: expr id -> code point offset in the source
    positions: dict[int, int] = field(default_factory=dict)


def _map_entry(buf: bytes) -> tuple[Any, Any]:
    key: Any = 0
    value: Any = b""
    for n, _, x in _fields(buf):
        if n == 1:
            key = x
        elif n == 2:
            value = x
    return key, value


def _reference(buf: bytes) -> tuple[str, tuple[str, ...]]:
    name, ids = "", []
    for n, _, x in _fields(buf):
        if n == 1:
            name = bytes(x).decode()
        elif n == 3:
            ids.append(bytes(x).decode())
    return name, tuple(ids)


def _positions(buf: bytes) -> dict[int, int]:
    out: dict[int, int] = {}
    for n, _, x in _fields(buf):
        if n == 4:
            k, v = _map_entry(x)
            out[_signed(k or 0)] = v if isinstance(v, int) else 0
    return out


def decode(serialized: bytes) -> AST:
    """Decode ``CompiledExpression.serialize()`` output (an Any with a Checked/ParsedExpr)."""
    type_url, payload = "", b""
    for n, _, x in _fields(serialized):
        if n == 1:
            type_url = bytes(x).decode()
        elif n == 2:
            payload = bytes(x)
    checked = type_url.endswith("cel.expr.CheckedExpr")
    if not checked and not type_url.endswith("cel.expr.ParsedExpr"):
        raise ValueError(f"unexpected message {type_url!r}")
    root: Expr | None = None
    ast = AST(expr=Expr(id=0), checked=checked)
    for n, _, x in _fields(payload):
        if checked and n == 2:
            k, v = _map_entry(x)
            ast.references[_signed(k or 0)] = _reference(v)
        elif checked and n == 3:
            k, v = _map_entry(x)
            ast.types[_signed(k or 0)] = _type(v)
        elif (checked and n == 4) or (not checked and n == 2):
            root = _expr(x)
        elif (checked and n == 5) or (not checked and n == 3):
            ast.positions = _positions(x)
    if root is None:
        raise ValueError("no expression in the serialized AST")
    ast.expr = root
    return ast
