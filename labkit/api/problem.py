"""The validation result type and the small helpers rule modules share."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Problem", "Sink", "as_dict", "as_list", "go_quote", "printable_name", "show"]


@dataclass(frozen=True)
class Problem:
    """One validation problem; ``str(p) == "Kind/name: field.path: message"``."""

    kind: str
    name: str
    path: str
    message: str

    def __str__(self) -> str:
        where = f"{self.path}: " if self.path else ""
        return f"{printable_name(self.kind)}/{printable_name(self.name)}: {where}{self.message}"


_GO_ESCAPES = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t",
               "\v": "\\v", "\\": "\\\\", '"': '\\"'}


def go_quote(text: str) -> str:
    """``text`` as Go's ``%q`` prints it (strconv.Quote): printable characters as they are, control
    and format characters escaped (``\\a``, ``\\x01``, ``\\ufeff``). The API server quotes names
    and string values this way in its messages, so a control character never reaches a terminal."""
    if text.isprintable() and '"' not in text and "\\" not in text:  # nothing to escape (C speed)
        return f'"{text}"'
    out = ['"']
    for ch in text:
        code = ord(ch)
        if ch in _GO_ESCAPES:
            out.append(_GO_ESCAPES[ch])
        elif ch.isprintable():
            out.append(ch)
        elif code < 0x80:
            out.append(f"\\x{code:02x}")
        elif code < 0x10000:
            out.append(f"\\u{code:04x}")
        else:
            out.append(f"\\U{code:08x}")
    out.append('"')
    return "".join(out)


def printable_name(name: str) -> str:
    """A name for the start of a message: as it is, or Go-quoted when it holds a character a
    terminal would act on (a control character, a BOM, a line break)."""
    return name if name.isprintable() else go_quote(name)


def show(value: Any, limit: int = 60) -> str:
    """A value as Go's field errors print it: strings with ``%q``, other values as JSON, truncated."""
    if isinstance(value, str):
        # each character quotes to one or more, so the first `limit` decide what is shown: a value of
        # 100,000 characters is not quoted whole to print 56 of them
        text = go_quote(value[:limit])
        return text if len(value) <= limit and len(text) <= limit else text[: limit - 3] + "..."
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def as_dict(value: Any) -> dict[str, Any]:
    """The value if it is a mapping, else {} (type errors are reported by the schema check)."""
    return value if isinstance(value, dict) else {}


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _one_line(text: str) -> str:
    return text.replace("\r", "\\r").replace("\n", "\\n")


@dataclass
class Sink:
    """Collects problems for one object."""

    kind: str
    name: str
    problems: list[Problem] = field(default_factory=list)

    def add(self, path: str, message: str) -> None:
        # one line per problem, whatever odd keys the input had
        self.problems.append(Problem(self.kind, self.name, _one_line(path), _one_line(message)))

    # Go field.Error flavours -----------------------------------------------------------------
    def required(self, path: str, detail: str = "") -> None:
        self.add(path, f"Required value: {detail}" if detail else "Required value")

    def invalid(self, path: str, value: Any, detail: str) -> None:
        self.add(path, f"Invalid value: {show(value)}: {detail}")

    def forbidden(self, path: str, detail: str) -> None:
        self.add(path, f"Forbidden: {detail}")

    def unsupported(self, path: str, value: Any, supported: list[str]) -> None:
        options = ", ".join(show(s) for s in supported)
        self.add(path, f"Unsupported value: {show(value)}: supported values: {options}")

    def duplicate(self, path: str, value: Any) -> None:
        self.add(path, f"Duplicate value: {show(value)}")

    def too_many(self, path: str, count: int, limit: int) -> None:
        self.add(path, f"Too many: {count}: must have at most {limit} items")

    def too_long(self, path: str, limit: int, unit: str = "bytes") -> None:
        self.add(path, f"Too long: may not be more than {limit} {unit}")

    def names(self, path: str, value: str, messages: list[str]) -> None:
        """Report the messages of a :mod:`labkit.api.names` check."""
        for msg in messages:
            if msg == "Required value":
                self.required(path)
            elif msg.startswith("Too long"):
                self.add(path, msg)
            else:
                self.invalid(path, value, msg)
