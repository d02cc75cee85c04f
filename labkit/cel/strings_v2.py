"""cel-go's strings extension, version 2 (what Kubernetes enables), on Python values.

Only the cel-python engine needs these; cel-expr-python has them built in (``ExtStrings(2)``).
Strings are indexed by code point, like CEL.
"""

from __future__ import annotations

import math
from typing import Any

from labkit.cel.k8slib import LibError


def char_at(s: str, i: int) -> str:
    if i < 0 or i > len(s):
        raise LibError(f"index out of range: {i}")
    return s[i : i + 1]


def index_of(s: str, sub: str, start: int = 0) -> int:
    if start < 0 or start > len(s):
        raise LibError(f"index out of range: {start}")
    return s.find(sub, start)


def last_index_of(s: str, sub: str, end: int | None = None) -> int:
    if end is None:
        return s.rfind(sub)
    if end < 0 or end >= len(s) and len(s) > 0:
        raise LibError(f"index out of range: {end}")
    return s.rfind(sub, 0, end + len(sub))


def lower_ascii(s: str) -> str:
    return "".join(c.lower() if "A" <= c <= "Z" else c for c in s)


def upper_ascii(s: str) -> str:
    return "".join(c.upper() if "a" <= c <= "z" else c for c in s)


def replace(s: str, old: str, new: str, n: int = -1) -> str:
    return s.replace(old, new, n if n >= 0 else -1)


def split(s: str, sep: str, n: int = -1) -> list[str]:
    if n == 0:
        return []
    if sep == "":
        parts = list(s)
        if n > 0 and len(parts) > n:
            parts = parts[: n - 1] + ["".join(parts[n - 1 :])]
        return parts
    return s.split(sep, n - 1) if n > 0 else s.split(sep)


def substring(s: str, start: int, end: int | None = None) -> str:
    end = len(s) if end is None else end
    if start < 0 or start > len(s) or end < 0 or end > len(s):
        raise LibError(f"index out of range: {start if not 0 <= start <= len(s) else end}")
    if start > end:
        raise LibError(f"invalid substring range. start: {start}, end: {end}")
    return s[start:end]


def trim(s: str) -> str:
    return s.strip()


def join(items: list[Any], sep: str = "") -> str:
    if any(not isinstance(x, str) for x in items):
        raise LibError("join: list must contain strings only")
    return sep.join(items)


def quote(s: str) -> str:
    out = ['"']
    for c in s:
        out.append({"\\": "\\\\", '"': '\\"', "\n": "\\n", "\t": "\\t", "\r": "\\r",
                    "\a": "\\a", "\b": "\\b", "\f": "\\f", "\v": "\\v"}.get(c, c))
    out.append('"')
    return "".join(out)


def _fmt_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        if math.isnan(v):
            return "NaN"
        if math.isinf(v):
            return "+Inf" if v > 0 else "-Inf"
        return _go_float(v)
    if isinstance(v, list):
        return "[" + ", ".join(_fmt_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{_fmt_value(k)}: {_fmt_value(x)}" for k, x in v.items()) + "}"
    if v is None:
        return "null"
    return str(v)


def _go_float(v: float) -> str:
    text = repr(v)
    return text[:-2] if text.endswith(".0") else text


def format_(fmt: str, args: list[Any]) -> str:
    out: list[str] = []
    i = n = 0
    while i < len(fmt):
        c = fmt[i]
        if c != "%":
            out.append(c)
            i += 1
            continue
        i += 1
        if i < len(fmt) and fmt[i] == "%":
            out.append("%")
            i += 1
            continue
        precision = None
        if i < len(fmt) and fmt[i] == ".":
            j = i + 1
            while j < len(fmt) and fmt[j].isdigit():
                j += 1
            precision = int(fmt[i + 1 : j] or 0)
            i = j
        if i >= len(fmt):
            raise LibError("unexpected end of format string")
        verb = fmt[i]
        i += 1
        if n >= len(args):
            raise LibError(f"index {n} out of range")
        arg = args[n]
        n += 1
        if verb == "s":
            out.append(_fmt_value(arg))
        elif verb == "d":
            if isinstance(arg, bool) or not isinstance(arg, int):
                raise LibError("error during formatting: decimal clause can only be used on integers")
            out.append(str(arg))
        elif verb in "fe":
            if isinstance(arg, bool) or not isinstance(arg, int | float):
                raise LibError(f"error during formatting: {'fixed-point' if verb == 'f' else 'scientific'} clause can only be used on doubles")
            out.append(f"{float(arg):.{6 if precision is None else precision}{verb}}")
        elif verb in "xXob":
            if isinstance(arg, str) and verb in "xX":
                text = arg.encode().hex()
                out.append(text.upper() if verb == "X" else text)
            elif isinstance(arg, int) and not isinstance(arg, bool):
                out.append(format(arg, verb))
            else:
                raise LibError(f"error during formatting: only integers and strings can be formatted with %{verb}")
        else:
            raise LibError(f"could not parse formatting clause: unrecognized formatting clause \"{verb}\"")
    return "".join(out)
