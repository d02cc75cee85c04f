"""Which kinds the sim knows, their API group/version and whether they are namespaced."""

from __future__ import annotations

#: kind -> default apiVersion
API_VERSIONS: dict[str, str] = {
    "Namespace": "v1",
    "Node": "v1",
    "Pod": "v1",
    "Event": "v1",
    "ConfigMap": "v1",
    "Secret": "v1",
    "Service": "v1",
    "ServiceAccount": "v1",
    "Deployment": "apps/v1",
    "ReplicaSet": "apps/v1",
    "Job": "batch/v1",
    "DeviceClass": "resource.k8s.io/v1",
    "ResourceClaim": "resource.k8s.io/v1",
    "ResourceClaimTemplate": "resource.k8s.io/v1",
    "ResourceSlice": "resource.k8s.io/v1",
    "DeviceTaintRule": "resource.k8s.io/v1",
    "PodGroup": "scheduling.k8s.io/v1beta1",
    "Workload": "scheduling.k8s.io/v1beta1",
    "PriorityClass": "scheduling.k8s.io/v1",
}

CLUSTER_SCOPED = frozenset(
    {"Namespace", "Node", "DeviceClass", "ResourceSlice", "DeviceTaintRule", "PriorityClass"}
)

#: lower-case / plural / short spellings accepted by Cluster.get/list/delete
_ALIASES: dict[str, str] = {}
for _k in API_VERSIONS:
    _ALIASES[_k.lower()] = _k
    _ALIASES[_k.lower() + "s"] = _k
_ALIASES.update({"po": "Pod", "no": "Node", "ns": "Namespace", "deploy": "Deployment", "rs": "ReplicaSet",
                 "ev": "Event", "resourceclaims": "ResourceClaim", "claim": "ResourceClaim",
                 "claims": "ResourceClaim", "pg": "PodGroup"})


def canonical_kind(kind: str) -> str:
    """'pods', 'pod', 'Pod' -> 'Pod'; unknown kinds pass through unchanged."""
    return _ALIASES.get(kind.lower(), kind)


def is_namespaced(kind: str) -> bool:
    return kind not in CLUSTER_SCOPED
