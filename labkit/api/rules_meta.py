"""ObjectMeta rules: name syntax per kind, namespace scope, labels and annotations."""

from __future__ import annotations

from typing import Any

from labkit.api import names
from labkit.api.load import NAMESPACED_KINDS
from labkit.api.problem import Sink, as_dict, show

__all__ = ["check_metadata", "check_metadata_types", "check_template_metadata"]

#: kinds whose names must be DNS labels; every other kind LabKit handles uses DNS subdomains
_LABEL_NAMED = {"Namespace"}
_ANNOTATIONS_MAX_BYTES = 256 * 1024


def check_metadata_types(obj: dict[str, Any], sink: Sink) -> bool:
    """What the API server's decoding of ObjectMeta refuses for every kind, a CRD's or one LabKit
    does not otherwise check included: metadata an object, name / generateName / namespace strings,
    labels and annotations objects of strings. False when metadata is not an object."""
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        sink.required("metadata", "every object needs metadata.name")
        return False
    for key in ("name", "generateName", "namespace", "uid", "resourceVersion"):
        value = meta.get(key)
        if value is not None and not isinstance(value, str):
            sink.add(f"metadata.{key}", f"must be a string, not {show(value)}{_QUOTE if _scalar(value) else ''}")
    for key in ("labels", "annotations"):
        values = meta.get(key)
        if values is None:
            continue
        if not isinstance(values, dict):
            sink.add(f"metadata.{key}", f"must be an object of strings, not {show(values)}")
            continue
        for k, v in values.items():
            if not isinstance(v, str):
                sink.add(f"metadata.{key}[{k}]", f"must be a string, not {show(v)}{_QUOTE if _scalar(v) else ''}")
    return True


_QUOTE = "; fix: quote the value"


def _scalar(value: object) -> bool:
    return isinstance(value, bool | int | float)


def check_metadata(obj: dict[str, Any], sink: Sink, *, types: bool = True) -> None:
    """ObjectMeta's rules; `types`: also its value types (False where the schema check reports them)."""
    kind = str(obj.get("kind"))
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        sink.required("metadata", "every object needs metadata.name")
        return
    if types:
        check_metadata_types(obj, sink)
    name, generate = meta.get("name"), meta.get("generateName")
    rule = names.dns_label if kind in _LABEL_NAMED else names.dns_subdomain
    if isinstance(name, str) and name:
        sink.names("metadata.name", name, rule(name))
    elif isinstance(generate, str) and generate:
        # the server appends 5 characters; trailing '-' is fine in a prefix
        sink.names("metadata.generateName", generate, rule(generate.rstrip("-") or "x"))
    elif name is None or name == "":
        sink.required("metadata.name", "name or generateName is required")
    namespace = meta.get("namespace")
    if kind in NAMESPACED_KINDS:
        if isinstance(namespace, str) and namespace:
            sink.names("metadata.namespace", namespace, names.dns_label(namespace))
    elif namespace and kind in _CLUSTER_SCOPED:
        sink.forbidden("metadata.namespace", f"not allowed on this type ({kind} is cluster-scoped); "
                       "remove metadata.namespace")
    _labels_and_annotations(sink, "metadata", meta)


def _labels_and_annotations(sink: Sink, base: str, meta: dict[str, Any]) -> None:
    for key, value in as_dict(meta.get("labels")).items():
        sink.names(f"{base}.labels", key, names.label_key(str(key)))
        if isinstance(value, str):
            sink.names(f"{base}.labels[{key}]", value, names.label_value(value))
    total = 0
    for key, value in as_dict(meta.get("annotations")).items():
        sink.names(f"{base}.annotations", key, names.label_key(str(key)))
        total += len(str(key)) + len(str(value))
    if total > _ANNOTATIONS_MAX_BYTES:
        sink.too_long(f"{base}.annotations", _ANNOTATIONS_MAX_BYTES)


def check_template_metadata(sink: Sink, path: str, meta: object) -> None:
    """ResourceClaimTemplate ``spec.metadata``: only labels and annotations are copied, so only
    they may be set."""
    if not isinstance(meta, dict):
        return
    for key in meta:
        if key not in ("labels", "annotations"):
            sink.forbidden(f"{path}.{key}", "cannot be set; only labels and annotations are copied to "
                                            "the generated claims")
    _labels_and_annotations(sink, path, meta)


_CLUSTER_SCOPED = {"DeviceClass", "ResourceSlice", "DeviceTaintRule", "Node", "Namespace"}
