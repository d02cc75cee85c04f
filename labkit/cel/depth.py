"""cel-go's parser limits on how deeply an expression nests, measured as cel-go measures them.

Kubernetes' CEL environment keeps cel-go's default parser options (k8s.io/apiserver
pkg/cel/environment/base.go sets none), so cel-go's parser (parser/parser.go) refuses an
expression in two ways, each with a limit of 250:

* while parsing, a listener counts the open invocations of each grammar rule (an ``expr`` inside
  parentheses, a call's argument, a list element...) and stops at the 251st: "expression
  recursion limit exceeded: 250";
* building the AST, the visitor counts nested ternaries, relations, arithmetic, selections,
  member calls and indexes (``a + b + ...``: one per operator): "max recursion depth exceeded".

Both are compile errors reported at no location (``<input>:-1:0``). A chain of ``&&``/``||`` or
of ``!``/``-`` does not nest in either count. The engines have their own limits (cel-cpp's parser
stops at 32, cel-python recurses in Python), so the facade asks :func:`check_depth` first and
runs what Kubernetes accepts even where an engine's own parser would not.

This module mirrors CEL's ANTLR grammar (cel-go parser/gen/CEL.g4) only to count; an expression
it cannot read is left to the engines, which report the syntax error.
"""

from __future__ import annotations

import re
import sys
from types import FrameType
from typing import NamedTuple

from labkit.cel.errors import CelCompileError

__all__ = ["MAX_RECURSION_DEPTH", "Depth", "check_depth", "measure", "tokens"]

#: cel-go's default (parser.MaxRecursionDepth), which Kubernetes keeps
MAX_RECURSION_DEPTH = 250
_LISTENER_TEXT = f"expression recursion limit exceeded: {MAX_RECURSION_DEPTH}"
_VISITOR_TEXT = "max recursion depth exceeded"

_TOKEN = re.compile(r"""
    (?P<ws>[\t\r\n\f ]+|//[^\n]*)
  | (?P<str>[bB]?[rR]?(?:\"\"\"[\s\S]*?\"\"\"|'''[\s\S]*?'''|"(?:\\.|[^"\\\n\r])*"|'(?:\\.|[^'\\\n\r])*')
           |[rR][bB](?:\"\"\"[\s\S]*?\"\"\"|'''[\s\S]*?'''|"[^"\n\r]*"|'[^'\n\r]*'))
  | (?P<num>(?:[0-9]+\.[0-9]+(?:[eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+|\.[0-9]+(?:[eE][+-]?[0-9]+)?)
           |0[xX][0-9a-fA-F]+[uU]?|[0-9]+[uU]?)
  | (?P<id>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<esc>`[A-Za-z0-9_.\-/ ]+`)
  | (?P<op>==|!=|<=|>=|&&|\|\||[<>\[\]{}().,\-!?:+*/%])
""", re.X)
_RELATIONS = frozenset({"<", "<=", ">=", ">", "==", "!=", "in"})
_LITERAL_WORDS = frozenset({"true", "false", "null"})
_END = ("end", "")


class Depth(NamedTuple):
    """How deeply an expression nests: the most open invocations of one grammar rule (cel-go's
    listener) and the longest chain of counted AST nodes (cel-go's visitor)."""

    rules: int
    nodes: int


class _Unreadable(ValueError):
    """Not CEL this module can read: the engines report the syntax error."""


class _TooDeep(Exception):
    pass


def tokens(expr: str) -> list[tuple[str, str]]:
    """CEL's tokens as (kind, text), kind one of lit (a literal), id, esc (`escaped`), op; ends
    with ("end", ""). Raises ValueError for text CEL's lexer would refuse."""
    out: list[tuple[str, str]] = []
    pos = 0
    while pos < len(expr):
        m = _TOKEN.match(expr, pos)
        if m is None:
            raise _Unreadable
        pos = m.end()
        kind = m.lastgroup or ""
        if kind == "ws":
            continue
        text = m.group(0)
        if kind == "id" and (text in _LITERAL_WORDS or text == "in"):
            kind = "lit" if text != "in" else "op"
        elif kind in ("str", "num"):
            kind = "lit"
        out.append((kind, text))
    out.append(_END)
    return out


