"""Node objects and their ResourceSlices from a cluster profile (hardware comes from fake_gpus)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from fake_gpus import catalog as fake_gpus_catalog
from fake_gpus import naming as fake_gpus_naming
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


def build_node(spec: NodeSpec, plugins: dict[str, str] | None = None) -> dict[str, Any]:
    """The Node of a profile entry; `plugins`: the extended resources device plugins register on it
    (labkit.sim.deviceplugin.advertised), in capacity and allocatable."""
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
    alloc.update(plugins or {})
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
        slices = build_slices(cache[spec.node_profile], spec.name, **kw)
        if profile.device_plugin:  # the DRA driver's GPU part is off: its kubelet plugin publishes nothing
            slices = [s for s in slices if s["spec"]["driver"] != fake_gpus_slices.GPU_DRIVER]
        return slices
    except (ValueError, KeyError, OSError) as exc:
        raise HardwareError(
            f"{profile.source}: node {spec.name} (nodeProfile {spec.node_profile}, migMode {spec.mig_mode}): {exc}"
        ) from None


#: how many nodes of one kind are built in full to learn its template (see SliceTemplate)
PROBES = 3


class _NoTemplate(Exception):
    """The probes' slices differ in a way SliceTemplate cannot derive from the node name."""


class SliceTemplate:
    """The ResourceSlices of every node of one kind (node profile and MIG mode), built once.

    fake_gpus builds a node's slices from its hardware and its name; only a few leaves depend on
    the name: the slices' names, ``nodeName``, the pool's name (the node's name inside fixed
    text) and each GPU's ``uuid``/``parentUUID`` (fake_gpus.naming.gpu_uuid of the node and
    the GPU's minor). The template builds the slices of a few nodes of the kind in full
    (``probes``: the first ones and the one with the longest name, where a slice name would be
    shortened with a hash first) and learns which leaves differ and how each follows from the
    name, checked against every probe. Every other node's slices are then new dicts along the
    paths to those leaves only; everything else (devices' attribute values, capacities, whole
    NIC and compute-domain devices) is one object shared by all nodes of the kind. When a leaf
    does not follow one of those rules (say, MIG devices' uuids), ``plan`` is None and each node
    is built in full, as before.

    Shared parts are read only: the store never edits an object in place, and Sim.get/list hand
    callers ResourceSlices that share nothing (copies).
    """

    def __init__(self, probes: list[tuple[str, list[dict]]], minors: Iterable[int]) -> None:
        self.slices = probes[0][1]
        self.minors = tuple(minors)
        try:
            self.plan: Any = self._plan([s for _, s in probes], [n for n, _ in probes])
        except _NoTemplate:
            self.plan = None

    def build(self, node_name: str) -> list[dict]:
        return _apply(self.slices, self.plan, node_name)

    def _plan(self, values: list[Any], names: list[str]) -> Any:
        """None: the same in every probe (shared); a callable: the leaf from the node name; a
        dict: the entries (keys or list indexes) that differ, with their plans."""
        first = values[0]
        if all(type(v) is type(first) and v == first for v in values[1:]):
            return None
        if type(first) is dict and all(type(v) is dict and list(v) == list(first) for v in values):
            plans = {k: self._plan([v[k] for v in values], names) for k in first}
            return {k: p for k, p in plans.items() if p is not None}
        if type(first) is list and all(type(v) is list and len(v) == len(first) for v in values):
            plans = {i: self._plan([v[i] for v in values], names) for i in range(len(first))}
            return {i: p for i, p in plans.items() if p is not None}
        if all(type(v) is str for v in values):
            return self._leaf(values, names)
        raise _NoTemplate

    def _leaf(self, values: list[str], names: list[str]) -> Callable[[str], str]:
        at = values[0].find(names[0])
        if at >= 0:
            head, tail = values[0][:at], values[0][at + len(names[0]):]
            if all(v == f"{head}{n}{tail}" for v, n in zip(values, names, strict=True)):
                return lambda node: f"{head}{node}{tail}"
        for minor in self.minors:
            if all(v == fake_gpus_naming.gpu_uuid(n, minor) for v, n in zip(values, names, strict=True)):
                return lambda node, minor=minor: fake_gpus_naming.gpu_uuid(node, minor)
        raise _NoTemplate


def _apply(value: Any, plan: dict, node: str) -> Any:
    """A copy of the dict or list `value` with the entries `plan` names rebuilt for `node`."""
    new = value.copy()
    for key, sub in plan.items():
        new[key] = sub(node) if callable(sub) else _apply(value[key], sub, node)
    return new


def build_all_slices(specs: list[NodeSpec], profile: ClusterProfile, cache: dict[str, Any]) -> Iterator[list[dict]]:
    """Every node's ResourceSlices, in `specs` order: the same as build_slices_for per node, with
    nodes of one kind built from one SliceTemplate (they share read-only parts)."""
    by_kind: dict[tuple[str, str | None], list[NodeSpec]] = {}
    for spec in specs:
        by_kind.setdefault((spec.node_profile, spec.mig_mode), []).append(spec)
    templates: dict[tuple[str, str | None], SliceTemplate | None] = {}
    for spec in specs:
        kind = (spec.node_profile, spec.mig_mode)
        if kind not in templates:
            same = by_kind[kind]
            if len(same) <= PROBES:
                templates[kind] = None
            else:
                longest = max(same, key=lambda s: len(s.name))
                probes = same[:PROBES - 1] + ([longest] if longest.name not in {p.name for p in same[:PROBES - 1]}
                                              else [same[PROBES - 1]])
                built = [(p.name, build_slices_for(p, profile, cache)) for p in probes]
                tmpl = SliceTemplate(built, (g.minor for g in cache[spec.node_profile].gpus))
                templates[kind] = tmpl if tmpl.plan is not None else None
        tmpl = templates[kind]
        yield tmpl.build(spec.name) if tmpl is not None else build_slices_for(spec, profile, cache)


def default_device_classes(profile: ClusterProfile | None = None, cache: dict[str, Any] | None = None) -> list[dict]:
    """NVIDIA's DeviceClasses (without the GPU ones under `gpuPlugin: device-plugin`), plus the
    dra-example-driver's when a node of `profile` runs it."""
    load_node_profile, _, device_classes = _fake_gpus()
    if profile is None:
        return list(device_classes())
    cache = {} if cache is None else cache
    for n in profile.nodes:
        if n.node_profile not in cache:
            cache[n.node_profile] = load_node_profile(n.node_profile)
    classes = fake_gpus_slices.device_classes_for(
        [cache[n] for n in dict.fromkeys(x.node_profile for x in profile.nodes)])
    if profile.device_plugin:  # NVIDIA's chart with resources.gpus.enabled=false installs no GPU classes
        classes = [c for c in classes if not _selects_driver(c, fake_gpus_slices.GPU_DRIVER)]
    return list(classes)


def _selects_driver(device_class: dict, driver: str) -> bool:
    """The class's CEL selectors pick devices of `driver` (NVIDIA's gpu, mig and vfio classes)."""
    return any(f"device.driver == '{driver}'" in ((sel.get("cel") or {}).get("expression") or "")
               for sel in (device_class.get("spec") or {}).get("selectors") or [])
