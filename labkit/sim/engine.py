"""`Sim`: the embedded cluster. Object store + controllers + scheduler + node agent, one process.

    sim = Sim(load_profile("workshop"), seed=0)
    sim.apply(objs); sim.run()          # run until nothing changes
    sim.advance(60)                     # move sim time; Jobs with labkit.dev/duration finish

Everything is deterministic for a given seed and input order: names, uids, placements.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from labkit.errors import InputError
from labkit.model.kinds import canonical_kind, is_namespaced
from labkit.model.podutil import meta
from labkit.model.profiles import ClusterProfile
from labkit.model.state import order_for_restore
from labkit.sim.agent import NodeAgent
from labkit.sim.claimctl import ClaimController
from labkit.sim.clock import Clock
from labkit.sim.computedomains import ComputeDomainController
from labkit.sim.deviceplugin import DeviceManager, advertised
from labkit.sim.dra import DraState, split_gates
from labkit.sim.events import EventRecorder
from labkit.sim.health import GpuHealthMonitor
from labkit.sim.mpijobs import MPIJobController
from labkit.sim.nodes import build_all_slices, build_node, default_device_classes
from labkit.sim.scheduler import Scheduler
from labkit.sim.store import Store, StoreError, copy_of
from labkit.sim.taintctl import DeviceTaintController
from labkit.sim.workloads import WorkloadController

SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
#: kinds whose status a client may set on create (everything else: the API server drops it)
KEEP_STATUS = frozenset({"Node"})


class SimError(InputError):
    """A request the simulated API server refuses; one line, names the object."""


class Sim:
    def __init__(self, profile: ClusterProfile, seed: int = 0, progress: Callable[..., Iterable] | None = None,
                 cel_engine: str | None = None, state: list[dict] | None = None,
                 default_duration: float | None = None) -> None:
        """`state`: objects of a real cluster (labkit.model.state.load_state) to start from instead of the
        profile's nodes; `profile` then only gives the Kubernetes version and feature gates."""
        self.profile = profile
        self.clock = Clock()
        self.store = Store(seed=seed, clock=self.clock)
        self.events = EventRecorder(self.store)
        dra_gates, self.other_gates = split_gates(profile.kubernetes_version, profile.feature_gates)
        self.dra = DraState(self.store, profile.kubernetes_version, dra_gates, cel_engine=cel_engine)
        self.workloads = WorkloadController(self.store)
        self.mpijobs = MPIJobController(self.store)
        self.scheduler = Scheduler(self.store, self.events, self.dra)
        self.claims = ClaimController(self.store, self.events, on_deallocate=self.scheduler.release_claim)
        self.agent = NodeAgent(self.store, self.events, self.dra,
                               **({} if default_duration is None else {"default_duration": default_duration}))
        self.taints = DeviceTaintController(self.store, self.events, profile.kubernetes_version)
        self.health = GpuHealthMonitor(self.store, self.agent)
        self.compute_domains = ComputeDomainController(self.store, self.events, self.agent)
        self.device_plugins = DeviceManager(self.store, self.events, self.agent, self.profile)
        self.scheduler.progress = progress
        if state is not None:
            self._restore(state)
        else:
            self._bootstrap(progress or (lambda it, **_: it))

    def _restore(self, state: list[dict]) -> None:
        """Store the dump's objects as they are (uids, bindings, allocations, reservations kept)."""
        have = {(o["kind"], o["metadata"]["name"]) for o in state if o["kind"] == "Namespace"}
        for ns in SYSTEM_NAMESPACES:
            if ("Namespace", ns) not in have:
                self.store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns},
                                   "status": {"phase": "Active"}})
        for obj in order_for_restore(state):
            try:
                stored = self.store.create(obj, restore=True)
            except StoreError as exc:
                raise SimError(f"{obj['kind']}/{obj['metadata'].get('name')}: {exc}") from None
            if obj["kind"] == "ResourceClaim":
                self.scheduler.adopt_allocation(stored)
        for pod in self.store.list("Pod"):
            if (pod.get("spec") or {}).get("nodeName") and (pod.get("status") or {}).get("phase") == "Running":
                self.agent.adopt(pod)

    def _bootstrap(self, progress: Callable[..., Iterable]) -> None:
        for ns in SYSTEM_NAMESPACES:
            self.store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns},
                               "status": {"phase": "Active"}})
        cache: dict[str, Any] = {}
        specs = self.profile.nodes
        with fewer_collections():  # a fleet is millions of long-lived objects: see fewer_collections
            built = list(progress(build_all_slices(specs, self.profile, cache), desc="nodes", total=len(specs)))
            for cls in default_device_classes(self.profile, cache):  # after the nodes: needs their profiles
                self.store.create(cls)
            for spec, slices in zip(specs, built, strict=True):
                # built here, for the store alone; with what a device plugin registers on the node
                self.store.create(build_node(spec, advertised(spec, self.profile, cache)), copy=False)
                for s in slices:
                    self.store.create(s, copy=False)

    # -- API -------------------------------------------------------------------------------
    def apply(self, objs: list[dict], fresh: bool = False) -> list[dict]:
        """Create or update each object (Namespaces first, then in order). Returns the stored objects
        themselves, not copies (the experiments' hot path; `Cluster.apply` hands out copies).
        `fresh=True`: the objects are copies the caller hands over and won't touch again (a new
        object is stored as it is, not copied once more)."""
        ordered = [o for o in objs if o.get("kind") == "Namespace"] + [o for o in objs if o.get("kind") != "Namespace"]
        out = []
        for obj in ordered:
            out.append(self._apply_one(obj, fresh))
        return out

    def _apply_one(self, obj: dict, fresh: bool = False) -> dict:
        kind = obj.get("kind") or ""
        m = obj.get("metadata") or {}
        what = f"{kind or '<no kind>'}/{m.get('name') or m.get('generateName') or '<no name>'}"
        if not kind:
            raise SimError(f"{what}: kind: required; every object needs `kind:` (e.g. Pod, ResourceClaim)")
        if not m.get("name") and not m.get("generateName"):
            raise SimError(f"{what}: metadata.name: required; give the object a name")
        ns = m.get("namespace") or "default"
        if is_namespaced(kind) and kind != "Event" and self.store.get("Namespace", ns, None) is None:
            raise SimError(f'{what}: metadata.namespace: namespace "{ns}" not found; apply a Namespace named {ns} first')
        existing = self.store.get(kind, m["name"], ns) if m.get("name") else None
        try:
            if existing is None:
                new = obj if fresh else copy_of(obj)
                if kind not in KEEP_STATUS:
                    new.pop("status", None)
                for f in ("uid", "resourceVersion", "creationTimestamp", "deletionTimestamp", "generation"):
                    new.setdefault("metadata", {}).pop(f, None)
                return self.store.create(new, copy=False)
            if kind == "ResourceClaim" and (existing.get("spec") or {}) != (obj.get("spec") or {}):
                raise SimError(f"{what}: spec: field is immutable; delete the claim and create it again")
            if kind == "Pod":
                current = {k: v for k, v in (existing.get("spec") or {}).items() if k != "nodeName"}
                wanted = {k: v for k, v in (obj.get("spec") or {}).items() if k != "nodeName"}
                if current != wanted:
                    raise SimError(f"{what}: spec: Forbidden: pod updates may not change the spec here; "
                                   "delete the pod and create it again")
            new = copy_of(existing)
            for k, v in obj.items():
                if k not in ("metadata", "status", "apiVersion", "kind") and not (kind == "Pod" and k == "spec"):
                    new[k] = copy_of(v)
            for f in ("labels", "annotations"):
                if f in m:
                    new["metadata"][f] = copy_of(m[f])
            if kind in KEEP_STATUS and "status" in obj:
                new["status"] = copy_of(obj["status"])
            return existing if new == existing else self.store.update(new)
        except StoreError as exc:
            raise SimError(f"{what}: {exc}") from None

    def get(self, kind: str, name: str, namespace: str | None = "default") -> dict | None:
        """The caller's copy, as an API server's GET is: changing it changes nothing stored (the
        controllers read the store itself; stored slices also share read-only parts between nodes,
        labkit.sim.nodes.SliceTemplate)."""
        obj = self.store.get(canonical_kind(kind), name, namespace)
        return None if obj is None else copy_of(obj)

    def list(self, kind: str, namespace: str | None = None) -> list[dict]:
        """The caller's copies, as get()."""
        return [copy_of(o) for o in self.store.list(canonical_kind(kind), namespace)]

    def delete(self, kind: str, name: str, namespace: str | None = "default") -> None:
        kind = canonical_kind(kind)
        try:
            self.store.delete(kind, name, namespace)
        except StoreError as exc:
            raise SimError(f"{kind}/{name}: {exc}") from None

    # -- running ---------------------------------------------------------------------------
    def step(self) -> bool:
        """One round of every controller. True when something changed."""
        before = self.store.rv
        self.mpijobs.reconcile()
        self.workloads.reconcile()
        self.compute_domains.reconcile()
        self.claims.reconcile()
        self.scheduler.schedule_pending()
        self.claims.reconcile()
        self.agent.reconcile()
        self.taints.reconcile()
        return self.store.rv != before

    def run(self, max_rounds: int = 10_000) -> int:
        """Run until nothing changes. Returns the number of rounds."""
        with fewer_collections():
            for i in range(1, max_rounds + 1):
                if not self.step():
                    return i
        raise SimError(f"the sim did not settle after {max_rounds} rounds (a controller keeps writing)")

    def advance(self, seconds: float) -> None:
        """Move sim time forward, finishing timed pods at their deadlines (and rescheduling after each)."""
        if seconds < 0:
            raise SimError("advance(seconds): seconds must be >= 0")
        target = self.clock.seconds + seconds
        self.run()
        while True:
            nxt = self.next_deadline()
            if nxt is None or nxt > target:
                break
            self.clock.seconds = max(self.clock.seconds, nxt)
            self.agent.finish_due(self.clock.seconds)
            self.taints.evict_due(self.clock.seconds)
            self.run()
        self.clock.seconds = target
        self.run()

    def next_deadline(self) -> float | None:
        """Sim time of the next timed event (a pod's duration ends, a toleration runs out)."""
        times = [t for t in (self.agent.next_deadline(), self.taints.next_deadline()) if t is not None]
        return min(times, default=None)

    # -- looking ---------------------------------------------------------------------------
    def node_slices(self, node_name: str) -> list[dict]:
        node = self.store.get("Node", node_name, None)
        return self.dra.slices_for(node) if node else []

    def pod_uid(self, name: str, namespace: str = "default") -> str | None:
        pod = self.store.get("Pod", name, namespace)
        return meta(pod)["uid"] if pod else None


