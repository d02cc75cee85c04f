"""NVIDIA's ComputeDomain (resource.nvidia.com/v1beta1) on the sim: the controller, the per-node
daemons and what the compute-domain kubelet plugin does at prepare time.

As kubernetes-sigs/dra-driver-nvidia-gpu does it (commit 95932046; docs/rack-scale-nvlink.md):

- controller (cmd/compute-domain-controller): adds the finalizer `resource.nvidia.com/computeDomain`;
  creates the workload ResourceClaimTemplate named in `spec.channel.resourceClaimTemplate.name`
  (request `channel`, class compute-domain-default-channel.nvidia.com, ComputeDomainChannelConfig
  with the CD's UID as domainID), the daemon template and the DaemonSet `computedomain-daemon-<uid>`
  in the driver's namespace; status.status is NotReady until `numNodes` nodes are Ready; on delete it
  removes the templates, the DaemonSet, the node labels and then its finalizer.
- kubelet plugin, preparing a channel claim: refuses a claim from another namespace, labels the node
  `resource.nvidia.com/computeDomain=<uid>` (which is what makes the DaemonSet run a daemon there) and
  fails until the node is Ready in the CD; then the container gets the IMEX channel.
- the daemon (cmd/compute-domain-daemon): once running, enters its node in status.nodes
  (name, ipAddress, cliqueID from the node's nvidia.com/gpu.clique label, index, status Ready).

Not modelled: ComputeDomainClique objects (the ComputeDomainCliques gate), host-managed IMEX, the
IMEX daemon's own peer handshake (a daemon is Ready once its pod runs).
"""

from __future__ import annotations

from typing import Any

from fake_gpus import computedomain as cd_plugin
from labkit.api import with_defaults
from labkit.api.problem import as_dict
from labkit.sim.agent import NodeAgent
from labkit.sim.events import EventRecorder
from labkit.sim.podutil import claim_entries, claim_name_for, is_deleting, is_finished, meta
from labkit.sim.store import Store, copy_of, evolve

KIND = "ComputeDomain"
API_VERSION = "resource.nvidia.com/v1beta1"
LABEL = "resource.nvidia.com/computeDomain"  # also the finalizer
TARGET_LABEL = "resource.nvidia.com/computeDomainTarget"
CLIQUE_LABEL = "nvidia.com/gpu.clique"
DRIVER_NAMESPACE = "dra-driver-nvidia-gpu"  # where NVIDIA's bats tests install the chart
COMPONENT = "compute-domain-controller"
PLUGIN = "compute-domain-kubelet-plugin"


def _template(namespace: str, name: str, uid: str, target: str, request: str, device_class: str,
              params: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
        "metadata": {"namespace": namespace, "name": name, "finalizers": [LABEL],
                     "labels": {LABEL: uid, TARGET_LABEL: target}},
        "spec": {"spec": {"devices": {
            "requests": [{"name": request, "exactly": {"deviceClassName": device_class}}],
            "config": [{"requests": [request], "opaque": {"driver": cd_plugin.DRIVER, "parameters": params}}],
        }}},
    }


def workload_template(cd: dict) -> dict[str, Any]:
    m = meta(cd)
    channel = as_dict(as_dict(cd.get("spec")).get("channel"))
    params = {"apiVersion": cd_plugin.CONFIG_API_VERSION, "kind": cd_plugin.CHANNEL_CONFIG_KIND,
              "domainID": m["uid"], "allocationMode": channel.get("allocationMode") or "Single"}
    return _template(m["namespace"], channel["resourceClaimTemplate"]["name"], m["uid"], "Workload", "channel",
                     cd_plugin.CHANNEL_CLASS, params)


