"""NVIDIA's compute-domain kubelet plugin, faked: its devices, DeviceClasses and CDI edits.

Facts (kubernetes-sigs/dra-driver-nvidia-gpu at 95932046, docs/rack-scale-nvlink.md): driver
`compute-domain.nvidia.com`; each node publishes one pool named after the node with devices
`channel-0` (type channel, id 0: the only IMEX channel published, of 2048) and `daemon-0` (type
daemon, id 0). Two DeviceClasses select them. A channel claim carries an opaque
`ComputeDomainChannelConfig` (domainID, allocationMode Single|All); preparing it injects the
device node /dev/nvidia-caps-imex-channels/channel0 (every channel with All; the fake lists them
in the env FAKE_IMEX_CHANNELS). A daemon claim
carries `ComputeDomainDaemonConfig` (domainID); its container gets the node's CLIQUE_ID,
COMPUTE_DOMAIN_UUID and the domain's COMPUTE_DOMAIN_NAME / _NAMESPACE (`daemon_env`).

The controller's objects (`workload_template`, `daemon_template`, `daemonset`) and its status
rule (`domain_status`) live here too, so that labkit's sim and `fake_gpus.cdcontroller` (against a
real API server) build the same objects.
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
CD_API_VERSION = "resource.nvidia.com/v1beta1"
LABEL = "resource.nvidia.com/computeDomain"  # the node / object label, and the finalizer
TARGET_LABEL = "resource.nvidia.com/computeDomainTarget"
CLIQUE_LABEL = "nvidia.com/gpu.clique"
CLIQUE_KIND = "ComputeDomainClique"
#: a ComputeDomainClique's label with its clique id (cmd/compute-domain-daemon/common.go)
CLIQUE_ID_LABEL = "resource.nvidia.com/computeDomain.cliqueID"
DRIVER_NAMESPACE = "dra-driver-nvidia-gpu"  # where NVIDIA's bats tests install the chart
NOT_READY = "error asserting ComputeDomain Ready: current node not ready in ComputeDomain"
#: what the plugin's Prepare puts before an error of applying a claim's config (channel_check's errors):
#: cmd/compute-domain-kubelet-plugin/device_state.go, "prepare devices failed: %w" around prepareDevices and
#: "error applying config: %w" around applyConfig
APPLY_CONFIG_FAILED = "prepare devices failed: error applying config: "
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


def daemon_config(claim: dict[str, Any]) -> dict[str, str] | None:
    """The claim's ComputeDomainDaemonConfig, or None: another claim, or a config that does not parse
    (its prepare reports that)."""
    try:
        config = claim_config(claim)
    except ConfigError:
        return None
    return config if config is not None and config["kind"] == DAEMON_CONFIG_KIND else None


def daemon_env(cd: dict[str, Any] | None, clique_id: str) -> dict[str, str]:
    """What the plugin gives a daemon container besides its domain's UID, in NVIDIA's order
    (cmd/compute-domain-kubelet-plugin/computedomain.go GetCDIContainerEditsCommon): CLIQUE_ID (the
    node's clique: its nvidia.com/gpu.clique label here, NVML's fabric info upstream), then the
    domain's name and namespace when the plugin found the domain."""
    env = {"CLIQUE_ID": clique_id} if clique_id else {}
    if cd is not None:
        m = cd.get("metadata") or {}
        env.update(COMPUTE_DOMAIN_NAME=str(m.get("name", "")), COMPUTE_DOMAIN_NAMESPACE=str(m.get("namespace", "default")))
    return env


def container_edits(config: dict[str, str], daemon: dict[str, str] | None = None) -> dict[str, Any]:
    """CDI containerEdits for a prepared channel or daemon device. NVIDIA's plugin injects the
    channel device nodes; the fake lists them in FAKE_IMEX_CHANNELS instead (a CDI deviceNode must
    exist on the host, and a node without NVIDIA hardware has none). `daemon`: daemon_env's
    variables for a daemon claim (CLIQUE_ID, COMPUTE_DOMAIN_NAME, ...)."""
    if config["kind"] == CHANNEL_CONFIG_KIND:
        paths = channel_paths(config["allocationMode"])
        env = [f"FAKE_IMEX_CHANNELS={','.join(p.rsplit('/', 1)[1] for p in paths)}",
               f"FAKE_COMPUTE_DOMAIN={config['domainID']}"]
        return {"env": env}
    extra = dict(daemon or {})
    env = [f"CLIQUE_ID={extra.pop('CLIQUE_ID')}"] if "CLIQUE_ID" in extra else []
    env.append(f"COMPUTE_DOMAIN_UUID={config['domainID']}")
    env += [f"{k}={v}" for k, v in extra.items()]
    return {"env": env}


