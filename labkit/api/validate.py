"""Validate objects like the API server of the chosen Kubernetes version would.

Order per object: old-API recognition, apiVersion/kind, metadata, structure (unknown fields,
types), then the kind's own rules. Each problem is one line with the fix when it is obvious.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from labkit.api import features
from labkit.api.context import CelChecks, Context
from labkit.api.legacy import check_legacy
from labkit.api.problem import Problem, Sink, as_dict, show
from labkit.api.rules_claim import check_claim_spec, check_claim_status, check_device_class_spec
from labkit.api.rules_core import check_namespace, check_node, check_pod_core
from labkit.api.rules_meta import check_metadata, check_metadata_types, check_template_metadata
from labkit.api.rules_nvidia import COMPUTE_DOMAIN_API, check_compute_domain
from labkit.api.rules_pod import check_pod_spec
from labkit.api.rules_slice import check_slice_spec, check_taint_rule_spec
from labkit.api.schema import MODEL_FOR, check_structure, suggest

__all__ = ["KNOWN_KINDS", "MAX_OBJECT_BYTES", "CelChecks", "Problem", "check_objects", "server_warnings"]

#: etcd's default --max-request-bytes: a larger object is refused by the API server
MAX_OBJECT_BYTES = 1536 * 1024

#: kind -> accepted apiVersions (group/version); pass-through kinds get metadata checks only
KNOWN_KINDS: dict[str, tuple[str, ...]] = {
    "DeviceClass": ("resource.k8s.io/v1",),
    "ResourceClaim": ("resource.k8s.io/v1",),
    "ResourceClaimTemplate": ("resource.k8s.io/v1",),
    "ResourceSlice": ("resource.k8s.io/v1",),
    "DeviceTaintRule": ("resource.k8s.io/v1",),
    "Node": ("v1",),
    "Pod": ("v1",),
    "Namespace": ("v1",),
    "Deployment": ("apps/v1",),
    "Job": ("batch/v1",),
    "PodGroup": ("scheduling.k8s.io/v1alpha2", "scheduling.k8s.io/v1alpha3", "scheduling.k8s.io/v1beta1"),
}

#: the kinds that built-in group versions serve besides KNOWN_KINDS (a kind not listed for
#: its apiVersion is refused, as the API server says "no matches for kind")
BUILTIN_KINDS: dict[str, frozenset[str]] = {
    "v1": frozenset({
        "Binding", "ComponentStatus", "ConfigMap", "Endpoints", "Event", "LimitRange", "List",
        "Namespace", "Node", "PersistentVolume", "PersistentVolumeClaim", "Pod", "PodTemplate",
        "ReplicationController", "ResourceQuota", "Secret", "Service", "ServiceAccount"}),
    "apps/v1": frozenset({"ControllerRevision", "DaemonSet", "Deployment", "ReplicaSet",
                          "StatefulSet"}),
    "batch/v1": frozenset({"CronJob", "Job"}),
}


def _ident(obj: dict[str, Any]) -> tuple[str, str]:
    kind = obj.get("kind")
    meta = as_dict(obj.get("metadata"))
    name = meta.get("name") or meta.get("generateName") or "<unnamed>"
    # a name that is not a string is itself a problem (metadata.name): shown short, as a value
    return (kind if isinstance(kind, str) and kind else "<no kind>"), name if isinstance(name, str) else show(name, 40)


def check_objects(objs: dict[str, Any] | Iterable[dict[str, Any]], *, cel: CelChecks | None,
                  kubernetes_version: str = features.DEFAULT_VERSION,
                  feature_gates: dict[str, bool] | None = None,
                  existing: Iterable[dict[str, Any]] = ()) -> list[Problem]:
    """All problems in ``objs``; empty when the API server would accept them.

    Callers use :func:`labkit.cel.validation.validate` (this with CEL compiled); this function is
    the rules engine under it, named apart so that nobody calls it without deciding ``cel``.

    ``existing`` are objects already stored in the cluster: they are not validated, but rules
    that look at other objects see them (a claim's admin access checks its Namespace's label).

    ``cel``: how to compile CEL selectors and estimate their cost. labkit.api cannot do that
    itself (labkit.cel sits above it); None (said on purpose) checks their length only.

    Raises :class:`labkit.api.features.FeatureGateError` for an unsupported version or an
    unknown gate name (bad options, not bad objects).
    """
    version = features.normalize_version(kubernetes_version)
    gates, _warnings = features.resolve_gates(version, feature_gates)
    items = [objs] if isinstance(objs, dict) else list(objs)
    ctx = Context.build(version, gates, cel)
    for obj in [*existing, *items]:
        if isinstance(obj, dict) and obj.get("kind") == "Namespace" and obj.get("apiVersion") == "v1" \
                and isinstance(obj.get("metadata"), dict):
            meta = as_dict(obj.get("metadata"))
            if isinstance(meta.get("name"), str):
                ctx.namespaces[meta["name"]] = as_dict(meta.get("labels"))
    problems: list[Problem] = []
    for index, obj in enumerate(items):
        problems.extend(_validate_one(obj, index, ctx))
    return problems


def server_warnings(objs: dict[str, Any] | Iterable[dict[str, Any]], *, kubernetes_version: str = features.DEFAULT_VERSION) -> list[str]:
    """The warnings the API server of ``kubernetes_version`` returns when ``objs`` are created (kubectl
    prints each as ``Warning: <text>``), each prefixed with the object: ``DeviceTaintRule rule-1:``.

    1.38: a DeviceTaintRule whose ``spec.deviceSelector`` is present but sets none of driver, pool and
    device (``kubernetes@v1.38.0-beta.0:pkg/registry/resource/devicetaintrule/strategy.go``,
    warningsForDeviceTaintRule); 1.37.1 has no warning there."""
    version = features.normalize_version(kubernetes_version)
    out: list[str] = []
    if features.minor_key(version) < (1, 38):
        return out
    for obj in [objs] if isinstance(objs, dict) else objs:
        if not isinstance(obj, dict) or obj.get("kind") != "DeviceTaintRule":
            continue
        selector = as_dict(obj.get("spec")).get("deviceSelector")
        if isinstance(selector, dict) and all(selector.get(f) is None for f in ("driver", "pool", "device")):
            kind, name = _ident(obj)
            out.append(f"{kind} {name}: spec.deviceSelector: an empty selector matches every device from "
                       "every driver in the cluster")
    return out


def _validate_one(obj: Any, index: int, ctx: Context) -> list[Problem]:
    if not isinstance(obj, dict):
        sink = Sink("<object>", f"#{index + 1}")
        sink.add("", f"expected a Kubernetes object (a mapping), got {type(obj).__name__}")
        return sink.problems
    kind, name = _ident(obj)
    sink = Sink(kind, name)  # Problem quotes a name with control characters, as the API server does
    try:
        size = len(json.dumps(obj, separators=(",", ":"), default=str))
        if size > MAX_OBJECT_BYTES:
            sink.add("", f"object is {size / 2**20:.1f} MiB; etcd stores at most 1.5 MiB per object "
                         "(the API server answers \"request is too large\"): split it")
            return sink.problems
        _check(obj, sink, ctx)
    except RecursionError:
        sink.add("", "object is nested too deeply to check")
    return _dedupe(sink.problems)


def _dedupe(problems: list[Problem]) -> list[Problem]:
    """Drop exact repeats, a bare "Required value" when a rule said more about that path, and the
    version's "unknown field" for a field whose feature gate says which Kubernetes version has it."""
    detailed = {p.path for p in problems if p.message != "Required value"}
    newer = {p.path for p in problems if "which does not exist in Kubernetes" in p.message}
    out: list[Problem] = []
    seen: set[Problem] = set()  # a set: thousands of problems (a huge list) stay linear
    for p in problems:
        if p in seen or (p.message == "Required value" and p.path in detailed) \
                or (p.path in newer and p.message.startswith("unknown field")):
            continue
        seen.add(p)
        out.append(p)
    return out


