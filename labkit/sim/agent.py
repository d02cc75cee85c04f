"""The kubelet part the sim needs: prepare devices for bound pods, run them, finish them.

A pod bound to a node whose claims are all allocated and reserved for it gets its devices
"prepared" through fake_gpus' CDI logic (`container_env`), so `pod_env()` shows what a container
would see (NVIDIA_VISIBLE_DEVICES, ...). The pod then turns Running. Pods with a
`labkit.dev/duration` annotation turn Succeeded once sim time passes startTime + duration.
"""

from __future__ import annotations

from typing import Any

from fake_gpus.plugin.cdi import container_env
from labkit.sim.clock import parse_timestamp
from labkit.sim.dra import DraState
from labkit.sim.events import EventRecorder
from labkit.sim.podutil import (
    DURATION_ANNOTATION,
    claim_name_for,
    is_deleting,
    is_finished,
    meta,
    parse_duration,
)
from labkit.sim.store import Store, evolve

COMPONENT = "kubelet"


class NodeAgent:
    def __init__(self, store: Store, events: EventRecorder, dra: DraState) -> None:
        self.store = store
        self.events = events
        self.dra = dra
        self.env: dict[str, dict[str, str]] = {}  # pod uid -> env
        self.problems: dict[str, str] = {}  # pod uid -> why it is not running yet
        self.deadlines: dict[str, tuple[float, str, str]] = {}  # pod uid -> (time, ns, name)
        self._todo: set[tuple[str, str]] = set()
        store.watch(self._on_pod, kinds=("Pod",))
        store.watch(self._on_claim, kinds=("ResourceClaim",))

    def _on_pod(self, ev) -> None:
        pod = ev.object
        uid = meta(pod).get("uid", "")
        if ev.type == "DELETED" or is_finished(pod):
            self.env.pop(uid, None)
            self.deadlines.pop(uid, None)
            self.problems.pop(uid, None)
            return
        if (pod.get("spec") or {}).get("nodeName") and (pod.get("status") or {}).get("phase", "Pending") == "Pending":
            self._todo.add((meta(pod)["namespace"], meta(pod)["name"]))

    def _on_claim(self, ev) -> None:
        for ref in (ev.object.get("status") or {}).get("reservedFor") or []:
            if ref.get("resource", "pods") == "pods":
                self._todo.add((meta(ev.object).get("namespace", "default"), ref.get("name", "")))

    def reconcile(self) -> None:
        todo, self._todo = sorted(self._todo), set()
        for ns, name in todo:
            pod = self.store.get("Pod", name, ns)
            if pod is None or is_deleting(pod) or is_finished(pod) or not (pod.get("spec") or {}).get("nodeName"):
                continue
            if (pod.get("status") or {}).get("phase", "Pending") != "Pending":
                continue
            self._start(pod)

    def _container_env(self) -> Any:
        return container_env

    def _start(self, pod: dict) -> None:
        uid = meta(pod)["uid"]
        node = self.store.get("Node", pod["spec"]["nodeName"], None)
        if node is None:
            self.problems[uid] = f"node {pod['spec']['nodeName']} does not exist"
            return
        env: dict[str, str] = {}
        slices = self.dra.slices_for(node)
        entries = list((pod.get("spec") or {}).get("resourceClaims") or [])
        ext = ((pod.get("status") or {}).get("extendedResourceClaimStatus") or {}).get("resourceClaimName")
        if ext:
            entries.append({"name": "extended-resources", "resourceClaimName": ext})
        for entry in entries:
            name, _ = claim_name_for(pod, entry)
            claim = self.store.get("ResourceClaim", name, meta(pod)["namespace"]) if name else None
            st = (claim or {}).get("status") or {}
            if claim is None or not st.get("allocation") or not any(
                    r.get("uid") == uid for r in st.get("reservedFor") or []):
                self.problems[uid] = (f'claim {entry.get("name")} ({name or "not created yet"}) is not allocated '
                                      f"and reserved for the pod; kubelet waits")
                return
            drivers = sorted({r.get("driver", "") for r in ((st["allocation"].get("devices") or {}).get("results") or [])})
            for driver in drivers:
                try:
                    env.update(self._container_env()(claim, driver, slices))
                except (ValueError, ImportError) as exc:
                    self.problems[uid] = f"NodePrepareResources for claim {name} failed: {exc}"
                    self.events.record(pod, "Warning", "FailedPrepareDynamicResources", self.problems[uid], COMPONENT)
                    return
        self.problems.pop(uid, None)
        self.env[uid] = env
        now = self.store.clock.timestamp()
        new = evolve(pod, "status")
        st = new["status"]
        st["phase"] = "Running"
        st["startTime"] = now
        st["hostIP"] = st["podIP"] = "10.0.0.1"  # addresses are not simulated
        conds = [c for c in st.get("conditions") or [] if c.get("type") == "PodScheduled"]
        conds += [{"type": t, "status": "True"} for t in ("Initialized", "ContainersReady", "Ready")]
        st["conditions"] = conds
        st["containerStatuses"] = [
            {"name": c.get("name", ""), "image": c.get("image", ""), "ready": True, "started": True,
             "restartCount": 0, "state": {"running": {"startedAt": now}}}
            for c in (pod.get("spec") or {}).get("containers") or []
        ]
        self.store.update(new)
        for c in (pod.get("spec") or {}).get("containers") or []:
            self.events.record(pod, "Normal", "Started", f"Started container {c.get('name', '')}", COMPONENT)
        ann = (meta(pod).get("annotations") or {}).get(DURATION_ANNOTATION)
        if ann is not None:
            try:
                seconds = parse_duration(ann)
            except ValueError as exc:
                self.events.record(pod, "Warning", "InvalidDuration", str(exc), "labkit")
                return
            self.deadlines[uid] = (parse_timestamp(now) + seconds, meta(pod)["namespace"], meta(pod)["name"])

    def next_deadline(self) -> float | None:
        return min((d[0] for d in self.deadlines.values()), default=None)

    def finish_due(self, now: float) -> int:
        """Pods whose duration has passed turn Succeeded. Returns how many."""
        due = sorted((d, uid) for uid, d in self.deadlines.items() if d[0] <= now)
        for (_, ns, name), uid in due:
            self.deadlines.pop(uid, None)
            pod = self.store.get("Pod", name, ns)
            if pod is None or meta(pod).get("uid") != uid or is_finished(pod):
                continue
            ts = self.store.clock.timestamp()
            new = evolve(pod, "status")
            st = new["status"]
            st["phase"] = "Succeeded"
            st["conditions"] = [
                c if c.get("type") == "PodScheduled" or c.get("type") == "Initialized"
                else {"type": c.get("type"), "status": "False", "reason": "PodCompleted"}
                for c in st.get("conditions") or []
            ]
            st["containerStatuses"] = [
                {**cs, "ready": False, "started": False,
                 "state": {"terminated": {"exitCode": 0, "reason": "Completed", "finishedAt": ts,
                                          "startedAt": (cs.get("state") or {}).get("running", {}).get("startedAt", ts)}}}
                for cs in st.get("containerStatuses") or []
            ]
            self.store.update(new)
        return len(due)
