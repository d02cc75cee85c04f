"""core/v1 rules as kube-apiserver applies them (pkg/apis/core/validation) to what LabKit reads:
Pods (and the pod templates of Deployments and Jobs), Nodes and Namespaces.

Covered: containers (required, names, images), resource lists (names, quantities, requests vs.
limits, extended resources), nodeName, nodeSelector, tolerations, restartPolicy; Node taints,
capacity and allocatable; Namespace finalizers. The DRA side of a pod (``resourceClaims``) is in
:mod:`labkit.api.rules_pod`. Cluster profiles describe Nodes too: :mod:`labkit.model.profiles`
reuses :func:`check_taints`, :func:`check_labels` and :func:`check_resource_list` so a profile is
refused where a Node would be.
"""

from __future__ import annotations

import math
from typing import Any

from labkit.api import names
from labkit.api.problem import Sink, as_dict, as_list
from labkit.api.quantity import Quantity, QuantityError, parse_quantity

__all__ = ["TAINT_EFFECTS", "check_labels", "check_namespace", "check_node", "check_pod_core",
           "check_resource_list", "check_taints", "check_tolerations"]

TAINT_EFFECTS = ["NoSchedule", "PreferNoSchedule", "NoExecute"]
_NEGATIVE = "must be greater than or equal to 0"
_NOT_INTEGER = "must be an integer"
#: helper.IsStandardContainerResourceName (plus hugepages-<size>)
_CONTAINER_RESOURCES = {"cpu", "memory", "ephemeral-storage"}
#: helper.IsStandardResourceName: what a resource list may name without a domain
_STANDARD_RESOURCES = _CONTAINER_RESOURCES | {
    "pods", "services", "replicationcontrollers", "resourcequotas", "secrets", "configmaps",
    "persistentvolumeclaims", "storage", "requests.cpu", "requests.memory", "requests.storage",
    "requests.ephemeral-storage", "limits.cpu", "limits.memory", "limits.ephemeral-storage",
    "services.nodeports", "services.loadbalancers"}
#: helper.IsIntegerResourceName (besides extended resources)
_INTEGER_RESOURCES = {"pods", "services", "replicationcontrollers", "resourcequotas", "secrets",
                      "configmaps", "persistentvolumeclaims", "services.nodeports",
                      "services.loadbalancers"}
_RESTART_POLICIES = ["Always", "OnFailure", "Never"]
_CONTAINER_LISTS = ("initContainers", "containers")


def _native(name: str) -> bool:
    return "/" not in name or "kubernetes.io/" in name


def _extended(name: str) -> bool:
    """helper.IsExtendedResourceName: a domain that is not kubernetes.io's, not ``requests.``."""
    return not _native(name) and not name.startswith("requests.") and not names.label_key(f"requests.{name}")


def _hugepages(name: str) -> bool:
    return name.startswith("hugepages-")


def _overcommit(name: str) -> bool:
    return _native(name) and not _hugepages(name)


def _quantity(sink: Sink, path: str, value: Any) -> Quantity | None:
    """Parse one quantity of a resource list; report it when it cannot be one."""
    if isinstance(value, bool) or value is None or isinstance(value, dict | list):
        sink.invalid(path, value, "must be a quantity such as 500m, 4Gi or 2")
        return None
    if isinstance(value, float) and not math.isfinite(value):
        sink.add(path, f"Invalid value: {value}: quantities must be finite numbers such as 500m, 4Gi or 2 "
                       "(YAML read .nan or .inf)")
        return None
    try:
        return parse_quantity(value)
    except QuantityError as exc:
        sink.invalid(path, value, str(exc))
        return None


