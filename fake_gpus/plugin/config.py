"""Opaque device configuration (NVIDIA's ``resource.nvidia.com/v1beta1`` kinds) for prepared devices.

The allocation result lists the configs that apply (``source: FromClass`` entries first,
then ``FromClaim``); for each device the last entry naming its request (or naming no
request) wins, as in NVIDIA's driver. Only entries whose ``opaque.driver`` is this driver are
read. The fake driver validates the settings and passes them to the container as env; it
does not need the driver feature gates (TimeSlicingSettings, MPSSupport) a real node would.
"""

from __future__ import annotations

from typing import Any

from .devices import AllocatedDevice, ClaimError

API_VERSION = "resource.nvidia.com/v1beta1"
KIND_FOR_TYPE = {"gpu": "GpuConfig", "mig": "MigDeviceConfig", "vfio": "VfioDeviceConfig"}
STRATEGIES = ("TimeSlicing", "MPS")
INTERVALS = ("Default", "Short", "Medium", "Long")


def _applies(entry: dict[str, Any], dev: AllocatedDevice) -> bool:
    requests = entry.get("requests") or []
    return not requests or dev.request in requests or dev.request_name in requests


def device_config(claim: dict[str, Any], driver: str, dev: AllocatedDevice) -> tuple[int, dict[str, Any]] | None:
    """(index in status.allocation.devices.config, parameters) of the config for ``dev``, or None."""
    configs = (((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("config") or []
    found = None
    for i, entry in enumerate(configs):
        opaque = entry.get("opaque") or {}
        if opaque.get("driver") == driver and _applies(entry, dev):
            found = (i, opaque.get("parameters"))
    return found


def config_env(claim: dict[str, Any], driver: str, dev: AllocatedDevice, prefix: str) -> dict[str, str]:
    """Env for the device's config (``<prefix>SHARING_STRATEGY`` ...); ClaimError if it is invalid."""
    found = device_config(claim, driver, dev)
    if found is None:
        return {}
    i, params = found
    meta = claim.get("metadata") or {}
    where = f"claim {meta.get('namespace', '')}/{meta.get('name', '')}: status.allocation.devices.config[{i}].opaque.parameters"
    if not isinstance(params, dict):
        raise ClaimError(f"{where}: must be an object with apiVersion and kind")
    if params.get("apiVersion") != API_VERSION:
        raise ClaimError(f"{where}.apiVersion: {params.get('apiVersion')!r} is not supported; use {API_VERSION}")
    kind = params.get("kind")
    want = KIND_FOR_TYPE.get(dev.kind)
    if kind not in KIND_FOR_TYPE.values():
        raise ClaimError(f"{where}.kind: {kind!r} is not supported; use one of {', '.join(KIND_FOR_TYPE.values())}")
    if kind != want:
        raise ClaimError(f"{where}.kind: {kind} cannot configure device {dev.name} of type {dev.kind}; "
                         f"use {want or 'no config'} for it")
    env: dict[str, str] = {prefix + "CONFIG_KIND": kind}
    if kind == "VfioDeviceConfig":
        return env
    sharing = params.get("sharing")
    if sharing is None:
        return env
    if not isinstance(sharing, dict):
        raise ClaimError(f"{where}.sharing: must be an object with a strategy")
    strategy = sharing.get("strategy")
    if strategy not in STRATEGIES:
        raise ClaimError(f"{where}.sharing.strategy: {strategy!r} is not supported; use TimeSlicing or MPS")
    if strategy == "TimeSlicing" and kind == "MigDeviceConfig":
        raise ClaimError(f"{where}.sharing.strategy: TimeSlicing does not apply to MIG devices; use MPS")
    env[prefix + "SHARING_STRATEGY"] = strategy
    if strategy == "TimeSlicing":
        interval = (sharing.get("timeSlicingConfig") or {}).get("interval", "Default")
        if interval not in INTERVALS:
            raise ClaimError(f"{where}.sharing.timeSlicingConfig.interval: {interval!r} is not supported; "
                             f"use one of {', '.join(INTERVALS)}")
        env[prefix + "TIMESLICE_INTERVAL"] = interval
    else:
        mps = sharing.get("mpsConfig") or {}
        pct = mps.get("defaultActiveThreadPercentage")
        if pct is not None:
            if not isinstance(pct, int) or isinstance(pct, bool) or not 1 <= pct <= 100:
                raise ClaimError(f"{where}.sharing.mpsConfig.defaultActiveThreadPercentage: {pct!r} must be "
                                 "an integer from 1 to 100")
            env[prefix + "MPS_ACTIVE_THREAD_PERCENTAGE"] = str(pct)
        limit = mps.get("defaultPinnedDeviceMemoryLimit")
        if limit is not None:
            env[prefix + "MPS_PINNED_DEVICE_MEMORY_LIMIT"] = str(limit)
    return env
