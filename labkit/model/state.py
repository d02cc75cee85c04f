"""A cluster's state from a dump (``labkit snapshot`` or ``kubectl get ... -A -o yaml``), for a sim
that starts where a real cluster is.

    objs = load_state("dump.yaml")          # checked: kinds, apiVersions, names
    sim = Sim(profile_for_state(objs), state=objs)

The dump keeps uids, allocations, reservations and bindings; `Sim` restores them as they are (no
re-scheduling of bound pods, no re-allocation of allocated claims).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from labkit.api import LoadError, load
from labkit.api.features import DEFAULT_VERSION, SUPPORTED_VERSIONS
from labkit.api.load import path_problem
from labkit.api.problem import Problem, as_dict, printable_name
from labkit.cel.validation import validate
from labkit.errors import InputError
from labkit.model.profiles import ClusterProfile, NodeSpec

#: the kinds a state dump holds, with the apiVersion labkit reads them in (restore order)
STATE_KINDS: dict[str, str] = {
    "Namespace": "v1",
    "DeviceClass": "resource.k8s.io/v1",
    "Node": "v1",
    "ResourceSlice": "resource.k8s.io/v1",
    "DeviceTaintRule": "resource.k8s.io/v1",
    "ResourceClaimTemplate": "resource.k8s.io/v1",
    "ResourceClaim": "resource.k8s.io/v1",
    "Pod": "v1",
}
#: kinds `kubectl get -A -o yaml` often adds that say nothing about placements; skipped silently
IGNORED_KINDS = frozenset({"Event"})


class StateError(InputError, ValueError):
    """A dump that cannot be used; one line naming the object and the fix."""


def origin_of(source: Any) -> str:
    if isinstance(source, Path) or (isinstance(source, str) and "\n" not in source and len(source) < 4096):
        return str(source)
    return "<state>"


def _fix_for_version(kind: str, want: str) -> str:
    plural = {"Namespace": "namespaces", "Node": "nodes", "Pod": "pods"}.get(kind) or f"{kind.lower()}s.v1.resource.k8s.io"
    return f"take it as {want} (`kubectl get {plural} -A -o yaml`, or `labkit snapshot`; needs Kubernetes 1.34+)"


def _what(origin: str, i: int, obj: dict[str, Any]) -> str:
    m = as_dict(obj.get("metadata"))
    ns, name = m.get("namespace"), m.get("name")
    name = name if isinstance(name, str) else "<no name>"
    kind = obj.get("kind") if isinstance(obj.get("kind"), str) else ""
    return f"{origin}: object {i + 1} ({kind or '<no kind>'} {ns + '/' if isinstance(ns, str) and ns else ''}" \
           f"{printable_name(name)})"


def load_state(source: str | Path | list[dict[str, Any]] | dict[str, Any]) -> list[dict[str, Any]]:
    """The objects of a dump, checked; raises StateError with one line naming what is wrong."""
    try:
        return _load_state(source)
    except RecursionError:  # a value nested hundreds of levels deep (objects handed in, not a file)
        raise StateError(f"{origin_of(source)}: nested too deeply to read",
                         fix="take the dump again with `labkit snapshot -o FILE`") from None


def _load_state(source: str | Path | list[dict[str, Any]] | dict[str, Any]) -> list[dict[str, Any]]:
    origin = origin_of(source)
    if isinstance(source, Path) or (isinstance(source, str) and "\n" not in source and len(source) < 4096):
        problem = path_problem(source, "the path of a dump made by `labkit snapshot -o FILE` or `kubectl get ... -A -o yaml`")
        if problem is not None:
            raise StateError(f"{source}: {problem}")
        source = Path(source)  # read as a file whatever it holds: load() takes a str like "a: b.yaml" for YAML
    try:
        objs = load(source, default_namespace=None)
    except LoadError as exc:  # its line names the file already (not a dump handed in as objects)
        first = exc.problems[0]
        raise StateError(first if first.startswith(f"{origin}:") else f"{origin}: {first}") from None
    out = []
    positions = []
    for i, obj in enumerate(objs):
        kind = obj.get("kind") if isinstance(obj.get("kind"), str) else ""
        version = obj.get("apiVersion") if isinstance(obj.get("apiVersion"), str) else ""
        m = as_dict(obj.get("metadata"))
        what = _what(origin, i, obj)
        if kind in IGNORED_KINDS:
            continue
        if kind not in STATE_KINDS:
            raise StateError(f"{what}: kind {kind or '<none>'!r} ({version or 'no apiVersion'}) is not part of the "
                             f"state labkit reads ({', '.join(STATE_KINDS)}); drop it from the dump, or take the dump "
                             "with `labkit snapshot`")
        if version != STATE_KINDS[kind]:
            raise StateError(f"{what}: apiVersion {version or '<none>'!r} is not read; {_fix_for_version(kind, STATE_KINDS[kind])}")
        if not m.get("name"):
            raise StateError(f"{what}: metadata.name: required; a dump holds stored objects, which all have names")
        if kind in ("Pod", "ResourceClaim", "ResourceClaimTemplate") and not m.get("namespace"):
            raise StateError(f"{what}: metadata.namespace: required; dump with `-A` (all namespaces) so objects keep "
                             "their namespace")
        out.append(obj)
        positions.append(i)
    _refuse_impossible(out, positions, origin)
    if not any(o["kind"] == "Node" for o in out):
        raise StateError(f"{origin}: the dump has no Node; a state needs the cluster's Nodes "
                         "(`labkit snapshot` writes them)")
    return out


def _checked_part(obj: dict[str, Any]) -> dict[str, Any]:
    """What the API server validates of a stored object: all of it but the status the kubelet
    and controllers write (a Node's capacity and allocatable and a claim's allocation do count)."""
    kind, status = obj.get("kind"), obj.get("status")
    if kind == "ResourceClaim" or not isinstance(status, dict):
        return obj
    if kind == "Node":
        return {**obj, "status": {k: v for k, v in status.items() if k in ("capacity", "allocatable")}}
    return {k: v for k, v in obj.items() if k != "status"}


def _refuse_impossible(objs: list[dict[str, Any]], positions: list[int], origin: str) -> None:
    """An object the API server could never have stored (a Pod without containers, an object cut
    off after its metadata, a negative quantity) is refused: the same rules as for applied objects
    (labkit.cel.validation), at the dump's Kubernetes version. A field that only needs a feature
    gate passes: the dump's cluster may run with it on."""
    version = state_version(objs)
    namespaces = [o for o in objs if o["kind"] == "Namespace"]

    def problems(batch: list[dict[str, Any]]) -> list[Problem]:
        return [p for p in validate([_checked_part(o) for o in batch], kubernetes_version=version,
                                    existing=namespaces) if "feature gate" not in p.message]

    if not problems(objs):  # the usual case: one pass over the whole dump
        return
    for i, obj in zip(positions, objs, strict=True):
        found = problems([obj])
        if found:
            more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
            first = found[0]
            raise StateError(f"{_what(origin, i, obj)}: {first.path + ': ' if first.path else ''}{first.message}{more}",
                             fix="an API server never stores such an object: take the dump again from the "
                                 "cluster (`labkit snapshot -o FILE`) instead of editing it")