def check_resource_list(sink: Sink, path: str, value: Any, *, container: bool = True,
                        keyed: bool = True) -> dict[str, Quantity]:
    """A ResourceList (requests, limits, capacity, allocatable): names and non-negative quantities;
    integer resources (pods, extended resources) must be whole numbers. ``keyed``: the path of an
    entry is ``path[name]`` (containers) rather than ``path.name`` (Node status)."""
    out: dict[str, Quantity] = {}
    if value is None:
        return out
    if not isinstance(value, dict):
        sink.invalid(path, value, "must be a mapping of resource names to quantities, e.g. {cpu: 500m}")
        return out
    for raw_name, raw in value.items():
        name = str(raw_name)
        rpath = f"{path}[{name}]" if keyed else f"{path}.{name}"
        msgs = names.label_key(name)
        if msgs:
            sink.names(rpath, name, msgs)
        elif "/" not in name and name not in _STANDARD_RESOURCES and not _hugepages(name):
            sink.invalid(rpath, name, "must be a standard resource type or fully qualified")
        if container and not msgs:
            if "/" not in name and name not in _CONTAINER_RESOURCES and not _hugepages(name):
                sink.invalid(rpath, name, "must be a standard resource for containers")
            elif "/" in name and not _native(name) and not _extended(name):
                sink.invalid(rpath, name, "doesn't follow extended resource name standard")
        q = _quantity(sink, rpath, raw)
        if q is None:
            continue
        if q.sign() < 0:
            sink.invalid(rpath, str(q), _NEGATIVE)
        elif (name in _INTEGER_RESOURCES or _extended(name)) and not q.is_integer():
            sink.invalid(rpath, str(q), _NOT_INTEGER)
        out[name] = q
    return out


def _requirements(sink: Sink, path: str, resources: Any) -> None:
    res = as_dict(resources)
    limits = check_resource_list(sink, f"{path}.limits", res.get("limits"))
    requests = check_resource_list(sink, f"{path}.requests", res.get("requests"))
    for name, q in requests.items():
        limit = limits.get(name)
        if limit is not None:
            if q.compare(limit) != 0 and not _overcommit(name):
                sink.invalid(f"{path}.requests", str(q), f"must be equal to {name} limit of {limit}")
            elif q.compare(limit) > 0:
                sink.invalid(f"{path}.requests", str(q), f"must be less than or equal to {name} limit of {limit}")
        elif not _overcommit(name) and name not in as_dict(res.get("limits")):
            sink.required(f"{path}.limits", "Limit must be set for non overcommitable resources")


def check_labels(sink: Sink, path: str, labels: Any) -> None:
    """A label map (metadata.labels, nodeSelector, a profile node's labels): keys and values."""
    if labels is None:
        return
    if not isinstance(labels, dict):
        sink.invalid(path, labels, "must be a mapping of label keys to string values")
        return
    for key, value in labels.items():
        sink.names(path, str(key), names.label_key(str(key)))
        if not isinstance(value, str):
            sink.add(f"{path}[{key}]", f"must be a string, not {value!r}; fix: quote the value")
        else:
            sink.names(f"{path}[{key}]", value, names.label_value(value))


def check_taints(sink: Sink, path: str, taints: Any) -> None:
    """Node spec.taints (validateNodeTaints): key, value, effect, unique by key and effect."""
    if taints is None:
        return
    if not isinstance(taints, list):
        sink.invalid(path, taints, "must be a list of {key, value, effect}")
        return
    seen: set[tuple[str, str]] = set()
    for i, taint in enumerate(taints):
        tpath = f"{path}[{i}]"
        if not isinstance(taint, dict):
            sink.invalid(tpath, taint, "must be a mapping {key, value, effect}")
            continue
        key, value, effect = taint.get("key"), taint.get("value"), taint.get("effect")
        if not isinstance(key, str):
            sink.required(f"{tpath}.key", "each taint needs a key, e.g. nvidia.com/gpu")
        else:
            sink.names(f"{tpath}.key", key, names.label_key(key))
        if value is not None:
            if not isinstance(value, str):
                sink.add(f"{tpath}.value", f"must be a string, not {value!r}; fix: quote the value")
            else:
                sink.names(f"{tpath}.value", value, names.label_value(value))
        if not effect:
            sink.required(f"{tpath}.effect", f"one of {', '.join(TAINT_EFFECTS)}")
        elif effect not in TAINT_EFFECTS:
            sink.unsupported(f"{tpath}.effect", effect, TAINT_EFFECTS)
        pair = (str(key), str(effect))
        if pair in seen:
            sink.add(tpath, f"Duplicate value: {{key: {key}, effect: {effect}}}: taints must be unique "
                            "by key and effect pair")
        seen.add(pair)


