"""Text rewrites that let cel-cpp (the cel-expr-python engine) run what Kubernetes' cel-go runs.

cel-cpp lacks some of the macros Kubernetes enables, or cannot run them from Python, and labkit
declares ``device.driver``, ``device.attributes``... as separate variables. Each rewrite keeps
error columns where it can and binds a receiver once with ``cel.bind``:

* ``sortBy``: cel-cpp has it only in its own lists extension, whose other functions behave
  unlike Kubernetes';
* ``transformMap`` / ``transformMapEntry``: cel-cpp's expansion needs an internal
  ``cel.@mapInsert`` it does not bind from Python;
* ``format.<name>().validate(s)`` / ``format.named(n)``: optionals cel-cpp cannot return from Python;
* ``cel.bind(d, device, ...)`` and ``has(device.x)``: ``device`` alone is no value here.

The names of the functions the rewrites call are public: the engine declares them and the cost
estimator (:mod:`labkit.cel.cost`) maps them back to what cel-go's AST has.
"""

from __future__ import annotations

import itertools
import re

from labkit.cel.errors import CelCompileError
from labkit.cel.literals import (
    HAS_DEVICE_FIELD,
    STRING_LITERAL,
    receiver_start,
    rewrite_each,
    split_call,
    substitute,
)

__all__ = ["FORMAT_ERRORS", "FORMAT_KNOWN", "FORMAT_NAMED", "MERGE_ENTRIES", "SORT_BY_KEYS", "ZIP_MAP",
           "rewrite_for_cpp", "sort_by_error"]

#: target of the sortBy() rewrite (Kubernetes: @sortByAssociatedKeys)
SORT_BY_KEYS = "labkit_sortByAssociatedKeys"
#: targets of the transformMap() / transformMapEntry() rewrites
ZIP_MAP, MERGE_ENTRIES = "labkit_zip_map", "labkit_merge_map_entries"
#: targets of the format validate() / named() rewrites
FORMAT_ERRORS, FORMAT_KNOWN, FORMAT_NAMED = "labkit_formatErrors", "labkit_formatKnown", "labkit_formatNamed"


def rewrite_for_cpp(expr: str, consumable_capacity: bool) -> str:
    """``expr`` as cel-cpp compiles it (unchanged when no rewrite applies)."""
    text = _inline_device_binds(expr) if "bind" in expr else expr
    if "has" in text:
        text = _rewrite_device_presence(text, consumable_capacity)
    if "format" in text and _FORMAT_NAMED.search(text):
        text = _rewrite_format_named(text)
    if _EXPANDED_MACROS.search(text):
        text = _rewrite_macros(text)
    return text


def _rewrite_device_presence(expr: str, consumable_capacity: bool) -> str:
    """``has(device.driver)`` is always true in Kubernetes; ``device`` is not a value here.

    Replaced by ``(true   )`` of the same length, so error columns stay right.
    """
    out, pos = [], 0
    spans = [(m.start(), m.end()) for m in STRING_LITERAL.finditer(expr)]
    for m in HAS_DEVICE_FIELD.finditer(expr):
        if any(a <= m.start() < b for a, b in spans):
            continue
        if m.group(1) == "allowMultipleAllocations" and not consumable_capacity:
            continue
        out.append(expr[pos : m.start()])
        out.append("(true" + " " * (m.end() - m.start() - 6) + ")")
        pos = m.end()
    out.append(expr[pos:])
    return "".join(out)


_SORT_BY = re.compile(r"\.\s*sortBy\s*\(")
_EXPANDED_MACROS = re.compile(r"\.\s*(sortBy|transformMap|transformMapEntry|validate)\s*\(")


def _expand_sort_by(v: str, args: list[str]) -> str | None:
    """cel-go: ``cel.bind(v, R, v.@sortByAssociatedKeys(v.map(x, key)))``."""
    if len(args) != 2:
        return None
    return f"{v}.{SORT_BY_KEYS}({v}.map({args[0]}, {args[1]}))"


def _expand_transform_map(v: str, args: list[str]) -> str | None:
    """keys and values from two transformList passes over the same value, zipped into a map."""
    if len(args) not in (3, 4):
        return None
    head = ", ".join(args[:-1])
    return f"{ZIP_MAP}({v}.transformList({head}, {args[0]}), {v}.transformList({head}, {args[-1]}))"


def _expand_transform_map_entry(v: str, args: list[str]) -> str | None:
    """the entry maps from one transformList pass, merged (a repeated key is an error, as in Go)."""
    if len(args) not in (3, 4):
        return None
    return f"{MERGE_ENTRIES}({v}.transformList({', '.join(args)}))"


