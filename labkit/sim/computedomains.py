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
- the daemon (cmd/compute-domain-daemon): once running, enters its node in its clique's
  ComputeDomainClique `<uid>.<cliqueID>` (driver namespace; ComputeDomainCliques gate, beta, on) and
  the controller copies the entries to status.nodes (name, ipAddress, cliqueID from the node's
  nvidia.com/gpu.clique label, index, status Ready).

Not modelled: host-managed IMEX, the IMEX daemon's own peer handshake (a daemon is Ready once its pod
runs), the cliques' ownerReferences to the daemon pods (the controller removes stale entries and the
domain's cliques itself).
"""

from __future__ import annotations

from fake_gpus import computedomain as cd_plugin
from labkit.api import with_defaults
from labkit.model.podutil import is_deleting, is_finished, meta, pod_claims
from labkit.sim.agent import NodeAgent
from labkit.sim.events import EventRecorder
from labkit.sim.store import Store, copy_of, evolve

KIND = "ComputeDomain"
LABEL = cd_plugin.LABEL
DRIVER_NAMESPACE = cd_plugin.DRIVER_NAMESPACE
COMPONENT = "compute-domain-controller"


Key = tuple[str, str, str]  # kind, namespace ("" when cluster-scoped), name


class ComputeDomainController:
    """Runs in every sim step; cheap when nothing it watches changed. It syncs only the domains
    something happened to (the domain itself, or an object labelled for it: its templates,
    DaemonSet, daemon pods, cliques, nodes, channel claims), and finds a domain's objects in an
    index of the label kept from the watch, not by listing every Node and Pod: a fleet of 1,000
    NVL72 racks has 18,000 nodes and hundreds of live domains."""

    def __init__(self, store: Store, events: EventRecorder, agent: NodeAgent) -> None:
        self.store, self.events, self.agent = store, events, agent
        self._all = True  # sync every domain in the next round
        self._dirty: set[str] = set()  # uids of domains to sync in the next round
        self._label_of: dict[Key, str] = {}  # object -> the domain uid in its LABEL label
        self._labelled: dict[str, set[Key]] = {}  # domain uid -> objects labelled for it
        self._domains: dict[str, tuple[str, str]] = {}  # uid -> (namespace, name) of a ComputeDomain
        # pod (namespace, name) -> its nodeName, and node -> pods bound to it: built from the store
        # when first needed (a fleet without ComputeDomains never needs it), then kept from the watch
        self._node_of: dict[tuple[str, str], str] = {}
        self._pods_on: dict[str, set[tuple[str, str]]] | None = None
        store.watch(self._on_event, kinds=(KIND, "Pod", "Node", "ResourceClaim", "ResourceClaimTemplate",
                                           "DaemonSet", cd_plugin.CLIQUE_KIND))
        agent.prepare_checks.append(self.check_prepare)
        agent.daemon_env = self.daemon_env

    def _on_event(self, ev) -> None:
        obj = ev.object
        m = obj.get("metadata") or {}
        gone = ev.type == "DELETED"
        if ev.kind == KIND:
            uid = m.get("uid", "")
            self._dirty.add(uid)
            if gone:
                self._domains.pop(uid, None)
            else:
                self._domains[uid] = (m.get("namespace") or "default", m.get("name", ""))
            return
        ns, name = m.get("namespace") or "", m.get("name", "")
        if ev.kind == "Pod" and self._pods_on is not None:
            node = None if gone else (obj.get("spec") or {}).get("nodeName")
            if self._node_of.get((ns, name)) != node:
                self._index_pod((ns, name), node)
        labels = m.get("labels")
        uid = None if gone or not labels else labels.get(LABEL)
        if uid is None and not self._label_of:  # nothing is labelled for a domain: the common case
            return
        key = (ev.kind, ns, name)
        old = self._label_of.get(key)
        if old != uid:
            if old is not None:
                self._labelled[old].discard(key)
                del self._label_of[key]
                self._dirty.add(old)
            if uid is not None:
                self._label_of[key] = uid
                self._labelled.setdefault(uid, set()).add(key)
        if uid is not None:
            self._dirty.add(uid)

    def _pods_by_node(self) -> dict[str, set[tuple[str, str]]]:
        if self._pods_on is None:
            self._pods_on = {}
            for p in self.store.list("Pod"):
                m = meta(p)
                self._index_pod((m.get("namespace") or "", m.get("name", "")), (p.get("spec") or {}).get("nodeName"))
        return self._pods_on

    def _index_pod(self, pod: tuple[str, str], node: str | None) -> None:
        pods_on = self._pods_on
        if pods_on is None:  # not built yet: _pods_by_node reads the store
            return
        old = self._node_of.get(pod)
        if old is not None:
            pods_on[old].discard(pod)
            del self._node_of[pod]
        if node:
            self._node_of[pod] = node
            pods_on.setdefault(node, set()).add(pod)

    def _owned(self, uid: str, kind: str, namespace: str | None = None) -> list[dict]:
        """The objects of `kind` labelled for the domain (in `namespace`, or any), as store.list orders them."""
        keys = sorted(k for k in self._labelled.get(uid, ()) if k[0] == kind and (namespace is None or k[1] == namespace))
        objs = (self.store.get(kind, k[2], k[1] or None) for k in keys)
        return [o for o in objs if o is not None]

    # -- the kubelet plugin's side ------------------------------------------------------------
    def check_prepare(self, pod: dict, claim: dict, node: dict) -> str | None:
        """What the compute-domain plugin checks before it hands out a channel (None: go ahead)."""
        results = ((((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results")) or []
        if not any(r.get("driver") == cd_plugin.DRIVER for r in results):
            return None
        try:
            config = cd_plugin.claim_config(claim)
            cd = self._by_uid(config["domainID"]) if config else None
            why, label = cd_plugin.channel_check(claim, cd, meta(node)["name"], meta(node).get("labels") or {})
        except cd_plugin.ConfigError as exc:
            return cd_plugin.prepare_error(claim, str(exc))
        if label and cd is not None:
            new = evolve(node, "metadata")
            new["metadata"]["labels"] = {**(meta(node).get("labels") or {}), LABEL: meta(cd)["uid"]}
            self.store.update(new)
        return cd_plugin.prepare_error(claim, why) if why else None

    def daemon_env(self, claim: dict, node: dict) -> dict[str, str]:
        """CLIQUE_ID and the domain's name and namespace, for a daemon claim ({} otherwise)."""
        config = cd_plugin.daemon_config(claim)
        if config is None:
            return {}
        clique = (meta(node).get("labels") or {}).get(cd_plugin.CLIQUE_LABEL, "")
        return cd_plugin.daemon_env(self._by_uid(config["domainID"]), clique)

    def _by_uid(self, uid: str) -> dict | None:
        where = self._domains.get(uid)
        return self.store.get(KIND, where[1], where[0]) if where else None

    # -- the controller ------------------------------------------------------------------------
    def reconcile(self) -> None:
        if not self._all and not self._dirty:
            return
        full, dirty = self._all, self._dirty
        self._all, self._dirty = False, set()
        live = set()
        for cd in self.store.list(KIND):
            uid = meta(cd)["uid"]
            if is_deleting(cd):
                self._delete(cd)
            else:
                live.add(uid)
                if (full or uid in dirty) and cd_plugin.template_name(cd):  # else refused by the API server
                    self._sync(cd)
        # labels of domains that are gone (RemoveStaleComputeDomainLabels)
        stale = [k[2] for uid in (list(self._labelled) if full else dirty)
                 if uid not in live and self._by_uid(uid) is None
                 for k in self._labelled.get(uid, ()) if k[0] == "Node"]
        for name in sorted(stale):
            node = self.store.get("Node", name, None)
            if node is not None:
                self._unlabel(node)

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
        self._ensure(cd_plugin.daemon_template(cd))
        ds = self._ensure(cd_plugin.daemonset(cd))
        wanted = cd_plugin.workload_template(cd)
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
        nodes = {meta(n)["name"] for n in self._owned(uid, "Node")}
        pods = self._owned(uid, "Pod", DRIVER_NAMESPACE)
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
        running: dict[str, tuple[str, str]] = {}
        for p in self._owned(uid, "Pod", DRIVER_NAMESPACE):
            if (p.get("status") or {}).get("phase") == "Running" and not is_deleting(p):
                node = self.store.get("Node", p["spec"]["nodeName"], None) or {}
                running[p["spec"]["nodeName"]] = ((p.get("status") or {}).get("podIP", ""),
                                                   (meta(node).get("labels") or {}).get(cd_plugin.CLIQUE_LABEL, ""))
        status = cd_plugin.domain_status(cd, running)
        self._cliques(cd, status)
        if (cd.get("status") or {}) != status:
            old = {n.get("name") for n in (cd.get("status") or {}).get("nodes") or []}
            new = evolve(cd, "status")
            new["status"] = status
            self.store.update(new)
            newly = {n["name"] for n in status.get("nodes") or []} - old
            if newly:
                self.agent.retry(self._waiting_on(uid, newly))

    def _cliques(self, cd: dict, status: dict) -> None:
        """The domain's ComputeDomainClique objects, as its daemons keep them."""
        uid = meta(cd)["uid"]
        wanted = {meta(c)["name"]: c for c in cd_plugin.cliques(cd, status, DRIVER_NAMESPACE)}
        for have in self._owned(uid, cd_plugin.CLIQUE_KIND, DRIVER_NAMESPACE):
            want = wanted.pop(meta(have)["name"], None)
            if want is None:
                self.store.delete(cd_plugin.CLIQUE_KIND, meta(have)["name"], DRIVER_NAMESPACE)
            elif have.get("daemons") != want["daemons"]:
                new = evolve(have)
                new["daemons"] = want["daemons"]
                self.store.update(new)
        for obj in wanted.values():
            self.store.create(obj, copy=False)

    def _waiting_on(self, uid: str, nodes: set[str]) -> list[tuple[str, str]]:
        """Pods bound to these nodes whose channel claims belong to the domain (the plugin retries them)."""
        out = []
        pods_on = self._pods_by_node()
        keys = sorted(set().union(*(pods_on.get(n, ()) for n in nodes)))
        for pod in (self.store.get("Pod", name, ns) for ns, name in keys):
            if pod is None or (pod.get("spec") or {}).get("nodeName") not in nodes or is_finished(pod):
                continue
            for pc in pod_claims(pod):
                name = pc.claim
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
        for kind in ("ResourceClaimTemplate", "DaemonSet", cd_plugin.CLIQUE_KIND):
            for obj in self._owned(uid, kind):
                self._drop_finalizer(obj)
                if self.store.get(kind, meta(obj)["name"], meta(obj)["namespace"]) is not None:
                    self.store.delete(kind, meta(obj)["name"], meta(obj)["namespace"])
        for p in self._owned(uid, "Pod", DRIVER_NAMESPACE):
            if self.store.get("Pod", meta(p)["name"], DRIVER_NAMESPACE) is not None:
                self.store.delete("Pod", meta(p)["name"], DRIVER_NAMESPACE)
        for node in self._owned(uid, "Node"):
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