class _Parser:
    """Recursive descent over CEL.g4, counting rule invocations like cel-go's recursionListener
    (a left-recursive rule's loop leaves and re-enters the rule: one open invocation) and
    returning, from each rule, the visitor depth of what it parsed."""

    def __init__(self, tokens: list[tuple[str, str]]) -> None:
        self.toks = tokens
        self.i = 0
        self.open: dict[str, int] = {}
        self.most = 0

    # -- tokens --------------------------------------------------------------------------------
    def peek(self, ahead: int = 0) -> tuple[str, str]:
        return self.toks[min(self.i + ahead, len(self.toks) - 1)]

    def at(self, text: str, ahead: int = 0) -> bool:
        kind, tok = self.peek(ahead)
        return kind == "op" and tok == text

    def take(self, text: str) -> None:
        if not self.at(text):
            raise _Unreadable
        self.i += 1

    # -- the listener's count ------------------------------------------------------------------
    def enter(self, rule: str) -> None:
        n = self.open.get(rule, 0) + 1
        self.open[rule] = n
        if n > self.most:
            self.most = n
            if n > MAX_RECURSION_DEPTH:
                raise _TooDeep

    def leave(self, rule: str) -> None:
        self.open[rule] -= 1

    # -- rules ---------------------------------------------------------------------------------
    def start(self) -> int:
        self.enter("start")
        depth = self.expr()
        if self.peek() != _END:
            raise _Unreadable
        self.leave("start")
        return depth

    def expr(self) -> int:
        self.enter("expr")
        depth = self.conditional_or()
        if self.at("?"):
            self.i += 1
            then = self.conditional_or()
            self.take(":")
            depth = 1 + max(depth, then, self.expr())
        self.leave("expr")
        return depth

    def conditional_or(self) -> int:
        self.enter("conditionalOr")
        depth = self.conditional_and()
        while self.at("||"):
            self.i += 1
            depth = max(depth, self.conditional_and())
        self.leave("conditionalOr")
        return depth

    def conditional_and(self) -> int:
        self.enter("conditionalAnd")
        depth = self.relation()
        while self.at("&&"):
            self.i += 1
            depth = max(depth, self.relation())
        self.leave("conditionalAnd")
        return depth

    def relation(self, right_operand: bool = False) -> int:
        self.enter("relation")
        depth = self.calc(0)
        while not right_operand and self.peek()[0] == "op" and self.peek()[1] in _RELATIONS:
            self.i += 1
            depth = 1 + max(depth, self.relation(True))
        self.leave("relation")
        return depth

    def calc(self, precedence: int) -> int:
        """precedence: 0 (any operator), 2 (right of + or -: only * / %), 3 (right of * / %)."""
        self.enter("calc")
        depth = self.unary()
        while True:
            kind, tok = self.peek()
            if kind == "op" and tok in ("*", "/", "%") and precedence <= 2:
                self.i += 1
                depth = 1 + max(depth, self.calc(3))
            elif kind == "op" and tok in ("+", "-") and precedence <= 1:
                self.i += 1
                depth = 1 + max(depth, self.calc(2))
            else:
                break
        self.leave("calc")
        return depth

    def unary(self) -> int:
        self.enter("unary")
        if self.at("!"):
            while self.at("!"):
                self.i += 1
        elif self.at("-") and not (self.peek(1)[0] == "lit" and self.peek(1)[1][:1].isdigit()
                                   or self.peek(1)[1][:1] == "." and self.peek(1)[0] == "lit"):
            while self.at("-"):
                self.i += 1
        depth = self.member()
        self.leave("unary")
        return depth

    def member(self) -> int:
        self.enter("member")
        depth = self.primary()
        while True:
            if self.at("."):
                self.i += 1
                if self.at("?"):
                    self.i += 1
                kind, _ = self.peek()
                if kind == "id" and self.at("(", 1):
                    self.i += 2
                    args = self.expr_list(")") if not self.at(")") else 0
                    self.take(")")
                    depth = 1 + max(depth, args)
                elif kind in ("id", "esc") or (kind == "lit" and self.peek()[1] in _LITERAL_WORDS):
                    self.escape_ident()
                    depth += 1
                else:
                    raise _Unreadable
            elif self.at("["):
                self.i += 1
                if self.at("?"):
                    self.i += 1
                depth = 1 + max(depth, self.expr())
                self.take("]")
            else:
                break
        self.leave("member")
        return depth

    def escape_ident(self) -> None:
        self.enter("escapeIdent")
        self.i += 1
        self.leave("escapeIdent")

    def primary(self) -> int:
        self.enter("primary")
        kind, tok = self.peek()
        depth = 0
        if self.at("("):
            self.i += 1
            depth = self.expr()
            self.take(")")
        elif self.at("["):
            self.i += 1
            if not self.at("]") and not (self.at(",") and self.at("]", 1)):
                depth = self.list_init()
            if self.at(","):
                self.i += 1
            self.take("]")
        elif self.at("{"):
            self.i += 1
            if not self.at("}") and not (self.at(",") and self.at("}", 1)):
                depth = self.map_initializer_list()
            if self.at(","):
                self.i += 1
            self.take("}")
        elif kind == "id" or self.at("."):
            depth = self.ident_call_or_message()
        elif kind == "lit" or (self.at("-") and self.peek(1)[0] == "lit"):
            self.enter("literal")
            self.i += 2 if self.at("-") else 1
            self.leave("literal")
        else:
            raise _Unreadable
        self.leave("primary")
        return depth

    def ident_call_or_message(self) -> int:
        if self.at("."):
            self.i += 1
        if self.peek()[0] != "id":
            raise _Unreadable
        # CreateMessage: IDENT ('.' IDENT)* '{'
        j = 1
        while self.at(".", j) and self.peek(j + 1)[0] == "id":
            j += 2
        if self.at("{", j):
            self.i += j + 1
            depth = 0
            if not self.at("}") and not (self.at(",") and self.at("}", 1)):
                depth = self.field_initializer_list()
            if self.at(","):
                self.i += 1
            self.take("}")
            return depth
        self.i += 1
        if self.at("("):
            self.i += 1
            depth = self.expr_list(")") if not self.at(")") else 0
            self.take(")")
            return depth
        return 0

    def expr_list(self, close: str) -> int:
        self.enter("exprList")
        depth = self.expr()
        while self.at(","):
            self.i += 1
            depth = max(depth, self.expr())
        self.leave("exprList")
        return depth

    def list_init(self) -> int:
        self.enter("listInit")
        depth = self.opt_expr()
        while self.at(",") and not self.at("]", 1):
            self.i += 1
            depth = max(depth, self.opt_expr())
        self.leave("listInit")
        return depth

    def opt_expr(self) -> int:
        self.enter("optExpr")
        if self.at("?"):
            self.i += 1
        depth = self.expr()
        self.leave("optExpr")
        return depth

    def map_initializer_list(self) -> int:
        self.enter("mapInitializerList")
        depth = 0
        while True:
            depth = max(depth, self.opt_expr())
            self.take(":")
            depth = max(depth, self.expr())
            if not self.at(",") or self.at("}", 1):
                break
            self.i += 1
        self.leave("mapInitializerList")
        return depth

    def field_initializer_list(self) -> int:
        self.enter("fieldInitializerList")
        depth = 0
        while True:
            self.enter("optField")
            if self.at("?"):
                self.i += 1
            self.escape_ident()
            self.leave("optField")
            self.take(":")
            depth = max(depth, self.expr())
            if not self.at(",") or self.at("}", 1):
                break
            self.i += 1
        self.leave("fieldInitializerList")
        return depth