def daemon_template(cd: dict) -> dict[str, Any]:
    uid = meta(cd)["uid"]
    params = {"apiVersion": cd_plugin.CONFIG_API_VERSION, "kind": cd_plugin.DAEMON_CONFIG_KIND, "domainID": uid}
    return _template(DRIVER_NAMESPACE, f"computedomain-daemon-{uid}", uid, "Daemon", "daemon",
                     cd_plugin.DAEMON_CLASS, params)


def daemonset(cd: dict) -> dict[str, Any]:
    uid = meta(cd)["uid"]
    name = f"computedomain-daemon-{uid}"
    return {
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"namespace": DRIVER_NAMESPACE, "name": name, "finalizers": [LABEL], "labels": {LABEL: uid}},
        "spec": {"selector": {"matchLabels": {LABEL: uid}}, "template": {
            "metadata": {"labels": {LABEL: uid}},
            "spec": {"nodeSelector": {LABEL: uid},
                     "containers": [{"name": "compute-domain-daemon", "image": "dra-driver-nvidia-gpu",
                                     "resources": {"claims": [{"name": "compute-domain-daemon"}]}}],
                     "tolerations": [{"operator": "Exists", "effect": e}
                                     for e in ("NoSchedule", "NoExecute", "PreferNoSchedule")],
                     "resourceClaims": [{"name": "compute-domain-daemon", "resourceClaimTemplateName": name}]}}},
    }


