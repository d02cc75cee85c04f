"""Cheap lexical facts about an expression, used by both engines.

``domain_candidates`` finds the strings an expression may use as attribute/capacity domains
(string literals and ``attributes.x`` selections); the cel-expr-python engine pre-fills
them with empty maps, because that engine has no hook for Kubernetes' "missing domain is an
empty map" rule.
"""

from __future__ import annotations

import re
from collections.abc import Callable

_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_SELECTED = re.compile(r"\b(?:attributes|capacity)\s*\.\s*([A-Za-z_][A-Za-z0-9_]*)")
STRING_LITERAL = re.compile(
    r"""[rR]?(?:'''(?:\\.|[^\\])*?'''|\"\"\"(?:\\.|[^\\])*?\"\"\"|'(?:\\.|[^'\\\n])*'|"(?:\\.|[^"\\\n])*")""",
    re.S,
)


def string_literals(expr: str) -> list[str]:
    """The (unescaped enough for domain names) contents of the string literals in ``expr``."""
    out = []
    for m in STRING_LITERAL.finditer(expr):
        text = m.group(0).lstrip("rR")
        quote = 3 if text[:3] in ("'''", '"""') else 1
        out.append(text[quote:-quote])
    return out


def strip_strings(expr: str) -> str:
    """``expr`` with every string literal replaced by ``""`` (for lexical checks)."""
    return STRING_LITERAL.sub('""', expr)


_STR = r"""(?:'(?:\\.|[^'\\\n])*'|"(?:\\.|[^"\\\n])*")"""
_INDEXED = re.compile(r"\b(?:attributes|capacity)\s*\[\s*\??\s*(" + _STR + r")\s*\]")
_OPT_SELECTED = re.compile(r"\b(?:attributes|capacity)\s*\.\s*\??\s*([A-Za-z_][A-Za-z0-9_]*)")
_PRESENCE = re.compile(r"(" + _STR + r")\s+in\s+device\s*\.\s*(?:attributes|capacity)\b(?!\s*[\[.])")
_VARIABLE_INDEX = re.compile(r"\b(?:attributes|capacity)\s*\[\s*\??\s*(?!device\s*\.\s*driver\b)[A-Za-z_]")
_DRIVER_INDEX = re.compile(r"\b(?:attributes|capacity)\s*\[\s*\??\s*device\s*\.\s*driver\s*\]")


def domain_candidates(expr: str) -> frozenset[str]:
    """Domains the expression looks up in ``device.attributes``/``device.capacity``.

    ``"d" in device.attributes`` is an honest membership test in Kubernetes, so a domain that
    the expression tests that way is left out (it must not be pre-filled). The returned
    set may contain the marker ``DRIVER`` for ``attributes[device.driver]``.
    """
    found = {m[1:-1] for m in _INDEXED.findall(expr)}
    if _VARIABLE_INDEX.search(strip_strings(expr)):
        # attributes[d] with d bound by cel.bind or a comprehension: any literal may be the domain
        found.update(s for s in string_literals(expr) if len(s) <= 253 and _DNS_SUBDOMAIN.match(s))
    found.update(_OPT_SELECTED.findall(strip_strings(expr)))
    found.difference_update(m[1:-1] for m in _PRESENCE.findall(expr))
    if _DRIVER_INDEX.search(expr):
        found.add(DRIVER)
    return frozenset(found)


DRIVER = "\x00driver"


# --- scanning expression text outside string literals (the engines' text rewrites) --------------

#: ``has(device.<field>)``: always true in Kubernetes; each engine and the cost estimate replace it
HAS_DEVICE_FIELD = re.compile(r"\bhas\s*\(\s*device\s*\.\s*(driver|attributes|capacity|allowMultipleAllocations)\s*\)")


def string_spans(expr: str) -> list[tuple[int, int]]:
    """(start, end) of each string literal in ``expr``."""
    return [(m.start(), m.end()) for m in STRING_LITERAL.finditer(expr)]


def in_string(pos: int, spans: list[tuple[int, int]]) -> bool:
    return any(a <= pos < b for a, b in spans)


def first_outside_strings(pattern: re.Pattern[str], expr: str, spans: list[tuple[int, int]]) -> re.Match[str] | None:
    """The first match of ``pattern`` that does not start inside a string literal."""
    return next((m for m in pattern.finditer(expr) if not in_string(m.start(), spans)), None)


def rewrite_each(pattern: re.Pattern[str], expr: str,
                 rewrite: Callable[[str, re.Match[str], list[tuple[int, int]]], str | None]) -> str:
    """``expr`` after ``rewrite(expr, match, spans)`` has replaced, one after the other, each first
    match of ``pattern`` outside string literals (looked for again in the rewritten text), until
    none is left or ``rewrite`` returns None (the rest stays as it is)."""
    while True:
        spans = string_spans(expr)
        m = first_outside_strings(pattern, expr, spans)
        if m is None:
            return expr
        new = rewrite(expr, m, spans)
        if new is None:
            return expr
        expr = new


