"""argparse types for the numbers the ``labkit`` commands take: the one home for their bounds.

Each type refuses what is not a number, NaN, the infinities and a value outside the option's
documented range, so argparse names the option and exits 2 before any work is done, in its own
format (``labkit experiment sweep: error: argument --seeds: ...``), as a Go command's flag
parsing does. The ranges are written as intervals (``[1, 8]``, ``(0, 10]``), as the trace
loaders write theirs. fake_gpus has its own (it imports nothing from labkit): fake_gpus.cli.number.

This module is at the bottom of the layers (beside labkit.errors): every command's module may use it.
"""

from __future__ import annotations

import argparse
import math
import os
import re
from collections.abc import Callable
from typing import TypeVar

__all__ = ["SEED_MAX", "WORKERS_PER_CPU", "max_workers", "number", "parsed_by", "seed", "shown", "whole", "workers"]

T = TypeVar("T")

#: the largest seed: numpy's and most tools' seeds are 32-bit (Python's random.Random takes any int,
#: but a seed past this is a typo, not a choice)
SEED_MAX = 2**32 - 1
#: local worker processes per CPU at most (a cell is CPU-bound: more only adds memory and start-up)
WORKERS_PER_CPU = 4

_WHOLE = re.compile(r"[+-]?[0-9]+", re.ASCII)


def _interval(lo: float, hi: float, *, lo_open: bool = False) -> str:
    """``[lo, hi]`` (``(lo, hi]``): whole numbers as they are, others as ``%g``."""
    lo_s, hi_s = (str(v) if isinstance(v, int) else f"{v:g}" for v in (lo, hi))
    return f"{'(' if lo_open else '['}{lo_s}, {hi_s}]"


def shown(text: str, limit: int = 40) -> str:
    """``text`` quoted for a message, cut to ``limit`` characters (a value may be megabytes long)."""
    return repr(text if len(text) <= limit else text[:limit] + "...")


def whole(lo: int, hi: int) -> Callable[[str], int]:
    """A whole number in [lo, hi] (ASCII digits, an optional sign: no ``1e9``, no ``1_000``)."""

    def parse(text: str) -> int:
        s = text.strip()
        if not _WHOLE.fullmatch(s):
            raise argparse.ArgumentTypeError(f"{shown(text)} is not a whole number; give one in {_interval(lo, hi)}")
        n = int(s) if len(s) <= 40 else None  # no int() of a thousand digits
        if n is None or not lo <= n <= hi:
            raise argparse.ArgumentTypeError(f"{shown(s)} is out of range {_interval(lo, hi)}")
        return n

    parse.__name__ = "whole number"
    return parse


def number(lo: float, hi: float, *, lo_open: bool = False) -> Callable[[str], float]:
    """A finite number in [lo, hi] (``lo_open``: in (lo, hi])."""
    where = _interval(lo, hi, lo_open=lo_open)

    def parse(text: str) -> float:
        try:
            x = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{shown(text)} is not a number; give one in {where}") from None
        if not math.isfinite(x):
            raise argparse.ArgumentTypeError(f"{shown(text)} is not a finite number; give one in {where}")
        if x < lo or x > hi or (lo_open and x == lo):
            raise argparse.ArgumentTypeError(f"{shown(text.strip())} is out of range {where}")
        return x

    parse.__name__ = "number"
    return parse


#: a seed: a whole number in [0, SEED_MAX]
seed = whole(0, SEED_MAX)


def max_workers() -> int:
    """The most local worker processes an option may ask for: WORKERS_PER_CPU per CPU of this machine."""
    return WORKERS_PER_CPU * (os.cpu_count() or 1)


def workers(text: str) -> int:
    """A number of local worker processes: 1 (serially, in this process) to :func:`max_workers`."""
    try:
        return whole(1, max_workers())(text)
    except argparse.ArgumentTypeError as exc:
        raise argparse.ArgumentTypeError(f"{exc}: 1 = serially in this process, at most {WORKERS_PER_CPU} per CPU "
                                         f"({os.cpu_count() or 1} here)") from None


def parsed_by(parse: Callable[[str], T], name: str = "value") -> Callable[[str], T]:
    """``parse`` as an argparse type: the ValueError it raises (a LabkitError with one line) becomes
    argparse's error for the option, so a spec with a number in it (``openb:0``, ``--seeds 5-1``)
    is refused as the plain numbers are."""

    def typed(text: str) -> T:
        try:
            return parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc).strip().splitlines()[0] if str(exc).strip() else name) from None

    typed.__name__ = name
    return typed
