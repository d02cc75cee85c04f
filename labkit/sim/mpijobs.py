"""Kubeflow's MPIJob (kubeflow.org/v2beta1) on the sim: its pods, as mpi-operator v2 makes them.

Workers are Pods `<job>-worker-<i>` (labels training.kubeflow.org/job-name, job-role worker,
replica-index), the launcher a Job `<job>-launcher` from the Launcher template, created at once or,
with `launcherCreationPolicy: WaitForWorkersReady`, once every worker runs. The launcher's pod then
runs like any Job pod (the sim's Job controller). Enough to run NVIDIA's nvbandwidth ComputeDomain
demo unchanged; no hostfile, SSH keys, Services or MPIJob status beyond `replicaStatuses`.
"""

from __future__ import annotations

from labkit.api.problem import as_dict
from labkit.model.podutil import is_deleting, is_finished, meta
from labkit.sim.store import Store, copy_of, evolve

KIND = "MPIJob"
JOB_NAME = "training.kubeflow.org/job-name"
JOB_ROLE = "training.kubeflow.org/job-role"
REPLICA_INDEX = "training.kubeflow.org/replica-index"


def _owner(job: dict) -> dict:
    m = meta(job)
    return {"apiVersion": job.get("apiVersion", "kubeflow.org/v2beta1"), "kind": KIND, "name": m["name"],
            "uid": m["uid"], "controller": True, "blockOwnerDeletion": True}


class MPIJobController:
    def __init__(self, store: Store) -> None:
        self.store = store

    def reconcile(self) -> None:
        for job in self.store.list(KIND):
            if not is_deleting(job):
                self._sync(job)

    def _sync(self, job: dict) -> None:
        m = meta(job)
        spec = as_dict(job.get("spec"))
        replicas = as_dict(spec.get("mpiReplicaSpecs"))
        worker = as_dict(replicas.get("Worker"))
        want = worker.get("replicas", 1)
        want = want if isinstance(want, int) and not isinstance(want, bool) and 0 <= want <= 1000 else 0
        workers = []
        for i in range(want):
            name = f"{m['name']}-worker-{i}"
            pod = self.store.get("Pod", name, m["namespace"])
            if pod is None:
                tmpl = as_dict(copy_of(worker.get("template")))
                tmeta = as_dict(tmpl.get("metadata"))
                labels = {**as_dict(tmeta.get("labels")), JOB_NAME: m["name"], JOB_ROLE: "worker",
                          REPLICA_INDEX: str(i)}
                pod_spec = as_dict(tmpl.get("spec"))
                pod_spec.setdefault("hostname", name)
                pod_spec.setdefault("subdomain", m["name"])
                pod = self.store.create({"apiVersion": "v1", "kind": "Pod", "metadata": {
                    "name": name, "namespace": m["namespace"], "labels": labels,
                    **({"annotations": tmeta["annotations"]} if tmeta.get("annotations") else {}),
                    "ownerReferences": [_owner(job)]}, "spec": pod_spec}, copy=False)
            workers.append(pod)
        running = sum(1 for p in workers if (p.get("status") or {}).get("phase") == "Running")
        launcher_name = f"{m['name']}-launcher"
        launcher = as_dict(replicas.get("Launcher"))
        wait = spec.get("launcherCreationPolicy") == "WaitForWorkersReady"
        if launcher and self.store.get("Job", launcher_name, m["namespace"]) is None and (not wait or running == want):
            tmpl = as_dict(copy_of(launcher.get("template")))
            tmeta = as_dict(tmpl.get("metadata"))
            tmpl["metadata"] = {**tmeta, "labels": {**as_dict(tmeta.get("labels")), JOB_NAME: m["name"],
                                                     JOB_ROLE: "launcher"}}
            tmpl["spec"] = {"restartPolicy": "OnFailure", **as_dict(tmpl.get("spec"))}
            self.store.create({"apiVersion": "batch/v1", "kind": "Job", "metadata": {
                "name": launcher_name, "namespace": m["namespace"], "labels": {JOB_NAME: m["name"]},
                "ownerReferences": [_owner(job)]}, "spec": {"backoffLimit": 6, "template": tmpl}}, copy=False)
        status = {"replicaStatuses": {"Worker": {"active": sum(1 for p in workers if not is_finished(p))}}}
        if (job.get("status") or {}) != status:
            new = evolve(job, "status")
            new["status"] = status
            self.store.update(new)
