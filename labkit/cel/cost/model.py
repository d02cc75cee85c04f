"""The values the estimate tracks: saturating ``[lo, hi]`` ranges (cel-go's uint64 arithmetic),
field paths with Go slice semantics, and what the call estimators see of a node."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

from labkit.cel._checked import Expr, Type

U64 = (1 << 64) - 1
_TWO_TO_64 = math.ldexp(1.0, 64)
STRING_FACTOR = 0.1          # per character of a traversed string
REGEX_FACTOR = 0.25          # per character of a regex pattern
LIST_CREATE, MAP_CREATE, STRUCT_CREATE = 10, 30, 40

# --- saturating uint64 ranges -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Est:
    """A ``[lo, hi]`` range of a cost or a size, saturating at 2^64-1 like cel-go."""

    lo: int
    hi: int

    def __add__(self, other: Est) -> Est:
        return Est(min(self.lo + other.lo, U64), min(self.hi + other.hi, U64))

    def times(self, other: Est) -> Est:
        return Est(min(self.lo * other.lo, U64), min(self.hi * other.hi, U64))

    def union(self, other: Est) -> Est:
        return Est(min(self.lo, other.lo), max(self.hi, other.hi))

    def factor(self, f: float) -> Est:
        """Each bound times ``f``, rounded up (cel-go's float arithmetic)."""
        return Est(_factor(self.lo, f), _factor(self.hi, f))


def _factor(x: int, f: float) -> int:
    xf = float(x)
    if xf > 0 and f > 0 and xf > _TWO_TO_64 / f:
        return U64
    c = math.ceil(xf * f)
    return U64 if c >= _TWO_TO_64 else int(c)


def fixed(n: int) -> Est:
    return Est(n, n)


ZERO, ONE = fixed(0), fixed(1)
MAX_FORMAT_REGEX = 128  # Kubernetes' MaxNameFormatRegexSize
UNKNOWN = Est(0, U64)


class GoPath:
    """A field path with Go slice semantics: ``append`` writes into spare capacity in place."""

    __slots__ = ("buf", "n")

    def __init__(self, buf: list[str], n: int) -> None:
        self.buf, self.n = buf, n

    @classmethod
    def of(cls, *names: str) -> GoPath:
        return cls(list(names), len(names))

    def names(self) -> tuple[str, ...]:
        return tuple(self.buf[: self.n])

    def append(self, name: str) -> GoPath:
        if self.n < len(self.buf):
            self.buf[self.n] = name  # shared with every other path appended to the same prefix
            return GoPath(self.buf, self.n + 1)
        cap = max(2 * len(self.buf), self.n + 1)  # Go's growth for small slices of strings
        return GoPath(self.buf[: self.n] + [name] + [""] * (cap - self.n - 1), self.n + 1)


NO_PATH = GoPath([], 0)


@dataclass
class Entry:
    """Sizes of a container's keys (or indices) and values, where both are known."""

    container: str  # "list" or "map"
    key: Est
    val: Est

    def union(self, other: Entry | None) -> Entry | None:
        if other is None:
            return None
        return Entry(self.container, self.key.union(other.key), self.val.union(other.val))


@dataclass
class Var:
    path: GoPath
    size: Est | None
    entry: Entry | None


@dataclass
class Node:
    """What the call estimators see of an argument: path, type, computed size."""

    expr: Expr | None
    path: GoPath
    type: Type
    size: Est | None


class Call(NamedTuple):
    cost: Est
    size: Est | None


ACCUMULATORS = {"__result__", "@result"}
