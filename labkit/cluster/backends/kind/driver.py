"""The fake_gpus driver manifests for a kind cluster.

The shared manifests (namespace, RBAC, DeviceClasses) come from ``fake_gpus/deploy``. The
DaemonSet is rendered here once per (node profile, MIG mode) of the cluster profile, pinned with
a nodeSelector on the labels the kind config puts on each worker, so every kind worker runs the
fake driver for exactly the hardware its profile node has. A profile with nodes that run NVIDIA's
compute-domain plugin (node profile ``computeDomains: true``) also gets ``fake_gpus/deploy/compute-domains``:
the ComputeDomain CRD, its DeviceClasses, and the controller's Deployment with its own ServiceAccount
and least-privilege RBAC. ``helm_values`` gives the values of the Helm chart
(``fake_gpus/deploy/helm/fake-gpus``) that render the same objects.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import yaml

from fake_gpus import cdcontroller
from fake_gpus.catalog import load_node_profile
from labkit.cluster.backends.kind.config import MIG_LABEL, PROFILE_LABEL
from labkit.model.profiles import ClusterProfile

DEPLOY_DIR = Path(__file__).resolve().parents[4] / "fake_gpus" / "deploy"


def _load_deploy_objects(deploy_dir: Path) -> list[dict[str, Any]]:
    objs: list[dict[str, Any]] = []
    for path in sorted(deploy_dir.glob("*.yaml")):
        if path.name.startswith("kustomization"):
            continue
        objs.extend(d for d in yaml.safe_load_all(path.read_text()) if isinstance(d, dict))
    return objs


def _dns_label(text: str) -> str:
    return re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")[:63]


def driver_manifests(
    profile: ClusterProfile, image: str, *, deploy_dir: Path = DEPLOY_DIR
) -> list[dict[str, Any]]:
    """Every object to apply: shared objects first, then one DaemonSet per hardware kind."""
    objs = _load_deploy_objects(deploy_dir)
    daemonsets = [o for o in objs if o.get("kind") == "DaemonSet"]
    if len(daemonsets) != 1:
        raise ValueError(f"{deploy_dir}: expected exactly one DaemonSet template, found {len(daemonsets)}")
    template = daemonsets[0]
    shared = [o for o in objs if o.get("kind") != "DaemonSet"]

    rendered: list[dict[str, Any]] = []
    for node_profile, mig in _hardware_kinds(profile):
        ds = copy.deepcopy(template)
        base = ds["metadata"]["name"]
        suffix = _hardware_suffix(node_profile, mig)
        ds["metadata"]["name"] = f"{base}-{suffix}"[:63]
        selector_labels = {"app.kubernetes.io/name": base, "fake-gpus.dev/hardware": suffix}
        ds["spec"]["selector"] = {"matchLabels": selector_labels}
        pod = ds["spec"]["template"]
        pod.setdefault("metadata", {}).setdefault("labels", {}).update(selector_labels)
        node_selector, affinity = _node_placement(node_profile, mig)
        if affinity:
            pod["spec"]["affinity"] = affinity
        pod["spec"]["nodeSelector"] = node_selector
        for container in pod["spec"]["containers"]:
            container["image"] = image
            container["imagePullPolicy"] = "IfNotPresent"  # loaded with `kind load`, never pulled
            container["args"] = _driver_args(container.get("args") or [], node_profile, mig)
            if profile.topology_attributes:  # the profile's lessons use LabKit's own topology attributes
                container["args"].append("--topology-attributes")
            _gates_last(container["args"])
        rendered.append(ds)
    return shared + rendered + (compute_domain_manifests(image) if has_compute_domains(profile) else [])


def has_compute_domains(profile: ClusterProfile) -> bool:
    """Whether a node of the profile runs NVIDIA's compute-domain plugin (multi-node NVLink trays)."""
    return any(load_node_profile(name).compute_domains for name in sorted({n.node_profile for n in profile.nodes}))


