"""The second personality: the devices of kubernetes-sigs/dra-example-driver.

Facts taken from that driver's source (internal/profiles/{gpu,net,cpu}, deployments/helm,
cmd/dra-example-kubeletplugin/cdi.go, api/example.com/resource/gpu/v1alpha1), written here anew:

gpu profile (driver ``gpu.example.com``, Helm ``kubeletPlugin.numDevices``, default 8)
  whole GPUs ``gpu-<i>``: attributes index (int), uuid (``gpu-<uuid>``), model
  ``LATEST-GPU-MODEL``, driverVersion 1.0.0; capacity memory 80Gi, compute 100.
  ``gpuPartitions`` N > 0: per GPU a counter set ``gpu-<i>-counters`` {memory 80Gi, compute 100},
  devices ``gpu-<i>-partition-<j>`` (attributes + partition=j, partitionable=true; capacity and
  counters memory 80Gi/N, compute 100/N) and ``gpu-<i>-full`` (+ partitionable, full=true;
  everything); counter sets in one slice, devices in a second.
  ``gpuAllowMultipleAllocations``: every device allowMultipleAllocations=true, and memory /
  compute carry a requestPolicy (default = the whole value, range min 1Gi|1 step 1Gi|1 max value).
net profile (``net.example.com``): ``nic-<i>``, multi-allocatable; index, uuid (``net-<uuid>``),
  model ``LATEST-NET-MODEL``, driverVersion 1.0.0; capacity vfs 100 (validValues [1], default 1),
  ingressBandwidth / egressBandwidth 100G (default 1G, min 100M, max 100G, step 1M).
cpu profile (``cpu.example.com``): ``numa-<i>`` multi-allocatable, attribute numaNodeID, capacity
  ``cpu.example.com/cpu`` = cpusPerNUMANode (the real driver also maps it onto the node's cpu
  through nodeAllocatableResourceMappings, a field the kit's API does not carry).

UUIDs: the real driver draws them from Go's math/rand seeded by the node name; the fake keeps
the format (``gpu-`` + UUID) and derives them from the node name and index instead.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from fake_gpus.errors import InputError

GPU_DRIVER = "gpu.example.com"
NET_DRIVER = "net.example.com"
CPU_DRIVER = "cpu.example.com"
CONFIG_API_VERSION = "gpu.resource.example.com/v1alpha1"
NET_CONFIG_API_VERSION = "net.resource.example.com/v1alpha1"
API_VERSION = "resource.k8s.io/v1"
MEMORY_BYTES = 80 << 30
COMPUTE = 100
SHARING_STRATEGIES = ("TimeSlicing", "SpacePartitioning")
INTERVALS = ("Default", "Short", "Medium", "Long")
_NAMESPACE = uuid.UUID("6f1b7a52-3c1e-4a51-9d6b-0e2f5d3c1a77")


@dataclass(frozen=True)
class ExampleDriverSpec:
    """What one node runs of the example driver (the Helm values that shape its devices)."""

    gpus: int = 8
    gpu_partitions: int = 0
    gpu_allow_multiple_allocations: bool = False
    nics: int = 0
    cpu_numa_nodes: int = 0
    cpus_per_numa_node: int = 4
    extended_resource_name: str = ""  # the chart's deviceClass.extendedResourceName


def is_example_driver(driver: str) -> bool:
    """The example driver names itself ``<profile>.example.com``."""
    return driver.endswith(".example.com")


def _uuid(node: str, prefix: str, i: int) -> str:
    return f"{prefix}-{uuid.uuid5(_NAMESPACE, f'{node}/{prefix}/{i}')}"


def _qty_binary(n: int) -> str:
    for suffix, shift in (("Gi", 30), ("Mi", 20), ("Ki", 10)):
        if n % (1 << shift) == 0:
            return f"{n >> shift}{suffix}"
    return str(n)


def _capacity(value: str, policy: dict[str, Any] | None) -> dict[str, Any]:
    out: dict[str, Any] = {"value": value}
    if policy:
        out["requestPolicy"] = policy
    return out


def _gpu_caps(memory: int, compute: int, multi: bool) -> dict[str, Any]:
    mem, cpt = _qty_binary(memory), str(compute)
    return {
        "compute": _capacity(cpt, {"default": cpt, "validRange": {"min": "1", "step": "1", "max": cpt}}
                             if multi else None),
        "memory": _capacity(mem, {"default": mem, "validRange": {"min": "1Gi", "step": "1Gi", "max": mem}}
                            if multi else None),
    }


def _base_attrs(i: int, uid: str, model: str) -> dict[str, Any]:
    return {"driverVersion": {"version": "1.0.0"}, "index": {"int": i}, "model": {"string": model},
            "uuid": {"string": uid}}


def _slice(node: str, driver: str, index: int, count: int, body: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": API_VERSION, "kind": "ResourceSlice",
            "metadata": {"name": f"{node}-{driver}-{index}"},
            "spec": {"driver": driver, "nodeName": node,
                     "pool": {"name": node, "generation": 1, "resourceSliceCount": count}, **body}}



def _partition(name: str, attrs: dict[str, Any], memory: int, compute: int, multi: bool,
               counter_set: str) -> dict[str, Any]:
    """A partitionable GPU's device (a partition or the full GPU): it consumes its own memory and
    compute from the GPU's counter set."""
    return {
        "name": name,
        "attributes": {**attrs, "partitionable": {"bool": True}},
        "allowMultipleAllocations": multi,
        "capacity": _gpu_caps(memory, compute, multi),
        "consumesCounters": [{"counterSet": counter_set, "counters": {
            "compute": {"value": str(compute)}, "memory": {"value": _qty_binary(memory)}}}],
    }

