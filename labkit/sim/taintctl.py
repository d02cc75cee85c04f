"""device-taint-eviction-controller: pods using a device with an untolerated NoExecute taint go.

Taints come from the devices in the ResourceSlices and from DeviceTaintRules (spec.deviceSelector
driver/pool/device, spec.taint). A result's tolerations (copied from its request at allocation)
may tolerate a taint for good, or for tolerationSeconds of sim time. Evicted pods get the
DisruptionTarget condition and a `DeviceTaintManagerEviction` event, then are deleted; the
claim controller then frees their devices and workload controllers make replacements.

Incremental: the NoExecute taints are indexed by device once per change of slices or rules
(a taint without timeAdded counts from then, as the API server would have stamped it), and a
claim change re-examines that claim only; a change of the taints re-examines every claim.
"""

from __future__ import annotations

from labkit.allocator.taints import tolerates
from labkit.api.features import DEFAULT_VERSION, minor_key
from labkit.model.podutil import is_deleting, is_finished, meta
from labkit.sim.clock import parse_timestamp
from labkit.sim.events import EventRecorder
from labkit.sim.store import Store, evolve

COMPONENT = "device-taint-eviction-controller"


class DeviceTaintController:
    def __init__(self, store: Store, events: EventRecorder, kubernetes_version: str = DEFAULT_VERSION) -> None:
        self.store = store
        self.events = events
        #: 1.38 on: a toleration with an empty effect tolerates NoExecute too (kubernetes#143376); before, the
        #: controller counted only tolerations whose effect is NoExecute
        self.empty_effect_tolerates = minor_key(kubernetes_version) >= (1, 38)
        self._taint_index: dict[tuple[str, str, str], list[tuple[dict, float]]] | None = None
        self._all = True  # every claim must be examined (the taints changed)
        self._dirty: set[tuple[str, str]] = set()  # claims changed since the last reconcile
        self._wanted: dict[tuple[str, str], dict[str, tuple[float, str, str]]] = {}  # claim -> pod uid -> deadline
        self.deadlines: dict[str, tuple[float, str, str]] = {}  # pod uid -> (time, ns, name)
        store.watch(self._on_event, kinds=("DeviceTaintRule", "ResourceSlice", "ResourceClaim"))

    def _on_event(self, ev) -> None:
        if ev.kind != "ResourceClaim":
            self._taint_index = None  # the taints themselves changed: index them again
            self._all = True
        elif ev.type != "ADDED":  # a new claim has no allocation yet
            m = ev.object.get("metadata") or {}
            self._dirty.add((m.get("namespace", "default"), m.get("name", "")))

    def _counts(self, toleration: dict) -> bool:
        effect = toleration.get("effect") or ""
        return effect == "NoExecute" or (effect == "" and self.empty_effect_tolerates)

    def _taints(self) -> dict[tuple[str, str, str], list[tuple[dict, float]]]:
        """NoExecute taints by device, with the time each counts from."""
        if self._taint_index is None:
            self._taint_index = self._scan_taints()
        return self._taint_index

    def _scan_taints(self) -> dict[tuple[str, str, str], list[tuple[dict, float]]]:
        now = self.store.clock.seconds
        out: dict[tuple[str, str, str], list[tuple[dict, float]]] = {}

        def add(key: tuple[str, str, str], taint: dict) -> None:
            added = parse_timestamp(taint["timeAdded"]) if taint.get("timeAdded") else now
            out.setdefault(key, []).append((taint, added))

        slices = self.store.list("ResourceSlice")
        for s in slices:
            spec = s.get("spec") or {}
            for d in spec.get("devices") or []:
                for t in d.get("taints") or []:
                    if t.get("effect") == "NoExecute":
                        add((spec.get("driver", ""), (spec.get("pool") or {}).get("name", ""), d.get("name", "")), t)
        rules = [r for r in self.store.list("DeviceTaintRule")
                 if ((r.get("spec") or {}).get("taint") or {}).get("effect") == "NoExecute"]
        if rules:
            for s in slices:
                spec = s.get("spec") or {}
                drv, pool = spec.get("driver", ""), (spec.get("pool") or {}).get("name", "")
                for d in spec.get("devices") or []:
                    for r in rules:
                        sel = r["spec"].get("deviceSelector")
                        if sel is None:  # no selector matches nothing (1.37.1 on; `{}` matches all), as the allocator
                            continue
                        if all(sel.get(k) in (None, v) for k, v in (("driver", drv), ("pool", pool), ("device", d.get("name")))):
                            add((drv, pool, d.get("name", "")), r["spec"]["taint"])
        return out

    def _claim_deadlines(self, claim: dict, taints: dict, now: float) -> dict[str, tuple[float, str, str]]:
        """pod uid -> when the claim's tainted devices evict it."""
        st = claim.get("status") or {}
        results = ((st.get("allocation") or {}).get("devices") or {}).get("results") or []
        evict_at: float | None = None
        for r in results:
            for t, added in taints.get((r.get("driver", ""), r.get("pool", ""), r.get("device", "")), []):
                # every matching toleration counts: one without tolerationSeconds tolerates for good, else the
                # smallest seconds win (kubernetes pkg/controller/devicetainteviction claimEvictionTime)
                tols = [x for x in r.get("tolerations") or [] if self._counts(x) and tolerates(x, t)]
                if any(x.get("tolerationSeconds") is None for x in tols):
                    continue
                at = max(now, added + min(max(float(x["tolerationSeconds"]), 0.0) for x in tols)) if tols else now
                evict_at = at if evict_at is None else min(evict_at, at)
        if evict_at is None:
            return {}
        return {ref.get("uid", ""): (evict_at, meta(claim)["namespace"], ref.get("name", ""))
                for ref in st.get("reservedFor") or [] if ref.get("resource", "pods") == "pods"}

    def reconcile(self) -> None:
        if not self._all and not self._dirty:
            return
        taints = self._taints()
        if not taints:
            self._all, self._dirty = False, set()
            self._wanted.clear()
            self.deadlines.clear()
            return
        now = self.store.clock.seconds
        if self._all:
            self._wanted.clear()
            claims = self.store.list("ResourceClaim")
        else:
            claims = []
            for ns, name in sorted(self._dirty):
                self._wanted.pop((ns, name), None)
                claim = self.store.get("ResourceClaim", name, ns)
                if claim is not None:
                    claims.append(claim)
        self._all, self._dirty = False, set()
        for claim in claims:
            wanted = self._claim_deadlines(claim, taints, now)
            if wanted:
                self._wanted[(meta(claim)["namespace"], meta(claim)["name"])] = wanted
        deadlines: dict[str, tuple[float, str, str]] = {}
        for wanted in self._wanted.values():
            for uid, d in wanted.items():
                if uid not in deadlines or d[0] < deadlines[uid][0]:
                    deadlines[uid] = d
        self.deadlines = deadlines
        self.evict_due(now)

    def next_deadline(self) -> float | None:
        return min((d[0] for d in self.deadlines.values()), default=None)

    def evict_due(self, now: float) -> None:
        for uid, (at, ns, name) in sorted(self.deadlines.items(), key=lambda kv: (kv[1], kv[0])):
            if at > now:
                continue
            self.deadlines.pop(uid, None)
            pod = self.store.get("Pod", name, ns)
            if pod is None or meta(pod).get("uid") != uid or is_deleting(pod) or is_finished(pod):
                continue
            new = evolve(pod, "status")
            conds = [c for c in new["status"].get("conditions") or [] if c.get("type") != "DisruptionTarget"]
            conds.append({"type": "DisruptionTarget", "status": "True", "reason": "DeletionByDeviceTaintManager",
                          "message": "Device Taint manager: deleting due to NoExecute taint"})
            new["status"]["conditions"] = conds
            pod = self.store.update(new)
            self.events.record(pod, "Normal", "DeviceTaintManagerEviction", "Marking for deletion", COMPONENT)
            self.store.delete("Pod", name, ns)
