"""Simulated time: starts at a fixed instant, moves only when the sim says so."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

EPOCH = datetime(2026, 1, 1, tzinfo=UTC)


class Clock:
    def __init__(self) -> None:
        self.seconds = 0.0

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("time only moves forward: seconds must be >= 0")
        self.seconds += seconds

    def timestamp(self) -> str:
        """RFC 3339 in UTC, whole seconds, like metav1.Time."""
        return (EPOCH + timedelta(seconds=int(self.seconds))).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_timestamp(ts: str) -> float:
    """Seconds since EPOCH for an RFC 3339 timestamp written by Clock."""
    return (datetime.strptime(ts, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC) - EPOCH).total_seconds()