def gpu_slices(spec: ExampleDriverSpec, node: str) -> list[dict[str, Any]]:
    multi = spec.gpu_allow_multiple_allocations
    devices: list[dict[str, Any]] = []
    counter_sets: list[dict[str, Any]] = []
    n = spec.gpu_partitions
    for i in range(spec.gpus):
        attrs = _base_attrs(i, _uuid(node, "gpu", i), "LATEST-GPU-MODEL")
        if n > 0:
            cs = f"gpu-{i}-counters"
            counter_sets.append({"name": cs, "counters": {"compute": {"value": str(COMPUTE)},
                                                          "memory": {"value": _qty_binary(MEMORY_BYTES)}}})
            pmem, pcpt = MEMORY_BYTES // n, COMPUTE // n
            for j in range(n):
                devices.append(_partition(f"gpu-{i}-partition-{j}", {**attrs, "partition": {"int": j}},
                                          pmem, pcpt, multi, cs))
            devices.append(_partition(f"gpu-{i}-full", {**attrs, "full": {"bool": True}},
                                      MEMORY_BYTES, COMPUTE, multi, cs))
        else:
            devices.append({"name": f"gpu-{i}", "attributes": attrs, "allowMultipleAllocations": multi,
                            "capacity": _gpu_caps(MEMORY_BYTES, COMPUTE, multi)})
    if not devices:
        return []
    if counter_sets:
        return [_slice(node, GPU_DRIVER, 0, 2, {"sharedCounters": counter_sets}),
                _slice(node, GPU_DRIVER, 1, 2, {"devices": devices})]
    return [_slice(node, GPU_DRIVER, 0, 1, {"devices": devices})]


def net_slices(spec: ExampleDriverSpec, node: str) -> list[dict[str, Any]]:
    bandwidth = {"value": "100G", "requestPolicy": {
        "default": "1G", "validRange": {"min": "100M", "max": "100G", "step": "1M"}}}
    devices = [{
        "name": f"nic-{i}",
        "allowMultipleAllocations": True,
        "attributes": _base_attrs(i, _uuid(node, "net", i), "LATEST-NET-MODEL"),
        "capacity": {"egressBandwidth": dict(bandwidth), "ingressBandwidth": dict(bandwidth),
                     "vfs": {"value": "100", "requestPolicy": {"default": "1", "validValues": ["1"]}}},
    } for i in range(spec.nics)]
    return [_slice(node, NET_DRIVER, 0, 1, {"devices": devices})] if devices else []


def cpu_slices(spec: ExampleDriverSpec, node: str) -> list[dict[str, Any]]:
    devices = [{
        "name": f"numa-{i}",
        "allowMultipleAllocations": True,
        "attributes": {"numaNodeID": {"int": i}},
        "capacity": {f"{CPU_DRIVER}/cpu": {"value": str(spec.cpus_per_numa_node)}},
    } for i in range(spec.cpu_numa_nodes)]
    return [_slice(node, CPU_DRIVER, 0, 1, {"devices": devices})] if devices else []