def check_tolerations(sink: Sink, path: str, tolerations: Any) -> None:
    """Pod spec.tolerations (validateTolerations)."""
    for i, tol in enumerate(as_list(tolerations)):
        tpath = f"{path}[{i}]"
        if not isinstance(tol, dict):
            sink.invalid(tpath, tol, "must be a mapping {key, operator, value, effect}")
            continue
        key, op, value, effect = tol.get("key"), tol.get("operator") or "Equal", tol.get("value"), tol.get("effect")
        if isinstance(key, str) and key:
            sink.names(f"{tpath}.key", key, names.label_key(key))
        elif op != "Exists":
            sink.invalid(f"{tpath}.operator", op, "operator must be Exists when `key` is empty, which means "
                                                  "\"match all values and all keys\"")
        if effect not in (None, "") and effect not in TAINT_EFFECTS:
            sink.unsupported(f"{tpath}.effect", effect, TAINT_EFFECTS)
        if tol.get("tolerationSeconds") is not None and effect != "NoExecute":
            sink.invalid(f"{tpath}.effect", effect, "effect must be 'NoExecute' when `tolerationSeconds` is set")
        if op == "Equal":
            if isinstance(value, str):
                sink.names(f"{tpath}.value", value, names.label_value(value))
        elif op == "Exists":
            if value not in (None, ""):
                sink.invalid(f"{tpath}.operator", tol, "value must be empty when `operator` is 'Exists'")
        else:
            sink.unsupported(f"{tpath}.operator", op, ["Equal", "Exists"])


def check_pod_core(sink: Sink, path: str, spec: Any, *, template: bool = False) -> None:
    """The core/v1 part of a PodSpec (ValidatePodSpec) that decides where a pod can run."""
    if not isinstance(spec, dict):
        sink.required(path, "a pod needs spec.containers")
        return
    containers = spec.get("containers")
    if not isinstance(containers, list) or not containers:
        sink.required(f"{path}.containers", "a pod needs at least one container {name, image}")
    seen: set[str] = set()
    for group in _CONTAINER_LISTS:
        for i, ctr in enumerate(as_list(spec.get(group))):
            cpath = f"{path}.{group}[{i}]"
            if not isinstance(ctr, dict):
                sink.invalid(cpath, ctr, "must be a container {name, image, resources}")
                continue
            name = ctr.get("name")
            if not isinstance(name, str) or not name:
                sink.required(f"{cpath}.name", "each container needs a name")
            else:
                sink.names(f"{cpath}.name", name, names.dns_label(name))
                if name in seen:
                    sink.duplicate(f"{cpath}.name", name)
                seen.add(name)
            image = ctr.get("image")
            if not isinstance(image, str) or not image:  # " " is accepted (Go does not trim it)
                sink.required(f"{cpath}.image", "e.g. busybox:1.36")
            _requirements(sink, f"{cpath}.resources", ctr.get("resources"))
    node_name = spec.get("nodeName")
    if isinstance(node_name, str) and node_name:
        sink.names(f"{path}.nodeName", node_name, names.dns_subdomain(node_name))
    check_labels(sink, f"{path}.nodeSelector", spec.get("nodeSelector"))
    check_tolerations(sink, f"{path}.tolerations", spec.get("tolerations"))
    policy = spec.get("restartPolicy")
    if policy not in (None, "") and policy not in _RESTART_POLICIES:
        sink.unsupported(f"{path}.restartPolicy", policy, _RESTART_POLICIES)
    if spec.get("overhead") is not None:
        check_resource_list(sink, f"{path}.overhead", spec.get("overhead"))
    del template  # the same rules hold for a Deployment's or Job's template


def check_node(sink: Sink, obj: dict[str, Any]) -> None:
    """ValidateNode: taints, and the quantities of status.capacity and status.allocatable."""
    check_taints(sink, "spec.taints", as_dict(obj.get("spec")).get("taints"))
    status = as_dict(obj.get("status"))
    for fld in ("capacity", "allocatable"):
        check_resource_list(sink, f"status.{fld}", status.get(fld), container=False, keyed=False)


def check_namespace(sink: Sink, obj: dict[str, Any]) -> None:
    """ValidateNamespace: spec.finalizers are qualified names."""
    for i, fin in enumerate(as_list(as_dict(obj.get("spec")).get("finalizers"))):
        if isinstance(fin, str):
            sink.names(f"spec.finalizers[{i}]", fin, names.label_key(fin))
