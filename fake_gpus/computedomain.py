"""NVIDIA's compute-domain kubelet plugin, faked: its devices, DeviceClasses and CDI edits.

Facts (kubernetes-sigs/dra-driver-nvidia-gpu at 95932046, docs/rack-scale-nvlink.md): driver
`compute-domain.nvidia.com`; each node publishes one pool named after the node with devices
`channel-0` (type channel, id 0: the only IMEX channel published, of 2048) and `daemon-0` (type
daemon, id 0). Two DeviceClasses select them. A channel claim carries an opaque
`ComputeDomainChannelConfig` (domainID, allocationMode Single|All); preparing it injects the
device node /dev/nvidia-caps-imex-channels/channel0 (every channel with All; the fake lists them
in the env FAKE_IMEX_CHANNELS). A daemon claim
carries `ComputeDomainDaemonConfig` (domainID); its container gets COMPUTE_DOMAIN_UUID and the
node's CLIQUE_ID.

What needs the cluster (labelling the node, waiting for the domain to be Ready, the daemon's
ComputeDomain name and namespace) is done by whoever runs the plugin (labkit's sim controller).
"""

from __future__ import annotations

from typing import Any

DRIVER = "compute-domain.nvidia.com"
CONFIG_API_VERSION = "resource.nvidia.com/v1beta1"
CHANNEL_CLASS = "compute-domain-default-channel.nvidia.com"
DAEMON_CLASS = "compute-domain-daemon.nvidia.com"
CHANNEL_CONFIG_KIND = "ComputeDomainChannelConfig"
DAEMON_CONFIG_KIND = "ComputeDomainDaemonConfig"
ALLOCATION_MODES = ("Single", "All")
#: IMEX channels a node has (NVIDIA's getImexChannelCount); only channel 0 is published
MAX_IMEX_CHANNELS = 2048
CHANNEL_DIR = "/dev/nvidia-caps-imex-channels"
_FIELDS = {CHANNEL_CONFIG_KIND: {"apiVersion", "kind", "domainID", "allocationMode"},
           DAEMON_CONFIG_KIND: {"apiVersion", "kind", "domainID"}}


class ConfigError(ValueError):
    """An opaque config NVIDIA's plugin would refuse (the message carries its reason)."""


def devices() -> list[dict[str, Any]]:
    """The devices one node's compute-domain plugin publishes."""
    return [{"name": f"{kind}-0", "attributes": {"id": {"int": 0}, "type": {"string": kind}}}
            for kind in ("channel", "daemon")]


def device_classes(api_version: str = "resource.k8s.io/v1") -> list[dict[str, Any]]:
    """The two DeviceClasses NVIDIA's chart installs with computeDomains enabled."""
    base = f"device.driver == '{DRIVER}' && device.attributes['{DRIVER}'].type == "
    return [
        {"apiVersion": api_version, "kind": "DeviceClass", "metadata": {"name": DAEMON_CLASS},
         "spec": {"selectors": [{"cel": {"expression": base + "'daemon'"}}]}},
        {"apiVersion": api_version, "kind": "DeviceClass", "metadata": {"name": CHANNEL_CLASS},
         "spec": {"selectors": [{"cel": {"expression": base + f"'channel' && device.attributes['{DRIVER}'].id == 0"}}]}},
    ]


def channel_paths(allocation_mode: str) -> list[str]:
    """The device nodes a channel claim injects: channel0, or all 2048 with allocationMode All."""
    count = MAX_IMEX_CHANNELS if allocation_mode == "All" else 1
    return [f"{CHANNEL_DIR}/channel{i}" for i in range(count)]


def parse_config(params: Any, where: str) -> dict[str, str]:
    """Validate one opaque config's parameters as NVIDIA's plugin decodes them (strict: unknown
    fields refused; domainID required; allocationMode Single|All, default Single)."""
    if not isinstance(params, dict):
        raise ConfigError(f"{where}: parameters must be an object")
    kind = params.get("kind")
    if kind not in _FIELDS:
        raise ConfigError(f"{where}: unknown config kind {kind!r} for driver {DRIVER}; "
                          f"use {CHANNEL_CONFIG_KIND} or {DAEMON_CONFIG_KIND}")
    if params.get("apiVersion") != CONFIG_API_VERSION:
        raise ConfigError(f"{where}: apiVersion must be {CONFIG_API_VERSION}")
    for k in params:
        if k not in _FIELDS[kind]:
            raise ConfigError(f'{where}: strict decoding error: unknown field "{k}"')
    if not params.get("domainID"):
        raise ConfigError(f"{where}: error validating config: domainID cannot be empty")
    mode = str(params.get("allocationMode") or "Single")
    if kind == CHANNEL_CONFIG_KIND and mode not in ALLOCATION_MODES:
        raise ConfigError(f"{where}: allocationMode {mode!r} must be Single or All")
    return {"kind": str(kind), "domainID": str(params["domainID"]), "allocationMode": mode}


def claim_config(claim: dict[str, Any]) -> dict[str, str] | None:
    """The compute-domain config of an allocated (or not yet allocated) claim, or None when the
    claim has no opaque config for this driver. Raises ConfigError."""
    st_cfg = (((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("config")
    spec_cfg = (((claim.get("spec") or {}).get("devices") or {}).get("config")) or []
    found = None
    for i, entry in enumerate(st_cfg if st_cfg is not None else spec_cfg):
        opaque = entry.get("opaque") or {}
        if opaque.get("driver") == DRIVER:
            found = parse_config(opaque.get("parameters"), f"config[{i}]")
    return found


def container_edits(config: dict[str, str], clique_id: str = "") -> dict[str, Any]:
    """CDI containerEdits for a prepared channel or daemon device. NVIDIA's plugin injects the
    channel device nodes; the fake lists them in FAKE_IMEX_CHANNELS instead (a CDI deviceNode must
    exist on the host, and a node without NVIDIA hardware has none)."""
    if config["kind"] == CHANNEL_CONFIG_KIND:
        paths = channel_paths(config["allocationMode"])
        env = [f"FAKE_IMEX_CHANNELS={','.join(p.rsplit('/', 1)[1] for p in paths)}",
               f"FAKE_COMPUTE_DOMAIN={config['domainID']}"]
        return {"env": env}
    env = [f"COMPUTE_DOMAIN_UUID={config['domainID']}"]
    if clique_id:
        env.insert(0, f"CLIQUE_ID={clique_id}")
    return {"env": env}
