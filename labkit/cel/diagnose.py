"""Turn engine error text into Kubernetes-shaped messages with fix hints."""

from __future__ import annotations

import re

from labkit.cel.errors import NO_SUCH_KEY_HINT, CelCompileError, CelRuntimeError
from labkit.cel.regexcheck import go_regex_error

_ERR_LINE = re.compile(r"ERROR: <input>:(\d+):(\d+): (.*)")
_RELOP = re.compile(r"found no matching overload for '_(<|<=|>|>=)_' applied to '\((\S+), (\S+)\)'")
_UNDECLARED = re.compile(r"undeclared reference to '([^']+)'(?: \(in container '[^']*'\))?")
_STATUS = re.compile(r"^[A-Z_]+: ")
_NOT_FOUND = re.compile(r"Key not found in map\s*:\s*\"?(.*?)\"?$")
_KIND = {"kubernetes.Quantity": "quantity", "kubernetes.Semver": "semver"}
_NEWER_STRINGS = {"reverse": 3}
#: cel-cpp's runtime texts -> cel-go's (common/types/err.go; conversions: common/types/string.go)
_RUNTIME_TEXT = {
    "divide by zero": "division by zero", "modulus by zero": "modulus by zero",
    "double out of int64 range": "integer overflow", "uint64 out of int64 range": "integer overflow",
    "int64 out of uint64 range": "unsigned integer overflow", "double out of uint64 range": "unsigned integer overflow",
    "cannot convert string to int": "type conversion error from 'string' to 'int'",
    "cannot convert string to uint": "type conversion error from 'string' to 'uint'",
    "cannot convert string to double": "type conversion error from 'string' to 'double'",
    "Type conversion error from 'string' to 'bool'": "type conversion error from 'string' to 'bool'",
}


def _offset(expr: str, line: int, col: int) -> int:
    lines = expr.split("\n")
    return sum(len(x) + 1 for x in lines[: line - 1]) + col - 1


def _skip_string(expr: str, i: int, step: int) -> int:
    quote = expr[i]
    i += step
    while 0 <= i < len(expr) and expr[i] != quote:
        i += step
    return i


def _operand(expr: str, start: int, step: int) -> str:
    """The operand text left (step -1) or right (step 1) of position ``start``."""
    depth = 0
    i = start
    opening, closing = ("([{", ")]}") if step == 1 else (")]}", "([{")
    while 0 <= i < len(expr):
        c = expr[i]
        if c in "'\"":
            i = _skip_string(expr, i, step)
        elif c in opening:
            depth += 1
        elif c in closing:
            if depth == 0:
                break
            depth -= 1
        elif depth == 0 and (c in "&|,?:" or (c == "!" and expr[i + 1 : i + 2] != "=")) or depth == 0 and step == -1 and c in "<>=":
            break
        i += step
    part = expr[i + 1 : start + 1] if step == -1 else expr[start:i]
    return part.strip()


def relational_hint(expr: str, line: int, col: int, op: str) -> str:
    pos = _offset(expr, line, col)
    left = _operand(expr, pos - 1, -1)
    right = _operand(expr, pos + len(op), 1)
    if left and right:
        return f"use {left}.compareTo({right}) {op} 0"
    return f"use a.compareTo(b) {op} 0"


def _is_member_call(expr: str, line: int, col: int) -> bool:
    """Is the call reported at line:col (its '(' or name) written as ``x.name(...)``?"""
    pos = min(_offset(expr, line, col), len(expr) - 1)
    while pos >= 0 and (expr[pos] in " \t\n(" or expr[pos].isalnum() or expr[pos] == "_"):
        pos -= 1
    return pos >= 0 and expr[pos] == "."


_INDEX = re.compile(r"Index error: index=(-?\d+) size=\d+")
_BAD_REGEX = re.compile(r"invalid regular expression: (.*)", re.S)


