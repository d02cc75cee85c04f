"""kind cluster configuration for a LabKit cluster profile.

One kind worker per fake node of the profile. Each worker registers as the profile's node name
(``t4-0``, not kind's ``<cluster>-worker2``: a kubeadm JoinConfiguration patch), so manifests that
pin pods with ``kubernetes.io/hostname`` and placements read the same on every backend. The API
server then reaches kubelets by InternalIP (the node names are not DNS names on kind's network).
Each worker also carries labels naming its profile node and the fake_gpus node profile its driver
pod publishes.

``LABKIT_KIND_NODE_IMAGE`` replaces the pinned ``kindest/node`` image (for example an image built
offline by ``tools/build-kind-node-image.sh``).
"""

from __future__ import annotations

import os
from typing import Any

import yaml

from labkit.cluster.backends.kind.images import node_image
from labkit.model.profiles import ClusterProfile, load_profile

#: label keys the fake_gpus DaemonSet reads (through the Node object) to pick its hardware
PROFILE_LABEL = "fake-gpus.dev/node-profile"
MIG_LABEL = "fake-gpus.dev/mig-mode"
NODE_NAME_LABEL = "labkit.dev/profile-node"

#: containerd 1.7 silently drops CDI devices unless CDI is on; containerd 2 has it on by default,
#: and this patch is harmless there (kind migrates version-2 config sections).
CDI_PATCH = '[plugins."io.containerd.grpc.v1.cri"]\n  enable_cdi = true\n'
#: where the host's capability bounding set lacks CAP_SYS_RESOURCE, containerd must not try to
#: lower oom_score_adj (as kind does for rootless); otherwise every pod sandbox fails
OOM_PATCH = '[plugins."io.containerd.grpc.v1.cri"]\n  restrict_oom_score_adj = true\n'
NODE_IMAGE_ENV = "LABKIT_KIND_NODE_IMAGE"

#: kubeadm's waits (kubeadm.k8s.io/v1beta4 `timeouts`), longer than its defaults (4-5 min): on a
#: busy laptop or a 2-core CI machine a control plane's static pods or a joining kubelet's TLS
#: bootstrap can need more, and kubeadm then fails the whole `kind create cluster` for a wait
KUBEADM_INIT_TIMEOUTS = {"controlPlaneComponentHealthCheck": "10m0s", "kubeletHealthCheck": "10m0s",
                         "kubernetesAPICall": "3m0s", "etcdAPICall": "5m0s"}
KUBEADM_JOIN_TIMEOUTS = {"kubeletHealthCheck": "10m0s", "kubernetesAPICall": "3m0s",
                         "tlsBootstrap": "10m0s", "discovery": "10m0s"}

#: KubeletConfiguration fields of every node, over the kubelet's defaults. syncFrequency: a pod whose
#: claims the kubelet could not prepare (a ComputeDomain not Ready yet, a driver restarting or not
#: registered again yet) is tried again only at the pod's next resync, not at the 10 s error back-off:
#: kubernetes/kubernetes pkg/kubelet/kuberuntime/kuberuntime_manager.go SyncPod records the
#: FailedPrepareDynamicResources event and returns no error, and pkg/kubelet/pod_workers.go
#: completeWork then requeues the pod at syncFrequency (default 1m) plus up to 50 % jitter. At 10 s
#: such a pod starts 10-15 s after the cause is gone instead of 60-90 s (NVIDIA's compute-domain
#: plugin retries inside the call for up to 45 s, kubernetes-sigs/dra-driver-nvidia-gpu
#: cmd/compute-domain-kubelet-plugin/driver.go ErrorRetryMaxTimeout; the fake driver answers at once).
#: Idle CPU of a node measured the same (~1.1 CPU-s a minute for a worker, either way).
KUBELET_CONFIG: dict[str, Any] = {"syncFrequency": "10s"}

#: API groups/versions an enabled gate needs served, per Kubernetes minor (alpha/beta APIs are
#: off by default). GA APIs need nothing.
RUNTIME_CONFIG_FOR_GATE: dict[str, dict[str, str]] = {
    "DRADeviceTaintRules": {"1.35": "resource.k8s.io/v1alpha3", "1.36": "resource.k8s.io/v1beta2"},
    "DRAResourcePoolStatus": {"1.36": "resource.k8s.io/v1alpha3", "1.37": "resource.k8s.io/v1alpha3"},
    "DRAWorkloadResourceClaims": {"1.36": "scheduling.k8s.io/v1alpha2", "1.37": "scheduling.k8s.io/v1alpha3"},
    "GenericWorkload": {"1.36": "scheduling.k8s.io/v1alpha2", "1.37": "scheduling.k8s.io/v1alpha3"},
}


def minor_of(version: str) -> str:
    return ".".join(str(version).lstrip("v").split(".")[:2])


def _join_patch(name: str, taints: list[dict[str, Any]]) -> str:
    registration: dict[str, Any] = {"name": name}
    if taints:
        registration["taints"] = [{k: t[k] for k in ("key", "value", "effect") if k in t} for t in taints]
    return yaml.safe_dump({"kind": "JoinConfiguration", "nodeRegistration": registration}, sort_keys=False)


