"""Small helpers about pods and their claims shared by the controllers and the scheduler."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

POD_CLAIM_ANNOTATION = "resource.kubernetes.io/pod-claim-name"
DELETE_PROTECTION = "resource.kubernetes.io/delete-protection"
DURATION_ANNOTATION = "labkit.dev/duration"
GROUP_LABEL = "labkit.dev/pod-group"
MIN_MEMBER_ANNOTATION = "labkit.dev/min-member"


def meta(obj: dict[str, Any]) -> dict[str, Any]:
    return obj.get("metadata") or {}


def nsname(obj: dict[str, Any]) -> str:
    m = meta(obj)
    return f"{m.get('namespace', 'default')}/{m.get('name', '')}"


def is_finished(pod: dict[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def is_deleting(obj: dict[str, Any]) -> bool:
    return bool(meta(obj).get("deletionTimestamp"))


#: the pod-claim name under which the scheduler's claim for DRA-backed extended resources is
#: tracked (not a DNS label, so it never collides with a claim name the pod itself declares)
EXTENDED_RESOURCES_KEY = "<extended-resources>"


def _recorded_claims(pod: dict[str, Any]) -> dict[str | None, str | None]:
    """pod.status.resourceClaimStatuses as entry name -> the claim the controller recorded (None: no claim
    needed)."""
    return {st.get("name"): st.get("resourceClaimName") or None
            for st in (pod.get("status") or {}).get("resourceClaimStatuses") or []}


def claim_not_needed(pod: dict[str, Any], entry: dict[str, Any]) -> bool:
    """Whether the resourceclaim controller recorded that the template entry ``entry`` needs no ResourceClaim:
    pod.status.resourceClaimStatuses names it without a resourceClaimName. The API's meaning of that: generating
    a claim was not necessary and the pod.spec.resourceClaims entry is ignored (the scheduler, the controller
    and kubelet skip it; resourceclaim.Name gives no name and no error)."""
    return _needs_no_claim(entry, _recorded_claims(pod))


def _needs_no_claim(entry: dict[str, Any], recorded: dict[str | None, str | None]) -> bool:
    """claim_not_needed, given the pod's _recorded_claims."""
    return not entry.get("resourceClaimName") and entry.get("name") in recorded and recorded[entry.get("name")] is None


@dataclass(frozen=True)
class PodClaim:
    """One claim of a pod as the pod itself says it: its entry in pod.spec.resourceClaims (or
    EXTENDED_RESOURCES_KEY), the ResourceClaim's name once known, and whether it is needed at all
    (claim_not_needed)."""

    entry: str
    claim: str | None
    needed: bool = True

    def state(self, claim: dict[str, Any] | None) -> str:
        """'not needed', 'not created', 'pending' or 'allocated', given the ResourceClaim of this name
        (None: none exists)."""
        if not self.needed:
            return "not needed"
        if claim is None:
            return "not created"
        return "allocated" if (claim.get("status") or {}).get("allocation") else "pending"


def pod_claims(pod: dict[str, Any], *, not_needed: bool = False) -> list[PodClaim]:
    """The pod's claims in spec order with their names resolved from one walk of its status, plus the
    scheduler's extended-resource claim once it exists (pod.status.extendedResourceClaimStatus). Entries
    that need no claim are left out unless ``not_needed``."""
    recorded = _recorded_claims(pod)
    out = []
    for entry in (pod.get("spec") or {}).get("resourceClaims") or []:
        name = entry.get("name") or ""
        if _needs_no_claim(entry, recorded):
            if not_needed:
                out.append(PodClaim(name, None, needed=False))
        else:
            out.append(PodClaim(name, entry.get("resourceClaimName") or recorded.get(name)))
    ext = ((pod.get("status") or {}).get("extendedResourceClaimStatus") or {}).get("resourceClaimName")
    if ext:
        out.append(PodClaim(EXTENDED_RESOURCES_KEY, ext))
    return out


def claim_name_for(pod: dict[str, Any], entry: dict[str, Any]) -> tuple[str | None, bool]:
    """(ResourceClaim name, from a template?) for one pod.spec.resourceClaims entry.

    A template claim's name is only known once the claim controller recorded it in
    pod.status.resourceClaimStatuses; until then the name is None (as it stays for an entry that needs
    no claim: callers skip those first, claim_not_needed). pod_claims resolves every entry at once.
    """
    if entry.get("resourceClaimName"):
        return entry["resourceClaimName"], False
    return _recorded_claims(pod).get(entry.get("name")), True


def claim_not_created(pod: dict[str, Any]) -> str:
    """resourceclaim.Name's error for a template claim the controller has not recorded yet."""
    return f'pod "{meta(pod).get("namespace", "default")}/{meta(pod).get("name", "")}": ResourceClaim not created yet'


def claim_not_found(namespace: str, name: str) -> str:
    """The scheduler's claim cache's answer for a claim that does not exist."""
    return f'could not find ResourceClaim "{namespace}/{name}"'


def claim_gate(pod: dict[str, Any], get_claim: Callable[[str], dict[str, Any] | None]) -> str | None:
    """Why kube-scheduler's DynamicResources PreEnqueue holds `pod` back, or None: one of its claims
    is not created yet or does not exist (the first such claim, in spec order, stopping at a claim that
    is there but fails a later check, which PreFilter reports). A gated pod is not tried at all: it gets
    no PodScheduled condition and no event, so this is the only place its reason shows.
    ``get_claim(name)``: the claim of that name in the pod's namespace, or None."""
    for entry in (pod.get("spec") or {}).get("resourceClaims") or []:
        if claim_not_needed(pod, entry):
            continue
        name, _ = claim_name_for(pod, entry)
        if name is None:
            return claim_not_created(pod)
        claim = get_claim(name)
        if claim is None:
            return claim_not_found(meta(pod).get("namespace", "default"), name)
        if is_deleting(claim):
            return None
    return None


def pod_reference(pod: dict[str, Any]) -> dict[str, Any]:
    m = meta(pod)
    return {"resource": "pods", "name": m.get("name", ""), "uid": m.get("uid", "")}


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")


def parse_duration(value: str) -> float:
    """'90', '90s', '5m', '1.5h' -> seconds. Raises ValueError with the accepted forms."""
    m = _DURATION.match(str(value))
    if not m:
        raise ValueError(f"{DURATION_ANNOTATION}: {value!r} is not a duration; use e.g. 30s, 5m or 1h")
    n = float(m.group(1))
    return n * {"ms": 0.001, "s": 1, "m": 60, "h": 3600, None: 1}[m.group(2)]


def qos_class(pod: dict[str, Any]) -> str:
    """BestEffort / Burstable / Guaranteed, from cpu and memory requests and limits."""
    spec = pod.get("spec") or {}
    containers = list(spec.get("containers") or []) + list(spec.get("initContainers") or [])
    any_set, guaranteed = False, True
    for c in containers:
        res = c.get("resources") or {}
        req, lim = res.get("requests") or {}, res.get("limits") or {}
        for r in ("cpu", "memory"):
            if r in req or r in lim:
                any_set = True
            if r not in lim or str(req.get(r, lim[r])) != str(lim[r]):
                guaranteed = False
    if not any_set:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


def status_on_create(obj: dict[str, Any]) -> None:
    """What the API server's create strategy sets (pods start Pending with a QoS class)."""
    if obj.get("kind") == "Pod":
        obj["status"] = {"phase": "Pending", "qosClass": qos_class(obj)}