def build_example_slices(spec: ExampleDriverSpec, node: str) -> list[dict[str, Any]]:
    return gpu_slices(spec, node) + net_slices(spec, node) + cpu_slices(spec, node)


def example_device_classes(specs: list[ExampleDriverSpec]) -> list[dict[str, Any]]:
    """One DeviceClass per driver the nodes run, named after it, selecting
    ``device.driver == '<name>'`` (the chart's deviceclass.yaml); the GPU class carries the
    chart's ``deviceClass.extendedResourceName`` when a node profile sets it."""
    drivers = [GPU_DRIVER] if any(s.gpus for s in specs) else []
    drivers += [NET_DRIVER] if any(s.nics for s in specs) else []
    drivers += [CPU_DRIVER] if any(s.cpu_numa_nodes for s in specs) else []
    extended = next((s.extended_resource_name for s in specs if s.extended_resource_name), "")
    out = []
    for d in drivers:
        body: dict[str, Any] = {"selectors": [{"cel": {"expression": f"device.driver == '{d}'"}}]}
        if d == GPU_DRIVER and extended:
            body["extendedResourceName"] = extended
        out.append({"apiVersion": API_VERSION, "kind": "DeviceClass", "metadata": {"name": d}, "spec": body})
    return out


# ------------------------------------------------------------------ prepare: config and env


class ExampleConfigError(InputError, ValueError):
    """An opaque config the example driver refuses (message as the driver words it)."""


def _check_fields(obj: dict[str, Any], allowed: set[str], where: str) -> None:
    for k in obj:
        if k not in allowed:  # the driver decodes configs strictly
            raise ExampleConfigError(f'error decoding config parameters: strict decoding error: unknown field "{where}{k}"')


def normalized_gpu_config(params: dict[str, Any] | None) -> dict[str, Any]:
    """GpuConfig after the driver's Normalize + Validate (None = DefaultGpuConfig: TimeSlicing,
    interval Default). Raises ExampleConfigError with the driver's reason."""
    if params is None:
        return {"strategy": "TimeSlicing", "interval": "Default"}
    if not isinstance(params, dict):
        raise ExampleConfigError("error decoding config parameters: not a JSON object")
    api, kind = params.get("apiVersion"), params.get("kind")
    if api != CONFIG_API_VERSION or kind != "GpuConfig":
        raise ExampleConfigError(f'error decoding config parameters: no kind "{kind}" is registered for '
                                 f'version "{api}"')
    _check_fields(params, {"apiVersion", "kind", "sharing"}, "")
    sharing = params.get("sharing")
    if sharing is None:
        return {"strategy": "TimeSlicing", "interval": "Default"}
    if not isinstance(sharing, dict):
        raise ExampleConfigError("error decoding config parameters: sharing must be an object")
    _check_fields(sharing, {"strategy", "timeSlicingConfig", "spacePartitioningConfig"}, "sharing.")
    strategy = sharing.get("strategy")
    if strategy not in SHARING_STRATEGIES:
        raise ExampleConfigError(f"error validating GPU config: unknown GPU sharing strategy: {strategy or ''}")
    ts, sp = sharing.get("timeSlicingConfig"), sharing.get("spacePartitioningConfig")
    if strategy == "TimeSlicing":
        if sp is not None:
            raise ExampleConfigError("unable to get time slicing config: cannot use SpacePartitioningConfig with "
                                     "the 'TimeSlicing' strategy")
        interval = (ts or {}).get("interval", "Default") if ts is not None else "Default"
        if interval not in INTERVALS:
            raise ExampleConfigError(f"error validating GPU config: unknown time-slice interval: {interval}")
        return {"strategy": strategy, "interval": interval}
    if ts is not None:
        raise ExampleConfigError("unable to get space partitioning config: cannot use TimeSlicingConfig with "
                                 "the 'SpacePartitioning' strategy")
    count = (sp or {}).get("partitionCount", 1) if sp is not None else 1
    if not isinstance(count, int) or count < 0:
        raise ExampleConfigError(f"error validating GPU config: invalid partition count: {count}")
    return {"strategy": strategy, "partitionCount": count}


def env_id(device: str) -> str:
    """``gpu-0-partition-1`` -> ``0_PARTITION_1`` (the driver's ``Device[4:]``, upper-cased)."""
    return device[4:].replace("-", "_").upper()


