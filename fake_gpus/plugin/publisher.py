"""Publish a node's ResourceSlices (and optionally DeviceClasses) through the API server."""

from __future__ import annotations

import copy
import logging
import re
from typing import Any

from .kube import KubeError, KubeRest

log = logging.getLogger("fake_gpus.plugin")

SLICES = "/apis/resource.k8s.io/v1/resourceslices"
CLASSES = "/apis/resource.k8s.io/v1/deviceclasses"


def _slice_name(node: str, driver: str, i: int) -> str:
    base = re.sub(r"[^a-z0-9.-]+", "-", f"{node}-{driver}".lower()).strip("-.")
    return f"{base[:240]}-{i}"


class SlicePublisher:
    """Keeps the API server's slices for (node, driver) equal to the desired list.

    Slices are matched by name; ones not desired any more are deleted. The pool generation
    follows Kubernetes' own resourceslice controller: 1 for a new pool, up by one when a slice is
    added or several change (so the scheduler never mixes old and new slices of the pool), kept
    for a single update. Slices get the Node as owner when the Node exists, so they vanish with it.
    """

    def __init__(self, api_client: Any, node: str, driver: str):
        self.rest = KubeRest(api_client)
        self.node = node
        self.driver = driver

    def _owner(self) -> list[dict[str, Any]]:
        status, node = self.rest.request("GET", f"/api/v1/nodes/{self.node}")
        if status != 200 or not isinstance(node, dict):
            log.info("node %s not found in the API server; slices get no owner", self.node)
            return []
        return [{"apiVersion": "v1", "kind": "Node", "name": self.node,
                 "uid": node["metadata"]["uid"], "controller": True}]

    def current(self) -> dict[str, dict[str, Any]]:
        data = self.rest.call("GET", SLICES, query={"fieldSelector": f"spec.driver={self.driver}"})
        out = {}
        for sl in (data or {}).get("items") or []:
            spec = sl.get("spec") or {}
            if spec.get("nodeName") == self.node or (spec.get("pool") or {}).get("name") == self.node:
                out[sl["metadata"]["name"]] = sl
        return out

    def publish(self, slices: list[dict[str, Any]]) -> list[str]:
        """Create/update/delete so exactly ``slices`` are published; returns their names."""
        existing = self.current()
        owner = self._owner()
        desired: dict[str, dict[str, Any]] = {}
        for i, sl in enumerate(slices):
            obj = copy.deepcopy(sl)
            obj.setdefault("apiVersion", "resource.k8s.io/v1")
            obj.setdefault("kind", "ResourceSlice")
            meta = obj.setdefault("metadata", {})
            meta.pop("generateName", None)
            name = meta.setdefault("name", _slice_name(self.node, self.driver, i))
            if owner:
                meta["ownerReferences"] = owner
            desired[name] = obj
        for name, obj in desired.items():
            if name in existing:
                _keep_time_added(obj, existing[name])
        # the generation rule of Kubernetes' resourceslice controller: a pool starts at 1; it goes
        # up when a slice is new or more than one slice changes; a single update keeps it
        new = [n for n in desired if n not in existing]
        changed = [n for n in desired if n in existing
                   and _spec_without_generation(existing[n]) != _spec_without_generation(desired[n])]
        generation = max([int(((s.get("spec") or {}).get("pool") or {}).get("generation", 0))
                          for s in existing.values()] or [0])
        if new or len(changed) > 1:
            generation += 1
        for obj in desired.values():
            obj["spec"].setdefault("pool", {})["generation"] = generation
        for name, obj in desired.items():
            if name in existing:
                obj["metadata"]["resourceVersion"] = existing[name]["metadata"]["resourceVersion"]
                self.rest.call("PUT", f"{SLICES}/{name}", body=obj)
            else:
                status, data = self.rest.request("POST", SLICES, body=obj)
                if status == 409:  # appeared meanwhile: take it over
                    cur = self.rest.call("GET", f"{SLICES}/{name}")
                    obj["metadata"]["resourceVersion"] = cur["metadata"]["resourceVersion"]
                    self.rest.call("PUT", f"{SLICES}/{name}", body=obj)
                elif status not in (200, 201):
                    msg = data.get("message") if isinstance(data, dict) else ""
                    raise KubeError(status, f"creating ResourceSlice {name}: HTTP {status}: {msg}")
        for name in set(existing) - set(desired):
            self.rest.call("DELETE", f"{SLICES}/{name}", ok=(200, 202, 404))
        log.info("published %d ResourceSlice(s) for node %s, driver %s (pool generation %d)",
                 len(desired), self.node, self.driver, generation)
        return sorted(desired)

    def delete_all(self) -> int:
        names = list(self.current())
        for name in names:
            self.rest.call("DELETE", f"{SLICES}/{name}", ok=(200, 202, 404))
        log.info("deleted %d ResourceSlice(s) of node %s, driver %s", len(names), self.node, self.driver)
        return len(names)


def _keep_time_added(desired: dict[str, Any], existing: dict[str, Any]) -> None:
    """A desired device taint without timeAdded takes the published one's (same key, value and
    effect): the API server stamps a taint sent without it again, which would restart the clock
    of the tolerationSeconds counted from it."""
    stamped = {}
    for d in (existing.get("spec") or {}).get("devices") or []:
        for t in d.get("taints") or []:
            if t.get("timeAdded"):
                stamped[(d.get("name"), t.get("key"), t.get("value"), t.get("effect"))] = t["timeAdded"]
    for d in (desired.get("spec") or {}).get("devices") or []:
        for t in d.get("taints") or []:
            when = stamped.get((d.get("name"), t.get("key"), t.get("value"), t.get("effect")))
            if when and not t.get("timeAdded"):
                t["timeAdded"] = when


def _spec_without_generation(sl: dict[str, Any]) -> Any:
    spec = copy.deepcopy(sl.get("spec") or {})
    (spec.get("pool") or {}).pop("generation", None)
    return spec


def apply_device_classes(api_client: Any, classes: list[dict[str, Any]]) -> list[str]:
    """Create or replace each DeviceClass."""
    rest = KubeRest(api_client)
    names = []
    for dc in classes:
        obj = copy.deepcopy(dc)
        obj.setdefault("apiVersion", "resource.k8s.io/v1")
        obj.setdefault("kind", "DeviceClass")
        name = obj["metadata"]["name"]
        status, cur = rest.request("GET", f"{CLASSES}/{name}")
        if status == 200:
            obj["metadata"]["resourceVersion"] = cur["metadata"]["resourceVersion"]
            rest.call("PUT", f"{CLASSES}/{name}", body=obj)
        else:
            rest.call("POST", CLASSES, body=obj)
        names.append(name)
    log.info("applied DeviceClass(es): %s", ", ".join(names))
    return names
