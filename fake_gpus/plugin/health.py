"""Device health: the kubelet's DRAResourceHealth stream (v1 and v1alpha1) and health events.

Every device the driver publishes is HEALTHY unless a lab marks it otherwise with
``HealthBoard.set``. Each stream message carries the complete device list; one is sent on
connect, on every change, and every ``resend_seconds`` so the kubelet never times a device
out to Unknown.

``HealthEvents`` applies the events a lab drops into the plugin's spool (``healthspool``): as
NVIDIA's driver with its NVMLDeviceHealthCheck gate, it re-publishes the device with the event's
taint (``fake_gpus.health_events``), and it sets the device's health on the board from its taints
(a NoSchedule one: Unhealthy; else gpu.nvidia.com/unmonitored: Unknown; else Healthy).
The taints live in the plugin's memory only: a restarted plugin publishes its devices untainted,
as NVIDIA's driver re-reads NVML at start, which does not replay past XIDs (NVIDIA's docs: restart
the driver to bring a recovered GPU back). A ``repair`` event does the same without a restart.
"""

from __future__ import annotations

import copy
import logging
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from fake_gpus.health_events import (
    HEALTHY,
    UNHEALTHY,
    UNKNOWN,
    HealthEvent,
    HealthEventError,
    add_or_update_taint,
    health_of,
    without_health_taints,
)

from . import healthspool

if TYPE_CHECKING:  # the servicer's context type only: the spool side (inject-health) needs no gRPC
    import grpc

log = logging.getLogger("fake_gpus.plugin")

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
    class Servicer(base):  # type: ignore[misc, valid-type]  # base: the generated servicer, per API version
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


GATE = "NVMLDeviceHealthCheck"


class HealthEvents:
    """One driver's health events: its slices' device taints (re-published through ``publish``, None
    with --no-publish) and its HealthBoard (None without --health). ``gate`` is NVMLDeviceHealthCheck:
    off, every event is refused, as NVIDIA's driver then watches no device health. Not thread-safe:
    the plugin's main loop calls ``poll``."""

    def __init__(self, driver: str, node: str, slices: list[dict[str, Any]], *, spool: Path, gate: bool,
                 board: HealthBoard | None = None,
                 publish: Callable[[list[dict[str, Any]]], Any] | None = None):
        self.driver, self.node, self.spool, self.gate = driver, node, spool, gate
        self.slices = [copy.deepcopy(s) for s in slices if (s.get("spec") or {}).get("driver") == driver]
        self.board, self._publish = board, publish

    def _find(self, device: str) -> tuple[str, dict[str, Any]]:
        names = []
        for s in self.slices:
            for d in s["spec"].get("devices") or []:
                if d.get("name") == device:
                    return (s["spec"].get("pool") or {}).get("name", ""), d
                names.append(str(d.get("name")))
        shown = ", ".join(names[:8]) + (f" ... ({len(names)} in all)" if len(names) > 8 else "")
        raise HealthEventError(f"device {device!r} is not published by driver {self.driver} on node {self.node}; "
                               f"its devices: {shown or 'none'}")

    def apply(self, device: str, event: HealthEvent | None) -> str:
        """Taint (or, event None, repair) ``device``; returns what happened. Raises HealthEventError."""
        if not self.gate:
            raise HealthEventError(f"feature gate {GATE} is off: the driver watches no device health; start the "
                                   f"plugin with --feature-gates {GATE}=true")
        pool, dev = self._find(device)
        taints = list(dev.get("taints") or [])
        if event is None:
            new = without_health_taints(taints)
            changed, what = new != taints, "repaired"
        else:
            new, changed = add_or_update_taint(taints, event.taint())
            t = event.taint()
            what = f"{event.describe()}: taint {t['key']}{'=' + t['value'] if 'value' in t else ''}:{t['effect']}"
        if new:
            dev["taints"] = new
        else:
            dev.pop("taints", None)
        health = health_of(new)
        if changed and self._publish is not None:
            self._publish(self.slices)
        if self.board is not None:
            self.board.set(pool, device, health, "" if event is None else event.describe())
        return f"device {device} on node {self.node}: {what}; health {health}"

    def poll(self) -> int:
        """Handle the spooled events; returns how many."""
        done = 0
        try:
            waiting = healthspool.pending(self.spool)
        except OSError as exc:  # keep serving the kubelet
            log.warning("health events: cannot read spool %s: %s", self.spool, exc)
            return 0
        for event_id, path in waiting:
            try:
                doc = healthspool.read_event(path)
                device, event = healthspool.parse_event(doc)
                ok, message = True, self.apply(device, event)
                log.info("health event: %s", message)
            except HealthEventError as exc:
                ok, message = False, f"health event refused: {exc}"
                log.warning("%s (%s)", message, path.name)
            except FileNotFoundError:
                continue
            except Exception as exc:  # publishing failed (KubeError, ...): answer, keep serving
                ok, message = False, f"health event failed: {exc}"
                log.exception("health event %s failed", path.name)
            try:
                path.unlink(missing_ok=True)
                healthspool.answer(self.spool, event_id, ok, message)
            except OSError as exc:
                log.warning("health events: cannot answer %s: %s", path.name, exc)
            done += 1
        return done
