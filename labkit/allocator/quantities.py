"""Quantity helpers for the allocator: parse once, compute with exact Fractions."""

from __future__ import annotations

from fractions import Fraction
from functools import lru_cache

from labkit.api.quantity import Quantity, parse_quantity

__all__ = ["qvalue", "qparse", "canonical"]


@lru_cache(maxsize=65536)
def qparse(text: str) -> Quantity:
    return parse_quantity(str(text))


def qvalue(value: object) -> Fraction:
    """Exact value of a quantity given as string, int or Quantity."""
    if isinstance(value, Quantity):
        return value.value
    if isinstance(value, bool):
        raise TypeError("bool is not a quantity")
    if isinstance(value, int):
        return Fraction(value)
    return qparse(str(value)).value


def canonical(value: object) -> str:
    if isinstance(value, Quantity):
        return value.canonical()
    if isinstance(value, int) and not isinstance(value, bool):
        return Quantity.from_int(value).canonical()
    return qparse(str(value)).canonical()
