"""Look up allocated devices in the node's ResourceSlices and read their attributes.

ResourceSlice attribute and capacity names may be bare (``uuid``) or qualified with the
driver's domain (``gpu.nvidia.com/uuid``); both spellings mean the same thing.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from fake_gpus.errors import InputError

NIC_TYPES = frozenset({"nic", "dpu", "rdma", "net", "network"})


@dataclass(frozen=True)
class AllocatedDevice:
    """One allocation result of a claim, joined with the device it names in the slices."""

    request: str  # as in the allocation result: "req" or "req/sub"
    driver: str
    pool: str
    name: str
    share_id: str | None = None
    device: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @property
    def request_name(self) -> str:
        """The claim-level request name (a firstAvailable subrequest suffix stripped)."""
        return self.request.split("/", 1)[0]

    def attribute(self, name: str) -> Any:
        return attribute_value(self.device, name, self.driver)

    def capacity(self, name: str) -> str | None:
        return capacity_value(self.device, name, self.driver)

    @property
    def kind(self) -> str:
        """"nic" for network devices, otherwise the driver's ``type`` ("gpu", "mig", ...)."""
        dtype = str(self.attribute("type") or "gpu")
        return "nic" if dtype.lower() in NIC_TYPES else dtype


def _lookup(mapping: dict[str, Any] | None, name: str, driver: str) -> Any:
    if not mapping:
        return None
    if name in mapping:
        return mapping[name]
    return mapping.get(f"{driver}/{name}")


def attribute_value(device: dict[str, Any], name: str, driver: str) -> Any:
    """The plain value of a device attribute (``{"string": "x"}`` -> ``"x"``), or None."""
    raw = _lookup(device.get("attributes"), name, driver)
    if not isinstance(raw, dict):
        return None
    for key in ("string", "int", "bool", "version"):
        if key in raw:
            return raw[key]
    for key in ("strings", "ints", "bools", "versions"):
        if key in raw:
            return list(raw[key])
    return None


def capacity_value(device: dict[str, Any], name: str, driver: str) -> str | None:
    raw = _lookup(device.get("capacity"), name, driver)
    if isinstance(raw, dict) and "value" in raw:
        return str(raw["value"])
    return None


class DeviceIndex:
    """(driver, pool, device) -> device entry of the slices a node publishes."""

    def __init__(self, slices: Iterable[dict[str, Any]]):
        self._devices: dict[tuple[str, str, str], dict[str, Any]] = {}
        for sl in slices:
            spec = sl.get("spec") or {}
            driver = spec.get("driver", "")
            pool = (spec.get("pool") or {}).get("name", "")
            for dev in spec.get("devices") or []:
                self._devices[(driver, pool, dev.get("name", ""))] = dev

    def get(self, driver: str, pool: str, name: str) -> dict[str, Any] | None:
        return self._devices.get((driver, pool, name))

    def __len__(self) -> int:
        return len(self._devices)


class ClaimError(InputError, ValueError):
    """A claim that cannot be prepared; the message is sent back to the kubelet."""


def allocated_devices(claim: dict[str, Any], driver: str, index: DeviceIndex) -> list[AllocatedDevice]:
    """The claim's allocation results for ``driver``, each joined with its slice entry.

    Raises ClaimError when the claim is not allocated or names a device the node does
    not publish.
    """
    meta = claim.get("metadata") or {}
    ref = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
    allocation = (claim.get("status") or {}).get("allocation")
    if not allocation:
        raise ClaimError(f"claim {ref} is not allocated (status.allocation is missing); "
                         "the scheduler must allocate it before the kubelet prepares it")
    out: list[AllocatedDevice] = []
    results = (allocation.get("devices") or {}).get("results") or []
    for i, res in enumerate(results):
        if res.get("driver") != driver:
            continue
        pool, name = res.get("pool", ""), res.get("device", "")
        dev = index.get(driver, pool, name)
        if dev is None:
            raise ClaimError(
                f"claim {ref}: status.allocation.devices.results[{i}] names device {pool}/{name} "
                f"of driver {driver}, which this node does not publish; re-create the claim "
                "so it is allocated again")
        out.append(AllocatedDevice(request=res.get("request", ""), driver=driver, pool=pool,
                                   name=name, share_id=res.get("shareID") or None, device=dev))
    return out