def measure(expr: str) -> Depth | None:
    """cel-go's two nesting counts for ``expr``; None where this module cannot read it. Counting
    stops at the first rule past the limit (``rules`` is then MAX_RECURSION_DEPTH + 1)."""
    try:
        parser = _Parser(tokens(expr))
    except _Unreadable:
        return None
    # one Python frame per rule, at most 11 rules per level of nesting; counting stops 251 deep
    old = sys.getrecursionlimit()
    need = _stack_depth() + 16 * (MAX_RECURSION_DEPTH + 1) + 100
    if old < need:
        sys.setrecursionlimit(need)
    try:
        nodes = parser.start()
    except _TooDeep:
        return Depth(parser.most, 0)
    except (_Unreadable, RecursionError):
        return None
    finally:
        if old < need and sys.getrecursionlimit() == need:
            sys.setrecursionlimit(old)
    return Depth(parser.most, nodes)


def _stack_depth() -> int:
    frame: FrameType | None = sys._getframe()
    n = 0
    while frame is not None:
        frame, n = frame.f_back, n + 1
    return n


def check_depth(expr: str) -> None:
    """Raise the CelCompileError Kubernetes gives when ``expr`` nests deeper than cel-go's parser
    allows; nothing otherwise (also where this module cannot read ``expr``)."""
    if len(expr) <= MAX_RECURSION_DEPTH:
        return  # each level either count adds takes a character at least
    depth = measure(expr)
    if depth is None:
        return
    if depth.rules > MAX_RECURSION_DEPTH:
        text = _LISTENER_TEXT
    elif depth.nodes > MAX_RECURSION_DEPTH:
        text = _VISITOR_TEXT
    else:
        return
    raise CelCompileError(f"compilation failed: ERROR: <input>:-1:0: {text}",
                          f"Kubernetes' CEL parser allows nesting {MAX_RECURSION_DEPTH} deep: split the "
                          "expression into several selectors, or nest fewer parentheses, calls and operators")
