"""Device health for the kubelet's DRAResourceHealth stream (v1 and v1alpha1).

Every device the driver publishes is HEALTHY unless a lab marks it otherwise with
``HealthBoard.set``. Each stream message carries the complete device list; one is sent on
connect, on every change, and every ``resend_seconds`` so the kubelet never times a device
out to Unknown.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import grpc

HEALTHY, UNHEALTHY, UNKNOWN = "Healthy", "Unhealthy", "Unknown"
_ENUM = {UNKNOWN: 0, HEALTHY: 1, UNHEALTHY: 2}
HEALTH_SERVICES = ["v1.DRAResourceHealth", "v1alpha1.DRAResourceHealth"]


class HealthBoard:
    """Health per (pool, device) of one driver; thread-safe, with change notification."""

    def __init__(self, devices: list[tuple[str, str]], *, timeout_seconds: int = 60):
        self.timeout_seconds = timeout_seconds
        self._cond = threading.Condition()
        self._version = 0
        self._closed = False
        now = int(time.time())
        self._health: dict[tuple[str, str], tuple[str, str, int]] = {d: (HEALTHY, "", now) for d in devices}

    def set(self, pool: str, device: str, health: str, message: str = "") -> None:
        if health not in _ENUM:
            raise ValueError(f"health {health!r}: must be one of {', '.join(_ENUM)}")
        with self._cond:
            if (pool, device) not in self._health:
                raise KeyError(f"device {pool}/{device} is not published by this driver")
            self._health[(pool, device)] = (health, message[:1024], int(time.time()))
            self._version += 1
            self._cond.notify_all()

    def snapshot(self) -> tuple[int, dict[tuple[str, str], tuple[str, str, int]]]:
        with self._cond:
            return self._version, dict(self._health)

    def wait_change(self, version: int, timeout: float) -> bool:
        """Block until the version moves past ``version``, the board closes, or ``timeout``."""
        with self._cond:
            return self._cond.wait_for(lambda: self._version != version or self._closed, timeout)

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    @property
    def closed(self) -> bool:
        return self._closed


def make_health_servicer(board: HealthBoard, pb2: ModuleType, base: type, resend_seconds: float = 10.0) -> Any:
    class Servicer(base):  # type: ignore[misc, valid-type]
        def NodeWatchResources(self, request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
            while context.is_active() and not board.closed:
                version, health = board.snapshot()
                resp = pb2.NodeWatchResourcesResponse()
                for (pool, device), (state, message, updated) in sorted(health.items()):
                    resp.devices.add(device=pb2.DeviceIdentifier(pool_name=pool, device_name=device),
                                     health=_ENUM[state], last_updated_time=updated,
                                     health_check_timeout_seconds=board.timeout_seconds, message=message)
                yield resp
                board.wait_change(version, resend_seconds)

    return Servicer()