def split_call(expr: str, open_paren: int, spans: list[tuple[int, int]]) -> tuple[list[str], int] | None:
    """Top-level arguments of the call whose '(' is at ``open_paren``, and the index after ')'."""
    depth, start, args, i = 0, open_paren + 1, [], open_paren
    while i < len(expr):
        for a, b in spans:
            if a <= i < b:
                i = b
                break
        else:
            c = expr[i]
            if c in "([{":
                depth += 1
            elif c in ")]}":
                depth -= 1
                if depth == 0:
                    args.append(expr[start:i])
                    return args, i + 1
            elif c == "," and depth == 1:
                args.append(expr[start:i])
                start = i + 1
            i += 1
    return None


def substitute(body: str, name: str, value: str) -> str:
    """``body`` with each use of the identifier ``name`` (outside string literals) replaced by ``value``."""
    spans = string_spans(body)
    ident = re.compile(r"(?<![.\w])" + re.escape(name) + r"(?!\w)")
    out, pos = [], 0
    for m in ident.finditer(body):
        if in_string(m.start(), spans):
            continue
        out.append(body[pos : m.start()])
        out.append(value)
        pos = m.end()
    out.append(body[pos:])
    return "".join(out)


def receiver_start(expr: str, end: int, spans: list[tuple[int, int]]) -> int:
    """Start of the member chain (``a.b["c"](d)``) that ends just before ``end``."""
    i, depth = end - 1, 0
    while i >= 0:
        span = next(((a, b) for a, b in spans if a <= i < b), None)
        if span:
            if depth == 0:
                break
            i = span[0] - 1
            continue
        c = expr[i]
        if c in ")]}":
            depth += 1
        elif c in "([{":
            if depth == 0:
                break
            depth -= 1
        elif depth == 0 and not (c.isalnum() or c in "_."):
            break
        i -= 1
    return i + 1


# --- which parts of `device` an expression reads (for sharing results between devices) ------------

#: a reference read by an expression: ("driver",), ("multi",) for allowMultipleAllocations,
#: (map, None, None) for all of device.attributes/capacity, (map, domain, None) for one domain,
#: (map, domain, name) for one attribute/capacity entry
DeviceRef = tuple[str, str | None, str | None]

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_PLAIN_STRING = re.compile(r"""'([^'\\\n]*)'|"([^"\\\n]*)\"""")
_WS = " \t\r\n"


def _skip(expr: str, i: int) -> int:
    while i < len(expr) and expr[i] in _WS:
        i += 1
    return i


def _plain_string(expr: str, i: int) -> tuple[str, int] | None:
    """A string literal without escapes at ``i``: (its text, index after it)."""
    if expr.startswith(("'''", '"""'), i):
        return None
    m = _PLAIN_STRING.match(expr, i)
    if m is None:
        return None
    return (m.group(1) if m.group(1) is not None else m.group(2)), m.end()


def _index(expr: str, i: int) -> tuple[str, int] | None:
    """``[ "text" ]`` at ``i`` (no optional ``[?``): (text, index after ``]``)."""
    if i >= len(expr) or expr[i] != "[":
        return None
    lit = _plain_string(expr, _skip(expr, i + 1))
    if lit is None:
        return None
    j = _skip(expr, lit[1])
    return (lit[0], j + 1) if j < len(expr) and expr[j] == "]" else None


def _device_ref(expr: str, i: int) -> DeviceRef | None:
    """The reference of the ``device`` that ends at ``i`` (None: used in any other way)."""
    i = _skip(expr, i)
    if i >= len(expr) or expr[i] != ".":
        return None
    m = _IDENT.match(expr, _skip(expr, i + 1))
    if m is None:
        return None
    field = m.group(0)
    if field == "driver":
        return ("driver", None, None)
    if field == "allowMultipleAllocations":
        return ("multi", None, None)
    if field not in ("attributes", "capacity"):
        return None
    dom = _index(expr, _skip(expr, m.end()))
    if dom is None:
        return (field, None, None)  # the whole map, whatever is done with it
    j = _skip(expr, dom[1])
    key = _index(expr, j)
    if key is not None:
        return (field, dom[0], key[0])
    if j < len(expr) and expr[j] == ".":
        sel = _IDENT.match(expr, _skip(expr, j + 1))
        if sel is not None:
            after = _skip(expr, sel.end())
            if after >= len(expr) or expr[after] != "(":  # not a macro or method on the domain map
                return (field, dom[0], sel.group(0))
    return (field, dom[0], None)


def device_references(expr: str) -> tuple[DeviceRef, ...] | None:
    """The parts of the CEL variable ``device`` that ``expr`` reads, told from its text; None when
    that cannot be told (``device`` used as a value, bound by a macro or cel.bind, escapes, raw or
    triple-quoted strings, comments). A selector's result is then a function of those parts alone
    (with the device convertible at all), which lets identical parts of different devices share it.
    """
    refs: list[DeviceRef] = []
    i, n, prev = 0, len(expr), ""
    while i < n:
        c = expr[i]
        if c in _WS:
            i += 1
            continue
        if c in "'\"":
            lit = _plain_string(expr, i)
            if lit is None:
                return None
            i, prev = lit[1], '"'
            continue
        if c == "/" and expr.startswith("//", i):
            return None
        m = _IDENT.match(expr, i)
        if m is not None:
            j = m.end()
            if j < n and expr[j] in "'\"":  # r"...", b'...'
                return None
            if m.group(0) == "device" and prev != ".":
                ref = _device_ref(expr, j)
                if ref is None:
                    return None
                refs.append(ref)
            i, prev = j, "a"
            continue
        prev = c
        i += 1
    return tuple(dict.fromkeys(refs))
