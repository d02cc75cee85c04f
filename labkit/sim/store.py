"""In-memory object store with API-server semantics that matter for DRA.

- every write bumps a global resourceVersion (string, like etcd's revision);
- uids come from a seeded RNG, names from generateName get seeded suffixes;
- deleting an object with finalizers only sets deletionTimestamp; it goes when they are removed;
- deleting an owner garbage-collects its dependents (ownerReferences, background propagation);
- every change is appended to a watch log and passed to watchers.

Stored dicts are shared, not copied on read: treat what get/list return as read-only and write
through `update` with a modified copy (`copy_of`).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from labkit.api.load import copy_of
from labkit.errors import InputError
from labkit.model.kinds import API_VERSIONS, is_namespaced
from labkit.model.podutil import status_on_create
from labkit.sim import names
from labkit.sim.clock import Clock

__all__ = ["Store", "StoreError", "WatchEvent", "copy_of", "evolve", "key_of"]

Key = tuple[str, str, str]  # kind, namespace ("" when cluster-scoped), name


class StoreError(InputError):
    """A write the API server would refuse (already exists, not found, ...)."""


@dataclass(frozen=True)
class WatchEvent:
    type: str  # ADDED | MODIFIED | DELETED
    object: dict
    resource_version: int
    #: the object's kind, read once (every watcher of every event asks for it)
    kind: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", self.object.get("kind", ""))


def evolve(obj: dict, *sections: str) -> dict:
    """A copy for writing that shares unchanged parts with `obj`: the top level, `metadata` and
    the named top-level `sections` (e.g. "spec", "status") are new dicts; anything deeper must be
    replaced, not mutated, by the caller."""
    new = dict(obj)
    new["metadata"] = dict(obj.get("metadata") or {})
    for s in sections:
        new[s] = dict(obj.get(s) or {})
    return new


def key_of(obj: dict) -> Key:
    kind = obj.get("kind", "")
    meta = obj.get("metadata") or {}
    ns = (meta.get("namespace") or "default") if is_namespaced(kind) else ""
    return kind, ns, meta.get("name", "")


class Store:
    def __init__(self, seed: int = 0, clock: Clock | None = None, keep_log: bool = True) -> None:
        self.rng = random.Random(seed)
        self.clock = clock or Clock()
        self.rv = 0
        self.keep_log = keep_log
        self.log: list[WatchEvent] = []
        self._objs: dict[str, dict[tuple[str, str], dict]] = {}
        self._dependents: dict[str, set[Key]] = {}  # owner uid -> keys of dependents
        self._watchers: list[tuple[frozenset[str] | None, Callable[[WatchEvent], None]]] = []
        self._watchers_of: dict[str, list[Callable[[WatchEvent], None]]] = {}  # kind -> its watchers, in order

    # -- reads -----------------------------------------------------------------------------
    def get(self, kind: str, name: str, namespace: str | None = "default") -> dict | None:
        ns = (namespace or "default") if is_namespaced(kind) else ""
        return self._objs.get(kind, {}).get((ns, name))

    def list(self, kind: str, namespace: str | None = None) -> list[dict]:
        objs = self._objs.get(kind, {})
        keys = sorted(k for k in objs if namespace is None or k[0] == namespace)
        return [objs[k] for k in keys]

    def dependents(self, owner_uid: str, kind: str | None = None) -> list[dict]:
        """Objects whose ownerReferences name `owner_uid`, sorted by key."""
        out = []
        for k in sorted(self._dependents.get(owner_uid, ())):
            if kind is None or k[0] == kind:
                obj = self._objs.get(k[0], {}).get(k[1:])
                if obj is not None:
                    out.append(obj)
        return out

    def count(self, kind: str) -> int:
        return len(self._objs.get(kind, {}))

    def kinds(self) -> list[str]:
        return sorted(k for k, v in self._objs.items() if v)

    # -- watches ---------------------------------------------------------------------------
    def watch(self, callback: Callable[[WatchEvent], None], kinds: Iterable[str] | None = None) -> None:
        """Call `callback` after every change (of `kinds`, or all)."""
        self._watchers.append((frozenset(kinds) if kinds is not None else None, callback))
        self._watchers_of.clear()

    def events_since(self, rv: int) -> list[WatchEvent]:
        """Watch log entries with resourceVersion > rv (needs keep_log)."""
        lo, hi = 0, len(self.log)
        while lo < hi:
            mid = (lo + hi) // 2
            if self.log[mid].resource_version <= rv:
                lo = mid + 1
            else:
                hi = mid
        return self.log[lo:]

    def _emit(self, type_: str, obj: dict) -> None:
        ev = WatchEvent(type_, obj, self.rv)
        if self.keep_log:
            self.log.append(ev)
        kind = ev.kind
        callbacks = self._watchers_of.get(kind)
        if callbacks is None:
            callbacks = self._watchers_of[kind] = [cb for kinds, cb in self._watchers if kinds is None or kind in kinds]
        for cb in callbacks:
            cb(ev)

    # -- writes ----------------------------------------------------------------------------
    def create(self, obj: dict, copy: bool = True, restore: bool = False) -> dict:
        """Store a new object. `copy=False` hands over a freshly built dict the caller won't touch.

        `restore=True` loads an object from a dump of a real cluster: its uid, creationTimestamp and
        status stay as they were (other objects refer to it by uid: reservedFor, ownerReferences)."""
        if copy:
            obj = copy_of(obj)
        kind = obj.get("kind") or ""
        if not kind:
            raise StoreError("object has no kind: set `kind:` (e.g. kind: Pod)")
        obj.setdefault("apiVersion", API_VERSIONS.get(kind, "v1"))
        meta = obj.setdefault("metadata", {})
        if is_namespaced(kind):
            meta["namespace"] = meta.get("namespace") or "default"
        else:
            meta.pop("namespace", None)
        if not meta.get("name"):
            if not meta.get("generateName"):
                raise StoreError(f"{kind}: metadata.name: required (or set metadata.generateName)")
            for _ in range(100):
                meta["name"] = names.generated_name(self.rng, meta["generateName"])
                if key_of(obj)[1:] not in self._objs.get(kind, {}):
                    break
        if not (obj.get("status") or {}).get("phase") and not (restore and obj.get("status")):
            status_on_create(obj)
        k = key_of(obj)
        bucket = self._objs.setdefault(kind, {})
        if k[1:] in bucket:
            where = f" in namespace {k[1]}" if k[1] else ""
            raise StoreError(f'{kind} "{k[2]}" already exists{where}')
        self.rv += 1
        if not (restore and meta.get("uid")):
            meta["uid"] = names.new_uid(self.rng)
        meta["resourceVersion"] = str(self.rv)
        if not (restore and meta.get("creationTimestamp")):
            meta["creationTimestamp"] = self.clock.timestamp()
        meta.setdefault("generation", 1)
        bucket[k[1:]] = obj
        for ref in meta.get("ownerReferences") or []:
            self._dependents.setdefault(ref.get("uid", ""), set()).add(k)
        self._emit("ADDED", obj)
        return obj

    def update(self, obj: dict) -> dict:
        """Replace the stored object with `obj` (a modified copy). Keeps uid and creationTimestamp."""
        k = key_of(obj)
        old = self._objs.get(k[0], {}).get(k[1:])
        if old is None:
            raise StoreError(f'{k[0]} "{k[2]}" not found')
        meta = obj.setdefault("metadata", {})
        ometa = old["metadata"]
        for f in ("uid", "creationTimestamp"):
            meta[f] = ometa[f]
        if is_namespaced(k[0]):
            meta["namespace"] = k[1]
        if obj.get("spec") != old.get("spec"):
            meta["generation"] = int(ometa.get("generation", 1)) + 1
        self.rv += 1
        meta["resourceVersion"] = str(self.rv)
        self._objs[k[0]][k[1:]] = obj
        if ometa.get("deletionTimestamp") and not meta.get("finalizers"):
            return self._remove(k)
        self._emit("MODIFIED", obj)
        return obj

    def delete(self, kind: str, name: str, namespace: str | None = "default") -> dict:
        ns = (namespace or "default") if is_namespaced(kind) else ""
        obj = self._objs.get(kind, {}).get((ns, name))
        if obj is None:
            where = f" in namespace {ns}" if ns else ""
            raise StoreError(f'{kind} "{name}" not found{where}')
        if obj["metadata"].get("finalizers"):
            if not obj["metadata"].get("deletionTimestamp"):
                new = evolve(obj)  # only metadata changes: the rest is shared, as stored objects are
                new["metadata"]["deletionTimestamp"] = self.clock.timestamp()
                return self.update(new)
            return obj
        return self._remove((kind, ns, name))

    def _remove(self, k: Key) -> dict:
        obj = self._objs[k[0]].pop(k[1:])
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        for ref in obj["metadata"].get("ownerReferences") or []:
            deps = self._dependents.get(ref.get("uid", ""))
            if deps:
                deps.discard(k)
        self._emit("DELETED", obj)
        # garbage collection of dependents (background propagation)
        for dk in sorted(self._dependents.pop(obj["metadata"]["uid"], set())):
            if dk[1:] in self._objs.get(dk[0], {}):
                self.delete(dk[0], dk[2], dk[1] or None)
        return obj