def state_version(objs: list[dict[str, Any]]) -> str:
    """The Kubernetes minor the dump's cluster runs: the oldest kubelet (nodes' nodeInfo), else the default."""
    minors = []
    for o in objs:
        if o.get("kind") != "Node":
            continue
        kv = as_dict(as_dict(o.get("status")).get("nodeInfo")).get("kubeletVersion")
        kv = kv.lstrip("v") if isinstance(kv, str) else ""
        parts = kv.split(".")
        if len(parts) >= 2 and parts[0].isdigit() and parts[1].isdigit():
            minors.append((int(parts[0]), int(parts[1])))
    if not minors:
        return DEFAULT_VERSION
    lo = min(minors)
    minor = f"{lo[0]}.{lo[1]}"
    if minor not in SUPPORTED_VERSIONS:
        raise StateError(f"the dump's nodes run Kubernetes {minor}; labkit models {', '.join(SUPPORTED_VERSIONS)}: "
                         "take the dump from a cluster of one of those")
    return minor


def order_for_restore(objs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """STATE_KINDS order; pods oldest first (the scheduler queues them in creation order)."""
    rank = {k: i for i, k in enumerate(STATE_KINDS)}

    def key(o: dict[str, Any]) -> tuple[int, str, str, str]:
        m = o.get("metadata") or {}
        ts = m.get("creationTimestamp") or "" if o["kind"] == "Pod" else ""
        return rank[o["kind"]], ts, m.get("namespace", ""), m.get("name", "")

    return sorted(objs, key=key)


def profile_for_state(objs: list[dict[str, Any]], name: str = "state", kubernetes_version: str | None = None,
                      feature_gates: dict[str, bool] | None = None) -> ClusterProfile:
    """A ClusterProfile describing the dump's nodes (for summaries; the sim restores the Nodes as they are)."""
    nodes = [NodeSpec(name=o["metadata"]["name"],
                      node_profile=((o["metadata"].get("labels") or {}).get("fake-gpus.dev/node-profile") or "(from dump)"),
                      labels=dict(o["metadata"].get("labels") or {}))
             for o in objs if o["kind"] == "Node"]
    return ClusterProfile(name=name, nodes=nodes, kubernetes_version=kubernetes_version or state_version(objs),
                          feature_gates=dict(feature_gates or {}), description=f"restored from {name}",
                          source=name)
