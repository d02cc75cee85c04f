"""Devices already in use, as kube-scheduler builds it from allocated claims.

Results with ``adminAccess: true`` are skipped (they do not make a device busy). With consumable
capacity on, results carrying a ``shareID`` are shared allocations: their ``consumedCapacity`` is
summed per device; every other result marks its device as dedicated.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from labkit.allocator.quantities import qvalue

__all__ = ["AllocatedState", "DeviceID"]

DeviceID = tuple[str, str, str]  # (driver, pool, device)


@dataclass
class AllocatedState:
    #: dedicated device -> number of results holding it (so that remove() is exact)
    devices: dict[DeviceID, int] = field(default_factory=dict)
    #: (driver, pool, device, shareID) -> count
    shared: dict[tuple[str, str, str, str], int] = field(default_factory=dict)
    #: device -> capacity name -> summed consumed capacity
    capacity: dict[DeviceID, dict[str, Fraction]] = field(default_factory=dict)
    #: device -> number of shared results on it (kept in step with ``shared``)
    shared_devices: dict[DeviceID, int] = field(default_factory=dict)
    #: device -> "ns/name" of claims holding it (for explanations)
    owners: dict[DeviceID, list[str]] = field(default_factory=dict)
    #: (driver, pool) -> how many results on its devices were added or removed so far (a cache
    #: of what is in use in one pool stays valid while its count does)
    changes: dict[tuple[str, str], int] = field(default_factory=dict)
    consumable_capacity: bool = True

    @classmethod
    def from_claims(cls, claims: Iterable[dict[str, Any]], *, consumable_capacity: bool = True) -> AllocatedState:
        state = cls(consumable_capacity=consumable_capacity)
        for claim in claims:
            allocation = ((claim or {}).get("status") or {}).get("allocation")
            if allocation:
                meta = claim.get("metadata") or {}
                state.add(allocation, owner=f"{meta.get('namespace', 'default')}/{meta.get('name', '')}")
        return state

    # -- incremental updates -------------------------------------------------------------------
    def add(self, allocation_result: dict[str, Any], owner: str | None = None) -> None:
        for result, device_id, share in self._results(allocation_result):
            if owner:
                self.owners.setdefault(device_id, []).append(owner)
            if share is not None:
                key = (*device_id, share)
                self.shared[key] = self.shared.get(key, 0) + 1
                self.shared_devices[device_id] = self.shared_devices.get(device_id, 0) + 1
                consumed = result.get("consumedCapacity")
                if consumed is not None:
                    per_device = self.capacity.setdefault(device_id, {})
                    for name, value in consumed.items():
                        per_device[name] = per_device.get(name, Fraction(0)) + qvalue(value)
            else:
                self.devices[device_id] = self.devices.get(device_id, 0) + 1

    def remove(self, allocation_result: dict[str, Any], owner: str | None = None) -> None:
        for result, device_id, share in self._results(allocation_result):
            if owner and owner in self.owners.get(device_id, []):
                self.owners[device_id].remove(owner)
                if not self.owners[device_id]:
                    del self.owners[device_id]
            if share is not None:
                key = (*device_id, share)
                if key in self.shared:
                    self.shared[key] -= 1
                    if not self.shared[key]:
                        del self.shared[key]
                    self.shared_devices[device_id] -= 1
                    if not self.shared_devices[device_id]:
                        del self.shared_devices[device_id]
                consumed = result.get("consumedCapacity")
                if consumed is not None and device_id in self.capacity:
                    per_device = self.capacity[device_id]
                    for name, value in consumed.items():
                        if name in per_device:
                            per_device[name] -= qvalue(value)
                    if all(v == 0 for v in per_device.values()):
                        del self.capacity[device_id]
            elif device_id in self.devices:
                self.devices[device_id] -= 1
                if not self.devices[device_id]:
                    del self.devices[device_id]

    def _results(self, allocation_result: dict[str, Any]) -> Iterator[tuple[dict[str, Any], DeviceID, str | None]]:
        changes = self.changes
        for result in ((allocation_result or {}).get("devices") or {}).get("results") or []:
            if result.get("adminAccess"):
                continue
            device_id = (result.get("driver", ""), result.get("pool", ""), result.get("device", ""))
            pool = device_id[:2]
            changes[pool] = changes.get(pool, 0) + 1
            share = result.get("shareID") if self.consumable_capacity else None
            yield result, device_id, share

    # -- queries -------------------------------------------------------------------------------
    def is_dedicated(self, device_id: DeviceID) -> bool:
        return device_id in self.devices

    def shared_device_ids(self) -> dict[DeviceID, int]:
        """Devices with at least one shared allocation (a live view, not a copy)."""
        return self.shared_devices

    def is_allocated(self, device_id: DeviceID) -> bool:
        """``IsDeviceAllocated``: dedicated, shared, or with aggregated capacity."""
        return device_id in self.devices or device_id in self.capacity or device_id in self.shared_devices
