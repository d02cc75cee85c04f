"""CDI specs for prepared claims, and the environment a container gets from them.

One transient spec per claim, ``<vendor>-<class>_<claimUID>.yaml`` in the CDI dir, with
kind ``k8s.<driver>/claim`` (NVIDIA's naming). Every allocated device becomes a CDI device
``<claimUID>-<device>`` (``-<shareID>`` appended for shared allocations, which keeps names
unique when one device is allocated twice). Per-device env (``FAKE_GPU_<i>_*``,
``FAKE_NIC_<i>_*``) sits on the device; claim-wide lists (``NVIDIA_VISIBLE_DEVICES``,
``FAKE_GPU_DEVICES``, ...) sit in the spec-level containerEdits, which the runtime applies
whenever any device of the spec is injected. ``container_env`` is the union of both: what
a container that references the whole claim sees. The embedded simulator uses it directly.
"""

from __future__ import annotations

import os
import re
import tempfile
import uuid
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import yaml

from .config import config_env
from .devices import AllocatedDevice, DeviceIndex, allocated_devices

CDI_CLASS = "claim"
_Dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
_NAME_RE = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9_.:-]*[A-Za-z0-9])?$")
_VENDOR_RE = re.compile(r"^[A-Za-z]([A-Za-z0-9_.-]*[A-Za-z0-9])?$")


def cdi_vendor(driver: str) -> str:
    return f"k8s.{driver}"


def cdi_kind(driver: str) -> str:
    return f"{cdi_vendor(driver)}/{CDI_CLASS}"


def cdi_device_name(claim_uid: str, device: str, share_id: str | None = None) -> str:
    name = f"{claim_uid}-{device}"
    if share_id:
        name += f"-{share_id}"
    if not _NAME_RE.match(name):
        raise ValueError(f"CDI device name {name!r} is invalid: use letters, digits, '_', '.', ':', '-' "
                         "and start and end with a letter or digit")
    return name


def cdi_device_id(driver: str, name: str) -> str:
    return f"{cdi_kind(driver)}={name}"


def spec_path(cdi_dir: str | os.PathLike[str], driver: str, claim_uid: str) -> Path:
    return Path(cdi_dir) / f"{cdi_vendor(driver)}-{CDI_CLASS}_{claim_uid}.yaml"


def _fake_uuid(prefix: str, dev: AllocatedDevice) -> str:
    """Stable UUID for devices that publish none (dynamically created MIG devices)."""
    return f"{prefix}-{uuid.uuid5(uuid.NAMESPACE_URL, f'{dev.driver}/{dev.pool}/{dev.name}')}"


def device_uuid(dev: AllocatedDevice) -> str:
    value = dev.attribute("uuid")
    if value:
        return str(value)
    return _fake_uuid("MIG" if dev.kind == "mig" else "GPU", dev)


def _put(env: dict[str, str], key: str, value: Any) -> None:
    if value is not None and value != "":
        env[key] = str(value)


def _first(dev: AllocatedDevice, *names: str) -> Any:
    for n in names:
        value = dev.attribute(n)
        if value is not None and value != "":
            return value
    return None


_NUMA = ("resource.kubernetes.io/numaNode", "numaNode", "topology.fake-gpus.dev/numaNode", "numa")


def _gpu_env(i: int, dev: AllocatedDevice) -> dict[str, str]:
    p = f"FAKE_GPU_{i}_"
    env: dict[str, str] = {}
    _put(env, p + "NAME", dev.name)
    _put(env, p + "POOL", dev.pool)
    _put(env, p + "TYPE", dev.kind)
    _put(env, p + "UUID", device_uuid(dev))
    _put(env, p + "PRODUCT", dev.attribute("productName"))
    _put(env, p + "ARCHITECTURE", dev.attribute("architecture"))
    _put(env, p + "MEMORY", dev.capacity("memory"))
    _put(env, p + "MIG_PROFILE", dev.attribute("profile"))
    _put(env, p + "PARENT_UUID", dev.attribute("parentUUID"))
    _put(env, p + "PCIE_ROOT", dev.attribute("resource.kubernetes.io/pcieRoot"))
    _put(env, p + "PCI_BUS_ID", dev.attribute("resource.kubernetes.io/pciBusID"))
    _put(env, p + "NUMA_NODE", _first(dev, *_NUMA))
    _put(env, p + "NVLINK_DOMAIN", _first(dev, "topology.fake-gpus.dev/nvlinkDomain", "nvlinkDomain"))
    _put(env, p + "REQUEST", dev.request_name)
    _put(env, p + "SHARE_ID", dev.share_id)
    return env


