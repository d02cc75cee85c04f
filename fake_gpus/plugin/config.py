"""Opaque device configuration (NVIDIA's ``resource.nvidia.com/v1beta1`` kinds) for prepared devices.

The allocation result lists the configs that apply (``source: FromClass`` entries first,
then ``FromClaim``); for each device the last entry naming its request (or naming no
request) wins, as in NVIDIA's driver. Only entries whose ``opaque.driver`` is this driver are
read. Validation follows NVIDIA's api/nvidia.com/resource/v1beta1 (strict decoding: unknown
fields are refused; GpuConfig sharing TimeSlicing|MPS with timeSlicingConfig.interval
Default|Short|Medium|Long or mpsConfig; MigDeviceConfig sharing TimeSlicing (no interval: the
kind has no timeSlicingConfig) or MPS; VfioDeviceConfig iommu.backendPolicy
LegacyOnly|PreferIommuFD), with NVIDIA's reasons, as a driver deployed with the
TimeSlicingSettings and MPSSupport feature gates on (what NVIDIA's quickstart asks for).
"""

from __future__ import annotations

from typing import Any

from .devices import AllocatedDevice, ClaimError

API_VERSION = "resource.nvidia.com/v1beta1"
KIND_FOR_TYPE = {"gpu": "GpuConfig", "mig": "MigDeviceConfig", "vfio": "VfioDeviceConfig"}
STRATEGIES = ("TimeSlicing", "MPS")
INTERVALS = ("Default", "Short", "Medium", "Long")
IOMMU_POLICIES = ("LegacyOnly", "PreferIommuFD")
_FIELDS = {  # what NVIDIA's types define (strict decoding refuses anything else)
    "GpuConfig": {"apiVersion", "kind", "sharing"},
    "MigDeviceConfig": {"apiVersion", "kind", "sharing"},
    "VfioDeviceConfig": {"apiVersion", "kind", "iommu"},
}
_SHARING_FIELDS = {"GpuConfig": {"strategy", "timeSlicingConfig", "mpsConfig"},
                   "MigDeviceConfig": {"strategy", "mpsConfig"}}
