"""Simulated time: starts at a fixed instant, moves only when the sim says so."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from functools import lru_cache

from labkit.errors import InputError

EPOCH = datetime(2026, 1, 1, tzinfo=UTC)


class ClockError(InputError, ValueError):
    """Time asked to move backwards."""


class Clock:
    def __init__(self) -> None:
        self.seconds = 0.0
        self._stamp: tuple[int, str] = (-1, "")  # the last timestamp written (every write asks)

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ClockError(f"time only moves forward: advance({seconds}) needs seconds >= 0; fix: pass 0 or more")
        self.seconds += seconds

    def timestamp(self) -> str:
        """RFC 3339 in UTC, whole seconds, like metav1.Time."""
        whole = int(self.seconds)
        if self._stamp[0] != whole:
            self._stamp = (whole, (EPOCH + timedelta(seconds=whole)).strftime("%Y-%m-%dT%H:%M:%SZ"))
        return self._stamp[1]


@lru_cache(maxsize=4096)
def parse_timestamp(ts: str) -> float:
    """Seconds since EPOCH for an RFC 3339 timestamp written by Clock."""
    return (datetime.strptime(ts, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC) - EPOCH).total_seconds()
