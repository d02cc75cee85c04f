"""Builders for the objects a test needs as a fixture (issue 44 item 5): claims, templates, pods,
ResourceSlices, devices, nodes and DeviceClasses as the plain dicts a user writes, instead of the
same pod-and-claim YAML written inline in many test files.

Field names are resource.k8s.io/v1's and core/v1's exactly (the team's dra-reference.md;
k8s.io/api/resource/v1/types.go): a claim's request is ``{"name", "exactly": {"deviceClassName",
"allocationMode", "count", "selectors": [{"cel": {"expression"}}]}}``; a pod names its claims in
``spec.resourceClaims[].resourceClaimName`` / ``resourceClaimTemplateName`` and its container
references them in ``resources.claims[].name``. Only what is given is written (no defaults the API
server would add), so a test that cares about defaulting still sees it done by the code under test;
lists given (requests, constraints, devices ...) are taken as they are, malformed ones included.

A test whose subject IS the exact input (YAML parsing, line numbers, snapshots of bad input) keeps
its literal text; ``yaml_docs`` turns built objects into text for the tests that feed a CLI.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import yaml

API = "resource.k8s.io/v1"
GPU = "gpu.nvidia.com"  # the fake GPUs' driver and DeviceClass
HOSTNAME = "kubernetes.io/hostname"

Selector = str | Mapping[str, Any]  # a CEL expression, or a whole `{"cel": {...}}` selector
#: a pod's claims: one object name (the pod's entry is then called "gpu"), {entry: object}, or (entry, object) pairs
ClaimRefs = str | Mapping[str, str] | Iterable[tuple[str, str]] | None


def cel(expression: str) -> dict[str, Any]:
    """One device selector: ``{"cel": {"expression": ...}}``."""
    return {"cel": {"expression": expression}}


def memory_at_least(quantity: str, driver: str = GPU) -> str:
    """CEL: the device's ``memory`` capacity is at least ``quantity`` (e.g. "40Gi")."""
    return f"device.capacity['{driver}'].memory.compareTo(quantity('{quantity}')) >= 0"


def product_is(name: str, driver: str = GPU) -> str:
    """CEL: the device's ``productName`` attribute is ``name`` (e.g. "Tesla T4")."""
    return f"device.attributes['{driver}'].productName == '{name}'"


def _selectors(selectors: Iterable[Selector]) -> list[dict[str, Any]]:
    return [cel(s) if isinstance(s, str) else dict(s) for s in selectors]