def _nic_env(i: int, dev: AllocatedDevice) -> dict[str, str]:
    p = f"FAKE_NIC_{i}_"
    env: dict[str, str] = {}
    _put(env, p + "NAME", dev.name)
    _put(env, p + "POOL", dev.pool)
    _put(env, p + "TYPE", dev.attribute("type"))
    _put(env, p + "PRODUCT", dev.attribute("productName"))
    _put(env, p + "MODEL", dev.attribute("model"))
    _put(env, p + "INTERFACE", _first(dev, "interfaceName", "ifName"))
    _put(env, p + "LINK_TYPE", dev.attribute("linkType"))
    _put(env, p + "LINK_SPEED_GBPS", dev.attribute("linkSpeedGbps"))
    _put(env, p + "BANDWIDTH", dev.capacity("bandwidthGbps") or dev.capacity("bandwidth"))
    _put(env, p + "PCIE_ROOT", dev.attribute("resource.kubernetes.io/pcieRoot"))
    _put(env, p + "PCI_BUS_ID", dev.attribute("resource.kubernetes.io/pciBusID"))
    _put(env, p + "NUMA_NODE", _first(dev, *_NUMA))
    _put(env, p + "REQUEST", dev.request_name)
    _put(env, p + "SHARE_ID", dev.share_id)
    return env


def _dedup(values: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(values))


def device_envs(devices: Sequence[AllocatedDevice], claim: dict[str, Any] | None = None,
                driver: str = "") -> tuple[list[dict[str, str]], dict[str, str]]:
    """Per-device env (same order as ``devices``) and the claim-wide env. With ``claim``, the
    opaque configs of its allocation are validated and added (raises ClaimError)."""
    per_device: list[dict[str, str]] = []
    gpus: list[AllocatedDevice] = []
    nics: list[AllocatedDevice] = []
    for dev in devices:
        if dev.kind == "nic":
            env = _nic_env(len(nics), dev)
            if claim is not None:
                env.update(config_env(claim, driver, dev, f"FAKE_NIC_{len(nics)}_"))
            nics.append(dev)
        else:
            env = _gpu_env(len(gpus), dev)
            if claim is not None:
                env.update(config_env(claim, driver, dev, f"FAKE_GPU_{len(gpus)}_"))
            gpus.append(dev)
        per_device.append(env)
    common: dict[str, str] = {}
    if gpus:
        common["NVIDIA_VISIBLE_DEVICES"] = ",".join(_dedup(device_uuid(d) for d in gpus))
        common["FAKE_GPU_DEVICES"] = ",".join(_dedup(d.name for d in gpus))
        common["FAKE_GPU_COUNT"] = str(len(gpus))
    if nics:
        common["FAKE_NIC_DEVICES"] = ",".join(_dedup(d.name for d in nics))
        common["FAKE_NIC_COUNT"] = str(len(nics))
    return per_device, common


def _claim_env(claim: dict[str, Any], driver: str) -> dict[str, str]:
    meta = claim.get("metadata") or {}
    return {
        "FAKE_DRA_DRIVER": driver,
        "FAKE_DRA_CLAIM": f"{meta.get('namespace', '')}/{meta.get('name', '')}",
        "FAKE_DRA_CLAIM_UID": str(meta.get("uid", "")),
    }


