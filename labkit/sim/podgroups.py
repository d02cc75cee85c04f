"""PodGroup-level ResourceClaims (DRAWorkloadResourceClaims, KEP-5729).

A pod's `spec.resourceClaims` entry that repeats an entry of its PodGroup's
`spec.resourceClaims` (same name, same source) is the group's claim: a template gives one
ResourceClaim per PodGroup (owned by the PodGroup) instead of one per pod, and the claim is
reserved for the PodGroup (`reservedFor: {apiGroup: scheduling.k8s.io, resource: podgroups}`),
so every pod of the group shares the same devices.
"""

from __future__ import annotations

from labkit.model.podutil import meta
from labkit.sim.store import Store

API_GROUP = "scheduling.k8s.io"


def pod_group(store: Store, pod: dict) -> dict | None:
    name = ((pod.get("spec") or {}).get("schedulingGroup") or {}).get("podGroupName")
    return store.get("PodGroup", name, meta(pod)["namespace"]) if name else None


def group_entry(group: dict | None, entry: dict) -> dict | None:
    """The PodGroup's claim entry the pod entry stands for, or None."""
    for ge in ((group or {}).get("spec") or {}).get("resourceClaims") or []:
        if ge.get("name") == entry.get("name") and (
                ge.get("resourceClaimName") or None) == (entry.get("resourceClaimName") or None) and (
                ge.get("resourceClaimTemplateName") or None) == (entry.get("resourceClaimTemplateName") or None):
            return ge
    return None


def group_ref(group: dict) -> dict:
    m = meta(group)
    return {"apiGroup": API_GROUP, "resource": "podgroups", "name": m.get("name", ""), "uid": m.get("uid", "")}


def owned_by(claim: dict, group: dict) -> bool:
    return any(o.get("kind") == "PodGroup" and o.get("uid") == meta(group).get("uid")
               for o in meta(claim).get("ownerReferences") or [])


def group_claim_ref(store: Store, pod: dict, claim: dict) -> dict | None:
    """The PodGroup reference to reserve `claim` for when it is a group claim of `pod`."""
    group = pod_group(store, pod)
    if group is None:
        return None
    for entry in (pod.get("spec") or {}).get("resourceClaims") or []:
        if group_entry(group, entry) is None:
            continue
        if entry.get("resourceClaimName") == meta(claim).get("name") or (
                entry.get("resourceClaimTemplateName") and owned_by(claim, group)):
            return group_ref(group)
    return None
