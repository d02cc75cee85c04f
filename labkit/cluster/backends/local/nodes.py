"""Fake Node objects and their heartbeats (the kubelet's node-status and Lease updates), so the
node lifecycle controller keeps them Ready and untainted."""

from __future__ import annotations

import datetime as dt
import logging
import threading
from typing import Any

from labkit.cluster.kube import ApiError, Kube

log = logging.getLogger("labkit.cluster.backends.local.nodes")

LEASE_SECONDS = 40
HEARTBEAT_INTERVAL = 10.0


def _now(micro: bool = False) -> str:
    t = dt.datetime.now(dt.UTC)
    return t.strftime("%Y-%m-%dT%H:%M:%S.%fZ" if micro else "%Y-%m-%dT%H:%M:%SZ")


def node_object(spec: Any, kubernetes_version: str, default_allocatable: dict[str, str]) -> dict:
    """A Node for a profile `NodeSpec` (name, node_profile, labels, taints, allocatable)."""
    alloc = {**default_allocatable, **(getattr(spec, "allocatable", None) or {})}
    labels = {"kubernetes.io/hostname": spec.name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
              "labkit.dev/node-profile": spec.node_profile, **(getattr(spec, "labels", None) or {})}
    node: dict = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": spec.name, "labels": labels},
                  "spec": {}}
    if getattr(spec, "taints", None):
        node["spec"]["taints"] = list(spec.taints)
    node["status"] = status(alloc, kubernetes_version)
    return node


def status(alloc: dict[str, str], kubernetes_version: str) -> dict:
    now = _now()
    ready = {"type": "Ready", "status": "True", "reason": "KubeletReady",
             "message": "labkit node agent is posting ready status", "lastHeartbeatTime": now,
             "lastTransitionTime": now}
    conds = [{"type": t, "status": "False", "reason": f"KubeletHas{r}", "message": m,
              "lastHeartbeatTime": now, "lastTransitionTime": now}
             for t, r, m in (("MemoryPressure", "SufficientMemory", "kubelet has sufficient memory available"),
                             ("DiskPressure", "NoDiskPressure", "kubelet has no disk pressure"),
                             ("PIDPressure", "SufficientPID", "kubelet has sufficient PID available"))]
    return {"capacity": dict(alloc), "allocatable": dict(alloc), "conditions": [*conds, ready],
            "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
            "nodeInfo": {"kubeletVersion": kubernetes_version, "kubeProxyVersion": "", "operatingSystem": "linux",
                         "architecture": "amd64", "containerRuntimeVersion": "labkit://fake",
                         "kernelVersion": "", "osImage": "labkit fake node", "machineID": "", "systemUUID": "",
                         "bootID": ""}}


def create_nodes(kube: Kube, nodes: list[dict]) -> None:
    for node in nodes:
        st = node.get("status")
        body = {k: v for k, v in node.items() if k != "status"}
        try:
            kube.request("POST", "/api/v1/nodes", body=body)
        except ApiError as exc:
            if exc.status != 409:
                raise
        name = node["metadata"]["name"]
        kube.patch_status("nodes", name, None, {"status": st})
        renew_lease(kube, name)
        # The TaintNodesByCondition admission plugin gives every new Node a not-ready:NoSchedule
        # taint; the node lifecycle controller drops it once it sees Ready=True, a few seconds after
        # kube-controller-manager starts. The node is Ready already, so drop it now.
        cur = kube.request("GET", f"/api/v1/nodes/{name}")
        taints = (cur.get("spec") or {}).get("taints") or []
        keep = [t for t in taints if t.get("key") != "node.kubernetes.io/not-ready"]
        if keep != taints:
            kube.patch("nodes", name, None, {"spec": {"taints": keep or None}})


def renew_lease(kube: Kube, node: str) -> None:
    path = f"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{node}"
    spec = {"holderIdentity": node, "leaseDurationSeconds": LEASE_SECONDS, "renewTime": _now(micro=True)}
    try:
        kube.request("PATCH", path, body={"spec": spec}, content_type="application/merge-patch+json")
    except ApiError as exc:
        if exc.status != 404:
            raise
        kube.request("POST", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases", body={
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": node, "namespace": "kube-node-lease"}, "spec": spec})


def heartbeat(kube: Kube, node: str) -> None:
    """Renew the Lease and refresh every condition's lastHeartbeatTime (kept Ready)."""
    renew_lease(kube, node)
    cur = kube.request("GET", f"/api/v1/nodes/{node}")
    conds = (cur.get("status") or {}).get("conditions") or []
    now = _now()
    for c in conds:
        c["lastHeartbeatTime"] = now
        want = "True" if c["type"] == "Ready" else "False"
        if c.get("status") != want:
            c["status"], c["lastTransitionTime"] = want, now
    kube.patch_status("nodes", node, None, {"status": {"conditions": conds}})


class Heartbeats(threading.Thread):
    def __init__(self, kube: Kube, nodes: list[str], interval: float = HEARTBEAT_INTERVAL) -> None:
        super().__init__(name="labkit-heartbeats", daemon=True)
        self.kube, self.nodes, self.interval = kube, nodes, interval
        self._halt = threading.Event()

    def stop(self) -> None:
        self._halt.set()

    def run(self) -> None:
        while not self._halt.wait(self.interval):
            for n in self.nodes:
                if self._halt.is_set():
                    return
                try:
                    heartbeat(self.kube, n)
                except Exception as exc:  # noqa: BLE001 - API server may be gone during down()
                    log.debug("heartbeat %s: %s", n, exc)