def _apiserver_patch(runtime_config: dict[str, str], gates: dict[str, bool]) -> str:
    """kubelet-preferred-address-types for the API server, and no leader election for the controller
    manager and the scheduler: a kind cluster has one control-plane node, so electing costs each of
    them a Lease renewal every 2 s (an API write and an etcd write) and elects nobody else; without
    it an idle workshop cluster uses ~9 % less CPU. kind's own extraArgs (runtime-config,
    feature-gates, enable-hostpath-provisioner: kubernetes-sigs/kind
    pkg/cluster/internal/kubeadm/config.go) are repeated because a merge patch replaces whole lists."""
    def gate_args() -> list[dict[str, str]]:  # fresh dicts: shared ones would dump as YAML anchors
        value = ",".join(f"{k}={str(v).lower()}" for k, v in sorted(gates.items()))
        return [{"name": "feature-gates", "value": value}] if gates else []

    args = [{"name": "runtime-config", "value": ",".join(f"{k}={v}" for k, v in sorted(runtime_config.items()))},
            *gate_args(), {"name": "kubelet-preferred-address-types", "value": "InternalIP,Hostname"}]
    manager = [*gate_args(), {"name": "enable-hostpath-provisioner", "value": "true"},
               {"name": "leader-elect", "value": "false"}]
    doc = {"apiVersion": "kubeadm.k8s.io/v1beta4", "kind": "ClusterConfiguration", "apiServer": {"extraArgs": args},
           "controllerManager": {"extraArgs": manager},
           "scheduler": {"extraArgs": [*gate_args(), {"name": "leader-elect", "value": "false"}]}}
    return yaml.safe_dump(doc, sort_keys=False)


def _timeouts_patches() -> list[str]:
    return [yaml.safe_dump({"apiVersion": "kubeadm.k8s.io/v1beta4", "kind": kind, "timeouts": timeouts},
                           sort_keys=False)
            for kind, timeouts in (("InitConfiguration", KUBEADM_INIT_TIMEOUTS),
                                   ("JoinConfiguration", KUBEADM_JOIN_TIMEOUTS))]


def kind_config(
    profile: str | dict[str, Any] | ClusterProfile,
    *,
    cluster_name: str = "labkit",
    allow_cgroup_v1: bool = False,
    restrict_oom_score_adj: bool = False,
    node_image_override: str | None = None,
) -> dict[str, Any]:
    """The ``kind.x-k8s.io/v1alpha4`` Cluster document for a cluster profile.

    `allow_cgroup_v1` adds ``failCgroupV1: false`` to every kubelet (hosts on cgroup v1);
    `restrict_oom_score_adj` is for hosts whose bounding set lacks CAP_SYS_RESOURCE.
    Every kubelet gets `KUBELET_CONFIG`.
    """
    profile = load_profile(profile)
    version = profile.kubernetes_version
    minor = minor_of(version)
    image = node_image_override or os.environ.get(NODE_IMAGE_ENV) or node_image(version)
    gates = dict(profile.feature_gates)

    runtime_config: dict[str, str] = {}
    for gate, enabled in sorted(gates.items()):
        api = RUNTIME_CONFIG_FOR_GATE.get(gate, {}).get(minor)
        if enabled and api:
            runtime_config[api] = "true"

    control_plane: dict[str, Any] = {"role": "control-plane", "image": image}
    if allow_cgroup_v1:
        control_plane["kubeadmConfigPatches"] = [_cgroup_v1_patch()]
    nodes: list[dict[str, Any]] = [control_plane]
    for node in profile.nodes:
        labels = {NODE_NAME_LABEL: node.name, PROFILE_LABEL: node.node_profile}
        if node.mig_mode:
            labels[MIG_LABEL] = node.mig_mode
        labels.update(node.labels)
        worker: dict[str, Any] = {"role": "worker", "image": image, "labels": labels}
        patches = [_join_patch(node.name, node.taints)]
        if allow_cgroup_v1:
            patches.append(_cgroup_v1_patch())
        worker["kubeadmConfigPatches"] = patches
        nodes.append(worker)

    containerd = [CDI_PATCH] + ([OOM_PATCH] if restrict_oom_score_adj else [])
    config: dict[str, Any] = {
        "kind": "Cluster",
        "apiVersion": "kind.x-k8s.io/v1alpha4",
        "name": cluster_name,
        "nodes": nodes,
        "containerdConfigPatches": containerd,
        "kubeadmConfigPatches": [_apiserver_patch(runtime_config, gates), *_timeouts_patches(),
                                 yaml.safe_dump({"kind": "KubeletConfiguration", **KUBELET_CONFIG}, sort_keys=False)],
    }
    if gates:
        config["featureGates"] = dict(sorted(gates.items()))
    if runtime_config:
        config["runtimeConfig"] = runtime_config
    return config


def _cgroup_v1_patch() -> str:
    """Kubelet 1.35+ refuses cgroup v1 hosts unless told otherwise (KEP-5573)."""
    return yaml.safe_dump({"kind": "KubeletConfiguration", "failCgroupV1": False}, sort_keys=False)


def kind_config_yaml(profile: str | dict[str, Any] | ClusterProfile, **kwargs: Any) -> str:
    return yaml.safe_dump(kind_config(profile, **kwargs), sort_keys=False)
