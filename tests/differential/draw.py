"""Sources of choices for the scenario generator.

The generator asks a ``Draw`` for every decision. Three implementations:
``RandomDraw`` (seeded, records the choices; used for bulk runs), ``ReplayDraw`` (replays a
recorded choice list; the shrinker edits that list) and ``HypothesisDraw`` (hypothesis ``data``;
hypothesis shrinks it).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any, Protocol, TypeVar

T = TypeVar("T")


class Draw(Protocol):
    def int(self, lo: int, hi: int) -> int: ...


def choice(d: Draw, options: Sequence[T]) -> T:
    return options[d.int(0, len(options) - 1)]


def chance(d: Draw, percent: int) -> bool:
    """True with probability percent/100; the shrink direction (0) is False."""
    return d.int(0, 99) >= 100 - percent


def subset(d: Draw, options: Sequence[T], lo: int, hi: int) -> list[T]:
    pool = list(options)
    out = []
    for _ in range(d.int(lo, min(hi, len(pool)))):
        out.append(pool.pop(d.int(0, len(pool) - 1)))
    return out


class RandomDraw:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.choices: list[int] = []

    def int(self, lo: int, hi: int) -> int:
        v = self.rng.randint(lo, hi)
        self.choices.append(v - lo)
        return v


class ReplayDraw:
    """Replays offsets from ``lo``; out-of-range values are clamped, missing ones are 0."""

    def __init__(self, choices: Sequence[int]) -> None:
        self.src = list(choices)
        self.pos = 0
        self.choices: list[int] = []

    def int(self, lo: int, hi: int) -> int:
        off = self.src[self.pos] if self.pos < len(self.src) else 0
        self.pos += 1
        v = min(lo + max(off, 0), hi)
        self.choices.append(v - lo)
        return v


class HypothesisDraw:
    """Wraps the ``draw`` function of an ``@st.composite`` strategy."""

    def __init__(self, draw: Any) -> None:
        from hypothesis import strategies as st

        self.draw = draw
        self.st = st

    def int(self, lo: int, hi: int) -> int:
        return self.draw(self.st.integers(lo, hi))