def _meta(name: str, namespace: str | None, labels: Mapping[str, str] | None = None,
          annotations: Mapping[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    if labels:
        meta["labels"] = dict(labels)
    if annotations:
        meta["annotations"] = dict(annotations)
    return meta


def request(name: str = "gpu", *, device_class: str = GPU, count: int | None = None,
            selectors: Iterable[Selector] = (), allocation_mode: str | None = None,
            admin_access: bool | None = None, tolerations: Sequence[Mapping[str, Any]] = (),
            capacity: Mapping[str, str] | None = None) -> dict[str, Any]:
    """One ``spec.devices.requests[]`` entry asking for ``exactly`` these devices."""
    exactly: dict[str, Any] = {"deviceClassName": device_class}
    if allocation_mode is not None:
        exactly["allocationMode"] = allocation_mode
    if count is not None:
        exactly["count"] = count
    if selectors:
        exactly["selectors"] = _selectors(selectors)
    if admin_access is not None:
        exactly["adminAccess"] = admin_access
    if tolerations:
        exactly["tolerations"] = list(tolerations)
    if capacity:
        exactly["capacity"] = {"requests": dict(capacity)}
    return {"name": name, "exactly": exactly}


def claim_spec(*, device_class: str = GPU, count: int | None = None, selectors: Iterable[Selector] = (),
               requests: Sequence[Mapping[str, Any]] | None = None,
               constraints: Sequence[Mapping[str, Any]] = (),
               config: Sequence[Mapping[str, Any]] = ()) -> dict[str, Any]:
    """A ResourceClaimSpec: ``requests`` as given, else one request "gpu" of ``device_class``."""
    reqs = list(requests) if requests is not None else \
        [request(device_class=device_class, count=count, selectors=selectors)]
    devices: dict[str, Any] = {"requests": reqs}
    if constraints:
        devices["constraints"] = list(constraints)
    if config:
        devices["config"] = list(config)
    return {"devices": devices}


def claim(name: str, *, device_class: str = GPU, count: int | None = None, selectors: Iterable[Selector] = (),
          namespace: str | None = "default", requests: Sequence[Mapping[str, Any]] | None = None,
          constraints: Sequence[Mapping[str, Any]] = (), config: Sequence[Mapping[str, Any]] = (),
          labels: Mapping[str, str] | None = None) -> dict[str, Any]:
    """A ResourceClaim (see `claim_spec` for its spec)."""
    return {"apiVersion": API, "kind": "ResourceClaim", "metadata": _meta(name, namespace, labels),
            "spec": claim_spec(device_class=device_class, count=count, selectors=selectors,
                               requests=requests, constraints=constraints, config=config)}


def claim_template(name: str, *, device_class: str = GPU, count: int | None = None,
                   selectors: Iterable[Selector] = (), namespace: str | None = "default",
                   requests: Sequence[Mapping[str, Any]] | None = None,
                   constraints: Sequence[Mapping[str, Any]] = (), config: Sequence[Mapping[str, Any]] = (),
                   labels: Mapping[str, str] | None = None) -> dict[str, Any]:
    """A ResourceClaimTemplate: the claim spec under ``spec.spec``."""
    return {"apiVersion": API, "kind": "ResourceClaimTemplate", "metadata": _meta(name, namespace, labels),
            "spec": {"spec": claim_spec(device_class=device_class, count=count, selectors=selectors,
                                        requests=requests, constraints=constraints, config=config)}}


def _entries(refs: ClaimRefs) -> list[tuple[str, str]]:
    if refs is None:
        return []
    if isinstance(refs, str):
        return [("gpu", refs)]
    if isinstance(refs, Mapping):
        return list(refs.items())
    return [(entry, obj) for entry, obj in refs]


def pod(name: str, *, claims: ClaimRefs = None, templates: ClaimRefs = None, node: str | None = None,
        node_name: str | None = None, image: str = "busybox",
        command: Sequence[str] | None = ("sleep", "infinity"), namespace: str | None = "default",
        labels: Mapping[str, str] | None = None, annotations: Mapping[str, str] | None = None,
        requests: Mapping[str, str] | None = None, container: str = "main", **spec: Any) -> dict[str, Any]:
    """A Pod with one container that uses every claim of the pod.

    ``claims`` / ``templates``: the ResourceClaims / ResourceClaimTemplates it names (a bare name
    gives the entry "gpu"). ``node`` pins it through ``nodeSelector: {kubernetes.io/hostname: node}``
    (the scheduler still decides, as in the scenarios); ``node_name`` sets ``spec.nodeName`` (no
    scheduler). ``requests``: the container's CPU/memory requests. ``spec``: more PodSpec fields
    (``tolerations``, ``affinity``, ``restartPolicy`` ...), as the API spells them."""
    entries = [{"name": e, "resourceClaimName": o} for e, o in _entries(claims)] + \
        [{"name": e, "resourceClaimTemplateName": o} for e, o in _entries(templates)]
    ctr: dict[str, Any] = {"name": container, "image": image}
    if command is not None:
        ctr["command"] = list(command)
    resources: dict[str, Any] = {}
    if requests:
        resources["requests"] = dict(requests)
    if entries:
        resources["claims"] = [{"name": e["name"]} for e in entries]
    if resources:
        ctr["resources"] = resources
    body: dict[str, Any] = {}
    if node is not None:
        body["nodeSelector"] = {HOSTNAME: node}
    if node_name is not None:
        body["nodeName"] = node_name
    body["containers"] = [ctr]
    if entries:
        body["resourceClaims"] = entries
    body.update(spec)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": _meta(name, namespace, labels, annotations),
            "spec": body}


def _attribute(value: Any) -> dict[str, Any]:
    """A DeviceAttribute: exactly one of bool / int / string / version (a dict is taken as written)."""
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, bool):
        return {"bool": value}
    if isinstance(value, int):
        return {"int": value}
    return {"string": str(value)}