# ------------------------------------------------------------------ the controller's objects


def _as_dict(v: Any) -> dict[str, Any]:
    return v if isinstance(v, dict) else {}


def template_name(cd: dict[str, Any]) -> str:
    """spec.channel.resourceClaimTemplate.name ('' when missing)."""
    name = _as_dict(_as_dict(_as_dict(cd.get("spec")).get("channel")).get("resourceClaimTemplate")).get("name")
    return name if isinstance(name, str) else ""


def _template(namespace: str, name: str, uid: str, target: str, request: str, device_class: str,
              params: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
        "metadata": {"namespace": namespace, "name": name, "finalizers": [LABEL],
                     "labels": {LABEL: uid, TARGET_LABEL: target}},
        "spec": {"spec": {"devices": {
            "requests": [{"name": request, "exactly": {"deviceClassName": device_class,
                                                       "allocationMode": "ExactCount", "count": 1}}],
            "config": [{"requests": [request], "opaque": {"driver": DRIVER, "parameters": params}}],
        }}},
    }


def workload_template(cd: dict[str, Any]) -> dict[str, Any]:
    """The channel claim template the controller creates in the CD's namespace."""
    m = cd["metadata"]
    channel = _as_dict(_as_dict(cd.get("spec")).get("channel"))
    params = {"apiVersion": CONFIG_API_VERSION, "kind": CHANNEL_CONFIG_KIND, "domainID": m["uid"],
              "allocationMode": channel.get("allocationMode") or "Single"}
    return _template(m.get("namespace") or "default", template_name(cd), m["uid"], "Workload", "channel",
                     CHANNEL_CLASS, params)


def daemon_template(cd: dict[str, Any], namespace: str = DRIVER_NAMESPACE) -> dict[str, Any]:
    uid = cd["metadata"]["uid"]
    params = {"apiVersion": CONFIG_API_VERSION, "kind": DAEMON_CONFIG_KIND, "domainID": uid}
    return _template(namespace, f"computedomain-daemon-{uid}", uid, "Daemon", "daemon", DAEMON_CLASS, params)


def daemonset(cd: dict[str, Any], namespace: str = DRIVER_NAMESPACE, image: str = "dra-driver-nvidia-gpu",
              command: list[str] | None = None) -> dict[str, Any]:
    """The per-domain DaemonSet: a daemon on every node labelled with the domain's UID."""
    uid = cd["metadata"]["uid"]
    name = f"computedomain-daemon-{uid}"
    container: dict[str, Any] = {"name": "compute-domain-daemon", "image": image,
                                 "resources": {"claims": [{"name": "compute-domain-daemon"}]}}
    if command:  # the driver's own image, already on the nodes (kind loads it): never pulled
        container["command"] = list(command)
        container["imagePullPolicy"] = "IfNotPresent"
    return {
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"namespace": namespace, "name": name, "finalizers": [LABEL], "labels": {LABEL: uid}},
        "spec": {"selector": {"matchLabels": {LABEL: uid}}, "template": {
            "metadata": {"labels": {LABEL: uid}},
            "spec": {"nodeSelector": {LABEL: uid}, "containers": [container],
                     "tolerations": [{"operator": "Exists", "effect": e}
                                     for e in ("NoSchedule", "NoExecute", "PreferNoSchedule")],
                     "resourceClaims": [{"name": "compute-domain-daemon", "resourceClaimTemplateName": name}]}}},
    }


def domain_status(cd: dict[str, Any], running: dict[str, tuple[str, str]]) -> dict[str, Any]:
    """The status the daemons and the controller write: `running` maps each node with a running
    daemon to (pod IP, clique id). Known nodes keep their index; new ones take the lowest free one.
    Ready once at least numNodes nodes are in and all of them are Ready (numNodes is deprecated upstream,
    "recommended to be set to zero": then Ready for whichever nodes are in)."""
    old = [n for n in _as_dict(cd.get("status")).get("nodes") or [] if isinstance(n, dict)]
    nodes = [n for n in old if n.get("name") in running]
    used = {n.get("index") for n in nodes}
    for name in sorted(set(running) - {n.get("name") for n in nodes}):
        index = next(i for i in range(len(running) + len(used) + 1) if i not in used)
        used.add(index)
        ip, clique = running[name]
        nodes.append({"name": name, "ipAddress": ip, "cliqueID": clique, "index": index, "status": "Ready"})
    num = _as_dict(cd.get("spec")).get("numNodes")
    want = num if isinstance(num, int) and not isinstance(num, bool) else 0
    ready = len(nodes) >= want and all(n.get("status") == "Ready" for n in nodes)
    status: dict[str, Any] = {"status": "Ready" if ready else "NotReady"}
    if nodes:
        status["nodes"] = nodes
    return status