def compute_domain_manifests(image: str) -> list[dict[str, Any]]:
    """fake_gpus/deploy/compute-domains with the driver image in the controller's Deployment, which
    also names it as the daemons' image (the kind nodes have it loaded)."""
    objs = copy.deepcopy(cdcontroller.manifests())
    for obj in objs:
        if obj["kind"] != "Deployment":
            continue
        for container in obj["spec"]["template"]["spec"]["containers"]:
            container["image"] = image
            container["imagePullPolicy"] = "IfNotPresent"  # loaded with `kind load`, never pulled
            args = container["args"]
            args[args.index("--daemon-image") + 1] = image
    return objs


def compute_domain_workloads(profile: ClusterProfile) -> list[str]:
    """The Deployments `up()` waits for besides the DaemonSets (the ComputeDomain controller)."""
    if not has_compute_domains(profile):
        return []
    return [o["metadata"]["name"] for o in cdcontroller.manifests() if o["kind"] == "Deployment"]


def _hardware_kinds(profile: ClusterProfile) -> list[tuple[str, str]]:
    """(node profile, MIG mode or "") of every hardware kind of the cluster profile: one DaemonSet each."""
    return sorted({(n.node_profile, n.mig_mode or "") for n in profile.nodes})


def _hardware_suffix(node_profile: str, mig: str) -> str:
    return _dns_label(node_profile + (f"-{mig}" if mig else ""))


def _node_placement(node_profile: str, mig: str) -> tuple[dict[str, str], dict[str, Any] | None]:
    """The nodeSelector (and affinity) that pin a hardware kind's DaemonSet to its kind workers."""
    node_selector = {PROFILE_LABEL: node_profile}
    if mig:
        node_selector[MIG_LABEL] = mig
        return node_selector, None
    # not on a node of the same hardware in a MIG mode: that node has its own DaemonSet
    return node_selector, {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": MIG_LABEL, "operator": "DoesNotExist"}]}]}}}


def helm_values(profile: ClusterProfile, image: str) -> dict[str, Any]:
    """Values for the fake driver's Helm chart that render what :func:`driver_manifests` gives for
    ``profile`` (one ``hardware`` entry per DaemonSet), for ``helm install -n fake-gpus
    --create-namespace`` on a kind cluster of that profile."""
    repository, _, tag = image.rpartition(":")
    if not repository or "/" in tag:
        repository, tag = image, "latest"
    hardware = []
    for node_profile, mig in _hardware_kinds(profile):
        node_selector, affinity = _node_placement(node_profile, mig)
        entry: dict[str, Any] = {"name": _hardware_suffix(node_profile, mig), "nodeProfile": node_profile,
                                 "nodeSelector": node_selector}
        if mig:
            entry["migMode"] = mig
        if affinity:
            entry["affinity"] = affinity
        hardware.append(entry)
    return {"image": {"repository": repository, "tag": tag, "pullPolicy": "IfNotPresent"},
            "hardware": hardware, "topologyAttributes": bool(profile.topology_attributes),
            "resources": {"computeDomains": {"enabled": has_compute_domains(profile)}}}


def _gates_last(args: list[str]) -> None:
    """Move the template's ``--feature-gates X`` after the per-hardware flags, where the Helm chart
    renders it (its extraArgs), so both give the same argv."""
    if "--feature-gates" in args:
        i = args.index("--feature-gates")
        args += [args.pop(i), args.pop(i)]


def _driver_args(args: list[str], node_profile: str, mig: str) -> list[str]:
    """Replace --profile/--mig in the template's args with this hardware's values."""
    out: list[str] = []
    skip = False
    for arg in args:
        if skip:
            skip = False
            continue
        if arg in ("--profile", "--mig"):
            skip = True
            continue
        if arg.startswith(("--profile=", "--mig=")):
            continue
        out.append(arg)
    out += ["--profile", node_profile]
    if mig:
        out += ["--mig", mig]
    return out
