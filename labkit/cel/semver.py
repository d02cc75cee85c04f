"""Semantic versions with the semantics of Kubernetes' CEL ``semver`` library.

Kubernetes parses with github.com/blang/semver/v4 (strict SemVer 2.0.0) and, for
``semver(s, true)``, normalises first: strip one leading ``v``, strip leading zeros of the
major/minor/patch parts and fill a missing minor/patch with ``0``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import total_ordering

from labkit.errors import InputError

__all__ = ["Semver", "SemverError", "parse_semver", "is_semver"]

_DIGITS = frozenset("0123456789")
_ALNUM = frozenset("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-")


def _q(text: str) -> str:
    """Go's %q for the ASCII strings that appear in version errors."""
    return json.dumps(text)


class SemverError(InputError, ValueError):
    """A string that is not a semantic version."""


def _number(text: str, what: str) -> int:
    if not text or not set(text) <= _DIGITS:
        raise SemverError(f"Invalid character(s) found in {what} number {_q(text)}")
    if len(text) > 1 and text[0] == "0":
        raise SemverError(f"{what.capitalize()} number must not contain leading zeroes {_q(text)}")
    value = int(text)
    if value >= 2**64:
        raise SemverError(f"{what.capitalize()} number out of range {_q(text)}")
    return value


def _prerelease(part: str) -> int | str:
    if not part:
        raise SemverError("Prerelease is empty")
    if set(part) <= _DIGITS:
        if len(part) > 1 and part[0] == "0":
            raise SemverError(f"Numeric PreRelease version must not contain leading zeroes {_q(part)}")
        return int(part)
    if not set(part) <= _ALNUM:
        raise SemverError(f"Invalid character(s) found in prerelease {_q(part)}")
    return part


@total_ordering
@dataclass(frozen=True, eq=False)
class Semver:
    """A parsed version; ordering and equality ignore build metadata (SemVer 2.0.0 §10)."""

    major: int
    minor: int
    patch: int
    pre: tuple[int | str, ...] = ()
    build: tuple[str, ...] = ()

    @classmethod
    def parse(cls, text: str, normalize: bool = False) -> Semver:
        return parse_semver(text, normalize)

    def compare(self, other: Semver) -> int:
        """-1, 0 or 1, like ``Version.Compare``."""
        a = (self.major, self.minor, self.patch)
        b = (other.major, other.minor, other.patch)
        if a != b:
            return -1 if a < b else 1
        if not self.pre or not other.pre:
            if self.pre == other.pre:
                return 0
            return -1 if self.pre else 1
        for x, y in zip(self.pre, other.pre):
            if x == y:
                continue
            if isinstance(x, int) != isinstance(y, int):
                return -1 if isinstance(x, int) else 1  # numeric identifiers sort first
            return -1 if x < y else 1  # type: ignore[operator]  # both int or both str (above)
        if len(self.pre) == len(other.pre):
            return 0
        return -1 if len(self.pre) < len(other.pre) else 1

    def key(self) -> str:
        """A string equal for equal versions (build metadata dropped)."""
        text = f"{self.major}.{self.minor}.{self.patch}"
        if self.pre:
            text += "-" + ".".join(str(p) for p in self.pre)
        return text

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Semver) and self.compare(other) == 0

    def __hash__(self) -> int:
        return hash(self.key())

    def __lt__(self, other: Semver) -> bool:
        return self.compare(other) < 0

    def __str__(self) -> str:
        return self.key() + ("+" + ".".join(self.build) if self.build else "")

    def __repr__(self) -> str:
        return f"Semver({str(self)!r})"


def _normalize(text: str) -> str:
    text = text.removeprefix("v")
    parts = text.split(".", 2)
    for i, p in enumerate(parts):
        if len(p) > 1:
            p = p.lstrip("0")
            if not p or p[0] not in _DIGITS:
                p = "0" + p
            parts[i] = p
    if len(parts) < 3:
        if any(c in parts[-1] for c in "+-"):
            raise SemverError("short version cannot contain PreRelease/Build meta data")
        parts += ["0"] * (3 - len(parts))
    return ".".join(parts)


def parse_semver(text: str, normalize: bool = False) -> Semver:
    """Parse strictly (blang/semver ``Parse``), optionally after Kubernetes' normalisation."""
    if normalize:
        text = _normalize(text)
    if not text:
        raise SemverError("Version string empty")
    parts = text.split(".", 2)
    if len(parts) != 3:
        raise SemverError("No Major.Minor.Patch elements found")
    major = _number(parts[0], "major")
    minor = _number(parts[1], "minor")
    rest = parts[2]
    cut = len(rest)
    for i, ch in enumerate(rest):
        if ch in "+-":
            cut = i
            break
    patch = _number(rest[:cut], "patch")
    pre: tuple[int | str, ...] = ()
    build: tuple[str, ...] = ()
    tail = rest[cut:]
    if tail.startswith("-"):
        pre_text, _, build_text = tail[1:].partition("+")
        pre = tuple(_prerelease(p) for p in pre_text.split("."))
        has_build = "+" in tail[1:]
    else:
        build_text = tail[1:]
        has_build = tail.startswith("+")
    if has_build:
        items = build_text.split(".")
        for b in items:
            if not b:
                raise SemverError("Build meta data is empty")
            if not set(b) <= _ALNUM:
                raise SemverError(f"Invalid character(s) found in build meta data {_q(b)}")
        build = tuple(items)
    return Semver(major, minor, patch, pre, build)


def is_semver(text: str, normalize: bool = False) -> bool:
    try:
        parse_semver(text, normalize)
    except SemverError:
        return False
    return True