def cliques(cd: dict[str, Any], status: dict[str, Any], namespace: str = DRIVER_NAMESPACE) -> list[dict[str, Any]]:
    """The ComputeDomainClique objects of a domain (ComputeDomainCliques gate, beta and on by default
    at 95932046): one per clique of its daemons, in the driver's namespace, named
    `<domain uid>.<cliqueID>`, labelled with both, `daemons[]` holding each daemon's nodeName,
    ipAddress, cliqueID, index and status (cmd/compute-domain-daemon/cdclique.go). Upstream each
    daemon writes its own entry and the controller builds status.nodes from them; here the same data
    comes from `status` (domain_status). Nodes without a clique (not fabric-attached) have none."""
    uid = cd["metadata"]["uid"]
    by_clique: dict[str, list[dict[str, Any]]] = {}
    for n in status.get("nodes") or []:
        if n.get("cliqueID"):
            by_clique.setdefault(n["cliqueID"], []).append(
                {"nodeName": n["name"], "ipAddress": n.get("ipAddress", ""), "cliqueID": n["cliqueID"],
                 "index": n.get("index", 0), "status": n.get("status", "NotReady")})
    return [{"apiVersion": CD_API_VERSION, "kind": CLIQUE_KIND,
             "metadata": {"name": f"{uid}.{clique}", "namespace": namespace,
                          "labels": {LABEL: uid, CLIQUE_ID_LABEL: clique}},
             "daemons": sorted(daemons, key=lambda d: d["nodeName"])}
            for clique, daemons in sorted(by_clique.items())]


def prepare_error(claim: dict[str, Any], why: str) -> str:
    """How the compute-domain plugin reports a failed prepare to the kubelet (and so in the pod's
    FailedPrepareDynamicResources event): cmd/compute-domain-kubelet-plugin/driver.go wraps every
    error as "error preparing devices for claim '<ns>/<name>:<uid>': ..."."""
    m = _as_dict(claim.get("metadata"))
    return f"error preparing devices for claim '{m.get('namespace', '')}/{m.get('name', '')}:{m.get('uid', '')}': {why}"


def node_ready(cd: dict[str, Any] | None, node: str) -> bool:
    """The plugin's isCurrentNodeReady: upstream it looks in the node's ComputeDomainClique first, then in
    status.nodes; here the cliques are built from the status (`cliques`), so the status answers for both."""
    for n in _as_dict((cd or {}).get("status")).get("nodes") or []:
        if isinstance(n, dict) and n.get("name") == node:
            return n.get("status") == "Ready"
    return False


def channel_check(claim: dict[str, Any], cd: dict[str, Any] | None, node: str, node_labels: dict[str, str]
                  ) -> tuple[str | None, bool]:
    """What the plugin checks before it hands out a channel (applyComputeDomainChannelConfigDriverManaged),
    as (error or None, whether to label the node first): the claim's namespace is the domain's, the node
    carries no other domain's label, the node is Ready in the domain. Claims that are not channel claims
    pass. Raises ConfigError for a config the plugin refuses."""
    config = claim_config(claim)
    if config is None or config["kind"] != CHANNEL_CONFIG_KIND:
        return None, False
    uid = config["domainID"]
    if cd is None:
        return f"{APPLY_CONFIG_FAILED}error asserting ComputeDomain's namespace: ComputeDomain not found: {uid}", False
    if cd["metadata"].get("namespace", "default") != _as_dict(claim.get("metadata")).get("namespace", "default"):
        return (f"{APPLY_CONFIG_FAILED}error asserting ComputeDomain's namespace: the ResourceClaim's namespace is "
                "different than the ComputeDomain's namespace"), False
    current = node_labels.get(LABEL)
    if current not in (None, uid):
        return (f"{APPLY_CONFIG_FAILED}error adding Node label for ComputeDomain: label already exists for a "
                "different ComputeDomain"), False
    return (None if node_ready(cd, node) else APPLY_CONFIG_FAILED + NOT_READY), current != uid
