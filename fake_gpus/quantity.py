"""Integer -> Kubernetes quantity string, as Go's resource.NewQuantity(n, BinarySI).String()
prints it: the largest binary suffix that divides the value exactly, else the plain number."""

from __future__ import annotations

from functools import lru_cache

_SUFFIXES = ("Ei", "Pi", "Ti", "Gi", "Mi", "Ki")


@lru_cache(maxsize=4096)
def binary_si(n: int) -> str:
    if n == 0:
        return "0"
    for i, suffix in enumerate(_SUFFIXES):
        unit = 1 << (10 * (len(_SUFFIXES) - i))
        if n % unit == 0:
            return f"{n // unit}{suffix}"
    return str(n)


def parse_binary_si(s: str) -> int:
    """Inverse of binary_si (for tests and sums): accepts a plain integer or <int><binary suffix>."""
    for i, suffix in enumerate(_SUFFIXES):
        if s.endswith(suffix):
            return int(s[: -len(suffix)]) << (10 * (len(_SUFFIXES) - i))
    return int(s)
