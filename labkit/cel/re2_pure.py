"""RE2's regular-expression syntax on Python's :mod:`re`, for installs without ``google-re2``.

Kubernetes' CEL (Go ``regexp``, RE2 syntax) refuses what a backtracking engine would accept:
backreferences (``\\1``), lookaround (``(?=``, ``(?<!``), atomic groups, possessive and doubled
repetition operators, ``\\Z`` and the other Perl-only escapes. This module parses a pattern as RE2
does, refuses those with RE2's own error text (``invalid escape sequence: \\1``,
``invalid perl operator: (?=`` ...: :func:`labkit.cel.regexcheck.go_regex_error` turns them into
Go's), and translates the rest into an equivalent Python pattern: ``$`` is the end of the text
(not before a final newline), ``\\d \\w \\s \\b`` are ASCII, ``a{,3}`` is literal text, POSIX classes
and ``\\Q...\\E`` are expanded.

It offers the part of google-re2's module API that labkit and cel-python use (``compile``,
``search``, ``match``, ``fullmatch``, ``finditer``, ``findall``, ``sub``, ``split``, ``escape``,
``error``). Not supported (one-line ``error``, never a wrong answer): Unicode classes ``\\p{..}``,
the ungreedy flag ``(?U)`` and ``\\C``. Python's engine backtracks: a pathological pattern can be
slow where RE2 is linear.

:mod:`labkit.cel.regex` installs it as ``re2`` when google-re2 cannot be imported (a browser).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import lru_cache
from typing import Any

__all__ = ["error", "compile", "search", "match", "fullmatch", "finditer", "findall", "sub", "subn",
           "split", "escape", "purge", "translate"]

#: RE2's limit on a counted repetition
MAX_REPEAT = 1000

_PERL_CLASSES = {"d": "0-9", "s": r"\t\n\f\r ", "w": "0-9A-Za-z_"}
_POSIX = {
    "alnum": "0-9A-Za-z", "alpha": "A-Za-z", "ascii": r"\x00-\x7f", "blank": r"\t ", "cntrl": r"\x00-\x1f\x7f",
    "digit": "0-9", "graph": r"!-~", "lower": "a-z", "print": r" -~", "punct": r"!-/:-@\[-`{-~",
    "space": r"\t\n\v\f\r ", "upper": "A-Z", "word": "0-9A-Za-z_", "xdigit": "0-9A-Fa-f",
}
_SIMPLE_ESCAPES = {"a": "\a", "f": "\f", "t": "\t", "n": "\n", "r": "\r", "v": "\v"}
_REPEAT = re.compile(r"\{(\d+)(,(\d*))?\}")


class error(Exception):  # noqa: N801 - the name google-re2 and re use
    """A pattern RE2 refuses (RE2's message), or one this fallback cannot run."""


def _lit(c: str) -> str:
    """One code point as a Python pattern fragment (inside or outside a class)."""
    if c.isalnum() or c == "_" or ord(c) > 0x7F:
        return c
    if c.isprintable() and c != " ":
        return "\\" + c
    return f"\\x{ord(c):02x}"


class _Parser:
    def __init__(self, pattern: str) -> None:
        self.p = pattern
        self.i = 0
        self.out: list[str] = []
        # per group level: flags in effect (i, m, s); a group restores the outer flags
        self.flags: list[set[str]] = [set()]
        # per group level: whether the last emitted thing can take a repetition operator
        self.can_repeat: list[bool] = [False]
        self.depth_starts: list[int] = []

    # -- helpers --------------------------------------------------------------------------------
    def fail(self, what: str, arg: str) -> error:
        return error(f"{what}: {arg}")

    def atom(self, text: str) -> None:
        if "i" in self.flags[-1]:
            text = f"(?i:{text})"
        self.out.append(text)
        self.can_repeat[-1] = True

    def zero_width(self, text: str) -> None:
        self.out.append(f"(?:{text})")  # a group: RE2 lets ^* through, Python's re needs something to repeat
        self.can_repeat[-1] = True  # RE2 accepts ^* (it is a no-op)

    # -- escapes --------------------------------------------------------------------------------
    def escape(self, in_class: bool) -> tuple[str, str | None]:
        """At a backslash: ('char', c) for one code point, ('class', ranges) for a class, or
        ('zw', fragment) for a zero-width assertion (outside classes only)."""
        start = self.i
        self.i += 1
        if self.i >= len(self.p):
            raise error("trailing \\")
        c = self.p[self.i]
        self.i += 1
        if c in "1234567":
            if self.i >= len(self.p) or self.p[self.i] not in "01234567":
                raise self.fail("invalid escape sequence", self.p[start:self.i])
            return self.octal(c)
        if c == "0":
            return self.octal(c)
        if c in _SIMPLE_ESCAPES:
            return "char", _SIMPLE_ESCAPES[c]
        if c == "x":
            return "char", self.hex_escape(start)
        if c in "dswDSW":
            ranges = _PERL_CLASSES[c.lower()]
            return ("nclass" if c.isupper() else "class"), ranges
        if c in "pP":
            raise error(f"not supported by labkit's pure-Python regular expressions: {self.p[start:self.i + 1]} "
                        "(Unicode classes need google-re2: pip install google-re2)")
        if not in_class:
            if c == "A":
                return "zw", r"\A"
            if c == "z":
                return "zw", r"\Z"
            if c == "b":
                return "zw", r"(?a:\b)"
            if c == "B":  # Python's \B does not match in an empty text, RE2's does
                return "zw", r"(?:(?a:\B)|\A\Z)"
            if c == "C":
                raise error("not supported by labkit's pure-Python regular expressions: \\C")
        if c.isascii() and not c.isalnum():
            return "char", c  # escaped punctuation is itself
        raise self.fail("invalid escape sequence", self.p[start:self.i])

    def octal(self, first: str) -> tuple[str, str]:
        digits = first
        while len(digits) < 3 and self.i < len(self.p) and self.p[self.i] in "01234567":
            digits += self.p[self.i]
            self.i += 1
        return "char", chr(int(digits, 8))

    def hex_escape(self, start: int) -> str:
        p = self.p
        if self.i < len(p) and p[self.i] == "{":
            end = p.find("}", self.i)
            body = p[self.i + 1:end] if end > 0 else ""
            if end < 0 or not body or not all(ch in "0123456789abcdefABCDEF" for ch in body):
                raise self.fail("invalid escape sequence", p[start:(end + 1 if end > 0 else len(p))])
            if int(body, 16) > 0x10FFFF:
                raise self.fail("invalid escape sequence", p[start:end])
            self.i = end + 1
            return chr(int(body, 16))
        body = p[self.i:self.i + 2]
        if len(body) < 2 or not all(ch in "0123456789abcdefABCDEF" for ch in body):
            raise self.fail("invalid escape sequence", p[start:self.i + len(body)])
        self.i += 2
        return chr(int(body, 16))

    # -- classes --------------------------------------------------------------------------------
    def char_class(self) -> None:
        start = self.i
        p = self.p
        self.i += 1
        negate = self.i < len(p) and p[self.i] == "^"
        if negate:
            self.i += 1
        parts: list[str] = []
        first = True
        while True:
            if self.i >= len(p):
                raise self.fail("missing ]", p[start:])
            c = p[self.i]
            if c == "]" and not first:
                self.i += 1
                break
            first = False
            if c == "[" and p.startswith("[:", self.i):
                end = p.find(":]", self.i + 2)
                if end >= 0:
                    name = p[self.i + 2:end]
                    neg = name.startswith("^")
                    ranges = _POSIX.get(name.lstrip("^"))
                    if ranges is None:
                        raise self.fail("invalid character class range", p[self.i:end + 2])
                    parts.append(f"[^{ranges}]" if neg else ranges)
                    self.i = end + 2
                    continue
            lo_start = self.i
            lo = self.class_char()
            if isinstance(lo, tuple):
                kind, ranges = lo
                parts.append(f"[^{ranges}]" if kind == "nclass" else ranges)
                continue
            if self.i + 1 < len(p) and p[self.i] == "-" and p[self.i + 1] != "]":
                self.i += 1
                hi = self.class_char()
                if isinstance(hi, tuple) or ord(hi) < ord(lo):
                    raise self.fail("invalid character class range", p[lo_start:self.i])
                parts.append(f"{_lit(lo)}-{_lit(hi)}")
            else:
                parts.append(_lit(lo))
        self.atom(self._class_pattern(parts, negate))

    @staticmethod
    def _class_pattern(parts: list[str], negate: bool) -> str:
        """Python has no class union: nested negated classes become an alternation."""
        plain = "".join(x for x in parts if not x.startswith("[^"))
        negs = [x for x in parts if x.startswith("[^")]
        if not negs:
            return f"[{'^' if negate else ''}{plain}]" if plain else ("[\\s\\S]" if negate else "(?!)")
        options = ([f"[{plain}]"] if plain else []) + negs
        union = "(?:" + "|".join(options) + ")"
        return f"(?:(?!{union})[\\s\\S])" if negate else union

    def class_char(self) -> str | tuple[str, str]:
        c = self.p[self.i]
        if c == "\\":
            kind, value = self.escape(in_class=True)
            assert value is not None
            return (kind, value) if kind in ("class", "nclass") else value
        self.i += 1
        return c

    # -- groups and repetition --------------------------------------------------------------------
    def group(self) -> None:
        p = self.p
        start = self.i
        if not p.startswith("(?", self.i):
            self.i += 1
            self.open("(")
            return
        j = self.i + 2
        if p.startswith("P<", j) or (p.startswith("<", j) and not p.startswith(("<=", "<!"), j)):
            name_start = j + (2 if p[j] == "P" else 1)
            end = p.find(">", name_start)
            if end < 0:
                raise self.fail("invalid named capture group", p[start:])
            name = p[name_start:end]
            if not name or not all(ch.isalnum() or ch == "_" for ch in name) or not name.isascii():
                raise self.fail("invalid named capture group", p[start:end + 1])
            self.i = end + 1
            # Python group names may not start with a digit: the name is kept only where Python allows it
            self.open(f"(?P<{name}>" if name.isidentifier() else "(")
            return
        flags = set(self.flags[-1])
        negate = False
        while j < len(p):
            c = p[j]
            if c in "imsU":
                if c == "U":
                    raise error("not supported by labkit's pure-Python regular expressions: the ungreedy flag (?U)")
                (flags.discard if negate else flags.add)(c)
                j += 1
                continue
            if c == "-" and not negate:
                negate = True
                j += 1
                continue
            ok = not (negate and p[j - 1] == "-") and c in ":)"
            if not ok:
                break
            self.i = j + 1
            if c == ")":
                self.flags[-1] = flags
            else:
                self.open("(?:", flags)
            return
        if p.startswith(("(?<=", "(?<!"), start):
            j = start + 3
        raise self.fail("invalid perl operator", p[start:min(j + 1, len(p))])

    def open(self, text: str, flags: set[str] | None = None) -> None:
        self.depth_starts.append(len(self.out))
        self.out.append(text)
        self.flags.append(set(self.flags[-1]) if flags is None else flags)
        self.can_repeat.append(False)

    def close(self) -> None:
        if not self.depth_starts:
            raise self.fail("unexpected )", self.p)
        self.depth_starts.pop()
        self.flags.pop()
        self.can_repeat.pop()
        self.out.append(")")
        self.can_repeat[-1] = True
        self.i += 1

    def repeat(self, op: str, end: int) -> None:
        p = self.p
        start = self.i
        self.i = end
        if self.i < len(p) and p[self.i] == "?":
            self.i += 1
            op += "?"
        if not self.can_repeat[-1]:
            raise self.fail("no argument for repetition operator", p[start:self.i].rstrip("?") or op)
        nxt = self._repeat_at(self.i)
        if nxt is not None:
            raise self.fail("bad repetition operator", p[start:nxt])
        self.out.append(op)
        self.can_repeat[-1] = False

    def _repeat_at(self, i: int) -> int | None:
        """The end of a repetition operator at ``i``, or None."""
        p = self.p
        if i < len(p) and p[i] in "*+?":
            return i + 1
        m = _REPEAT.match(p, i)
        return m.end() if m else None

    # -- the whole pattern ----------------------------------------------------------------------
    def parse(self) -> str:
        p = self.p
        while self.i < len(p):
            c = p[self.i]
            if c == "\\" and p.startswith("\\Q", self.i):
                end = p.find("\\E", self.i + 2)
                text = p[self.i + 2:] if end < 0 else p[self.i + 2:end]
                self.i = len(p) if end < 0 else end + 2
                for ch in text:
                    self.atom(_lit(ch))
            elif c == "\\":
                kind, value = self.escape(in_class=False)
                assert value is not None
                if kind == "zw":
                    self.zero_width(value)
                elif kind == "char":
                    self.atom(_lit(value))
                else:
                    self.atom(f"[^{value}]" if kind == "nclass" else f"[{value}]")
            elif c == "[":
                self.char_class()
            elif c == "(":
                self.group()
            elif c == ")":
                self.close()
            elif c == "|":
                self.out.append("|")
                self.can_repeat[-1] = False
                self.i += 1
            elif c in "*+?":
                self.repeat(c, self.i + 1)
            elif c == "{":
                m = _REPEAT.match(p, self.i)
                if m is None:
                    self.atom(r"\{")
                    self.i += 1
                    continue
                lo = int(m.group(1))
                hi = lo if m.group(2) is None else (int(m.group(3)) if m.group(3) else None)
                if lo > MAX_REPEAT or (hi is not None and (hi > MAX_REPEAT or hi < lo)):
                    raise self.fail("invalid repetition size", m.group(0))
                self.repeat(m.group(0), m.end())
            elif c == "^":
                self.zero_width("(?m:^)" if "m" in self.flags[-1] else r"\A")
                self.i += 1
            elif c == "$":
                self.zero_width("(?m:$)" if "m" in self.flags[-1] else r"\Z")
                self.i += 1
            elif c == ".":
                self.atom(r"[\s\S]" if "s" in self.flags[-1] else r"[^\n]")
                self.i += 1
            else:
                self.atom(_lit(c))
                self.i += 1
        if self.depth_starts:
            raise self.fail("missing )", p)
        return "".join(self.out)


@lru_cache(maxsize=512)
def translate(pattern: str) -> str:
    """The Python :mod:`re` pattern equivalent to the RE2 ``pattern``; raises :class:`error`."""
    if isinstance(pattern, bytes):
        raise error("not supported by labkit's pure-Python regular expressions: bytes patterns")
    return _Parser(pattern).parse()


@lru_cache(maxsize=512)
def compile(pattern: Any, options: Any = None) -> re.Pattern[str]:  # noqa: A001 - re2's API
    """Compile an RE2 pattern (a compiled pattern is returned as it is)."""
    if isinstance(pattern, re.Pattern):
        return pattern
    try:
        return re.compile(translate(pattern))
    except re.error as exc:  # a translation this module got wrong: still one line
        raise error(f"not supported by labkit's pure-Python regular expressions: {pattern} ({exc})") from None


def search(pattern: Any, text: str, flags: int = 0) -> re.Match[str] | None:
    return compile(pattern).search(text)


def match(pattern: Any, text: str, flags: int = 0) -> re.Match[str] | None:
    return compile(pattern).match(text)


def fullmatch(pattern: Any, text: str, flags: int = 0) -> re.Match[str] | None:
    return compile(pattern).fullmatch(text)


def finditer(pattern: Any, text: str, flags: int = 0) -> Iterator[re.Match[str]]:
    return compile(pattern).finditer(text)


def findall(pattern: Any, text: str, flags: int = 0) -> list[Any]:
    return compile(pattern).findall(text)


def split(pattern: Any, text: str, maxsplit: int = 0, flags: int = 0) -> list[str]:
    return compile(pattern).split(text, maxsplit)


def sub(pattern: Any, repl: Any, text: str, count: int = 0, flags: int = 0) -> str:
    return compile(pattern).sub(repl, text, count)


def subn(pattern: Any, repl: Any, text: str, count: int = 0, flags: int = 0) -> tuple[str, int]:
    return compile(pattern).subn(repl, text, count)


def escape(pattern: str) -> str:
    return "".join(_lit(c) if not c.isalnum() else c for c in pattern)


def purge() -> None:
    compile.cache_clear()
    translate.cache_clear()
