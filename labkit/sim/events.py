"""Kubernetes Events (core/v1 shape) written into the store, deduplicated like the recorder does."""

from __future__ import annotations

from labkit.sim.store import Store, copy_of


class EventRecorder:
    def __init__(self, store: Store) -> None:
        self.store = store
        self._seen: dict[tuple[str, str, str, str], tuple[str, str]] = {}
        self.order: list[tuple[str, str]] = []  # (namespace, name) in creation order

    def record(self, obj: dict, type_: str, reason: str, message: str, component: str) -> None:
        m = obj.get("metadata") or {}
        uid = m.get("uid", "")
        ns = m.get("namespace") or "default"
        key = (uid, reason, message, component)
        now = self.store.clock.timestamp()
        if key in self._seen:
            ev = self.store.get("Event", self._seen[key][1], self._seen[key][0])
            if ev is not None:
                ev = copy_of(ev)
                ev["count"] = int(ev.get("count", 1)) + 1
                ev["lastTimestamp"] = now
                self.store.update(ev)
                return
        name = f"{m.get('name', '')}.{self.store.rng.getrandbits(64):016x}"
        self.store.create({
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": name, "namespace": ns},
            "involvedObject": {"apiVersion": obj.get("apiVersion", ""), "kind": obj.get("kind", ""),
                               "name": m.get("name", ""), "namespace": ns, "uid": uid},
            "type": type_,
            "reason": reason,
            "message": message,
            "source": {"component": component},
            "reportingComponent": component,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }, copy=False)
        self._seen[key] = (ns, name)
        self.order.append((ns, name))

    def events(self) -> list[dict]:
        """Events oldest first (by first occurrence)."""
        out = []
        for ns, name in self.order:
            ev = self.store.get("Event", name, ns)
            if ev is not None:
                out.append(ev)
        return out
