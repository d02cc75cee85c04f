"""The resourceclaim controller of kube-controller-manager, for the sim.

- creates a ResourceClaim for each template entry of a pod (generateName `<pod>-<podClaimName>-`,
  controller ownerReference to the pod, annotation `resource.kubernetes.io/pod-claim-name`,
  labels/annotations from the template's metadata, spec copied) and records it in
  pod.status.resourceClaimStatuses;
- removes pods that are gone or finished from claims' status.reservedFor;
- deallocates a claim nobody reserves any more (allocation and delete-protection finalizer go);
- deletes template claims whose pod finished (garbage collection deletes them with the pod).
"""

from __future__ import annotations

from collections.abc import Callable

from labkit.model.podutil import (
    DELETE_PROTECTION,
    POD_CLAIM_ANNOTATION,
    claim_name_for,
    claim_not_needed,
    is_deleting,
    is_finished,
    meta,
)
from labkit.sim import names, podgroups
from labkit.sim.events import EventRecorder
from labkit.sim.store import Store, copy_of, evolve

COMPONENT = "resource_claim"
EXTENDED_CLAIM_ANNOTATION = "resource.kubernetes.io/extended-resource-claim"


class ClaimController:
    def __init__(self, store: Store, events: EventRecorder, on_deallocate: Callable[[dict], None]) -> None:
        self.store = store
        self.events = events
        self.on_deallocate = on_deallocate  # called with the claim before its allocation is removed
        self._dirty_pods: set[tuple[str, str]] = set()
        self._dirty_claims: set[tuple[str, str]] = set()
        self._claims_of_pod: dict[str, set[tuple[str, str]]] = {}  # pod uid -> claims reserving it
        store.watch(self._on_event, kinds=("Pod", "ResourceClaim", "ResourceClaimTemplate"))
        for p in store.list("Pod"):
            self._dirty_pods.add((meta(p)["namespace"], meta(p)["name"]))
        for c in store.list("ResourceClaim"):
            self._dirty_claims.add((meta(c)["namespace"], meta(c)["name"]))

    def _on_event(self, ev) -> None:
        m = meta(ev.object)
        key = (m.get("namespace", "default"), m.get("name", ""))
        if ev.kind == "Pod":
            self._dirty_pods.add(key)
            if ev.type == "DELETED" or is_finished(ev.object):
                self._dirty_claims.update(self._claims_of_pod.get(m.get("uid", ""), ()))
        elif ev.kind == "ResourceClaim":
            self._dirty_claims.add(key)
            for ref in (ev.object.get("status") or {}).get("reservedFor") or []:
                self._claims_of_pod.setdefault(ref.get("uid", ""), set()).add(key)
        else:  # a template appeared: pods waiting for it may proceed
            self._dirty_pods.update(
                (meta(p)["namespace"], meta(p)["name"]) for p in self.store.list("Pod", key[0])
                if not p["spec"].get("nodeName")
            )

    def reconcile(self) -> None:
        while self._dirty_pods or self._dirty_claims:
            pods, self._dirty_pods = sorted(self._dirty_pods), set()
            for ns, name in pods:
                pod = self.store.get("Pod", name, ns)
                if pod is not None:
                    self._sync_pod(pod)
            claims, self._dirty_claims = sorted(self._dirty_claims), set()
            for ns, name in claims:
                claim = self.store.get("ResourceClaim", name, ns)
                if claim is not None:
                    self._sync_claim(claim)

    # -- pods ------------------------------------------------------------------------------
    def _sync_pod(self, pod: dict) -> None:
        if is_deleting(pod) or is_finished(pod):
            for (ns, name) in self._claims_of_pod.get(meta(pod)["uid"], ()):
                self._dirty_claims.add((ns, name))
            return
        pm = meta(pod)
        statuses = list((pod.get("status") or {}).get("resourceClaimStatuses") or [])
        changed = False
        for entry in (pod.get("spec") or {}).get("resourceClaims") or []:
            template_name = entry.get("resourceClaimTemplateName")
            if not template_name or claim_not_needed(pod, entry):
                continue
            existing, _ = claim_name_for(pod, entry)
            if existing:
                continue
            group = podgroups.pod_group(self.store, pod)
            if podgroups.group_entry(group, entry) is not None:
                shared = self._group_claim(group, entry, template_name) if group is not None else None
                if shared is not None:
                    statuses.append({"name": entry["name"], "resourceClaimName": meta(shared)["name"]})
                    changed = True
                continue
            template = self.store.get("ResourceClaimTemplate", template_name, pm["namespace"])
            if template is None:
                self.events.record(pod, "Warning", "FailedResourceClaimCreation",
                                   f'PodResourceClaim {entry.get("name")}: resource claim template '
                                   f'"{template_name}": resourceclaimtemplate.resource.k8s.io '
                                   f'"{template_name}" not found', COMPONENT)
                continue
            tspec = template.get("spec") or {}
            tmeta = tspec.get("metadata") or {}
            annotations = dict(tmeta.get("annotations") or {})
            annotations[POD_CLAIM_ANNOTATION] = entry["name"]
            claim_meta = {
                "generateName": names.claim_generate_name(pm["name"], entry["name"]),
                "namespace": pm["namespace"],
                "annotations": annotations,
                "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": pm["name"], "uid": pm["uid"],
                                     "controller": True, "blockOwnerDeletion": True}],
            }
            if tmeta.get("labels"):
                claim_meta["labels"] = dict(tmeta["labels"])
            claim = self.store.create({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                                       "metadata": claim_meta, "spec": copy_of(tspec.get("spec") or {})},
                                      copy=False)
            statuses.append({"name": entry["name"], "resourceClaimName": meta(claim)["name"]})
            changed = True
        if changed:
            new = evolve(pod, "status")
            new["status"]["resourceClaimStatuses"] = statuses
            self.store.update(new)

    def _group_claim(self, group: dict, entry: dict, template_name: str) -> dict | None:
        """The PodGroup's claim for a template entry: found, or created once for the whole group."""
        gm = meta(group)
        for c in self.store.list("ResourceClaim", gm["namespace"]):
            if podgroups.owned_by(c, group) and (meta(c).get("annotations") or {}).get(POD_CLAIM_ANNOTATION) == entry["name"]:
                return c
        template = self.store.get("ResourceClaimTemplate", template_name, gm["namespace"])
        if template is None:
            self.events.record(group, "Warning", "FailedResourceClaimCreation",
                               f'PodGroup resource claim {entry.get("name")}: resource claim template '
                               f'"{template_name}" not found', COMPONENT)
            return None
        tspec = template.get("spec") or {}
        tmeta = tspec.get("metadata") or {}
        claim_meta = {
            "generateName": names.claim_generate_name(gm["name"], entry["name"]),
            "namespace": gm["namespace"],
            "annotations": {**(tmeta.get("annotations") or {}), POD_CLAIM_ANNOTATION: entry["name"]},
            "ownerReferences": [{"apiVersion": group.get("apiVersion", "scheduling.k8s.io/v1alpha2"),
                                 "kind": "PodGroup", "name": gm["name"], "uid": gm.get("uid", ""),
                                 "controller": True, "blockOwnerDeletion": True}],
        }
        if tmeta.get("labels"):
            claim_meta["labels"] = dict(tmeta["labels"])
        return self.store.create({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                                  "metadata": claim_meta, "spec": copy_of(tspec.get("spec") or {})}, copy=False)

    # -- claims ----------------------------------------------------------------------------
    def _pod_gone_or_done(self, ns: str, ref: dict) -> bool:
        if ref.get("resource", "pods") != "pods" or ref.get("apiGroup"):
            return False  # other consumers (PodGroups) are kept
        pod = self.store.get("Pod", ref.get("name", ""), ns)
        return pod is None or meta(pod).get("uid") != ref.get("uid") or is_finished(pod) or is_deleting(pod)

    def _sync_claim(self, claim: dict) -> None:
        cm = meta(claim)
        ns = cm["namespace"]
        status = claim.get("status") or {}
        reserved = status.get("reservedFor") or []
        keep = [r for r in reserved if not self._pod_gone_or_done(ns, r)]
        owner = next((o for o in cm.get("ownerReferences") or [] if o.get("kind") == "Pod" and o.get("controller")), None)
        generated = POD_CLAIM_ANNOTATION in (cm.get("annotations") or {}) or (
            (cm.get("annotations") or {}).get(EXTENDED_CLAIM_ANNOTATION) == "true")
        if owner is not None and generated:
            pod = self.store.get("Pod", owner.get("name", ""), ns)
            if (pod is None or meta(pod).get("uid") != owner.get("uid") or is_finished(pod)) and not is_deleting(claim):
                if not keep and status.get("allocation"):
                    claim = self._deallocate(claim, keep)
                self.store.delete("ResourceClaim", cm["name"], ns)
                claim = self.store.get("ResourceClaim", cm["name"], ns)
                if claim is None:
                    return
                status = claim.get("status") or {}
                reserved = status.get("reservedFor") or []
                keep = [r for r in reserved if not self._pod_gone_or_done(ns, r)]
        if len(keep) != len(reserved) or (not keep and status.get("allocation")) or (
            is_deleting(claim) and not status.get("allocation") and DELETE_PROTECTION in (cm.get("finalizers") or [])
        ):
            self._deallocate(claim, keep)

    def _deallocate(self, claim: dict, keep: list[dict]) -> dict:
        new = evolve(claim, "status")
        st = new["status"]
        if keep:
            st["reservedFor"] = keep
        else:
            st.pop("reservedFor", None)
            if st.get("allocation"):
                self.on_deallocate(claim)
                st.pop("allocation", None)
                st.pop("devices", None)
            fin = [f for f in new["metadata"].get("finalizers") or [] if f != DELETE_PROTECTION]
            if fin:
                new["metadata"]["finalizers"] = fin
            else:
                new["metadata"].pop("finalizers", None)
        if not st:
            new.pop("status", None)
        return self.store.update(new)