def device(name: str, *, attributes: Mapping[str, Any] | None = None,
           capacity: Mapping[str, str | int | Mapping[str, Any]] | None = None, **fields: Any) -> dict[str, Any]:
    """A ResourceSlice device. ``attributes``: name -> a Python bool/int/str (typed as the API's
    ``bool``/``int``/``string``) or an explicit ``{"version": ...}``; ``capacity``: name -> a
    quantity (``{"value": q}``) or an explicit DeviceCapacity. ``fields``: more Device fields."""
    out: dict[str, Any] = {"name": name}
    if attributes is not None:
        out["attributes"] = {k: _attribute(v) for k, v in attributes.items()}
    if capacity is not None:
        out["capacity"] = {k: dict(v) if isinstance(v, Mapping) else {"value": str(v)} for k, v in capacity.items()}
    out.update(fields)
    return out


def resource_slice(node: str | None, driver: str = GPU, pool: str | None = None,
                   devices: Sequence[Mapping[str, Any]] = (), *, name: str | None = None, generation: int = 1,
                   slice_count: int = 1, all_nodes: bool = False, **spec: Any) -> dict[str, Any]:
    """A ResourceSlice of ``driver`` on ``node`` (``spec.nodeName``), or for every node
    (``all_nodes``; ``node`` None); the pool is named after the node unless given. ``spec``: more
    ResourceSliceSpec fields (``nodeSelector``, ``sharedCounters`` ...)."""
    body: dict[str, Any] = {"driver": driver,
                            "pool": {"name": pool or node or driver, "generation": generation,
                                     "resourceSliceCount": slice_count}}
    if all_nodes:
        body["allNodes"] = True
    elif node is not None and "nodeSelector" not in spec:
        body["nodeName"] = node
    body["devices"] = list(devices)
    body.update(spec)
    return {"apiVersion": API, "kind": "ResourceSlice",
            "metadata": {"name": name or f"{pool or node or 'all'}-{driver}"}, "spec": body}


slice_ = resource_slice


def node(name: str, *, labels: Mapping[str, str] | None = None, cpu: str = "64", memory: str = "512Gi",
         pods: str = "110", taints: Sequence[Mapping[str, Any]] = ()) -> dict[str, Any]:
    """A Node labelled with its hostname, allocatable ``cpu``/``memory``/``pods``."""
    resources = {"cpu": cpu, "memory": memory, "pods": pods}
    out: dict[str, Any] = {"apiVersion": "v1", "kind": "Node",
                           "metadata": {"name": name, "labels": {HOSTNAME: name, **(labels or {})}},
                           "spec": {}, "status": {"capacity": dict(resources), "allocatable": dict(resources)}}
    if taints:
        out["spec"]["taints"] = list(taints)
    return out


def device_class(name: str, expression: str | None = None, *,
                 config: Sequence[Mapping[str, Any]] = ()) -> dict[str, Any]:
    """A DeviceClass selecting the devices ``expression`` (CEL) accepts; all devices when None."""
    spec: dict[str, Any] = {}
    if expression is not None:
        spec["selectors"] = [cel(expression)]
    if config:
        spec["config"] = list(config)
    return {"apiVersion": API, "kind": "DeviceClass", "metadata": {"name": name}, "spec": spec}


def yaml_docs(*objs: Mapping[str, Any] | Iterable[Mapping[str, Any]]) -> str:
    """The objects as one multi-document YAML text (lists are flattened), keys in the order built."""
    flat: list[dict[str, Any]] = []
    for o in objs:
        if isinstance(o, Mapping):
            flat.append(dict(o))
        else:
            flat.extend(dict(x) for x in o)
    return yaml.safe_dump_all(flat, sort_keys=False)
