"""The `sim` backend: `Cluster` on the embedded, in-process `labkit.sim` cluster.

Nothing runs outside Python: `up()` builds the nodes and their ResourceSlices from the profile,
`apply()` stores objects like the API server would (validated and defaulted by labkit.api), and
`wait()` runs controllers, scheduler and node agent until nothing changes. Time is simulated:
`advance(seconds)` moves it (Jobs with a `labkit.dev/duration` annotation finish).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from labkit.api import with_defaults
from labkit.cel.validation import validate
from labkit.cluster.backends import register_backend
from labkit.cluster.base import (
    Cluster,
    ClusterError,
    NotFound,
    RefusedObjects,
    Source,
    cluster_error,
    load_source,
)
from labkit.cluster.explain import format_pod_explanation
from labkit.cluster.placements import PlacementTable, build_placements
from labkit.errors import LabkitError
from labkit.model.kinds import canonical_kind
from labkit.model.profiles import ClusterProfile, load_profile
from labkit.model.state import StateError, load_state, origin_of, profile_for_state
from labkit.output import print_text
from labkit.sim.engine import Sim, SimError
from labkit.sim.nodes import HardwareError
from labkit.sim.store import copy_of


class SimCluster(Cluster):
    backend = "sim"

    def __init__(self, *, seed: int = 0, validate: bool = True, progress: bool = True,
                 cel_engine: str | None = None, state: Any = None, default_duration: float | None = None,
                 **kw: Any) -> None:
        """`state`: start from a real cluster's dump (a path, YAML text or objects: `labkit snapshot`,
        `kubectl get ... -A -o yaml`) instead of a profile; the profile argument of up() is then
        ignored and the Kubernetes version comes from the dump's nodes. `default_duration`: seconds a
        run-to-completion pod (a Job's) runs before it succeeds when it has no `labkit.dev/duration`
        annotation (None: 60)."""
        super().__init__(progress=progress, **kw)
        self.state = state
        self.seed = seed
        self.default_duration = default_duration
        self.validate = validate
        self.cel_engine = cel_engine
        self.sim: Sim | None = None

    # -- lifecycle -------------------------------------------------------------------------
    @classmethod
    def available(cls, kubernetes_version: str = "1.37") -> tuple[bool, str]:
        return True, "embedded in Python: nothing to install"

    def up(self, profile: str | Path | dict | ClusterProfile = "workshop") -> SimCluster:
        objs = None
        if self.state is not None:
            try:
                objs = load_state(self.state)
                self.profile = profile_for_state(objs, name=origin_of(self.state))
            except StateError as exc:
                raise cluster_error(exc) from None
        else:
            self.profile = load_profile(profile)
        try:
            self.sim = Sim(self.profile, seed=self.seed, cel_engine=self.cel_engine,
                           default_duration=self.default_duration,
                           progress=self._progress if self.show_progress else None, state=objs)
        except (HardwareError, SimError) as exc:
            raise cluster_error(exc) from None
        self.sim.run()
        return self

    def _progress(self, items, desc: str, total: int | None = None):  # noqa: ANN001
        if (total or 0) <= 50:
            return items
        return self.progress(items, desc=desc, total=total)

    def down(self) -> None:
        self.sim = None

    @property
    def _sim(self) -> Sim:
        if self.sim is None:
            raise ClusterError("the sim cluster is not up: call up(profile) or use labkit.cluster.connect()")
        return self.sim

    # -- objects ---------------------------------------------------------------------------
    def apply(self, source: Source) -> list[dict]:
        """Store the objects the API server would accept, as `kubectl apply` does: each object is
        stored or refused on its own, and when any was refused one RefusedObjects lists every
        problem of every refused object, in the input's order, after the others were stored (the
        real backends do the same; `labkit simulate` then prints no report, see its run_simulate)."""
        objs = load_source(source)
        # a dict's or list's objects are load_source's copies (each shared part copied apart), used
        # only here: stored as they are (YAML text may alias one part in two places: copied again)
        fresh = isinstance(source, dict | list | tuple)
        sim = self._sim
        refused: dict[int, list[str]] = {}
        if self.validate:
            # one object at a time, with the input's and the cluster's Namespaces in view, as when
            # they were checked together (a claim's admin access reads its Namespace's label)
            namespaces = [*sim.list("Namespace"), *(o for o in objs if isinstance(o, dict) and o.get("kind") == "Namespace")]
            for i, obj in enumerate(objs):
                problems = validate([obj], kubernetes_version=sim.profile.kubernetes_version,
                                    feature_gates=sim.dra.gates or None, existing=namespaces)
                if problems:
                    refused[i] = [str(p) for p in problems]
        # load_source's objects are copies already; Namespaces first, as Sim.apply orders them
        valid = sorted(((i, with_defaults(o, copy=False)) for i, o in enumerate(objs) if i not in refused),
                       key=lambda item: item[1].get("kind") != "Namespace")
        stored: list[dict] = []
        for i, obj in valid:
            try:
                stored += sim.apply([obj], fresh=fresh)
            except SimError as exc:  # the store refused it (no such namespace, an immutable spec)
                refused[i] = [cluster_error(exc).line()]
        stored = [copy_of(o) for o in stored]  # the caller's, as an API server's answer is
        if refused:
            raise RefusedObjects([p for i in sorted(refused) for p in refused[i]], stored)
        return stored

    def delete(self, kind: str, name: str, namespace: str | None = "default") -> None:
        try:
            self._sim.delete(kind, name, namespace)
        except SimError as exc:
            raise NotFound(str(exc)) from None

    def get(self, kind: str, name: str, namespace: str | None = "default") -> dict:
        obj = self._sim.get(kind, name, namespace)
        if obj is None:
            where = f" in namespace {namespace}" if namespace else ""
            raise NotFound(f'{canonical_kind(kind)} "{name}" not found{where}')
        return obj

    def list(self, kind: str, namespace: str | None = None) -> list[dict]:
        return self._sim.list(kind, namespace)

    # -- running ---------------------------------------------------------------------------
    def wait(self, until: Callable[[Cluster], bool] | None = None, timeout: float = 60.0) -> bool:
        """Run to quiescence; with `until`, also let sim time pass (up to `timeout` sim seconds)
        so that timed pods finish, until `until(self)` holds."""
        sim = self._sim
        try:
            sim.run()
            if until is None:
                return True
            start = sim.clock.seconds
            while not until(self):
                nxt = sim.next_deadline()
                if nxt is None or nxt - start > timeout:
                    return False
                sim.advance(max(0.0, nxt - sim.clock.seconds))
            return True
        except SimError as exc:
            raise cluster_error(exc) from None

    def advance(self, seconds: float) -> None:
        """Move simulated time forward by `seconds` (sim only)."""
        try:
            self._sim.advance(seconds)
        except SimError as exc:
            raise cluster_error(exc) from None

    @property
    def clock_seconds(self) -> float:
        """Sim only: simulated seconds since the cluster came up."""
        return self._sim.clock.seconds

    def move_clock_to(self, seconds: float) -> None:
        """Sim only: the clock jumps to `seconds` (never back) and nothing else runs - no controller round,
        unlike `advance` (an experiment's tick: the runner deletes the pods that finish itself)."""
        self._sim.clock.advance(max(0.0, seconds - self._sim.clock.seconds))

    def inject_health_event(self, node: str, device: str, xid: int | None = None, *, kind: str = "xid") -> None:
        try:
            self._sim.health.inject(node, device, xid, kind)
            self._sim.run()
        except LabkitError as exc:
            raise cluster_error(exc) from None

    def watch(self, kind: str, namespace: str | None = None, *, timeout: float = 60.0) -> Any:
        """(event type, object) of `kind` as the API server's watch sends them (`Cluster.watch`): first
        ADDED for every object there is, then ADDED / MODIFIED / DELETED from the store's watch log as
        the sim runs, letting sim time pass up to `timeout` sim seconds (as `wait`); it ends when
        nothing more happens within them. A callback on every change, as it happens: `on_change`."""
        return self._watch(canonical_kind(kind), namespace, timeout)

    def on_change(self, callback: Callable[[Any], None], kinds: list[str] | None = None) -> None:
        """Sim only: call `callback(event)` after every change (event.type ADDED/MODIFIED/DELETED,
        event.object, event.resource_version), optionally only for some kinds."""
        self._sim.store.watch(callback, kinds=[canonical_kind(k) for k in kinds] if kinds else None)

    def _watch(self, kind: str, namespace: str | None, timeout: float) -> Iterator[tuple[str, dict]]:
        sim = self._sim
        rv = sim.store.rv
        for obj in sim.store.list(kind, namespace):
            yield "ADDED", copy_of(obj)
        start = sim.clock.seconds
        try:
            while True:
                for ev in sim.store.events_since(rv):
                    rv = ev.resource_version
                    ns = (ev.object.get("metadata") or {}).get("namespace")
                    if ev.kind == kind and (namespace is None or ns == namespace):
                        yield ev.type, copy_of(ev.object)
                before = sim.store.rv
                sim.run()
                if sim.store.rv != before:
                    continue
                nxt = sim.next_deadline()
                if nxt is None or nxt - start > timeout or nxt <= sim.clock.seconds:
                    return
                sim.advance(nxt - sim.clock.seconds)
        except SimError as exc:
            raise cluster_error(exc) from None

    def events(self) -> list[dict]:
        return self._sim.events.events()

    # -- looking ---------------------------------------------------------------------------
    def placements(self) -> PlacementTable:
        s = self._sim
        return build_placements(s.store.list("Pod"), s.store.list("ResourceClaim"), s.dra.all_slices())

    def explain(self, pod: str, namespace: str = "default") -> str:
        obj = self.get("Pod", pod, namespace)
        s = self._sim
        uid = obj["metadata"]["uid"]
        return format_pod_explanation(obj, s.scheduler.attempts.get(uid), s.agent.problems.get(uid),
                           lambda name: s.store.get("ResourceClaim", name, namespace))

    def pod_env(self, pod: str, namespace: str = "default", container: str | None = None) -> dict[str, str]:
        obj = self.get("Pod", pod, namespace)
        try:
            return self._sim.agent.pod_env(obj["metadata"]["uid"], container)
        except KeyError as exc:
            raise ClusterError(f"pod {namespace}/{pod}: {exc.args[0]}") from None

    def status(self) -> str:
        return self.inventory() if self.sim is not None else "sim cluster (not up)"

    @classmethod
    def manage(cls, action: str, profile: Any, *, progress: bool = False, **_: Any) -> int:
        profile = load_profile(profile)
        if action == "down":
            print("sim: nothing to stop - a sim cluster lives inside the Python process that created it.")
            return 0
        c = cls(progress=progress).up(profile)
        print_text(c.inventory())
        print_text("note: the sim backend runs in-process; this cluster ends with this command. Notebooks "
                   "and `labkit simulate` each create their own (identical, deterministic) sim cluster.")
        return 0

    def inventory(self) -> str:
        """Nodes, GPUs and other devices of the cluster, one line per node profile."""
        s = self._sim
        slices = s.dra.all_slices()
        per_driver: dict[str, int] = {}
        for sl in slices:
            drv = sl["spec"].get("driver", "")
            per_driver[drv] = per_driver.get(drv, 0) + len(sl["spec"].get("devices") or [])
        lines = [self.profile.summary(),
                 f"  {len(slices)} ResourceSlices, {len(s.store.list('DeviceClass'))} DeviceClasses"]
        lines += [f"  {n:>6} devices from driver {d}" for d, n in sorted(per_driver.items())]
        if self.profile.topology_attributes:
            lines.append("  topology.fake-gpus.dev/* attributes: on (LabKit's own, not published by NVIDIA's driver)")
        return "\n".join(lines)


register_backend("sim", SimCluster)