def container_env(claim: dict[str, Any], driver: str, slices: list[dict[str, Any]]) -> dict[str, str]:
    """The env a container gets for all of ``claim``'s devices of ``driver``.

    Raises ``devices.ClaimError`` (a ValueError) for an unallocated claim or a device the
    slices do not contain. Returns ``{}`` when the claim has no device of this driver.
    """
    devices = allocated_devices(claim, driver, DeviceIndex(slices))
    if not devices:
        return {}
    per_device, common = device_envs(devices, claim, driver)
    env = _claim_env(claim, driver)
    env.update(common)
    for d in per_device:
        env.update(d)
    return env


def _env_list(env: dict[str, str]) -> list[str]:
    return [f"{k}={v}" for k, v in env.items()]


def build_spec(claim: dict[str, Any], driver: str, devices: Sequence[AllocatedDevice]) -> dict[str, Any]:
    """The CDI spec (a dict) for a claim's prepared devices; see the module docstring."""
    claim_uid = str((claim.get("metadata") or {}).get("uid", ""))
    per_device, common = device_envs(devices, claim, driver)
    spec_devices: list[dict[str, Any]] = []
    seen: set[str] = set()
    for dev, env in zip(devices, per_device):
        name = cdi_device_name(claim_uid, dev.name, dev.share_id)
        if name in seen:  # same device for two requests: one CDI device carries both
            for entry in spec_devices:
                if entry["name"] == name:
                    entry["containerEdits"]["env"].extend(_env_list(env))
            continue
        seen.add(name)
        spec_devices.append({"name": name, "containerEdits": {"env": _env_list(env)}})
    env = _claim_env(claim, driver)
    env.update(common)
    return {
        "cdiVersion": minimum_cdi_version(spec_devices),
        "kind": cdi_kind(driver),
        "devices": spec_devices,
        "containerEdits": {"env": _env_list(env)},
    }


def minimum_cdi_version(spec_devices: Iterable[dict[str, Any]]) -> str:
    """0.3.0 covers kind/devices/env; device names starting with a digit need 0.5.0."""
    if any(d["name"][:1].isdigit() for d in spec_devices):
        return "0.5.0"
    return "0.3.0"


def write_spec(cdi_dir: str | os.PathLike[str], driver: str, claim_uid: str, spec: dict[str, Any]) -> Path:
    """Write the spec atomically (temp file + rename) so the runtime never reads half a file."""
    path = spec_path(cdi_dir, driver, claim_uid)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".yaml")
    try:
        with os.fdopen(fd, "w") as fh:
            yaml.dump(spec, fh, Dumper=_Dumper, sort_keys=False)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def remove_spec(cdi_dir: str | os.PathLike[str], driver: str, claim_uid: str) -> None:
    spec_path(cdi_dir, driver, claim_uid).unlink(missing_ok=True)


def validate_spec(spec: dict[str, Any]) -> list[str]:
    """Problems with a spec under the CDI naming rules (used by tests and as a self-check)."""
    problems: list[str] = []
    kind = str(spec.get("kind", ""))
    vendor, _, cls = kind.partition("/")
    if not _VENDOR_RE.match(vendor):
        problems.append(f"kind {kind!r}: vendor must start with a letter and use [A-Za-z0-9_.-]")
    if not _VENDOR_RE.match(cls):
        problems.append(f"kind {kind!r}: class must start with a letter and use [A-Za-z0-9_.-]")
    names = [d.get("name", "") for d in spec.get("devices") or []]
    for n in names:
        if not _NAME_RE.match(n):
            problems.append(f"device {n!r}: invalid CDI device name")
    if len(set(names)) != len(names):
        problems.append("duplicate device names")
    if any(n[:1].isdigit() for n in names) and spec.get("cdiVersion") in ("0.3.0", "0.4.0"):
        problems.append("device names starting with a digit need cdiVersion >= 0.5.0")
    for where, edits in [("spec", spec.get("containerEdits") or {})] + [
            (f"device {d.get('name')}", d.get("containerEdits") or {}) for d in spec.get("devices") or []]:
        for e in edits.get("env") or []:
            if "=" not in e:
                problems.append(f"{where}: env entry {e!r} is not KEY=VALUE")
    return problems
