"""Node objects and their ResourceSlices from a cluster profile (hardware comes from fake_gpus)."""

from __future__ import annotations

import uuid
from typing import Any

from fake_gpus import catalog as fake_gpus_catalog
from fake_gpus import slices as fake_gpus_slices
from labkit.errors import EngineError
from labkit.model.profiles import DEFAULT_ALLOCATABLE, ClusterProfile, NodeSpec


class HardwareError(EngineError):
    """fake_gpus could not build a node's inventory."""


def _node_info(name: str) -> dict[str, str]:
    """All of NodeSystemInfo's required fields, so that get -> edit -> apply round-trips."""
    ident = uuid.uuid5(uuid.NAMESPACE_DNS, f"{name}.fake-gpus.dev")
    return {"machineID": ident.hex, "systemUUID": str(ident), "bootID": str(uuid.uuid5(ident, "boot")),
            "kernelVersion": "6.12.0-fake", "osImage": "fake-gpus node", "containerRuntimeVersion": "fake://1.0",
            "kubeletVersion": "v1.37.0", "kubeProxyVersion": "", "operatingSystem": "linux",
            "architecture": "amd64"}


def build_node(spec: NodeSpec) -> dict[str, Any]:
    labels = {
        "kubernetes.io/hostname": spec.name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "fake-gpus.dev/node-profile": spec.node_profile,
    }
    if spec.mig_mode:
        labels["fake-gpus.dev/mig-mode"] = spec.mig_mode
    labels.update(spec.labels)
    alloc = dict(DEFAULT_ALLOCATABLE)
    alloc.update(spec.allocatable)
    node: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": spec.name, "labels": labels},
        "spec": {},
        "status": {
            "capacity": dict(alloc),
            "allocatable": alloc,
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                            "message": "kubelet is posting ready status (simulated)"}],
            "nodeInfo": _node_info(spec.name),
        },
    }
    if spec.taints:
        node["spec"]["taints"] = [dict(t) for t in spec.taints]
    return node


def _fake_gpus() -> tuple[Any, Any, Any]:
    return fake_gpus_catalog.load_node_profile, fake_gpus_slices.build_slices, fake_gpus_slices.device_classes


def build_slices_for(spec: NodeSpec, profile: ClusterProfile, cache: dict[str, Any]) -> list[dict]:
    """The ResourceSlices the node's driver(s) publish. `cache` memoises node profiles."""
    load_node_profile, build_slices, _ = _fake_gpus()
    try:
        if spec.node_profile not in cache:
            cache[spec.node_profile] = load_node_profile(spec.node_profile)
        kw: dict[str, Any] = {"kubernetes_version": profile.kubernetes_version,
                              "topology_attributes": profile.topology_attributes}
        if spec.mig_mode:
            kw["mig_mode"] = spec.mig_mode
        return build_slices(cache[spec.node_profile], spec.name, **kw)
    except (ValueError, KeyError, OSError) as exc:
        raise HardwareError(
            f"{profile.source}: node {spec.name} (nodeProfile {spec.node_profile}, migMode {spec.mig_mode}): {exc}"
        ) from None


def default_device_classes(profile: ClusterProfile | None = None, cache: dict[str, Any] | None = None) -> list[dict]:
    """NVIDIA's DeviceClasses, plus the dra-example-driver's when a node of `profile` runs it."""
    load_node_profile, _, device_classes = _fake_gpus()
    if profile is None:
        return list(device_classes())
    cache = {} if cache is None else cache
    for n in profile.nodes:
        if n.node_profile not in cache:
            cache[n.node_profile] = load_node_profile(n.node_profile)
    return list(fake_gpus_slices.device_classes_for(
        [cache[n] for n in dict.fromkeys(x.node_profile for x in profile.nodes)]))