_MPS_FIELDS = {"defaultActiveThreadPercentage", "defaultPinnedDeviceMemoryLimit", "defaultPerDevicePinnedMemoryLimit"}
_BINARY = {"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}


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


def _unknown(obj: dict[str, Any], allowed: set[str], where: str, prefix: str = "") -> None:
    for k in obj:
        if k not in allowed:
            raise ClaimError(f'{where}: strict decoding error: unknown field "{prefix}{k}"')


def _quantity_bytes(v: Any) -> int | None:
    s = str(v).strip()
    for suffix in sorted(_BINARY, key=len, reverse=True):
        if s.endswith(suffix) and s[: -len(suffix)].isdigit():
            return int(s[: -len(suffix)]) * _BINARY[suffix]
    return int(s) if s.isdigit() else None


def _vfio_env(dev: AllocatedDevice, prefix: str, policy: str, api_device: bool) -> dict[str, str]:
    """What NVIDIA's VFIO CDI handler gives a container, as env: the IOMMU backend it uses
    (iommufd only when preferred and the host has it) and, with enableAPIDevice, the API device
    node it injects (/dev/iommu or the legacy container /dev/vfio/vfio)."""
    iommufd = policy == "PreferIommuFD" and dev.attribute("iommuFDEnabled") is True
    env = {prefix + "IOMMU_BACKEND_POLICY": policy, prefix + "IOMMU_BACKEND": "iommufd" if iommufd else "legacy"}
    if api_device:
        env[prefix + "IOMMU_API_DEVICE"] = "/dev/iommu" if iommufd else "/dev/vfio/vfio"
    return env


def config_env(claim: dict[str, Any], driver: str, dev: AllocatedDevice, prefix: str) -> dict[str, str]:
    """Env for the device's config (``<prefix>SHARING_STRATEGY`` ...); ClaimError if NVIDIA's
    driver would refuse it (the message carries NVIDIA's reason)."""
    found = device_config(claim, driver, dev)
    if found is None:  # NVIDIA's defaults: VfioDeviceConfig LegacyOnly without the API device
        return _vfio_env(dev, prefix, "LegacyOnly", False) if dev.kind == "vfio" else {}
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
    _unknown(params, _FIELDS[kind], where)
    if kind != want:
        raise ClaimError(f"{where}.kind: {kind} cannot configure device {dev.name} of type {dev.kind}; "
                         f"use {want or 'no config'} for it")
    env: dict[str, str] = {prefix + "CONFIG_KIND": kind}
    if kind == "VfioDeviceConfig":
        iommu = params.get("iommu") or {}
        if not isinstance(iommu, dict):
            raise ClaimError(f"{where}.iommu: must be an object")
        _unknown(iommu, {"backendPolicy", "enableAPIDevice"}, where, "iommu.")
        policy = iommu.get("backendPolicy") or "LegacyOnly"
        if policy not in IOMMU_POLICIES:
            raise ClaimError(f"{where}.iommu.backendPolicy: unknown IOMMU backend policy: {policy}, supported "
                             f"IOMMU backend policies: {', '.join(IOMMU_POLICIES)}")
        api = iommu.get("enableAPIDevice")
        if api is not None and not isinstance(api, bool):
            raise ClaimError(f"{where}.iommu.enableAPIDevice: {api!r} must be true or false")
        env.update(_vfio_env(dev, prefix, policy, bool(api)))
        return env
    sharing = params.get("sharing")
    if sharing is None:
        return env
    if not isinstance(sharing, dict):
        raise ClaimError(f"{where}.sharing: must be an object with a strategy")
    _unknown(sharing, _SHARING_FIELDS[kind], where, "sharing.")
    strategy = sharing.get("strategy")
    if strategy == "MPS" and dev.device.get("allowMultipleAllocations"):
        # the driver runs with --consumable-shares (only then are its devices multi-allocatable)
        raise ClaimError(f"{where}.sharing.strategy: MPS sharing is not supported when consumable shares is enabled")
    if strategy not in STRATEGIES:
        raise ClaimError(f"{where}.sharing.strategy: unknown GPU sharing strategy: {strategy or ''}, supported GPU "
                         f"sharing strategies: {', '.join(STRATEGIES)}")
    env[prefix + "SHARING_STRATEGY"] = strategy
    if strategy == "TimeSlicing":
        if sharing.get("mpsConfig") is not None:
            raise ClaimError(f"{where}.sharing: cannot use MpsConfig with the 'TimeSlicing' strategy")
        if kind == "GpuConfig":  # MIG devices take TimeSlicing without an interval
            interval = (sharing.get("timeSlicingConfig") or {}).get("interval") or "Default"
            if interval not in INTERVALS:
                raise ClaimError(f"{where}.sharing.timeSlicingConfig.interval: unknown time-slice interval: "
                                 f"{interval}, supported time-slice intervals: {', '.join(INTERVALS)}")
            env[prefix + "TIMESLICE_INTERVAL"] = interval
        return env
    if sharing.get("timeSlicingConfig") is not None:
        raise ClaimError(f"{where}.sharing: cannot use TimeSlicingConfig with the 'MPS' strategy")
    mps = sharing.get("mpsConfig") or {}
    if not isinstance(mps, dict):
        raise ClaimError(f"{where}.sharing.mpsConfig: must be an object")
    _unknown(mps, _MPS_FIELDS, where, "sharing.mpsConfig.")
    pct = mps.get("defaultActiveThreadPercentage")
    if pct is not None:
        if not isinstance(pct, int) or isinstance(pct, bool):
            raise ClaimError(f"{where}.sharing.mpsConfig.defaultActiveThreadPercentage: {pct!r} must be an integer")
        if pct < 0:
            raise ClaimError(f"{where}.sharing.mpsConfig: active thread percentage must not be negative")
        if pct > 100:
            raise ClaimError(f"{where}.sharing.mpsConfig: active thread percentage must not be greater than 100")
        env[prefix + "MPS_ACTIVE_THREAD_PERCENTAGE"] = str(pct)
    limit = mps.get("defaultPinnedDeviceMemoryLimit")
    if limit is not None:
        size = _quantity_bytes(limit)
        if size is None:
            raise ClaimError(f"{where}.sharing.mpsConfig.defaultPinnedDeviceMemoryLimit: {limit!r} is not a quantity")
        if size // (1 << 20) <= 0:
            raise ClaimError(f"{where}.sharing.mpsConfig: invalid limit: default value set too low: {limit}")
        env[prefix + "MPS_PINNED_DEVICE_MEMORY_LIMIT"] = str(limit)
    return env