def compile_error_from_text(expr: str, text: str) -> CelCompileError:
    """Build a CelCompileError from cel-cpp's checker/parser text."""
    text = _STATUS.sub("", text.strip()).removesuffix("[INVALID_ARGUMENT]").strip()
    problems: list[str] = []
    blocks: list[str] = []
    hint = ""
    for m in _ERR_LINE.finditer(text):
        line, col, msg = int(m.group(1)), int(m.group(2)), m.group(3).strip()
        und = _UNDECLARED.fullmatch(msg)
        if und:
            name = und.group(1)
            if name.startswith("device."):
                field = name.split(".", 1)[1]
                msg = f"undefined field '{field}'"
                if field == "allowMultipleAllocations":
                    hint = hint or ("device.allowMultipleAllocations exists only with consumable capacity "
                                    "(feature gate DRAConsumableCapacity)")
            else:
                msg = f"undeclared reference to '{name}' (in container '')"
                if name == "sign" and _is_member_call(expr, line, col):
                    msg = "found no matching overload for 'sign' applied to 'kubernetes.Quantity.()'"
                    hint = hint or "sign is a global function in Kubernetes: write sign(<quantity>)"
                elif name == "includes":
                    hint = hint or "includes() exists only with list-type attributes (feature gate DRAListTypeAttributes)"
                elif name in _NEWER_STRINGS:
                    hint = hint or f"{name}() is not in the strings library version Kubernetes uses (version 2)"
        msg = _member_form(expr, line, col, msg)
        rel = _RELOP.search(msg)
        if rel and (rel.group(2) in _KIND or rel.group(3) in _KIND):
            hint = hint or relational_hint(expr, line, col, rel.group(1))
        problems.append(f"ERROR: <input>:{line}:{col}: {msg}")
        blocks.append(f"ERROR: <input>:{line}:{col}: {msg}\n{_caret(expr, line, col)}")
    if not problems:
        first = text.splitlines()[0] if text else "invalid expression"
        problems.append(first)
        blocks.append(first)
    return CelCompileError("compilation failed: " + "; ".join(problems), hint,
                           detail="compilation failed: " + "\n".join(blocks))


_OVERLOAD = re.compile(r"found no matching overload for '([A-Za-z][\w.]*)' applied to '\((.*)\)'$")


def _split_types(text: str) -> list[str]:
    parts, depth, cur = [], 0, ""
    for c in text:
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        if c == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
        else:
            cur += c
    if cur.strip():
        parts.append(cur.strip())
    return parts


def _member_form(expr: str, line: int, col: int, msg: str) -> str:
    """cel-go writes member calls as 'recv.(args)'; cel-cpp as '(recv, args)'."""
    m = _OVERLOAD.match(msg)
    if not m or "." in m.group(1) or not _is_member_call(expr, line, col):
        return msg
    types = _split_types(m.group(2))
    if not types:
        return msg
    return f"found no matching overload for '{m.group(1)}' applied to '{types[0]}.({', '.join(types[1:])})'"


def _caret(expr: str, line: int, col: int) -> str:
    """cel-go's source excerpt: `` | <line>`` and `` | ....^``."""
    lines = expr.split("\n")
    src = lines[line - 1] if 0 < line <= len(lines) else ""
    return f" | {src}\n | {'.' * (col - 1)}^"


def runtime_error_from_text(text: str) -> CelRuntimeError:
    text = _STATUS.sub("", text.strip())
    m = _NOT_FOUND.search(text)
    if m:
        return no_such_key(m.group(1))
    if text.startswith("No matching overloads found") or text.startswith("no such overload"):
        return CelRuntimeError("no such overload", text.partition(":")[2].strip())
    m = _INDEX.fullmatch(text)
    if m:
        return CelRuntimeError(f"index out of bounds: {m.group(1)}")
    m = _BAD_REGEX.fullmatch(text)
    if m:
        return CelRuntimeError(go_regex_error(ValueError(m.group(1))))
    return CelRuntimeError(_RUNTIME_TEXT.get(text, text))


def no_such_key(key: str) -> CelRuntimeError:
    return CelRuntimeError(f"no such key: {key}", NO_SUCH_KEY_HINT)
