"""device-taint-eviction-controller: pods using a device with an untolerated NoExecute taint go.

Taints come from the devices in the ResourceSlices and from DeviceTaintRules (spec.deviceSelector
driver/pool/device, spec.taint). A result's tolerations (copied from its request at allocation)
may tolerate a taint for good, or for tolerationSeconds of sim time. Evicted pods get the
DisruptionTarget condition and a `DeviceTaintManagerEviction` event, then are deleted; the
claim controller then frees their devices and workload controllers make replacements.
"""

from __future__ import annotations

from labkit.allocator.taints import tolerates
from labkit.sim.clock import parse_timestamp
from labkit.sim.events import EventRecorder
from labkit.sim.podutil import is_deleting, is_finished, meta
from labkit.sim.store import Store, evolve

COMPONENT = "device-taint-eviction-controller"


class DeviceTaintController:
    def __init__(self, store: Store, events: EventRecorder) -> None:
        self.store = store
        self.events = events
        self._dirty = True
        self._taint_index: dict[tuple[str, str, str], list[dict]] | None = None
        self.deadlines: dict[str, tuple[float, str, str]] = {}  # pod uid -> (time, ns, name)
        store.watch(self._on_event, kinds=("DeviceTaintRule", "ResourceSlice", "ResourceClaim"))

    def _on_event(self, ev) -> None:
        if ev.kind != "ResourceClaim":
            self._taint_index = None  # the taints themselves changed: index them again
            self._dirty = True
        elif ev.type == "MODIFIED":
            self._dirty = True

    def _taints(self) -> dict[tuple[str, str, str], list[dict]]:
        """NoExecute taints by device, indexed once per change of slices or rules (not per claim
        change, which is what makes a reconcile run)."""
        if self._taint_index is None:
            self._taint_index = self._scan_taints()
        return self._taint_index

    def _scan_taints(self) -> dict[tuple[str, str, str], list[dict]]:
        out: dict[tuple[str, str, str], list[dict]] = {}
        for s in self.store.list("ResourceSlice"):
            spec = s.get("spec") or {}
            for d in spec.get("devices") or []:
                for t in d.get("taints") or []:
                    if t.get("effect") == "NoExecute":
                        out.setdefault((spec.get("driver", ""), (spec.get("pool") or {}).get("name", ""), d.get("name", "")),
                                       []).append(t)
        rules = [r for r in self.store.list("DeviceTaintRule")
                 if ((r.get("spec") or {}).get("taint") or {}).get("effect") == "NoExecute"]
        if rules:
            for s in self.store.list("ResourceSlice"):
                spec = s.get("spec") or {}
                drv, pool = spec.get("driver", ""), (spec.get("pool") or {}).get("name", "")
                for d in spec.get("devices") or []:
                    for r in rules:
                        sel = r["spec"].get("deviceSelector") or {}
                        if all(sel.get(k) in (None, v) for k, v in (("driver", drv), ("pool", pool), ("device", d.get("name")))):
                            out.setdefault((drv, pool, d.get("name", "")), []).append(r["spec"]["taint"])
        return out

    def reconcile(self) -> None:
        if not self._dirty:
            return
        self._dirty = False
        taints = self._taints()
        if not taints:
            self.deadlines.clear()
            return
        now = self.store.clock.seconds
        wanted: dict[str, tuple[float, str, str]] = {}
        for claim in self.store.list("ResourceClaim"):
            st = claim.get("status") or {}
            results = ((st.get("allocation") or {}).get("devices") or {}).get("results") or []
            evict_after: float | None = None
            for r in results:
                for t in taints.get((r.get("driver", ""), r.get("pool", ""), r.get("device", "")), []):
                    tol = next((x for x in r.get("tolerations") or [] if tolerates(x, t)), None)
                    if tol is None:
                        after = 0.0
                    elif tol.get("tolerationSeconds") is not None:
                        added = parse_timestamp(t["timeAdded"]) if t.get("timeAdded") else now
                        after = max(0.0, added + float(tol["tolerationSeconds"]) - now)
                    else:
                        continue
                    evict_after = after if evict_after is None else min(evict_after, after)
            if evict_after is None:
                continue
            for ref in st.get("reservedFor") or []:
                if ref.get("resource", "pods") == "pods":
                    at = now + evict_after
                    prev = wanted.get(ref.get("uid", ""))
                    if prev is None or at < prev[0]:
                        wanted[ref.get("uid", "")] = (at, meta(claim)["namespace"], ref.get("name", ""))
        self.deadlines = wanted
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
