"""Deployment -> ReplicaSet -> Pods and Job -> Pods, named the way Kubernetes names them.

Deployment `web` makes ReplicaSet `web-<pod-template-hash>` which makes pods `web-<hash>-<5>`;
Job `train` makes pods `train-<5>` (`train-<index>-<5>` when Indexed). A template change makes
a new ReplicaSet and scales the old ones to zero at once (no surge/unavailable pacing).
Job pods finish when the sim clock passes their `labkit.dev/duration` annotation.
"""

from __future__ import annotations

from labkit.model.podutil import DURATION_ANNOTATION, is_deleting, is_finished, meta
from labkit.sim import names
from labkit.sim.store import Store, copy_of


def _owner_ref(obj: dict) -> dict:
    m = meta(obj)
    return {"apiVersion": obj.get("apiVersion", ""), "kind": obj.get("kind", ""), "name": m["name"],
            "uid": m["uid"], "controller": True, "blockOwnerDeletion": True}


def _set_status(store: Store, obj: dict, status: dict) -> None:
    if (obj.get("status") or {}) != status:
        new = copy_of(obj)
        new["status"] = status
        store.update(new)


def _pod_from_template(owner: dict, template: dict, generate_name: str, extra_labels: dict[str, str],
                       extra_annotations: dict[str, str] | None = None) -> dict:
    t = copy_of(template or {})
    tmeta = t.get("metadata") or {}
    labels = dict(tmeta.get("labels") or {})
    labels.update(extra_labels)
    annotations = dict(tmeta.get("annotations") or {})
    for k, v in (extra_annotations or {}).items():
        annotations.setdefault(k, v)
    pod_meta = {"generateName": generate_name, "namespace": meta(owner).get("namespace", "default"),
                "labels": labels, "ownerReferences": [_owner_ref(owner)]}
    if annotations:
        pod_meta["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta, "spec": t.get("spec") or {}}


def _active(pods: list[dict]) -> list[dict]:
    return [p for p in pods if not is_finished(p) and not is_deleting(p)]


class WorkloadController:
    def __init__(self, store: Store) -> None:
        self.store = store

    def reconcile(self) -> None:
        for d in self.store.list("Deployment"):
            self._deployment(d)
        for rs in self.store.list("ReplicaSet"):
            self._replicaset(rs)
        for job in self.store.list("Job"):
            self._job(job)

    # -- Deployment ------------------------------------------------------------------------
    def _deployment(self, d: dict) -> None:
        if is_deleting(d):
            return
        spec = d.get("spec") or {}
        template = spec.get("template") or {}
        collision = int((d.get("status") or {}).get("collisionCount", 0))
        h = names.pod_template_hash(template, collision)
        rs_name = f"{meta(d)['name']}-{h}"
        ns = meta(d).get("namespace", "default")
        replicas = int(spec.get("replicas", 1))
        owned = self.store.dependents(meta(d)["uid"], "ReplicaSet")
        current = self.store.get("ReplicaSet", rs_name, ns)
        if current is None:
            t = copy_of(template)
            t.setdefault("metadata", {}).setdefault("labels", {})["pod-template-hash"] = h
            selector = copy_of(spec.get("selector") or {})
            selector.setdefault("matchLabels", {})["pod-template-hash"] = h
            labels = dict((template.get("metadata") or {}).get("labels") or {})
            labels["pod-template-hash"] = h
            self.store.create({
                "apiVersion": "apps/v1", "kind": "ReplicaSet",
                "metadata": {"name": rs_name, "namespace": ns, "labels": labels,
                             "annotations": {"deployment.kubernetes.io/revision": str(len(owned) + 1)},
                             "ownerReferences": [_owner_ref(d)]},
                "spec": {"replicas": replicas, "selector": selector, "template": t},
            })
        elif int((current.get("spec") or {}).get("replicas", 1)) != replicas:
            new = copy_of(current)
            new["spec"]["replicas"] = replicas
            self.store.update(new)
        for rs in owned:
            if meta(rs)["name"] != rs_name and int((rs.get("spec") or {}).get("replicas", 1)) != 0:
                new = copy_of(rs)
                new["spec"]["replicas"] = 0
                self.store.update(new)
        pods = [p for rs in self.store.dependents(meta(d)["uid"], "ReplicaSet")
                for p in _active(self.store.dependents(meta(rs)["uid"], "Pod"))]
        running = sum(1 for p in pods if (p.get("status") or {}).get("phase") == "Running")
        status = {"observedGeneration": meta(d).get("generation", 1), "replicas": len(pods),
                  "readyReplicas": running, "availableReplicas": running,
                  "unavailableReplicas": max(0, replicas - running)}
        if collision:
            status["collisionCount"] = collision
        _set_status(self.store, d, status)

    # -- ReplicaSet ------------------------------------------------------------------------
    def _replicaset(self, rs: dict) -> None:
        if is_deleting(rs):
            return
        want = int((rs.get("spec") or {}).get("replicas", 1))
        pods = _active(self.store.dependents(meta(rs)["uid"], "Pod"))
        for _ in range(want - len(pods)):
            self.store.create(_pod_from_template(rs, (rs.get("spec") or {}).get("template") or {},
                                                 f"{meta(rs)['name']}-", {}), copy=False)
        if len(pods) > want:
            # like the ReplicaSet controller: unscheduled pods go first, then the newest
            def rank(p: dict) -> tuple[int, int]:
                return (1 if (p.get("spec") or {}).get("nodeName") else 0, -int(meta(p).get("resourceVersion", 0)))
            for p in sorted(pods, key=rank)[: len(pods) - want]:
                self.store.delete("Pod", meta(p)["name"], meta(p).get("namespace"))
        pods = _active(self.store.dependents(meta(rs)["uid"], "Pod"))
        running = sum(1 for p in pods if (p.get("status") or {}).get("phase") == "Running")
        _set_status(self.store, rs, {"replicas": len(pods), "readyReplicas": running,
                                     "availableReplicas": running,
                                     "observedGeneration": meta(rs).get("generation", 1)})

    # -- Job -------------------------------------------------------------------------------
    def _job(self, job: dict) -> None:
        if is_deleting(job):
            return
        spec = job.get("spec") or {}
        jm = meta(job)
        pods = self.store.dependents(jm["uid"], "Pod")
        succeeded = sum(1 for p in pods if (p.get("status") or {}).get("phase") == "Succeeded")
        failed = sum(1 for p in pods if (p.get("status") or {}).get("phase") == "Failed")
        active = _active(pods)
        parallelism = int(spec.get("parallelism", 1))
        completions = spec.get("completions")
        if completions is None:
            complete = succeeded > 0 and not active
            want = 0 if succeeded else parallelism
        else:
            complete = succeeded >= int(completions)
            want = 0 if complete else min(parallelism, int(completions) - succeeded)
        if spec.get("suspend"):
            want = 0
        indexed = spec.get("completionMode") == "Indexed"
        used_idx = {int((meta(p).get("annotations") or {}).get("batch.kubernetes.io/job-completion-index", -1))
                    for p in pods if (p.get("status") or {}).get("phase") != "Failed"}
        extra_ann = {}
        if DURATION_ANNOTATION in (jm.get("annotations") or {}):
            extra_ann[DURATION_ANNOTATION] = jm["annotations"][DURATION_ANNOTATION]
        for _ in range(want - len(active)):
            labels = {"batch.kubernetes.io/controller-uid": jm["uid"], "batch.kubernetes.io/job-name": jm["name"],
                      "controller-uid": jm["uid"], "job-name": jm["name"]}
            gen = f"{jm['name']}-"
            ann = dict(extra_ann)
            if indexed:
                idx = next(i for i in range(int(completions or parallelism) + len(used_idx) + 1) if i not in used_idx)
                used_idx.add(idx)
                gen = f"{jm['name']}-{idx}-"
                ann["batch.kubernetes.io/job-completion-index"] = str(idx)
                labels["batch.kubernetes.io/job-completion-index"] = str(idx)
            self.store.create(_pod_from_template(job, spec.get("template") or {}, gen, labels, ann), copy=False)
        status: dict = {"active": len(_active(self.store.dependents(jm["uid"], "Pod")))}
        if succeeded:
            status["succeeded"] = succeeded
        if failed:
            status["failed"] = failed
        old = job.get("status") or {}
        status["startTime"] = old.get("startTime") or self.store.clock.timestamp()
        if complete:
            status["completionTime"] = old.get("completionTime") or self.store.clock.timestamp()
            status["conditions"] = [{"type": "Complete", "status": "True"}]
        _set_status(self.store, job, status)
