"""Prepare / unprepare claims: the driver logic behind the gRPC service.

No gRPC here, so the embedded simulator and tests can call it directly. Safe for
concurrent calls: one lock per claim UID serialises work on the same claim, and the
checkpoint has its own lock.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import cdi
from .checkpoint import Checkpoint, PreparedClaim, PreparedDevice
from .claims import ClaimSource, ClaimSourceError
from .devices import AllocatedDevice, ClaimError, DeviceIndex, allocated_devices

log = logging.getLogger("fake_gpus.plugin")


def _prepared_devices(driver: str, claim_uid: str, devices: list[AllocatedDevice]) -> list[PreparedDevice]:
    """One entry per (pool, device, shareID), listing every request that got it."""
    out: dict[tuple[str, str, str | None], PreparedDevice] = {}
    for dev in devices:
        key = (dev.pool, dev.name, dev.share_id)
        entry = out.get(key)
        if entry is None:
            entry = out[key] = PreparedDevice(request_names=[], pool_name=dev.pool, device_name=dev.name,
                                              cdi_device_ids=cdi.claim_cdi_ids(driver, claim_uid, dev),
                                              share_id=dev.share_id)
        if dev.request_name not in entry.request_names:
            entry.request_names.append(dev.request_name)
    return list(out.values())


class DriverState:
    def __init__(self, driver: str, claims: ClaimSource, *, cdi_dir: str | Path, checkpoint_path: str | Path,
                 slices: list[dict[str, Any]] | None = None):
        self.driver = driver
        self.claims = claims
        self.cdi_dir = Path(cdi_dir)
        self.checkpoint = Checkpoint(checkpoint_path, driver)
        self._index = DeviceIndex(slices or [])
        self._slices = list(slices or [])
        self._locks: dict[str, threading.Lock] = {}
        self._locks_guard = threading.Lock()
        #: the driver's own check of a claim before it is prepared: the error for the kubelet, or None
        self.precheck: Callable[[dict[str, Any]], str | None] | None = None
        restored = self.checkpoint.all()
        if restored:
            log.info("restored %d prepared claim(s) from %s", len(restored), self.checkpoint.path)
        for uid, prepared in restored.items():  # e.g. /var/run/cdi is a tmpfs emptied by a reboot
            if prepared.cdi_spec and not cdi.spec_path(self.cdi_dir, driver, uid).exists():
                cdi.write_spec(self.cdi_dir, driver, uid, prepared.cdi_spec)
                log.info("claim %s/%s (uid %s): rewrote missing CDI spec", prepared.namespace, prepared.name, uid)

    def set_slices(self, slices: list[dict[str, Any]]) -> None:
        """The node's published slices: where device attributes for the env come from."""
        self._index = DeviceIndex(slices)
        self._slices = list(slices)

    def devices(self) -> list[tuple[str, str]]:
        """(pool, device) of every device this driver publishes."""
        return [((s["spec"].get("pool") or {}).get("name", ""), d.get("name", ""))
                for s in self._slices if (s.get("spec") or {}).get("driver") == self.driver
                for d in s["spec"].get("devices") or []]

    def _lock(self, uid: str) -> threading.Lock:
        with self._locks_guard:
            return self._locks.setdefault(uid, threading.Lock())

    def prepare(self, namespace: str, name: str, uid: str, *, save: bool = True) -> PreparedClaim:
        """Prepare one claim; idempotent. Raises ClaimError with a message for the kubelet.

        save=False leaves writing the checkpoint to a later ``checkpoint.flush()`` (one write
        per gRPC call instead of one per claim)."""
        ref = f"{namespace}/{name}"
        with self._lock(uid):
            done = self.checkpoint.get(uid)
            if done is not None:
                if save:
                    self.checkpoint.flush()  # it may come from a batch not yet written
                if done.cdi_spec and not cdi.spec_path(self.cdi_dir, self.driver, uid).exists():
                    cdi.write_spec(self.cdi_dir, self.driver, uid, done.cdi_spec)
                    log.info("claim %s (uid %s): CDI spec was missing, rewritten", ref, uid)
                return done
            try:
                claim = self.claims.get_claim(namespace, name)
            except ClaimSourceError as exc:
                raise ClaimError(f"claim {ref}: {exc}") from exc
            if claim is None:
                raise ClaimError(f"claim {ref} not found in the API server; it was deleted or the name is wrong")
            got_uid = (claim.get("metadata") or {}).get("uid")
            if got_uid != uid:
                raise ClaimError(f"claim {ref} got replaced: the API server has uid {got_uid}, "
                                 f"the kubelet asked for uid {uid}")
            if self.precheck is not None:
                why = self.precheck(claim)
                if why:
                    raise ClaimError(f"claim {ref}: {why}")
            devices = allocated_devices(claim, self.driver, self._index)
            spec = cdi.build_spec(claim, self.driver, devices) if devices else None
            if spec is not None:
                cdi.write_spec(self.cdi_dir, self.driver, uid, spec)
                self._write_common_spec(devices[0].pool)
            prepared = PreparedClaim(namespace=namespace, name=name, uid=uid,
                                     devices=_prepared_devices(self.driver, uid, devices), cdi_spec=spec)
            self.checkpoint.put(prepared, save=save)
            log.info("prepared claim %s (uid %s): %s", ref, uid,
                     ", ".join(f"{d.pool_name}/{d.device_name}" for d in prepared.devices) or "no devices")
            return prepared

    def _write_common_spec(self, node: str) -> None:
        """The example driver's per-node `common` CDI device (written once)."""
        common = cdi.common_spec(self.driver, node)
        path = cdi.common_spec_path(self.cdi_dir, self.driver)
        if common is not None and not path.exists():
            cdi.write_spec_file(path, common)

    def unprepare(self, namespace: str, name: str, uid: str, *, save: bool = True) -> None:
        """Remove the claim's CDI spec and checkpoint entry; unknown claims are fine."""
        with self._lock(uid):
            cdi.remove_spec(self.cdi_dir, self.driver, uid)
            if self.checkpoint.remove(uid, save=save):
                log.info("unprepared claim %s/%s (uid %s)", namespace, name, uid)

    def prepared(self) -> dict[str, PreparedClaim]:
        return self.checkpoint.all()
