"""Constant regular expressions are checked when the selector is compiled, as in Kubernetes.

cel-go rejects ``x.matches("(")`` in the checker ("invalid matches argument") and
``x.find("(")`` when the program is built ("error parsing regexp: ..."); both are compile
errors for the allocator. Patterns computed at run time fail at run time instead.
"""

from __future__ import annotations

import re

from labkit.cel.errors import CelCompileError
from labkit.cel.regex import re2

_LIT = r"""([rR]?)(?:'((?:\\.|[^'\\\n])*)'|"((?:\\.|[^"\\\n])*)")"""
_MEMBER = re.compile(r"\.\s*(matches|find|findAll)\s*\(\s*" + _LIT + r"\s*[,)]")
_GLOBAL = re.compile(r"(?<![.\w])matches\s*\(\s*[^,()]+,\s*" + _LIT + r"\s*\)")
_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v",
            "\\": "\\", "'": "'", '"': '"', "`": "`", "?": "?"}
_GO_TEXT = [
    (re.compile(r"^missing \): (.*)$", re.S), "missing closing ): `{}`"),
    (re.compile(r"^missing \]: (.*)$", re.S), "missing closing ]: `{}`"),
    (re.compile(r"^bad repetition operator: (.*)$", re.S), "invalid nested repetition operator: `{}`"),
    (re.compile(r"^invalid repetition size: (.*)$", re.S), "invalid repeat count: `{}`"),
    (re.compile(r"^trailing \\$", re.S), "trailing backslash at end of expression: ``"),
]


def unescape(body: str, raw: bool) -> str:
    """The value of a CEL string literal body (common escapes; \\x, \\u, octal)."""
    if raw or "\\" not in body:
        return body
    out, i = [], 0
    while i < len(body):
        c = body[i]
        if c != "\\" or i + 1 >= len(body):
            out.append(c)
            i += 1
            continue
        n = body[i + 1]
        if n in _ESCAPES:
            out.append(_ESCAPES[n])
            i += 2
        elif n in "xX" and i + 3 < len(body) + 1:
            out.append(chr(int(body[i + 2 : i + 4], 16)))
            i += 4
        elif n == "u":
            out.append(chr(int(body[i + 2 : i + 6], 16)))
            i += 6
        elif n == "U":
            out.append(chr(int(body[i + 2 : i + 10], 16)))
            i += 10
        elif n.isdigit():
            out.append(chr(int(body[i + 1 : i + 4], 8)))
            i += 4
        else:
            out.append(c)
            i += 1
    return "".join(out)


def go_regex_error(exc: Exception) -> str:
    """RE2 (C++) error text -> Go regexp error text."""
    text = exc.args[0] if exc.args else str(exc)
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    for pattern, fmt in _GO_TEXT:
        m = pattern.match(text)
        if m:
            return "error parsing regexp: " + fmt.format(*m.groups())
    what, sep, arg = text.partition(": ")
    return f"error parsing regexp: {what}: `{arg}`" if sep else f"error parsing regexp: {text}"


def check_constant_patterns(expr: str) -> None:
    for m in _MEMBER.finditer(expr):
        body = m.group(3) if m.group(3) is not None else m.group(4)
        _check(expr, m.start(2), m.group(1), unescape(body, bool(m.group(2))))
    for m in _GLOBAL.finditer(expr):
        body = m.group(2) if m.group(2) is not None else m.group(3)
        _check(expr, m.start(1), "matches", unescape(body, bool(m.group(1))))


def _check(expr: str, at: int, function: str, pattern: str) -> None:
    try:
        re2.compile(pattern)
    except Exception as exc:  # re2.error: the module exposes no stable class
        detail = go_regex_error(exc)
        if function == "matches":
            line = expr.count("\n", 0, at) + 1
            col = at - (expr.rfind("\n", 0, at) + 1) + 1
            src = expr.split("\n")[line - 1]
            raise CelCompileError(f"compilation failed: ERROR: <input>:{line}:{col}: invalid matches argument",
                                  detail, detail=f"compilation failed: ERROR: <input>:{line}:{col}: invalid matches "
                                  f"argument\n | {src}\n | {'.' * (col - 1)}^") from None
        raise CelCompileError(f"program instantiation failed: {detail}") from None