def _expand_format_validate(v: str, args: list[str]) -> str | None:
    """``F.validate(s)`` -> optional list of messages (cel-cpp cannot return optionals from Python)."""
    if len(args) != 1:
        return None
    e = f"{v}_errors"
    return f"cel.bind({e}, {v}.{FORMAT_ERRORS}({args[0]}), {e}.size() == 0 ? optional.none() : optional.of({e}))"


_EXPANSIONS = {
    "validate": (_expand_format_validate, "format.dns1123Label().validate(<string>)"),
    "sortBy": (_expand_sort_by, "list.sortBy(x, <key of x>)"),
    "transformMap": (_expand_transform_map, "m.transformMap(k, v, [<filter>,] <value>)"),
    "transformMapEntry": (_expand_transform_map_entry, "m.transformMapEntry(k, v, [<filter>,] {<key>: <value>})"),
}


_BIND_DEVICE = re.compile(r"\bcel\s*\.\s*bind\s*\(\s*([A-Za-z_]\w*)\s*,\s*device\s*,")


def _inline_device_binds(expr: str) -> str:
    """``cel.bind(d, device, body)`` -> ``body`` with ``d`` replaced by ``device``: labkit declares
    ``device.driver``, ``device.attributes``... as variables, so ``device`` alone is no value."""

    def inline(expr: str, m: re.Match[str], spans: list[tuple[int, int]]) -> str | None:
        split = split_call(expr, expr.index("(", m.start()), spans)
        if split is None or len(split[0]) != 3:
            return None
        body = substitute(split[0][2].strip(), m.group(1), "device")
        return f"{expr[:m.start()]}({body}){expr[split[1]:]}"

    return rewrite_each(_BIND_DEVICE, expr, inline)


_FORMAT_NAMED = re.compile(r"(?<![.\w])format\s*\.\s*named\s*\(")


def _rewrite_format_named(expr: str) -> str:
    """``format.named(n)`` -> ``optional.of(<format n>)`` or ``optional.none()``."""

    names = itertools.count()

    def named(expr: str, m: re.Match[str], spans: list[tuple[int, int]]) -> str:
        split = split_call(expr, m.end() - 1, spans)
        if split is None or len(split[0]) != 1:
            raise CelCompileError("compilation failed: format.named() takes one string", 'write format.named("dns1123Label")')
        v = f"__labkit_formatName{next(names)}__"
        return (f"{expr[:m.start()]}cel.bind({v}, {split[0][0].strip()}, {FORMAT_KNOWN}({v}) ? "
                f"optional.of({FORMAT_NAMED}({v})) : optional.none()){expr[split[1]:]}")

    return rewrite_each(_FORMAT_NAMED, expr, named)


def _rewrite_macros(expr: str) -> str:
    """Expand, as text, the macros cel-cpp cannot run for labkit, the way cel-go expands them:

    * ``sortBy``: cel-cpp has it only in its own lists extension, whose other functions behave
      unlike Kubernetes';
    * ``transformMap`` / ``transformMapEntry``: cel-cpp's expansion needs an internal
      ``cel.@mapInsert`` it does not bind from Python.

    The receiver is bound once with ``cel.bind``.
    """

    names = itertools.count()

    def expand_one(expr: str, m: re.Match[str], spans: list[tuple[int, int]]) -> str:
        expand, usage = _EXPANSIONS[m.group(1)]
        split = split_call(expr, m.end() - 1, spans)
        start = receiver_start(expr, m.start(), spans)
        if split is None or start >= m.start():
            body = None
        else:
            v = f"__labkit_{m.group(1)}{next(names)}__"
            body = expand(v, [a.strip() for a in split[0]])
        if body is None or split is None:
            raise CelCompileError(f"compilation failed: {m.group(1)}() needs a receiver and the right arguments",
                                  f"write {usage}")
        return f"{expr[:start]}cel.bind({v}, {expr[start:m.start()]}, {body}){expr[split[1]:]}"

    return rewrite_each(_EXPANDED_MACROS, expr, expand_one)


_SORT_BY_ERROR = re.compile(r"<input>:(\d+):(\d+): found no matching overload for '"
                            + SORT_BY_KEYS + r"' applied to '\((.*), (list\(.*\))\)'")


def sort_by_error(expr: str, text: str) -> str:
    """Point a key-type error at the original sortBy( and name it as cel-go does."""
    m = _SORT_BY.search(expr)
    line = expr.count("\n", 0, m.end()) + 1 if m else 1
    col = m.end() - (expr.rfind("\n", 0, m.end()) + 1) if m else 1
    return _SORT_BY_ERROR.sub(
        lambda e: f"<input>:{line}:{col}: found no matching overload for '@sortByAssociatedKeys' "
                  f"applied to '{e.group(3)}.({e.group(4)})'", text)
