"""CDI specs for prepared claims, and the environment a container gets from them.

One transient spec per claim, ``<vendor>-<class>_<claimUID>.yaml`` in the CDI dir. NVIDIA
personality: kind ``k8s.<driver>/claim`` (NVIDIA's naming); every allocated device becomes a CDI
device ``<claimUID>-<device>`` (``-<shareID>`` appended for shared allocations). All env sits
on the devices, keyed by device (``FAKE_GPU_<id>_*``, ``FAKE_NIC_<id>_*``, see `env_id`), so a
container gets exactly the variables of the devices of the requests it references and several
claims never overwrite each other; the spec-level edits carry only ``FAKE_DRA_*``. The list
variables (``NVIDIA_VISIBLE_DEVICES`` ...) are finished by `visible_devices`, the runtime hook.
dra-example-driver personality (drivers ``*.example.com``): kind ``k8s.<driver>/<profile>``,
the driver's own env (``GPU_DEVICE_<id>`` ...) and a per-node ``common`` device.
`prepare` + `resolve_env` are the whole kubelet/runtime path without files; the simulator
uses them per container.
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import yaml

from fake_gpus import computedomain, example_driver
from fake_gpus.fileio import replacing

from .config import config_env
from .devices import AllocatedDevice, ClaimError, DeviceIndex, allocated_devices

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


def env_id(dev: AllocatedDevice) -> str:
    """The device's key in env names: its name without the ``gpu-``/``nic-`` prefix, upper-case,
    non-alphanumerics as ``_`` (``gpu-2-mig-1g5gb-19-0`` -> ``2_MIG_1G5GB_19_0``), as the
    dra-example-driver keys GPU_DEVICE_<id>. Keyed by device, not by position, so a container
    that gets devices from several claims or requests never sees one overwrite another."""
    name = dev.name
    for prefix in ("gpu-", "nic-"):
        if name.startswith(prefix):
            name = name[len(prefix):]
            break
    return re.sub(r"[^A-Za-z0-9]", "_", name).upper()


def _gpu_env(dev: AllocatedDevice) -> dict[str, str]:
    p = f"FAKE_GPU_{env_id(dev)}_"
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


def _nic_env(dev: AllocatedDevice) -> dict[str, str]:
    p = f"FAKE_NIC_{env_id(dev)}_"
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
                driver: str = "") -> list[dict[str, str]]:
    """Per-device env (same order as ``devices``). With ``claim``, the opaque configs of its
    allocation are validated and added (raises ClaimError). Each device also carries the list
    variables (NVIDIA_VISIBLE_DEVICES ...) for itself alone; `visible_devices` turns them into
    the lists of everything a container got."""
    per_device: list[dict[str, str]] = []
    for dev in devices:
        if dev.kind == "nic":
            env = _nic_env(dev)
            if claim is not None:
                env.update(config_env(claim, driver, dev, f"FAKE_NIC_{env_id(dev)}_"))
            env.update({"FAKE_NIC_DEVICES": dev.name, "FAKE_NIC_COUNT": "1"})
        else:
            env = _gpu_env(dev)
            if claim is not None:
                env.update(config_env(claim, driver, dev, f"FAKE_GPU_{env_id(dev)}_"))
            env.update({"NVIDIA_VISIBLE_DEVICES": "void" if dev.kind == "vfio" else device_uuid(dev),
                        "FAKE_GPU_DEVICES": dev.name, "FAKE_GPU_COUNT": "1"})
        per_device.append(env)
    return per_device


_NAME_KEY = re.compile(r"^FAKE_(GPU|NIC)_(.+)_NAME$")


def visible_devices(env: dict[str, str]) -> dict[str, str]:
    """The runtime hook: what NVIDIA's container runtime derives from the devices it injected.
    NVIDIA_VISIBLE_DEVICES, FAKE_GPU_DEVICES/COUNT (and FAKE_NIC_DEVICES/COUNT) list every
    device of the container in injection order. CDI env edits cannot build such a list (a later
    edit replaces a variable), so the sim and local backends apply this after resolving."""
    out = dict(env)
    found: dict[str, list[str]] = {"GPU": [], "NIC": []}
    for key in env:
        m = _NAME_KEY.match(key)
        if m and f"FAKE_{m.group(1)}_{m.group(2)}_POOL" in env:
            found[m.group(1)].append(m.group(2))
    if found["GPU"]:
        # GPUs bound to vfio-pci reach the container as /dev/vfio nodes, never through the NVIDIA
        # runtime: NVIDIA's driver sets NVIDIA_VISIBLE_DEVICES=void for them
        visible = [env.get(f"FAKE_GPU_{i}_UUID", "") for i in found["GPU"] if env.get(f"FAKE_GPU_{i}_TYPE") != "vfio"]
        out["NVIDIA_VISIBLE_DEVICES"] = ",".join(_dedup(visible)) or "void"
        out["FAKE_GPU_DEVICES"] = ",".join(_dedup(env[f"FAKE_GPU_{i}_NAME"] for i in found["GPU"]))
        out["FAKE_GPU_COUNT"] = str(len(found["GPU"]))
    if found["NIC"]:
        out["FAKE_NIC_DEVICES"] = ",".join(_dedup(env[f"FAKE_NIC_{i}_NAME"] for i in found["NIC"]))
        out["FAKE_NIC_COUNT"] = str(len(found["NIC"]))
    return out


# ------------------------------------------------------------------ what NVIDIA's real driver gives instead
# NVIDIA's DRA driver builds its claim CDI specs with the container toolkit's nvcdi library, whose
# common edits always set NVIDIA_VISIBLE_DEVICES=void (so the NVIDIA runtime hook injects no GPU a
# second time) and whose device edits carry the GPU as device nodes, driver-library mounts and
# hooks (dra-driver-nvidia-gpu cmd/gpu-kubelet-plugin/cdi.go; nvidia-container-toolkit
# pkg/nvcdi). The fake driver instead writes the GPU's UUID into NVIDIA_VISIBLE_DEVICES so a
# learner sees which GPU a container got; `nvidia_container_view` says what a real container sees.

#: the control device nodes nvcdi's common edits give every container with an NVIDIA GPU
NVIDIA_CONTROL_NODES = ("/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia-modeset")
_MINOR_RE = re.compile(r"^gpu-(\d+)")


def nvidia_container_view(env: dict[str, str]) -> dict[str, list[str]]:
    """What NVIDIA's real driver hands the container that got the GPUs of ``env`` (an env as
    `resolve_env` returns it): ``env``, ``deviceNodes``, ``mounts``, ``hooks`` and ``check`` (how to
    see the GPU from inside). ``{}`` when the container got no GPU."""
    ids = [m.group(2) for k in env if (m := _NAME_KEY.match(k)) and m.group(1) == "GPU"
           and f"FAKE_GPU_{m.group(2)}_POOL" in env]
    if not ids:
        return {}
    nodes: list[str] = []
    checks: list[str] = []
    nvidia = False
    for i in ids:
        name, kind = env[f"FAKE_GPU_{i}_NAME"], env.get(f"FAKE_GPU_{i}_TYPE", "gpu")
        if kind == "vfio":  # passthrough: the VFIO group, never the NVIDIA runtime
            nodes += ["/dev/vfio/vfio", f"/dev/vfio/<IOMMU group of {env.get(f'FAKE_GPU_{i}_PCI_BUS_ID', name)}>"]
            continue
        nvidia = True
        minor = _MINOR_RE.match(name)
        nodes.append(f"/dev/nvidia{minor.group(1)}" if minor else f"/dev/nvidia<minor of {name}>")
        if kind == "mig":
            nodes.append(f"/dev/nvidia-caps/nvidia-cap<N> (access to MIG {env.get(f'FAKE_GPU_{i}_MIG_PROFILE', name)})")
        checks.append(f"nvidia-smi -L lists {env.get(f'FAKE_GPU_{i}_UUID', name)}")
    view = {"env": ["NVIDIA_VISIBLE_DEVICES=void"], "deviceNodes": _dedup(nodes), "mounts": [], "hooks": [],
            "check": checks}
    if nvidia:
        view["deviceNodes"] = _dedup(nodes + list(NVIDIA_CONTROL_NODES))
        view["mounts"] = ["driver libraries (libcuda.so, libnvidia-ml.so, ...)", "nvidia-smi and firmware"]
        view["hooks"] = ["nvidia-cdi-hook create-symlinks", "nvidia-cdi-hook update-ldcache"]
    if any(env.get(k) == "MPS" for k in env if k.endswith("_SHARING_STRATEGY")):
        view["env"].append("CUDA_MPS_PIPE_DIRECTORY=... (the MPS control daemon of the claim)")
    return view


def _claim_env(claim: dict[str, Any], driver: str) -> dict[str, str]:
    meta = claim.get("metadata") or {}
    return {
        "FAKE_DRA_DRIVER": driver,
        "FAKE_DRA_CLAIM": f"{meta.get('namespace', '')}/{meta.get('name', '')}",
        "FAKE_DRA_CLAIM_UID": str(meta.get("uid", "")),
    }


def _env_list(env: dict[str, str]) -> list[str]:
    return [f"{k}={v}" for k, v in env.items()]


def build_spec(claim: dict[str, Any], driver: str, devices: Sequence[AllocatedDevice], *,
               daemon_env: dict[str, str] | None = None) -> dict[str, Any]:
    """The CDI spec (a dict) for a claim's prepared devices; see the module docstring.
    `daemon_env`: what the compute-domain plugin knows of a daemon claim's node and domain
    (fake_gpus.computedomain.daemon_env)."""
    if example_driver.is_example_driver(driver):
        return _example_spec(claim, driver, devices)
    if driver == computedomain.DRIVER:
        return _compute_domain_spec(claim, driver, devices, daemon_env)
    claim_uid = str((claim.get("metadata") or {}).get("uid", ""))
    per_device = device_envs(devices, claim, driver)
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
    return {
        "cdiVersion": minimum_cdi_version(spec_devices),
        "kind": cdi_kind(driver),
        "devices": spec_devices,
        "containerEdits": {"env": _env_list(_claim_env(claim, driver))},
    }


def _compute_domain_spec(claim: dict[str, Any], driver: str, devices: Sequence[AllocatedDevice],
                         daemon_env: dict[str, str] | None = None) -> dict[str, Any]:
    """NVIDIA's compute-domain plugin: the channel's device nodes (FAKE_IMEX_CHANNELS lists them)
    or the daemon's env, from the claim's ComputeDomain*Config (ClaimError when it is refused)."""
    meta = claim.get("metadata") or {}
    try:
        config = computedomain.claim_config(claim)
    except computedomain.ConfigError as exc:
        raise ClaimError(f"claim {meta.get('namespace', '')}/{meta.get('name', '')}: {exc}") from None
    if config is None:
        raise ClaimError(f"claim {meta.get('namespace', '')}/{meta.get('name', '')}: no opaque config for "
                         f"driver {driver}; a ComputeDomain's claim template carries its "
                         f"{computedomain.CHANNEL_CONFIG_KIND} (create claims from that template)")
    spec_devices = [{"name": cdi_device_name(str(meta.get("uid", "")), d.name, d.share_id),
                     "containerEdits": computedomain.container_edits(config, daemon_env)} for d in devices]
    return {"cdiVersion": minimum_cdi_version(spec_devices), "kind": cdi_kind(driver), "devices": spec_devices,
            "containerEdits": {"env": _env_list(_claim_env(claim, driver))}}


# ------------------------------------------------------------------ the dra-example-driver personality
# Its CDI kind is k8s.<driver>/<profile> (class = the profile: gpu, net, cpu); every container
# also gets the `common` device of a spec written once per node.


def example_kind(driver: str) -> str:
    return f"{cdi_vendor(driver)}/{driver.split('.', 1)[0]}"


def common_spec(driver: str, node: str) -> dict[str, Any] | None:
    """The per-node spec of the example driver's `common` device (None for NVIDIA's driver)."""
    if not example_driver.is_example_driver(driver):
        return None
    return {"cdiVersion": "0.3.0", "kind": example_kind(driver),
            "devices": [{"name": "common", "containerEdits": {"env": example_driver.common_env(driver, node)}}]}


def common_spec_path(cdi_dir: str | os.PathLike[str], driver: str) -> Path:
    return Path(cdi_dir) / f"{cdi_vendor(driver)}-{driver.split('.', 1)[0]}_common.yaml"


def _example_spec(claim: dict[str, Any], driver: str, devices: Sequence[AllocatedDevice]) -> dict[str, Any]:
    meta = claim.get("metadata") or {}
    claim_uid = str(meta.get("uid", ""))
    allocation = (claim.get("status") or {}).get("allocation") or {}
    results = [r for r in (allocation.get("devices") or {}).get("results") or [] if r.get("driver") == driver]
    admin = any(r.get("adminAccess") for r in (allocation.get("devices") or {}).get("results") or [])
    try:
        configs = example_driver.claim_configs(claim, driver)
        spec_devices = []
        for res in results:
            params = example_driver.config_for(configs, str(res.get("request", "")))
            name = cdi_device_name(claim_uid, str(res.get("device", "")), res.get("shareID") or None)
            env = example_driver.device_env(driver, claim_uid, res, params, admin)
            spec_devices.append({"name": name, "containerEdits": {"env": env}})
    except example_driver.ExampleConfigError as exc:
        raise ClaimError(f"claim {meta.get('namespace', '')}/{meta.get('name', '')}: {exc}") from None
    return {"cdiVersion": minimum_cdi_version(spec_devices), "kind": example_kind(driver), "devices": spec_devices}


def claim_cdi_ids(driver: str, claim_uid: str, dev: AllocatedDevice) -> list[str]:
    """The CDI device IDs the driver returns for one prepared device (the example driver adds
    its `common` device first)."""
    if example_driver.is_example_driver(driver):
        kind = example_kind(driver)
        return [f"{kind}=common", f"{kind}={cdi_device_name(claim_uid, dev.name, dev.share_id)}"]
    return [cdi_device_id(driver, cdi_device_name(claim_uid, dev.name, dev.share_id))]


def prepare(claim: dict[str, Any], driver: str, slices: list[dict[str, Any]], *,
            daemon_env: dict[str, str] | None = None) -> tuple[dict[str, Any] | None, list[tuple[list[str], list[str]]]]:
    """What NodePrepareResources does for one claim, without files: the claim's CDI spec and,
    per prepared device, (request names, CDI device IDs). Raises ClaimError."""
    spec, prepared = prepare_deferred(claim, driver, slices, daemon_env=daemon_env)
    return (spec() if spec is not None else None), prepared


def prepare_deferred(claim: dict[str, Any], driver: str, slices: list[dict[str, Any]], *,
                     daemon_env: dict[str, str] | None = None,
                     ) -> tuple[Callable[[], dict[str, Any]] | None, list[tuple[list[str], list[str]]]]:
    """`prepare`, with the claim's CDI spec built when the returned function is first called:
    the checks (ClaimError) happen now, the spec (the env of every device, what a simulated
    kubelet only needs once someone reads a container's env) later, with the same content.
    The claim and slices must not change in between (a store's objects are replaced, not changed)."""
    devices = allocated_devices(claim, driver, DeviceIndex(slices))
    if not devices:
        return None, []
    memo: list[dict[str, Any]] = []
    if example_driver.is_example_driver(driver) or driver == computedomain.DRIVER:
        memo.append(build_spec(claim, driver, devices, daemon_env=daemon_env))  # their checks build it
    else:
        for dev in devices:  # NVIDIA's config checks, as device_envs makes them (device order)
            config_env(claim, driver, dev, f"FAKE_{'NIC' if dev.kind == 'nic' else 'GPU'}_{env_id(dev)}_")

    def spec() -> dict[str, Any]:
        if not memo:
            memo.append(build_spec(claim, driver, devices, daemon_env=daemon_env))
        return memo[0]
    uid = str((claim.get("metadata") or {}).get("uid", ""))
    out: dict[tuple[str, str, str | None], tuple[list[str], list[str]]] = {}
    for dev in devices:
        entry = out.setdefault((dev.pool, dev.name, dev.share_id), ([], claim_cdi_ids(driver, uid, dev)))
        if dev.request_name not in entry[0]:
            entry[0].append(dev.request_name)
    return spec, list(out.values())


def resolve_env(specs: Iterable[dict[str, Any]], device_ids: Iterable[str]) -> dict[str, str]:
    """The env a container gets when the runtime injects ``device_ids`` from ``specs``: per
    spec its own edits once, then each device's, in ID order (a later value wins), then the
    `visible_devices` hook. KeyError names an ID no spec defines."""
    index: dict[str, tuple[int, dict[str, Any], dict[str, Any]]] = {}
    for n, spec in enumerate(specs):
        for dev in spec.get("devices") or []:
            index[f"{spec.get('kind')}={dev.get('name')}"] = (n, spec.get("containerEdits") or {},
                                                              dev.get("containerEdits") or {})
    env: dict[str, str] = {}
    applied: set[int] = set()
    for cdi_id in device_ids:
        if cdi_id not in index:
            raise KeyError(f"CDI device {cdi_id} is not defined by any spec")
        n, spec_edits, dev_edits = index[cdi_id]
        if n not in applied:
            applied.add(n)
            _apply(env, spec_edits)
        _apply(env, dev_edits)
    return visible_devices(env)


def _apply(env: dict[str, str], edits: dict[str, Any]) -> None:
    for item in edits.get("env") or []:
        k, _, v = str(item).partition("=")
        env[k] = v


def container_env(claim: dict[str, Any], driver: str, slices: list[dict[str, Any]]) -> dict[str, str]:
    """The env a container that references the whole claim gets for ``driver``'s devices.

    Raises ``devices.ClaimError`` (a ValueError) for an unallocated claim or a device the
    slices do not contain. Returns ``{}`` when the claim has no device of this driver.
    """
    spec, prepared = prepare(claim, driver, slices)
    if spec is None:
        return {}
    specs = [spec]
    node = next((d.get("pool", "") for d in (claim.get("status") or {}).get("allocation", {}).get("devices", {})
                 .get("results", []) if d.get("driver") == driver), "")
    common = common_spec(driver, node)
    if common is not None:
        specs.append(common)
    return resolve_env(specs, [i for _, ids in prepared for i in ids])


def minimum_cdi_version(spec_devices: Iterable[dict[str, Any]]) -> str:
    """0.3.0 covers kind/devices/env; device names starting with a digit need 0.5.0."""
    if any(d["name"][:1].isdigit() for d in spec_devices):
        return "0.5.0"
    return "0.3.0"


def write_spec(cdi_dir: str | os.PathLike[str], driver: str, claim_uid: str, spec: dict[str, Any]) -> Path:
    """Write the spec atomically (temp file + rename) so the runtime never reads half a file."""
    return write_spec_file(spec_path(cdi_dir, driver, claim_uid), spec)


def write_spec_file(path: Path, spec: dict[str, Any]) -> Path:
    with replacing(path, suffix=".yaml") as fh:
        yaml.dump(spec, fh, Dumper=_Dumper, sort_keys=False)
    return path


def remove_spec(cdi_dir: str | os.PathLike[str], driver: str, claim_uid: str) -> None:
    spec_path(cdi_dir, driver, claim_uid).unlink(missing_ok=True)


_VERSION_RE = re.compile(r"^\d+\.\d+\.\d+$")


def validate_spec(spec: Any) -> list[str]:
    """Problems with a spec, each ``field path: problem``, under the rules of the CDI spec's
    reference parser: cdiVersion a version string, kind ``vendor/class`` (vendor and class start
    with a letter, then letters, digits, ``_ - .``, end with a letter or digit), at least one
    device, each named once (a letter or digit first and last, ``_ - . :`` between; a digit first
    needs cdiVersion >= 0.5.0), container edits a mapping whose env entries are ``KEY=VALUE`` with
    a non-empty KEY. Takes any parsed document (the local backend reads spec files with it)."""
    if not isinstance(spec, dict):
        return [f"(the document): a CDI spec is a mapping, not {type(spec).__name__}"]
    problems: list[str] = []
    version = spec.get("cdiVersion")
    if not isinstance(version, str) or not _VERSION_RE.match(version):
        problems.append(f"cdiVersion: {version!r} is not a CDI version such as '0.6.0'")
    kind = spec.get("kind")
    vendor, sep, cls = kind.partition("/") if isinstance(kind, str) else ("", "", "")
    if not _VENDOR_RE.match(vendor):
        problems.append(f"kind: {kind!r}: vendor must start with a letter and use [A-Za-z0-9_.-]")
    if not sep or not _VENDOR_RE.match(cls):
        problems.append(f"kind: {kind!r}: class must start with a letter and use [A-Za-z0-9_.-]")
    problems += _edits_problems("containerEdits", spec.get("containerEdits"))
    devices = spec.get("devices")
    if not isinstance(devices, list) or not devices:
        return [*problems, "devices: a CDI spec defines at least one device (a list)"]
    seen: set[str] = set()
    for i, dev in enumerate(devices):
        where = f"devices[{i}]"
        if not isinstance(dev, dict):
            problems.append(f"{where}: a device is a mapping, not {type(dev).__name__}")
            continue
        name = dev.get("name")
        if not isinstance(name, str) or not _NAME_RE.match(name):
            problems.append(f"{where}.name: device {name!r}: invalid CDI device name (letters, digits, _ - . :)")
        elif name in seen:
            problems.append(f"{where}.name: duplicate device names ({name!r})")
        else:
            seen.add(name)
            if name[:1].isdigit() and version in ("0.3.0", "0.4.0"):
                problems.append(f"{where}.name: device names starting with a digit need cdiVersion >= 0.5.0")
        problems += _edits_problems(f"{where}.containerEdits", dev.get("containerEdits"))
    return problems


def _edits_problems(where: str, edits: Any) -> list[str]:
    if edits is None:
        return []
    if not isinstance(edits, dict):
        return [f"{where}: container edits are a mapping, not {type(edits).__name__}"]
    env = edits.get("env")
    if env is None:
        return []
    if not isinstance(env, list):
        return [f"{where}.env: a list of KEY=VALUE strings, not {type(env).__name__}"]
    return [f"{where}.env[{i}]: env entry {item!r} is not KEY=VALUE" for i, item in enumerate(env)
            if not isinstance(item, str) or item.find("=") <= 0]
