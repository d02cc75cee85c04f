"""NVIDIA's device plugin and the kubelet's device manager, for profiles with `gpuPlugin: device-plugin`.

NVIDIA's supported GB200 set-up: the GPUs reach pods through NVIDIA's device plugin (the node
advertises `nvidia.com/gpu` in capacity and allocatable, one unit per GPU), and NVIDIA's DRA driver
runs with its GPU part off (resources.gpus.enabled=false) for ComputeDomains only. Facts:

- NVIDIA/k8s-device-plugin cmd/nvidia-device-plugin/main.go: DEVICE_LIST_STRATEGY defaults to
  `envvar`, DEVICE_ID_STRATEGY to `uuid`: Allocate answers a container with the env
  NVIDIA_VISIBLE_DEVICES=<GPU UUIDs, comma-separated>. The sim adds the fake's FAKE_GPU_DEVICES and
  FAKE_GPU_COUNT (as the fake DRA driver's containers have them).
- kubernetes pkg/kubelet/cm/devicemanager/manager.go: at pod admission the device manager gives each
  container devices of the resource that no other pod holds (an init container's devices are
  reusable by the containers after it); a pod's devices are free again once it has finished or is
  gone. Too few free devices: "requested number of devices unavailable for <resource>. Requested:
  <n>, Available: <m>"; pkg/kubelet/cm/admission/errors.go wraps it as "Allocate failed due to <err>,
  which is unexpected" with reason UnexpectedAdmissionError, and pkg/kubelet/kubelet.go (rejectPod)
  fails the pod with that reason and the message "Pod was rejected: <message>" plus a Warning event.

Which free GPUs a container gets: the lowest GPU indexes first (NVIDIA's plugin prefers an
NVLink-aligned set through GetPreferredAllocation; on one tray every choice is equally aligned).
"""

from __future__ import annotations

from typing import Any

from fake_gpus import catalog as fake_gpus_catalog
from fake_gpus import naming as fake_gpus_naming
from labkit.model.podutil import is_finished, meta
from labkit.model.profiles import DEVICE_PLUGIN_RESOURCE, ClusterProfile, NodeSpec
from labkit.sim.agent import COMPONENT, NodeAgent
from labkit.sim.events import EventRecorder
from labkit.sim.resources import container_requests
from labkit.sim.store import Store, evolve

RESOURCE = DEVICE_PLUGIN_RESOURCE
ADMISSION_REASON = "UnexpectedAdmissionError"

#: one GPU as the device plugin lists it: (device name as the DRA driver would call it, UUID = device ID)
Gpu = tuple[str, str]


def node_gpus(spec: NodeSpec, profile: ClusterProfile, cache: dict[str, Any]) -> list[Gpu]:
    """The GPUs NVIDIA's device plugin lists on this node (none unless the profile says
    `gpuPlugin: device-plugin`, none on a node that runs dra-example-driver). `cache` memoises
    node profiles (the one the sim's node builders share)."""
    if not profile.device_plugin:
        return []
    if spec.node_profile not in cache:
        cache[spec.node_profile] = fake_gpus_catalog.load_node_profile(spec.node_profile)
    prof = cache[spec.node_profile]
    if prof.example is not None:
        return []
    return [(f"gpu-{g.minor}", fake_gpus_naming.gpu_uuid(spec.name, g.minor)) for g in sorted(prof.gpus,
                                                                                            key=lambda g: g.minor)]


def advertised(spec: NodeSpec, profile: ClusterProfile, cache: dict[str, Any]) -> dict[str, str]:
    """What the device plugin registers with the kubelet, as the node's capacity and allocatable."""
    gpus = node_gpus(spec, profile, cache)
    return {RESOURCE: str(len(gpus))} if gpus else {}


def container_env(gpus: list[Gpu]) -> dict[str, str]:
    """The env NVIDIA's device plugin (envvar / uuid strategies) and the fake give a container."""
    return {"NVIDIA_VISIBLE_DEVICES": ",".join(u for _, u in gpus),
            "FAKE_GPU_DEVICES": ",".join(n for n, _ in gpus), "FAKE_GPU_COUNT": str(len(gpus))}


class DeviceManager:
    """The kubelet device manager of every node whose GPUs NVIDIA's device plugin serves."""

    def __init__(self, store: Store, events: EventRecorder, agent: NodeAgent, profile: ClusterProfile,
                 cache: dict[str, Any] | None = None) -> None:
        self.store, self.events = store, events
        cache = {} if cache is None else cache
        self.devices: dict[str, list[Gpu]] = {}  # node -> its GPUs, in the order they are handed out
        for spec in profile.nodes if profile.device_plugin else ():
            gpus = node_gpus(spec, profile, cache)
            if gpus:
                self.devices[spec.name] = gpus
        #: pod uid -> (node, container -> its GPUs); what a kubelet keeps in its checkpoint
        self.assigned: dict[str, tuple[str, dict[str, list[Gpu]]]] = {}
        if self.devices:
            store.watch(self._on_pod, kinds=("Pod",))
            agent.device_plugins = self.allocate

    def _on_pod(self, ev) -> None:
        if ev.type == "DELETED" or is_finished(ev.object):
            self.assigned.pop(meta(ev.object).get("uid", ""), None)

    def in_use(self, node: str) -> set[str]:
        return {g[1] for n, per in self.assigned.values() if n == node for gpus in per.values() for g in gpus}

    def allocate(self, pod: dict, node: dict) -> dict[str, dict[str, str]] | None:
        """Admission: the pod's containers' device-plugin env (container -> env; the same answer
        again for a pod admitted before), or None when the pod was rejected (it is Failed now)."""
        uid = meta(pod)["uid"]
        name = node["metadata"]["name"]
        if uid not in self.assigned:
            per = self._assign(pod, name)
            if per is None:
                return None
            self.assigned[uid] = (name, per)
        return {c: container_env(gpus) for c, gpus in self.assigned[uid][1].items() if gpus}

    def _assign(self, pod: dict, node: str) -> dict[str, list[Gpu]] | None:
        spec = pod.get("spec") or {}
        taken = self.in_use(node)
        free = [g for g in self.devices.get(node, []) if g[1] not in taken]
        reusable: list[Gpu] = []  # init containers' devices, for the containers after them
        per: dict[str, list[Gpu]] = {}
        for init, ctr in [(True, c) for c in spec.get("initContainers") or []] + \
                         [(False, c) for c in spec.get("containers") or []]:
            want = container_requests(ctr).get(RESOURCE, 0)
            if not want:
                continue
            count = int(want)
            mine = reusable[:count]
            needed = count - len(mine)
            if needed > len(free):
                self._reject(pod, f"requested number of devices unavailable for {RESOURCE}. "
                                  f"Requested: {needed}, Available: {len(free)}")
                return None
            mine += free[:needed]
            free = free[needed:]
            reusable = [g for g in reusable if g not in mine] + (mine if init else [])
            per[ctr.get("name", "")] = mine
        return per

    def _reject(self, pod: dict, error: str) -> None:
        """kubelet rejectPod: the pod fails at admission, with a Warning event."""
        message = f"Allocate failed due to {error}, which is unexpected"
        self.events.record(pod, "Warning", ADMISSION_REASON, message, COMPONENT)
        new = evolve(pod, "status")
        new["status"].update(phase="Failed", reason=ADMISSION_REASON, message=f"Pod was rejected: {message}")
        self.store.update(new)
