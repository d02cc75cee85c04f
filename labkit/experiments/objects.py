"""Small builders for the resource.k8s.io/v1 objects the policies emit (plain dicts)."""

from __future__ import annotations

from typing import Any

API = "resource.k8s.io/v1"
GPU_CLASS = "gpu.nvidia.com"
MIG_CLASS = "mig.nvidia.com"
NAMESPACE = "default"
HOSTNAME_LABEL = "kubernetes.io/hostname"
#: what every experiment pod asks for (`pod`): the experiments are about GPUs
POD_CPU_MILLI = 100
POD_MEMORY_MIB = 256


def mem_selector(gib: float) -> dict:
    """CEL: the device has at least `gib` GiB of memory (rounded up to whole MiB)."""
    mib = int(-(-gib * 1024 // 1))
    return {"cel": {"expression": f"device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('{mib}Mi')) >= 0"}}


def profile_selector(profile: str) -> dict:
    return {"cel": {"expression": f"device.attributes['gpu.nvidia.com'].profile == '{profile}'"}}


def no_nvlink_selector() -> dict:
    """CEL: the device publishes no NVLink domain (fake_gpus' topology attribute)."""
    return {"cel": {"expression": "!has(device.attributes['topology.fake-gpus.dev'].nvlinkDomain)"}}


def exactly(device_class: str, count: int = 1, selectors: list[dict] | None = None) -> dict:
    out: dict[str, Any] = {"deviceClassName": device_class, "allocationMode": "ExactCount", "count": count}
    if selectors:
        out["selectors"] = selectors
    return out


def claim_spec(requests: list[dict], constraints: list[dict] | None = None, config: list[dict] | None = None) -> dict:
    devices: dict[str, Any] = {"requests": requests}
    if constraints:
        devices["constraints"] = constraints
    if config:
        devices["config"] = config
    return {"devices": devices}


def template(name: str, spec: dict) -> dict:
    return {"apiVersion": API, "kind": "ResourceClaimTemplate",
            "metadata": {"name": name, "namespace": NAMESPACE}, "spec": {"spec": spec}}


def claim(name: str, spec: dict, labels: dict[str, str] | None = None) -> dict:
    meta: dict[str, Any] = {"name": name, "namespace": NAMESPACE}
    if labels:
        meta["labels"] = dict(labels)
    return {"apiVersion": API, "kind": "ResourceClaim", "metadata": meta, "spec": spec}


def time_slicing_config() -> list[dict]:
    """NVIDIA's GpuConfig asking for time-slicing (what a shared GPU claim carries)."""
    return [{"opaque": {"driver": GPU_CLASS, "parameters": {
        "apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig",
        "sharing": {"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Default"}}}}}]


def bus_selector(bus_ids: list[str]) -> dict:
    """CEL: the device sits at one of these PCI bus ids (they repeat from node to node: pin the
    pod to its node too)."""
    return {"cel": {"expression": f"device.attributes['resource.kubernetes.io'].pciBusID in {sorted(bus_ids)!r}"}}


def pod(name: str, *, template_name: str | None = None, claim_name: str | None = None,
        node: str | None = None, labels: dict[str, str] | None = None) -> dict:
    """A pause pod with one claim entry `gpu` (from a template or a named shared claim).

    CPU and memory requests are kept small on purpose: the experiments are about GPUs."""
    container: dict[str, Any] = {"name": "main", "image": "registry.k8s.io/pause:3.10",
                                 "resources": {"requests": {"cpu": f"{POD_CPU_MILLI}m",
                                                                      "memory": f"{POD_MEMORY_MIB}Mi"}}}
    spec: dict[str, Any] = {"containers": [container], "restartPolicy": "Never"}
    if template_name or claim_name:
        entry: dict[str, Any] = {"name": "gpu"}
        if template_name:
            entry["resourceClaimTemplateName"] = template_name
        else:
            entry["resourceClaimName"] = claim_name
        spec["resourceClaims"] = [entry]
        container["resources"]["claims"] = [{"name": "gpu"}]
    if node:
        spec["nodeSelector"] = {HOSTNAME_LABEL: node}
    meta: dict[str, Any] = {"name": name, "namespace": NAMESPACE}
    if labels:
        meta["labels"] = dict(labels)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}