def _check(obj: dict[str, Any], sink: Sink, ctx: Context) -> None:
    stop, skip = check_legacy(obj, sink)
    if stop:
        return
    api, kind = obj.get("apiVersion"), obj.get("kind")
    if not api or not isinstance(api, str):
        sink.required("apiVersion", "e.g. resource.k8s.io/v1")
    if not kind or not isinstance(kind, str):
        sink.required("kind", "e.g. ResourceClaim")
        return
    if kind not in KNOWN_KINDS:
        if isinstance(api, str) and api.startswith("resource.k8s.io/"):
            dra = [k for k, apis in KNOWN_KINDS.items() if apis[0].startswith("resource.k8s.io/")]
            hint = suggest(kind, dra)
            fix = f'did you mean "{hint}"?' if hint else f"known kinds: {', '.join(dra)}"
            sink.add("kind", f"{show(kind)} is not a kind of {api} ({fix})")
        served = BUILTIN_KINDS.get(api) if isinstance(api, str) else None
        if served is not None and kind not in served:
            hint = suggest(kind, sorted(served | {k for k, v in KNOWN_KINDS.items() if api in v}))
            fix = f'did you mean "{hint}"?' if hint else "check the kind and apiVersion"
            sink.add("kind", f"{show(kind)} is not a kind of {api} ({fix})")
        if kind == "ComputeDomain" and api == COMPUTE_DOMAIN_API:  # NVIDIA's CRD: the sim runs its controller
            check_metadata(obj, sink)
            check_compute_domain(sink, obj)
        else:  # ConfigMap, Service, CRDs ...: accepted as is, once their metadata decodes
            check_metadata_types(obj, sink)
        return
    if api and api not in KNOWN_KINDS[kind]:
        sink.add("apiVersion", f"{kind} is {' or '.join(KNOWN_KINDS[kind])}, not {api!r}")
        return
    # the schema check reports metadata's wrong types for the kinds it has a model of
    check_metadata(obj, sink, types=(str(api), kind) not in MODEL_FOR)
    dropped = frozenset(f for f, g in features.FIELD_GATES.items() if not ctx.on(g))
    check_structure(obj, sink, skip=skip, version=ctx.version, dropped=dropped)
    namespace = as_dict(obj.get("metadata")).get("namespace")
    spec = obj.get("spec")
    if kind == "DeviceClass":
        check_device_class_spec(sink, ctx, spec)
    elif kind == "ResourceClaim":
        check_claim_spec(sink, ctx, "spec", spec, namespace)
        if obj.get("status") is not None:
            check_claim_status(sink, ctx, obj["status"], spec)
    elif kind == "ResourceClaimTemplate":
        check_template_metadata(sink, "spec.metadata", as_dict(spec).get("metadata"))
        check_claim_spec(sink, ctx, "spec.spec", as_dict(spec).get("spec"), namespace)
    elif kind == "ResourceSlice":
        check_slice_spec(sink, ctx, spec)
    elif kind == "DeviceTaintRule":
        msg = ctx.gate_message("DRADeviceTaintRules")
        if ctx.minor() < 37:
            sink.add("apiVersion", f"DeviceTaintRule is served as resource.k8s.io/v1 from Kubernetes 1.37; "
                                   f"{ctx.version} has it only as an alpha/beta API (v1alpha3/v1beta2)")
        elif msg:
            sink.add("kind", msg)
        check_taint_rule_spec(sink, ctx, spec)
    elif kind == "Pod":
        check_pod_core(sink, "spec", spec)
        check_pod_spec(sink, "spec", spec)
    elif kind in ("Deployment", "Job"):
        template = as_dict(as_dict(spec).get("template"))
        check_pod_core(sink, "spec.template.spec", template.get("spec"), template=True)
        check_pod_spec(sink, "spec.template.spec", template.get("spec"))
    elif kind == "Node":
        check_node(sink, obj)
    elif kind == "Namespace":
        check_namespace(sink, obj)