class ComputeDomainController:
    """Runs in every sim step; cheap when nothing it watches changed."""

    def __init__(self, store: Store, events: EventRecorder, agent: NodeAgent) -> None:
        self.store, self.events, self.agent = store, events, agent
        self._dirty = True
        store.watch(self._on_event, kinds=(KIND, "Pod", "Node", "ResourceClaim"))
        agent.prepare_checks.append(self.check_prepare)

    def _on_event(self, ev) -> None:
        if ev.kind == KIND or self.store.count(KIND) or any(self._ours(ev.object)):
            self._dirty = True

    @staticmethod
    def _ours(obj: dict) -> list[str]:
        return [v for k, v in (meta(obj).get("labels") or {}).items() if k == LABEL]

    # -- the kubelet plugin's side ------------------------------------------------------------
    def check_prepare(self, pod: dict, claim: dict, node: dict) -> str | None:
        """What the compute-domain plugin checks before it hands out a channel (None: go ahead)."""
        results = ((((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results")) or []
        if not any(r.get("driver") == cd_plugin.DRIVER for r in results):
            return None
        try:
            config = cd_plugin.claim_config(claim)
        except cd_plugin.ConfigError as exc:
            return str(exc)
        if config is None or config["kind"] != cd_plugin.CHANNEL_CONFIG_KIND:
            return None
        uid = config["domainID"]
        cd = self._by_uid(uid)
        if cd is None:
            return f"error asserting ComputeDomain's namespace: ComputeDomain not found: {uid}"
        if meta(cd)["namespace"] != meta(claim).get("namespace", "default"):
            return ("error asserting ComputeDomain's namespace: the ResourceClaim's namespace is different "
                    "than the ComputeDomain's namespace")
        labels = meta(node).get("labels") or {}
        if labels.get(LABEL) not in (None, uid):
            return "error adding Node label for ComputeDomain: label already exists for a different ComputeDomain"
        if labels.get(LABEL) != uid:
            new = evolve(node, "metadata")
            new["metadata"]["labels"] = {**labels, LABEL: uid}
            self.store.update(new)
        for n in ((cd.get("status") or {}).get("nodes") or []):
            if n.get("name") == meta(node)["name"] and n.get("status") == "Ready":
                return None
        return "error asserting ComputeDomain Ready: current node not ready in ComputeDomain"

    def _by_uid(self, uid: str) -> dict | None:
        return next((c for c in self.store.list(KIND) if meta(c).get("uid") == uid), None)

    # -- the controller ------------------------------------------------------------------------
    def reconcile(self) -> None:
        if not self._dirty:
            return
        self._dirty = False
        live = set()
        for cd in self.store.list(KIND):
            if is_deleting(cd):
                self._delete(cd)
            else:
                live.add(meta(cd)["uid"])
                if self._template_name(cd):
                    self._sync(cd)
        for node in self.store.list("Node"):  # labels of domains that are gone (RemoveStaleComputeDomainLabels)
            uid = (meta(node).get("labels") or {}).get(LABEL)
            if uid is not None and uid not in live and self._by_uid(uid) is None:
                self._unlabel(node)

    @staticmethod
    def _template_name(cd: dict) -> str:
        """spec.channel.resourceClaimTemplate.name ('' when missing: the API server refuses such a CD,
        see labkit.api.rules_nvidia; a CD stored without validation is left alone)."""
        name = as_dict(as_dict(as_dict(cd.get("spec")).get("channel")).get("resourceClaimTemplate")).get("name")
        return name if isinstance(name, str) else ""

    def _ensure(self, obj: dict) -> dict:
        m = meta(obj)
        have = self.store.get(obj["kind"], m["name"], m.get("namespace"))
        return have if have is not None else self.store.create(with_defaults(obj), copy=False)

    def _sync(self, cd: dict) -> None:
        m = meta(cd)
        if LABEL not in (m.get("finalizers") or []):
            new = evolve(cd, "metadata")
            new["metadata"]["finalizers"] = [*(m.get("finalizers") or []), LABEL]
            cd = self.store.update(new)
            m = meta(cd)
        if self.store.get("Namespace", DRIVER_NAMESPACE, None) is None:
            self.store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": DRIVER_NAMESPACE},
                               "status": {"phase": "Active"}})
        self._ensure(daemon_template(cd))
        ds = self._ensure(daemonset(cd))
        wanted = workload_template(cd)
        have = self.store.get("ResourceClaimTemplate", meta(wanted)["name"], m["namespace"])
        if have is None:
            self.store.create(with_defaults(wanted), copy=False)
        elif (meta(have).get("labels") or {}).get(LABEL) != m["uid"]:
            self.events.record(cd, "Warning", "ResourceClaimTemplateExists",
                               f"error creating ResourceClaimTemplate '{m['namespace']}/{meta(wanted)['name']}': "
                               "it already exists and belongs to something else", COMPONENT)
        self._daemon_pods(cd, ds)
        self._status(cd)

    def _daemon_pods(self, cd: dict, ds: dict) -> None:
        """The DaemonSet controller: one daemon pod per node labelled for this domain."""
        uid = meta(cd)["uid"]
        nodes = {meta(n)["name"] for n in self.store.list("Node") if (meta(n).get("labels") or {}).get(LABEL) == uid}
        pods = [p for p in self.store.list("Pod", DRIVER_NAMESPACE) if self._ours(p) == [uid]]
        placed = {p["spec"].get("nodeName") or self._target(p) for p in pods if not is_deleting(p)}
        for p in pods:
            if (p["spec"].get("nodeName") or self._target(p)) not in nodes:
                self.store.delete("Pod", meta(p)["name"], DRIVER_NAMESPACE)
        for node in sorted(nodes - placed):
            tmpl = copy_of(ds["spec"]["template"])
            spec = tmpl["spec"]
            spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]}}}
            self.store.create({"apiVersion": "v1", "kind": "Pod", "metadata": {
                "generateName": f"{meta(ds)['name']}-", "namespace": DRIVER_NAMESPACE, "labels": tmpl["metadata"]["labels"],
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": meta(ds)["name"],
                                     "uid": meta(ds)["uid"], "controller": True, "blockOwnerDeletion": True}]},
                "spec": spec}, copy=False)

    @staticmethod
    def _target(pod: dict) -> str:
        terms = ((((pod.get("spec") or {}).get("affinity") or {}).get("nodeAffinity") or {})
                 .get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms") or [{}]
        fields = terms[0].get("matchFields") or [{}]
        return (fields[0].get("values") or [""])[0]

    def _status(self, cd: dict) -> None:
        """What the daemons write (status.nodes) and the controller's global status."""
        uid = meta(cd)["uid"]
        old = [n for n in (cd.get("status") or {}).get("nodes") or []]
        running = {}
        for p in self.store.list("Pod", DRIVER_NAMESPACE):
            if self._ours(p) == [uid] and (p.get("status") or {}).get("phase") == "Running" and not is_deleting(p):
                running[p["spec"]["nodeName"]] = p
        nodes = []
        used = {n["index"] for n in old if n.get("name") in running}
        for n in old:
            if n.get("name") in running:
                nodes.append(n)
        for name in sorted(set(running) - {n.get("name") for n in nodes}):
            node = self.store.get("Node", name, None) or {}
            index = next(i for i in range(len(running) + len(used) + 1) if i not in used)
            used.add(index)
            nodes.append({"name": name, "ipAddress": (running[name].get("status") or {}).get("podIP", ""),
                          "cliqueID": (meta(node).get("labels") or {}).get(CLIQUE_LABEL, ""),
                          "index": index, "status": "Ready"})
        num = as_dict(cd.get("spec")).get("numNodes")
        want_nodes = num if isinstance(num, int) else 0
        ready = len(nodes) >= want_nodes and all(n["status"] == "Ready" for n in nodes)
        status = {"status": "Ready" if ready else "NotReady"}
        if nodes:
            status["nodes"] = nodes
        if (cd.get("status") or {}) != status:
            new = evolve(cd, "status")
            new["status"] = status
            self.store.update(new)
            newly = {n["name"] for n in nodes} - {n.get("name") for n in old}
            if newly:
                self.agent.retry(self._waiting_on(uid, newly))

    def _waiting_on(self, uid: str, nodes: set[str]) -> list[tuple[str, str]]:
        """Pods bound to these nodes whose channel claims belong to the domain (the plugin retries them)."""
        out = []
        for pod in self.store.list("Pod"):
            if (pod.get("spec") or {}).get("nodeName") not in nodes or is_finished(pod):
                continue
            for entry in claim_entries(pod):
                name, _ = claim_name_for(pod, entry)
                claim = self.store.get("ResourceClaim", name, meta(pod)["namespace"]) if name else None
                try:
                    config = cd_plugin.claim_config(claim) if claim else None
                except cd_plugin.ConfigError:
                    config = None
                if config and config["domainID"] == uid:
                    out.append((meta(pod)["namespace"], meta(pod)["name"]))
                    break
        return out

    def _delete(self, cd: dict) -> None:
        uid = meta(cd)["uid"]
        for kind in ("ResourceClaimTemplate", "DaemonSet"):
            for obj in self.store.list(kind):
                if self._ours(obj) == [uid]:
                    self._drop_finalizer(obj)
                    if self.store.get(kind, meta(obj)["name"], meta(obj)["namespace"]) is not None:
                        self.store.delete(kind, meta(obj)["name"], meta(obj)["namespace"])
        for p in self.store.list("Pod", DRIVER_NAMESPACE):
            if self._ours(p) == [uid]:
                self.store.delete("Pod", meta(p)["name"], DRIVER_NAMESPACE)
        for node in self.store.list("Node"):
            if (meta(node).get("labels") or {}).get(LABEL) == uid:
                self._unlabel(node)
        self._drop_finalizer(cd)

    def _drop_finalizer(self, obj: dict) -> None:
        fins = meta(obj).get("finalizers") or []
        if LABEL in fins:
            new = evolve(obj, "metadata")
            new["metadata"]["finalizers"] = [f for f in fins if f != LABEL]
            self.store.update(new)

    def _unlabel(self, node: dict) -> None:
        new = evolve(node, "metadata")
        new["metadata"]["labels"] = {k: v for k, v in (meta(node).get("labels") or {}).items() if k != LABEL}
        self.store.update(new)
