"""Node agent: the kubelet's DRA duties for one fake node, as a thread.

Each tick it (1) registers DRA plugins that appeared in the node's registry dir (GetInfo, then
NotifyRegistrationStatus), (2) starts pods bound to the node once every claim is allocated and
reserved for the pod: NodePrepareResources per driver, CDI IDs resolved against the node's CDI
dir, pod annotated with the env and marked Running, and (3) finishes pods being deleted:
NodeUnprepareResources for claims no other pod on the node still uses, then delete with grace 0.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import logging
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc

from fake_gpus.plugin.cdi import visible_devices
from labkit.cluster.annotations import CONTAINER_ENV_ANNOTATION, DEVICES_ANNOTATION, ENV_ANNOTATION
from labkit.cluster.backends.local.cdi import CDIError, resolve_env
from labkit.cluster.kube import ApiError, Kube
from labkit.model.podutil import EXTENDED_RESOURCES_KEY, pod_claims

log = logging.getLogger("labkit.cluster.backends.local.agent")

#: what a 1.37 kubelet speaks, in its order of preference
KUBELET_DRA_VERSIONS = ("v1.DRAPlugin", "v1beta1.DRAPlugin")
RPC_TIMEOUT = 45.0
#: key for the scheduler-made claim of DRA-backed extended resources (not a valid pod claim name)


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _gen(version: str) -> tuple[Any, Any]:
    # lazy: start-up (the generated protobuf modules add ~0.2 s; only a running node agent needs them)
    from fake_gpus.plugin.gen import dra_v1_pb2, dra_v1_pb2_grpc, dra_v1beta1_pb2, dra_v1beta1_pb2_grpc

    return {"v1.DRAPlugin": (dra_v1_pb2, dra_v1_pb2_grpc),
            "v1beta1.DRAPlugin": (dra_v1beta1_pb2, dra_v1beta1_pb2_grpc)}[version]


@dataclass
class Plugin:
    driver: str
    endpoint: str
    version: str
    reg_socket: Path
    channel: grpc.Channel

    def call(self, method: str, claims: list[dict]) -> dict[str, Any]:
        """NodePrepareResources / NodeUnprepareResources for `claims`; response map by claim UID."""
        pb2, pb2_grpc = _gen(self.version)
        stub = pb2_grpc.DRAPluginStub(self.channel)
        req_cls = getattr(pb2, f"{method}Request")
        req = req_cls(claims=[pb2.Claim(namespace=c["metadata"]["namespace"], name=c["metadata"]["name"],
                                        uid=c["metadata"]["uid"]) for c in claims])
        return dict(getattr(stub, method)(req, timeout=RPC_TIMEOUT).claims)


@dataclass
class PodState:
    claims: dict[str, dict] = field(default_factory=dict)  # claim uid -> claim (as prepared)
    error: str = ""


class NodeAgent(threading.Thread):
    """Plays the kubelet for `node` (see module docstring). Stop with `stop()`."""

    def __init__(self, kube: Kube, node: str, registry_dir: Path, cdi_dir: Path, interval: float = 0.25) -> None:
        super().__init__(name=f"labkit-agent-{node}", daemon=True)
        self.kube, self.node = kube, node
        self.registry_dir, self.cdi_dir = registry_dir, cdi_dir
        self.interval = interval
        self.plugins: dict[str, Plugin] = {}
        self.pods: dict[str, PodState] = {}  # pod uid -> what we prepared for it
        self.errors: dict[str, str] = {}  # pod uid -> last start error (for explain)
        self._halt = threading.Event()
        self._reported: set[tuple[str, str]] = set()

    # -- thread ------------------------------------------------------------------------------
    def stop(self) -> None:
        self._halt.set()

    def run(self) -> None:
        while not self._halt.is_set():
            try:
                self.tick()
            except Exception as exc:  # noqa: BLE001 - keep going; the API server may be restarting
                log.debug("agent %s: %s", self.node, exc)
            self._halt.wait(self.interval)
        for p in self.plugins.values():
            p.channel.close()

    def tick(self) -> None:
        self.register_plugins()
        pods = self.kube.list("pods", None, fieldSelector=f"spec.nodeName={self.node}")
        live = {p["metadata"]["uid"] for p in pods}
        for pod in pods:
            uid = pod["metadata"]["uid"]
            if pod["metadata"].get("deletionTimestamp"):
                self.finish_pod(pod)
            elif uid not in self.pods and (pod.get("status") or {}).get("phase", "Pending") == "Pending":
                self.start_pod(pod)
        for uid in [u for u in self.pods if u not in live]:  # force-deleted behind our back
            self._unprepare(uid)

    # -- registration ------------------------------------------------------------------------
    def register_plugins(self) -> None:
        # lazy: start-up (the generated protobuf modules add ~0.2 s; only a running node agent needs them)
        from fake_gpus.plugin.gen import pluginregistration_pb2, pluginregistration_pb2_grpc

        socks = set(self.registry_dir.glob("*.sock")) if self.registry_dir.is_dir() else set()
        for drv in [d for d, p in self.plugins.items() if p.reg_socket not in socks]:
            self.plugins.pop(drv).channel.close()
        known = {p.reg_socket for p in self.plugins.values()}
        for sock in sorted(socks - known):
            with grpc.insecure_channel(f"unix://{sock}") as ch:
                stub = pluginregistration_pb2_grpc.RegistrationStub(ch)
                try:
                    info = stub.GetInfo(pluginregistration_pb2.InfoRequest(), timeout=5)
                except grpc.RpcError:
                    continue  # socket not served yet
                version = next((v for v in info.supported_versions if v in KUBELET_DRA_VERSIONS), None)
                error = ""
                if info.type != "DRAPlugin":
                    error = f"plugin type {info.type!r} is not handled by this node agent (want DRAPlugin)"
                elif version is None:
                    error = (f"none of the services supported by the plugin ({', '.join(info.supported_versions)}) "
                             f"are supported by the kubelet ({', '.join(KUBELET_DRA_VERSIONS)})")
                stub.NotifyRegistrationStatus(pluginregistration_pb2.RegistrationStatus(
                    plugin_registered=not error, error=error), timeout=5)
            if error:
                log.warning("node %s: plugin %s refused: %s", self.node, sock, error)
                continue
            self.plugins[info.name] = Plugin(info.name, info.endpoint, version, sock,
                                             grpc.insecure_channel(f"unix://{info.endpoint}"))

    # -- pods --------------------------------------------------------------------------------
    def pod_claims(self, pod: dict) -> list[tuple[str, str | None]]:
        """(podClaimName, ResourceClaim name or None while the claim controller has not made it)."""
        return [(pc.entry, pc.claim) for pc in pod_claims(pod)]

    def start_pod(self, pod: dict) -> None:
        meta = pod["metadata"]
        ns, uid = meta["namespace"], meta["uid"]
        claims: dict[str, dict] = {}  # podClaimName -> claim
        for pod_claim, name in self.pod_claims(pod):
            if name is None:
                return self._not_ready(pod, f"claim {pod_claim}: no ResourceClaim created for it yet")
            try:
                claim = self.kube.get("resourceclaims", name, ns)
            except ApiError as exc:
                return self._not_ready(pod, f"claim {name}: {exc.message}")
            reserved = {r.get("uid") for r in (claim.get("status") or {}).get("reservedFor") or []}
            if not (claim.get("status") or {}).get("allocation") or uid not in reserved:
                return self._not_ready(pod, f"claim {name}: not allocated and reserved for the pod yet")
            claims[pod_claim] = claim
        # prepare, one call per driver (like the kubelet's DRA manager)
        prepared: dict[str, list[dict]] = {}  # claim uid -> [{requests, cdi_ids}]
        by_driver: dict[str, list[dict]] = {}
        for claim in claims.values():
            results = claim["status"]["allocation"].get("devices", {}).get("results") or []
            for drv in sorted({r["driver"] for r in results}):
                by_driver.setdefault(drv, []).append(claim)
        for drv, cl in by_driver.items():
            plugin = self.plugins.get(drv)
            if plugin is None:
                return self._failed(pod, f"DRA driver {drv} is not registered on node {self.node}")
            try:
                resp = plugin.call("NodePrepareResources", cl)
            except grpc.RpcError as exc:
                return self._failed(pod, f"NodePrepareResources for driver {drv} failed: {exc.details()}")
            for c in cl:
                r = resp.get(c["metadata"]["uid"])
                if r is None:
                    return self._failed(pod, f"driver {drv} did not answer for claim {c['metadata']['name']}")
                if r.error:
                    return self._failed(pod, f"prepare claim {c['metadata']['name']}: {r.error}")
                prepared.setdefault(c["metadata"]["uid"], []).extend(
                    {"requests": list(d.request_names), "cdi": list(d.cdi_device_ids)} for d in r.devices)
        try:
            env, devices = self._container_env(pod, claims, prepared)
        except CDIError as exc:
            return self._failed(pod, str(exc))
        self._run(pod, env, devices)
        self.errors.pop(uid, None)
        self.pods[uid] = PodState(claims={c["metadata"]["uid"]: c for c in claims.values()})

    def _container_env(self, pod: dict, claims: dict[str, dict],
                       prepared: dict[str, list[dict]]) -> tuple[dict[str, dict[str, str]], dict[str, list[str]]]:
        env: dict[str, dict[str, str]] = {}
        devices: dict[str, list[str]] = {}
        spec = pod.get("spec") or {}
        ext = (pod.get("status") or {}).get("extendedResourceClaimStatus") or {}
        for ctr in (spec.get("initContainers") or []) + (spec.get("containers") or []):
            ids: list[str] = []
            refs = list((ctr.get("resources") or {}).get("claims") or [])
            refs += [{"name": EXTENDED_RESOURCES_KEY, "request": m["requestName"]} for m in ext.get("requestMappings") or []
                     if m.get("containerName") == ctr["name"] and m.get("requestName")]
            for ref in refs:
                claim = claims.get(ref["name"])
                if claim is None:
                    continue
                for d in prepared.get(claim["metadata"]["uid"], []):
                    req = ref.get("request")
                    if not req or not d["requests"] or req in d["requests"]:
                        ids += [i for i in d["cdi"] if i not in ids]
            devices[ctr["name"]] = ids
            env[ctr["name"]] = resolve_env(ids, [self.cdi_dir]) if ids else {}
        return env, devices

    def _run(self, pod: dict, env: dict[str, dict[str, str]], devices: dict[str, list[str]]) -> None:
        meta = pod["metadata"]
        ns, name = meta["namespace"], meta["name"]
        merged: dict[str, str] = {}
        for e in env.values():
            merged.update({k: v for k, v in e.items() if k not in merged})
        merged = visible_devices(merged) if merged else merged
        self.kube.patch("pods", name, ns, {"metadata": {"annotations": {
            ENV_ANNOTATION: json.dumps(merged, sort_keys=True),
            CONTAINER_ENV_ANNOTATION: json.dumps(env, sort_keys=True),
            DEVICES_ANNOTATION: json.dumps(devices, sort_keys=True)}}})
        now = _now()
        conds = [{"type": t, "status": "True", "lastTransitionTime": now}
                 for t in ("PodReadyToStartContainers", "Initialized", "ContainersReady", "Ready")]
        conds.append({"type": "PodScheduled", "status": "True", "lastTransitionTime": now})
        spec = pod.get("spec") or {}
        statuses = [{"name": c["name"], "image": c.get("image", ""), "imageID": "", "ready": True,
                     "started": True, "restartCount": 0,
                     "containerID": f"labkit://{meta['uid']}/{c['name']}",
                     "state": {"running": {"startedAt": now}}} for c in spec.get("containers") or []]
        self.kube.patch_status("pods", name, ns, {"status": {
            "phase": "Running", "conditions": conds, "containerStatuses": statuses, "startTime": now,
            "hostIP": "127.0.0.1", "hostIPs": [{"ip": "127.0.0.1"}], "podIP": "127.0.0.1",
            "podIPs": [{"ip": "127.0.0.1"}]}})

    def _not_ready(self, pod: dict, why: str) -> None:
        self.errors[pod["metadata"]["uid"]] = why

    def _failed(self, pod: dict, why: str) -> None:
        """Record and report (as an Event, like the kubelet) a preparation failure; retried next tick."""
        uid = pod["metadata"]["uid"]
        self.errors[uid] = why
        self.pods.pop(uid, None)
        if (uid, why) in self._reported:
            return
        self._reported.add((uid, why))
        meta = pod["metadata"]
        with contextlib.suppress(ApiError):
            self.kube.request("POST", f"/api/v1/namespaces/{meta['namespace']}/events", body={
                "apiVersion": "v1", "kind": "Event",
                "metadata": {"generateName": f"{meta['name']}.", "namespace": meta["namespace"]},
                "involvedObject": {"apiVersion": "v1", "kind": "Pod", "name": meta["name"],
                                   "namespace": meta["namespace"], "uid": uid},
                "reason": "FailedPrepareDynamicResources", "message": why, "type": "Warning",
                "source": {"component": "kubelet", "host": self.node},
                "firstTimestamp": _now(), "lastTimestamp": _now(), "count": 1})

    def finish_pod(self, pod: dict) -> None:
        meta = pod["metadata"]
        self._unprepare(meta["uid"])
        try:
            self.kube.request("DELETE", f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}", body={
                "apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0,
                "preconditions": {"uid": meta["uid"]}})
        except ApiError as exc:
            if exc.status not in (404, 409):
                raise

    def _unprepare(self, pod_uid: str) -> None:
        state = self.pods.pop(pod_uid, None)
        self.errors.pop(pod_uid, None)
        if state is None:
            return
        still_used = {cu for s in self.pods.values() for cu in s.claims}
        by_driver: dict[str, list[dict]] = {}
        for cu, claim in state.claims.items():
            if cu in still_used:
                continue
            for r in claim["status"]["allocation"].get("devices", {}).get("results") or []:
                lst = by_driver.setdefault(r["driver"], [])
                if claim not in lst:
                    lst.append(claim)
        for drv, claims in by_driver.items():
            plugin = self.plugins.get(drv)
            if plugin is None:
                continue
            try:
                resp = plugin.call("NodeUnprepareResources", claims)
                for c in claims:
                    err = getattr(resp.get(c["metadata"]["uid"]), "error", "")
                    if err:
                        log.warning("node %s: unprepare %s: %s", self.node, c["metadata"]["name"], err)
            except grpc.RpcError as exc:
                log.warning("node %s: NodeUnprepareResources (%s) failed: %s", self.node, drv, exc.details())
