"""The kubelet part the sim needs: prepare devices for bound pods, run them, finish them.

A pod bound to a node whose claims are all allocated and reserved for it gets its devices
"prepared" through fake_gpus' CDI logic (`container_env`), so `pod_env()` shows what a container
would see (NVIDIA_VISIBLE_DEVICES, ...). The pod then turns Running. Pods with a
`labkit.dev/duration` annotation turn Succeeded once sim time passes startTime + duration;
run-to-completion pods (restartPolicy Never or OnFailure, as every Job's pods are) without it run
for DEFAULT_DURATION (60 s, `Sim(default_duration=...)`) and then succeed, so upstream Jobs
complete under `labkit simulate --advance`. Pods with restartPolicy Always (Deployments, bare pods
by default) keep running, as their containers would be restarted.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from fake_gpus.plugin import cdi as fake_gpus_cdi
from fake_gpus.plugin.devices import AllocatedDevice
from labkit.errors import NotFoundError
from labkit.model.podutil import (
    DURATION_ANNOTATION,
    EXTENDED_RESOURCES_KEY,
    is_deleting,
    is_finished,
    meta,
    parse_duration,
    pod_claims,
)
from labkit.sim.clock import parse_timestamp
from labkit.sim.dra import DraState
from labkit.sim.events import EventRecorder
from labkit.sim.store import Store, evolve

COMPONENT = "kubelet"
#: the FailedPrepareDynamicResources event of a claim whose driver refused NodePrepareResources, in a 1.37
#: kubelet's words: pkg/kubelet/kuberuntime/kuberuntime_manager.go ("Failed to prepare dynamic resources: %v")
#: around pkg/kubelet/cm/dra/manager.go ("prepare dynamic resources: %w" around "NodePrepareResources failed
#: for ResourceClaim %s: %s", the claim's name and the driver's error)
KUBELET_PREPARE_FAILED = ("Failed to prepare dynamic resources: prepare dynamic resources: "
                          "NodePrepareResources failed for ResourceClaim {claim}: {error}")
DEFAULT_DURATION = 60.0  # seconds a run-to-completion container (restartPolicy Never/OnFailure) runs
#: the device health values a kubelet writes (core/v1 ResourceHealthStatus)
HEALTH_VALUES = ("Healthy", "Unhealthy", "Unknown")


def reserved_for_pod(claim: dict, pod: dict) -> bool:
    """The claim is reserved for the pod itself, or for the PodGroup the pod belongs to."""
    group = ((pod.get("spec") or {}).get("schedulingGroup") or {}).get("podGroupName")
    for ref in (claim.get("status") or {}).get("reservedFor") or []:
        if ref.get("uid") == meta(pod).get("uid"):
            return True
        if group and ref.get("resource") == "podgroups" and ref.get("name") == group:
            return True
    return False


def _same(spec: dict[str, Any]) -> dict[str, Any]:
    return spec


class UnknownContainer(NotFoundError, KeyError):
    """pod_env() asked for a container the pod does not have."""

    def __str__(self) -> str:  # the message, not KeyError's quoted repr
        return str(self.args[0]) if self.args else ""



class NodeAgent:
    def __init__(self, store: Store, events: EventRecorder, dra: DraState,
                 default_duration: float = DEFAULT_DURATION) -> None:
        self.store = store
        self.default_duration = default_duration
        self.events = events
        self.dra = dra
        #: pod uid -> container -> env; or the function that builds it when first read (`pod_env`)
        self.env: dict[str, dict[str, dict[str, str]] | Callable[[], dict[str, dict[str, str]]]] = {}
        self.problems: dict[str, str] = {}  # pod uid -> why it is not running yet
        self.deadlines: dict[str, tuple[float, str, str]] = {}  # pod uid -> (time, ns, name)
        self._todo: set[tuple[str, str]] = set()
        #: a driver's own checks at NodePrepareResources: (pod, claim, node) -> why it fails, or None
        self.prepare_checks: list[Callable[[dict, dict, dict], str | None]] = []
        #: (claim, node) -> the compute-domain plugin's env for a daemon claim (ComputeDomainController)
        self.daemon_env: Callable[[dict, dict], dict[str, str]] | None = None
        #: (pod, node) -> per container env of its device-plugin devices, given at admission (None:
        #: the pod was rejected); labkit.sim.deviceplugin.DeviceManager sets it
        self.device_plugins: Callable[[dict, dict], dict[str, dict[str, str]] | None] | None = None
        #: the kubelet's device health cache (DRAResourceHealth streams): (driver, pool, device) -> health
        self.device_health: dict[tuple[str, str, str], str] = {}
        #: (driver, node) whose plugin streams health; pods there get allocatedResourcesStatus
        self.health_streams: set[tuple[str, str]] = set()
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

    def retry(self, pods: list[tuple[str, str]]) -> None:
        """Prepare these (namespace, name) pods again in the next round (a driver's retry)."""
        self._todo.update(pods)

    def reconcile(self) -> None:
        todo, self._todo = sorted(self._todo), set()
        for ns, name in todo:
            pod = self.store.get("Pod", name, ns)
            if pod is None or is_deleting(pod) or is_finished(pod) or not (pod.get("spec") or {}).get("nodeName"):
                continue
            if (pod.get("status") or {}).get("phase", "Pending") != "Pending":
                continue
            self._start(pod)

    def _cdi(self) -> Any:
        return fake_gpus_cdi

    def adopt(self, pod: dict) -> None:
        """A Running pod restored from a dump: its devices are prepared again (as a restarted
        kubelet finds them in its checkpoint), so `pod_env()` answers; its status stays as it is."""
        env = self._prepare(pod)
        if env is not None:
            self.env[meta(pod)["uid"]] = env

    def _prepare(self, pod: dict) -> Callable[[], dict[str, dict[str, str]]] | None:
        """Prepare the pod's claims (NodePrepareResources): a function that gives the per container
        env (built on first read: see `pod_env`), or None when the pod must wait (claims not
        ready) or preparation failed (then the pod says why)."""
        uid = meta(pod)["uid"]
        node = self.store.get("Node", pod["spec"]["nodeName"], None)
        if node is None:
            self.problems[uid] = f"node {pod['spec']['nodeName']} does not exist"
            return None
        plugin_env = self.device_plugins(pod, node) if self.device_plugins is not None else {}
        if plugin_env is None:  # rejected at admission: the pod has failed
            return None
        slices = self.dra.slices_for(node)
        # the CDI specs in order: built now, or (NVIDIA's GPU specs) when the env is first read;
        # a node's common spec (the example driver's) goes in once: it never equals a claim's spec
        # (whose devices are named after the claim's uid), so only the common ones are compared
        specs: list[Callable[[], dict[str, Any]]] = []
        built: list[dict] = []
        prepared: dict[str, list[tuple[list[str], list[str]]]] = {}  # pod claim name -> (requests, CDI ids)
        cdi = self._cdi()
        for pc in pod_claims(pod):
            name = pc.claim
            claim = self.store.get("ResourceClaim", name, meta(pod)["namespace"]) if name else None
            st = (claim or {}).get("status") or {}
            if claim is None or not st.get("allocation") or not reserved_for_pod(claim, pod):
                self.problems[uid] = (f'claim {pc.entry} ({name or "not created yet"}) is not allocated '
                                      f"and reserved for the pod; kubelet waits")
                return None
            drivers = sorted({r.get("driver", "") for r in ((st["allocation"].get("devices") or {}).get("results") or [])})
            for check in self.prepare_checks:
                why = check(pod, claim, node)
                if why:
                    self._prepare_failed(pod, KUBELET_PREPARE_FAILED.format(claim=name, error=why))
                    return None
            for driver in drivers:
                try:
                    extra = self.daemon_env(claim, node) if self.daemon_env is not None else None
                    spec, devs = cdi.prepare_deferred(claim, driver, slices, daemon_env=extra)
                except (ValueError, ImportError) as exc:
                    self._prepare_failed(pod, KUBELET_PREPARE_FAILED.format(claim=name, error=exc))
                    return None
                if spec is not None:
                    specs.append(spec)
                    common = cdi.common_spec(driver, node["metadata"]["name"])
                    if common is not None and common not in built:
                        built.append(common)
                        specs.append(functools.partial(_same, common))
                prepared.setdefault(pc.entry, []).extend(devs)

        def envs() -> dict[str, dict[str, str]]:
            out = self._container_envs(pod, [s() for s in specs], prepared)
            for ctr, env in plugin_env.items():  # the CDI edits of DRA devices come after the plugin's env
                out[ctr] = {**env, **out.get(ctr, {})}
            return out
        return envs

    def _start(self, pod: dict) -> None:
        env = self._prepare(pod)
        if env is None:
            return
        uid = meta(pod)["uid"]
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
        self._write_health(new)
        self.store.update(new)
        for c in (pod.get("spec") or {}).get("containers") or []:
            self.events.record(pod, "Normal", "Started", f"Started container {c.get('name', '')}", COMPONENT)
        ann = (meta(pod).get("annotations") or {}).get(DURATION_ANNOTATION)
        seconds: float | None = None
        if ann is not None:
            try:
                seconds = parse_duration(ann)
            except ValueError as exc:
                self.events.record(pod, "Warning", "InvalidDuration", str(exc), "labkit")
                return
        elif (pod.get("spec") or {}).get("restartPolicy") in ("Never", "OnFailure"):
            seconds = self.default_duration  # run-to-completion pods (every Job's) finish on their own
        if seconds is not None:
            self.deadlines[uid] = (parse_timestamp(now) + seconds, meta(pod)["namespace"], meta(pod)["name"])

    def _container_envs(self, pod: dict, specs: list[dict],
                        prepared: dict[str, list[tuple[list[str], list[str]]]]) -> dict[str, dict[str, str]]:
        """Per container (init containers first): the env of exactly the CDI devices of the
        claims and requests it references (the whole claim when no request is named)."""
        spec = pod.get("spec") or {}
        mappings = ((pod.get("status") or {}).get("extendedResourceClaimStatus") or {}).get("requestMappings") or []
        out: dict[str, dict[str, str]] = {}
        for ctr in (spec.get("initContainers") or []) + (spec.get("containers") or []):
            refs = list((ctr.get("resources") or {}).get("claims") or [])
            refs += [{"name": EXTENDED_RESOURCES_KEY, "request": m["requestName"]} for m in mappings
                     if m.get("containerName") == ctr.get("name") and m.get("requestName")]
            ids: list[str] = []
            for ref in refs:
                for requests, cdi_ids in prepared.get(ref.get("name", ""), []):
                    req = ref.get("request")
                    if not req or req in requests:
                        ids += [i for i in cdi_ids if i not in ids]
            out[ctr.get("name", "")] = self._cdi().resolve_env(specs, ids) if ids else {}
        return out

    def _prepare_failed(self, pod: dict, why: str) -> None:
        """Like the kubelet: the pod stays Pending in ContainerCreating, with a Warning event."""
        uid = meta(pod)["uid"]
        first = self.problems.get(uid) != why
        self.problems[uid] = why
        if not first:
            return
        self.events.record(pod, "Warning", "FailedPrepareDynamicResources", why, COMPONENT)
        new = evolve(pod, "status")
        st = new["status"]
        containers = (pod.get("spec") or {}).get("containers") or []
        st["containerStatuses"] = [{"name": c.get("name", ""), "image": c.get("image", ""), "ready": False,
                                    "started": False, "restartCount": 0,
                                    "state": {"waiting": {"reason": "ContainerCreating"}}} for c in containers]
        self.store.update(new)

    # -- device health (KEP-4680, gate ResourceHealthStatus) --------------------------------
    def report_health(self, driver: str, node: str, devices: dict[tuple[str, str], str]) -> None:
        """One NodeWatchResources message of `driver`'s plugin on `node`: the health of each of
        its devices, by (pool, device). The kubelet caches it and writes the health of every
        running pod on the node that holds one of them again (allocatedResourcesStatus)."""
        self.health_streams.add((driver, node))
        self.device_health.update({(driver, pool, dev): h for (pool, dev), h in devices.items()})
        for pod in self.store.list("Pod"):
            if (pod.get("spec") or {}).get("nodeName") != node or is_deleting(pod) or is_finished(pod):
                continue
            if (pod.get("status") or {}).get("phase") != "Running":
                continue
            new = evolve(pod, "status")
            if self._write_health(new):
                self.store.update(new)

    def _write_health(self, pod: dict) -> bool:
        """Set each container's allocatedResourcesStatus as a kubelet does; True when it changed.

        Facts from kubernetes pkg/kubelet/cm/dra/manager.go (UpdateAllocatedResourcesStatus):
        only containers with resources.claims get entries (a DRA-backed extended resource gets
        none); an entry is named `claim:<podClaimName>` or `claim:<podClaimName>/<request>` and
        lists every device the claim prepared (all of the claim's, even for a request), with the
        device's first CDI device ID as resourceID (else `<driver>/<pool>/<device>`) and the
        health its driver last streamed (Unknown for a device no stream reported); the claim's
        name comes from pod.status.resourceClaimStatuses only, so a claim named directly in
        spec.resourceClaims (resourceClaimName) gets no entry. The sim writes entries only on a
        node where a driver streams health (after a health event there, see
        labkit.sim.health): until then pod status stays as before."""
        node = (pod.get("spec") or {}).get("nodeName")
        if not any(n == node for _, n in self.health_streams):
            return False
        st = pod["status"]
        recorded = {c.get("name"): c.get("resourceClaimName") for c in st.get("resourceClaimStatuses") or []}
        ns = meta(pod)["namespace"]
        changed = False
        statuses = []
        for ctr, cs in zip((pod.get("spec") or {}).get("containers") or [], st.get("containerStatuses") or [],
                           strict=False):
            entries = []
            for ref in (ctr.get("resources") or {}).get("claims") or []:
                claim = self.store.get("ResourceClaim", recorded.get(ref.get("name")) or "", ns)
                resources = self._claim_health(claim) if claim is not None else []
                if resources:
                    name = f"claim:{ref.get('name')}" + (f"/{ref['request']}" if ref.get("request") else "")
                    entries.append({"name": name, "resources": resources})
            new_cs = dict(cs)
            if entries:
                new_cs["allocatedResourcesStatus"] = entries
            else:
                new_cs.pop("allocatedResourcesStatus", None)
            changed |= new_cs != cs
            statuses.append(new_cs)
        if changed:
            st["containerStatuses"] = statuses
        return changed

    def _claim_health(self, claim: dict) -> list[dict[str, str]]:
        """resourceID and health of each device the claim prepared (one per device and share)."""
        uid = str(meta(claim).get("uid", ""))
        results = ((((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results")) or []
        out: list[dict[str, str]] = []
        seen: set[tuple] = set()
        for r in results:
            key = (r.get("driver", ""), r.get("pool", ""), r.get("device", ""), r.get("shareID"))
            if key in seen:
                continue
            seen.add(key)
            dev = AllocatedDevice(request=r.get("request", ""), driver=key[0], pool=key[1], name=key[2],
                                  share_id=key[3])
            try:
                ids = self._cdi().claim_cdi_ids(key[0], uid, dev)
            except ValueError:
                ids = []
            out.append({"resourceID": ids[0] if ids else "/".join(key[:3]),
                        "health": self.device_health.get(key[:3], "Unknown")})
        return out

    def pod_env(self, uid: str, container: str | None = None) -> dict[str, str]:
        """One container's env, or with no name the union over the pod's containers (the list
        variables then cover every device of the pod)."""
        per = self.env.get(uid, {})
        if callable(per):  # prepared, not read yet: build it once (see _prepare)
            per = self.env[uid] = per()
        if container is not None:
            if per and container not in per:
                raise UnknownContainer(f"no container {container!r} in this pod; fix: use one of {', '.join(per)}")
            return dict(per.get(container, {}))
        merged: dict[str, str] = {}
        for env in per.values():
            merged.update({k: v for k, v in env.items() if k not in merged})
        return self._cdi().visible_devices(merged) if merged else merged

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