#: CPython's first GC threshold while the sim runs (default 700)
GC_YOUNG_THRESHOLD = 10_000
#: how many fewer_collections() blocks are open (the outermost one unfreezes)
_open_blocks = 0
#: the outermost block froze objects (False: the caller had frozen some itself; left alone)
_froze = False


@contextmanager
def fewer_collections() -> Iterator[None]:
    """While the sim runs: young collections after 10,000 net allocations instead of 700, and
    the objects that exist when a block opens are left out of later collections (gc.freeze).

    The sim keeps large, long-lived caches (the store's slices, converted slices and pools of
    every node it has looked at, filter results per pod shape). CPython's collector walks all of
    them in every full collection, and a full one comes whenever the objects that survived since
    the last grew by a quarter: with a 5,000-node fleet that was a third of the run time, and it
    grows with the fleet. Frozen objects are not walked; each block (a sim run(), and nested in
    it, say, a whole experiment) freezes what is there when it opens, so collections only look
    at what this block made; and after every collection what survived it is frozen too, so an
    object is walked by one young collection rather than again by each older generation's (a run
    keeps per-node caches for every node it looks at: walking them twice cost a 5,000-node burst
    a fifth of its time). Garbage cycles among frozen objects wait for the outermost block's
    end, which unfreezes everything (gc.unfreeze); the previous thresholds are restored then too.
    A caller that froze objects itself is left alone (no freeze, no unfreeze).
    """
    global _open_blocks, _froze
    if not gc.isenabled():
        yield
        return
    old = gc.get_threshold()
    if _open_blocks == 0:
        _froze = gc.get_freeze_count() == 0
    if old[0] < GC_YOUNG_THRESHOLD:
        gc.set_threshold(GC_YOUNG_THRESHOLD, *old[1:])
    if _froze:
        gc.freeze()
        if _open_blocks == 0:
            gc.callbacks.append(_freeze_survivors)
    _open_blocks += 1
    try:
        yield
    finally:
        _open_blocks -= 1
        if _open_blocks == 0 and _froze:
            gc.callbacks.remove(_freeze_survivors)
            gc.unfreeze()
        gc.set_threshold(*old)


def _freeze_survivors(phase: str, info: dict) -> None:
    """After each collection, freeze what survived it: an object is walked by one young
    collection, not again by every older generation's (most of what a run keeps is caches that
    live as long as the run)."""
    if phase == "stop":
        gc.freeze()
