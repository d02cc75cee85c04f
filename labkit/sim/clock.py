"""Simulated time: starts at a fixed instant, moves only when the sim says so."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from labkit.errors import InputError

EPOCH = datetime(2026, 1, 1, tzinfo=UTC)


class ClockError(InputError, ValueError):
    """Time asked to move backwards."""


class Clock:
    def __init__(self) -> None:
        self.seconds = 0.0

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ClockError(f"time only moves forward: advance({seconds}) needs seconds >= 0; fix: pass 0 or more")
        self.seconds += seconds

    def timestamp(self) -> str:
        """RFC 3339 in UTC, whole seconds, like metav1.Time."""
        return (EPOCH + timedelta(seconds=int(self.seconds))).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_timestamp(ts: str) -> float:
    """Seconds since EPOCH for an RFC 3339 timestamp written by Clock."""
    return (datetime.strptime(ts, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC) - EPOCH).total_seconds()
