"""Reserve, PreBind and Bind: what the sim scheduler writes once a node is chosen (or none is).

Reserve counts the chosen devices and resources as in use before anything is written (a gang
reserves all its members first and takes everything back if too few fit). PreBind writes each
claim's status.allocation, the delete-protection finalizer and reservedFor (a PodGroup's claim
is reserved for the PodGroup); Bind sets spec.nodeName and PodScheduled=True and records the
Scheduled event. A pod that fits nowhere gets PodScheduled=False (Unschedulable, or
SchedulerError when a plugin failed) and a FailedScheduling event.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from labkit.model.podutil import DELETE_PROTECTION, EXTENDED_RESOURCES_KEY, meta, pod_reference
from labkit.sim import podgroups
from labkit.sim.filters import EXTENDED_CLAIM_ANNOTATION
from labkit.sim.names import new_uid
from labkit.sim.resources import pod_requests
from labkit.sim.scoring import nonzero_requests
from labkit.sim.store import copy_of, evolve

if TYPE_CHECKING:
    from labkit.sim.attempt import Attempt
    from labkit.sim.handle import SchedulerHandle

COMPONENT = "default-scheduler"


def owner_name(pod: dict, key: str) -> str:
    """Owner name recorded in AllocatedState (shown in allocator explanations)."""
    return f"{meta(pod)['namespace']}/{meta(pod)['name']}-extended-resources" if key == EXTENDED_RESOURCES_KEY else key


def _alloc_key(pod: dict, by_key: dict[str, dict], key: str) -> str:
    return f"ext:{meta(pod)['uid']}" if key == EXTENDED_RESOURCES_KEY else meta(by_key[key])["uid"]


def set_condition(pod: dict, status: str, reason: str | None, message: str | None) -> bool:
    """Set PodScheduled (first in the list); True when it changed."""
    st = pod.setdefault("status", {})
    st.setdefault("phase", "Pending")
    conds = [c for c in st.get("conditions") or [] if c.get("type") != "PodScheduled"]
    cond: dict[str, Any] = {"type": "PodScheduled", "status": status}
    if reason:
        cond["reason"] = reason
    if message:
        cond["message"] = message
    old = next((c for c in st.get("conditions") or [] if c.get("type") == "PodScheduled"), None)
    st["conditions"] = [cond, *conds]
    return old != cond


class Binder:
    def __init__(self, handle: SchedulerHandle) -> None:
        self.s = handle

    def _fix_share_ids(self, result: dict) -> dict:
        """Seeded shareIDs instead of random ones, so runs repeat exactly."""
        result = copy_of(result)
        for r in ((result.get("devices") or {}).get("results") or []):
            if r.get("shareID"):
                r["shareID"] = new_uid(self.s.store.rng)
        return result

    def reserve(self, pod: dict, att: Attempt) -> dict[str, dict]:
        """Count the attempt's devices and resources as in use (not yet written)."""
        s = self.s
        fixed = {k: self._fix_share_ids(v) for k, v in att.allocations.items()}
        by_key = {f"{meta(c)['namespace']}/{meta(c)['name']}": c for c in att.claims}
        for key, result in fixed.items():
            owner = owner_name(pod, key)
            s.dra.allocated.add(result, owner=owner)
            s.claim_allocs[_alloc_key(pod, by_key, key)] = (result, owner)
        s.resources.account(meta(pod)["uid"], att.node or "", pod_requests(pod), nonzero_requests(pod))
        if fixed:
            s.allocated_devices()
        return fixed

    def unreserve(self, pod: dict, att: Attempt, fixed: dict[str, dict]) -> None:
        s = self.s
        by_key = {f"{meta(c)['namespace']}/{meta(c)['name']}": c for c in att.claims}
        for key, result in fixed.items():
            s.dra.allocated.remove(result, owner=owner_name(pod, key))
            s.claim_allocs.pop(_alloc_key(pod, by_key, key), None)
        if meta(pod)["uid"] in s.resources.bound:
            s.resources.unaccount(meta(pod)["uid"])

    def commit(self, pod: dict, att: Attempt, fixed: dict[str, dict] | None = None) -> None:
        s = self.s
        if fixed is None:
            fixed = self.reserve(pod, att)
        ref = pod_reference(pod)
        for claim in att.claims:
            key = f"{meta(claim)['namespace']}/{meta(claim)['name']}"
            cur = s.store.get("ResourceClaim", meta(claim)["name"], meta(claim)["namespace"]) or claim
            new = evolve(cur, "status")
            st = new["status"]
            if key in fixed:
                st["allocation"] = fixed[key]
                fins = list(new["metadata"].get("finalizers") or [])
                if DELETE_PROTECTION not in fins:
                    fins.append(DELETE_PROTECTION)
                new["metadata"]["finalizers"] = fins
            reserved = list(st.get("reservedFor") or [])
            mine = podgroups.group_claim_ref(s.store, pod, claim) or ref  # a PodGroup's claim: reserved for the group
            if not any(r.get("uid") == mine["uid"] for r in reserved):
                reserved.append(mine)
            st["reservedFor"] = reserved
            s.store.update(new)
        new_pod = evolve(pod, "spec", "status")
        if EXTENDED_RESOURCES_KEY in fixed and att.ext_claim is not None:
            ext = self._create_extended_claim(pod, att.ext_claim, fixed[EXTENDED_RESOURCES_KEY], ref)
            new_pod["status"]["extendedResourceClaimStatus"] = {
                "requestMappings": att.ext_mappings, "resourceClaimName": meta(ext)["name"]}
        new_pod["spec"]["nodeName"] = att.node
        set_condition(new_pod, "True", None, None)
        s.store.update(new_pod)
        s.queue.failed_epoch.pop(meta(pod)["uid"], None)
        s.events.record(pod, "Normal", "Scheduled",
                        f"Successfully assigned {meta(pod)['namespace']}/{meta(pod)['name']} to {att.node}", COMPONENT)

    def _create_extended_claim(self, pod: dict, synth: dict, result: dict, ref: dict) -> dict:
        s = self.s
        pm = meta(pod)
        claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                 "metadata": {"generateName": f"{pm['name']}-extended-resources-", "namespace": pm["namespace"],
                              "annotations": {EXTENDED_CLAIM_ANNOTATION: "true"},
                              "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": pm["name"],
                                                   "uid": pm["uid"], "controller": True, "blockOwnerDeletion": True}],
                              "finalizers": [DELETE_PROTECTION]},
                 "spec": copy_of(synth["spec"])}
        created = s.store.create(claim, copy=False)
        new = evolve(created, "status")
        new["status"] = {"allocation": result, "reservedFor": [ref]}
        s.claim_allocs[meta(created)["uid"]] = s.claim_allocs.pop(
            f"ext:{pm['uid']}", (result, owner_name(pod, EXTENDED_RESOURCES_KEY)))
        return s.store.update(new)

    def fail(self, pod: dict, att: Attempt) -> dict:
        """Write PodScheduled=False and the FailedScheduling event (not for gated pods). Returns the pod."""
        if att.gated:
            return pod
        new = evolve(pod, "status")
        reason = "SchedulerError" if att.error else "Unschedulable"
        if set_condition(new, "False", reason, att.message):
            pod = self.s.store.update(new)
        self.s.events.record(pod, "Warning", "FailedScheduling", att.message, COMPONENT)
        return pod

    def gated(self, pod: dict) -> dict:
        new = evolve(pod, "status")
        if set_condition(new, "False", "SchedulingGated", "Scheduling is blocked due to non-empty scheduling gates"):
            return self.s.store.update(new)
        return pod