def _decimal(q: str) -> str:
    """A decimal quantity as a plain integer (Go's AsDec for the net profile's rates)."""
    units = {"k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30}
    for suffix in sorted(units, key=len, reverse=True):
        if q.endswith(suffix) and q[: -len(suffix)].isdigit():
            return str(int(q[: -len(suffix)]) * units[suffix])
    return q


def device_env(driver: str, claim_uid: str, result: dict[str, Any], config: dict[str, Any] | None,
               admin_access: bool) -> list[str]:
    """The env entries of one device's CDI edit, in the order the driver writes them."""
    name = str(result.get("device", ""))
    cls = driver.split(".", 1)[0]
    key = "".join(c if c.isalnum() else "_" for c in name).upper()
    env = [f"{cls.upper()}_DEVICE_{key}_RESOURCE_CLAIM={claim_uid}", f"DRA_ADMIN_ACCESS={str(admin_access).lower()}"]
    consumed = result.get("consumedCapacity") or {}
    if driver == GPU_DRIVER:
        cfg = normalized_gpu_config(config)
        i = env_id(name)
        env += [f"GPU_DEVICE_{i}={name}", f"GPU_DEVICE_{i}_SHARING_STRATEGY={cfg['strategy']}"]
        if cfg["strategy"] == "TimeSlicing":
            env.append(f"GPU_DEVICE_{i}_TIMESLICE_INTERVAL={cfg['interval']}")
        else:
            env.append(f"GPU_DEVICE_{i}_PARTITION_COUNT={cfg['partitionCount']}")
        if "memory" in consumed:
            env.append(f"GPU_DEVICE_{i}_MEMORY={consumed['memory']}")
        if "compute" in consumed:
            env.append(f"GPU_DEVICE_{i}_COMPUTE={consumed['compute']}")
    elif driver == NET_DRIVER:
        i = name[4:]
        burst = ((config or {}).get("bandwidthBurst") or {}) if isinstance(config, dict) else {}
        if int(burst.get("ingressBurst") or 0) > 0:
            env.append(f"NET_DEVICE_{i}_INGRESS_BURST={int(burst['ingressBurst'])}")
        if int(burst.get("egressBurst") or 0) > 0:
            env.append(f"NET_DEVICE_{i}_EGRESS_BURST={int(burst['egressBurst'])}")
        if "ingressBandwidth" in consumed:
            env.append(f"NET_DEVICE_{i}_INGRESS_RATE={_decimal(str(consumed['ingressBandwidth']))}")
        if "egressBandwidth" in consumed:
            env.append(f"NET_DEVICE_{i}_EGRESS_RATE={_decimal(str(consumed['egressBandwidth']))}")
    elif driver == CPU_DRIVER:
        if config is not None:
            raise ExampleConfigError("error applying config: configuration not allowed")
        i = name[len("numa-"):]
        env.append(f"CPU_DEVICE_{i}={name}")
        cpu = consumed.get(f"{CPU_DRIVER}/cpu")
        if cpu is not None:
            env.append(f"CPU_DEVICE_{i}_CONSUMED_CPU={cpu}")
    return env


def common_env(driver: str, node: str) -> list[str]:
    """The ``common`` CDI device every container of the driver gets."""
    return [f"KUBERNETES_NODE_NAME={node}", f"DRA_RESOURCE_DRIVER_NAME={driver}"]


def claim_configs(claim: dict[str, Any], driver: str) -> list[tuple[list[str], dict[str, Any]]]:
    """(requests, parameters) of the driver's opaque configs: class configs first, then claim
    configs (the later one wins for a request)."""
    entries = (((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("config") or []
    ordered = ([e for e in entries if e.get("source") == "FromClass"]
               + [e for e in entries if e.get("source") != "FromClass"])
    out = []
    for e in ordered:
        opaque = e.get("opaque")
        if opaque is None:
            raise ExampleConfigError("error getting opaque device configs: only opaque parameters are supported "
                                     "by this driver")
        if opaque.get("driver") == driver:
            out.append((list(e.get("requests") or []), opaque.get("parameters")))
    return out


def config_for(configs: list[tuple[list[str], dict[str, Any]]], request: str) -> dict[str, Any] | None:
    for requests, params in reversed(configs):
        if not requests or request in requests:
            return params
    return None
