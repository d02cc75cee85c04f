"""Structural checks (unknown fields, wrong types) against the ``kubernetes`` client's models.

The client's pydantic models accept snake_case aliases and know fields newer than the target
Kubernetes version, so unknown fields are found by our own walk over the models' camelCase field
names; ``model_validate`` is used only for type errors, whose messages are rewritten in our style.
Fields that exist in the client but not yet in the target version are handled by
:mod:`labkit.api.gates`.
"""

from __future__ import annotations

import difflib
import functools
import importlib
import re
import typing
from typing import Any

from labkit.api.problem import Sink, show

__all__ = ["MODEL_FOR", "check_structure"]

#: (apiVersion, kind) -> client model class name
MODEL_FOR: dict[tuple[str, str], str] = {
    ("resource.k8s.io/v1", "DeviceClass"): "V1DeviceClass",
    ("resource.k8s.io/v1", "ResourceClaim"): "ResourceV1ResourceClaim",
    ("resource.k8s.io/v1", "ResourceClaimTemplate"): "V1ResourceClaimTemplate",
    ("resource.k8s.io/v1", "ResourceSlice"): "V1ResourceSlice",
    ("resource.k8s.io/v1", "DeviceTaintRule"): "V1DeviceTaintRule",
    ("v1", "Pod"): "V1Pod",
    ("v1", "Node"): "V1Node",
    ("v1", "Namespace"): "V1Namespace",
}

# quantities are strings in the client but JSON numbers are fine for the API server
_QUANTITY_LEAVES = {"value", "default", "min", "max", "step", "capacityMultiplier",
                    "deviceMultiplier", "perPod", "perContainer"}
_QUANTITY_MAPS = {"requests", "limits", "consumedCapacity", "allocatable", "capacity", "overhead",
                  "validValues", "counters", "hard", "used"}
_NOT_QUANTITY = {"taints", "tolerations", "taint", "labels", "annotations"}


@functools.cache
def _client() -> Any:
    return importlib.import_module("kubernetes.client")


def _model(name: str) -> Any:
    return getattr(_client(), name)


@functools.cache
def _fields(model: type) -> dict[str, Any]:
    """camelCase field name -> annotation."""
    return {(f.serialization_alias or name): f.annotation for name, f in model.model_fields.items()}


def _is_model(tp: Any) -> bool:
    return isinstance(tp, type) and hasattr(tp, "model_fields")


def _shape(annotation: Any) -> tuple[str, Any]:
    """('model'|'list'|'dict'|'other', inner model) for a field annotation."""
    try:
        return _shape_cached(annotation)
    except TypeError:  # unhashable annotation
        return _shape_uncached(annotation)


@functools.cache
def _shape_cached(annotation: Any) -> tuple[str, Any]:
    return _shape_uncached(annotation)


def _shape_uncached(annotation: Any) -> tuple[str, Any]:
    tp = annotation
    while True:
        origin = typing.get_origin(tp)
        if origin is typing.Union or (origin is not None and str(origin) == "<class 'types.UnionType'>"):
            args = [a for a in typing.get_args(tp) if a is not type(None)]
            tp = args[0] if args else Any
            continue
        if origin is typing.Annotated:
            tp = typing.get_args(tp)[0]
            continue
        break
    origin = typing.get_origin(tp)
    if _is_model(tp):
        return "model", tp
    if origin in (list, typing.List):  # noqa: UP006
        inner = typing.get_args(tp)[0] if typing.get_args(tp) else Any
        kind, model = _shape(inner)
        return ("list", model) if kind == "model" else ("other", None)
    if origin in (dict, typing.Dict):  # noqa: UP006
        args = typing.get_args(tp)
        kind, model = _shape(args[1]) if len(args) == 2 else ("other", None)
        return ("dict", model) if kind == "model" else ("other", None)
    return "other", None


def _camel(snake: str) -> str:
    head, *rest = snake.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def suggest(key: str, known: list[str]) -> str | None:
    """The known field the user most likely meant."""
    lowered = {k.lower(): k for k in known}
    if key.lower() in lowered:
        return lowered[key.lower()]
    if "_" in key and _camel(key) in known:
        return _camel(key)
    match = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
    if match:
        return match[0]
    match = difflib.get_close_matches(key.lower(), list(lowered), n=1, cutoff=0.6)
    return lowered[match[0]] if match else None


_MAX_SUGGESTIONS = 20


def _walk(value: Any, model: type, path: str, sink: Sink, skip: set[str]) -> None:
    if not isinstance(value, dict):
        return
    fields = _fields(model)
    unknown = 0
    for key, item in value.items():
        child = f"{path}.{key}" if path else str(key)
        if child in skip:
            continue
        if key not in fields:
            unknown += 1  # a suggestion for the first few: thousands of odd keys stay fast
            hint = suggest(str(key), list(fields)) if unknown <= _MAX_SUGGESTIONS else None
            extra = f' (did you mean "{hint}"?)' if hint else ""
            sink.add(child, f'unknown field "{key}"{extra}')
            continue
        kind, inner = _shape(fields[key])
        if kind == "model":
            _walk(item, inner, child, sink, skip)
        elif kind == "list" and isinstance(item, list):
            for i, elem in enumerate(item):
                _walk(elem, inner, f"{child}[{i}]", sink, skip)
        elif kind == "dict" and isinstance(item, dict):
            for k, elem in item.items():
                _walk(elem, inner, f"{child}[{k}]", sink, skip)


def _format_loc(loc: tuple) -> str:
    out = ""
    for i, part in enumerate(loc):
        if isinstance(part, int) or i and isinstance(loc[i - 1], str) and _is_map_key(loc, i):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


_MAP_FIELDS = {"attributes", "capacity", "requests", "limits", "counters", "labels", "annotations",
               "consumedCapacity", "nodeAllocatableResources", "allocatable", "overhead", "hard",
               "used", "nodeSelector", "parameters"}


def _is_map_key(loc: tuple, i: int) -> bool:
    return loc[i - 1] in _MAP_FIELDS and not (i >= 2 and loc[i - 2] == "spec" and loc[i - 1] == "nodeSelector")


def _is_quantity_position(loc: tuple) -> bool:
    names = [p for p in loc if isinstance(p, str)]
    if any(n in _NOT_QUANTITY for n in names):
        return False
    if names and names[-1] in _QUANTITY_LEAVES:
        return True
    if len(loc) >= 2 and isinstance(loc[-2], str) and loc[-2] in _QUANTITY_MAPS:
        return True
    return len(loc) >= 2 and loc[-2] == "validValues"


_TYPE_WORDS = {
    "int_type": "must be an integer", "int_parsing": "must be an integer",
    "int_from_float": "must be an integer", "string_type": "must be a string",
    "bool_type": "must be true or false", "bool_parsing": "must be true or false",
    "list_type": "must be a list", "dict_type": "must be an object",
    "model_type": "must be an object", "model_attributes_type": "must be an object",
    "datetime_type": "must be an RFC 3339 time", "datetime_parsing": "must be an RFC 3339 time",
    "datetime_from_date_parsing": "must be an RFC 3339 time",
}


def check_structure(obj: dict, sink: Sink, *, skip: set[str] | None = None) -> None:
    """Report unknown fields and wrong value types of a known kind (no-op for other kinds)."""
    model_name = MODEL_FOR.get((str(obj.get("apiVersion")), str(obj.get("kind"))))
    if model_name is None:
        return
    model = _model(model_name)
    skip = skip or set()
    _walk(obj, model, "", sink, skip)
    try:
        model.model_validate(obj)
    except Exception as exc:  # pydantic.ValidationError; imported lazily with the client
        errors = getattr(exc, "errors", None)
        if errors is None:
            sink.add("", f"could not be checked: {exc}")
            return
        seen: set[str] = set()
        for err in errors():
            _report(err, sink, skip, seen)


def _report(err: dict, sink: Sink, skip: set[str], seen: set[str]) -> None:
    etype, loc = err.get("type", ""), tuple(err.get("loc", ()))
    if etype == "extra_forbidden":
        return  # reported by _walk, with a suggestion
    # pydantic puts union/tagged details after the field; keep the field path only
    loc = tuple(p for p in loc if not (isinstance(p, str) and re.match(r"^(function-|json-or-python|lax-|strict-)", p)))
    path = _format_loc(loc)
    if path in skip or any(path.startswith(s + ".") or path.startswith(s + "[") for s in skip):
        return
    value = err.get("input")
    if etype == "string_type" and isinstance(value, int | float) and not isinstance(value, bool) \
            and _is_quantity_position(loc):
        return
    if path in seen:
        return
    seen.add(path)
    if etype == "missing":
        sink.required(path)
        return
    words = _TYPE_WORDS.get(etype)
    if words and etype == "string_type" and isinstance(value, bool):
        sink.add(path, f"{words}, not {show(value)}; fix: quote the value: Kubernetes' YAML reads "
                       "unquoted y, n, yes, no, on, off, true, false as booleans")
    elif words and etype == "string_type" and isinstance(value, int | float):
        sink.add(path, f"{words}, not {show(value)}; fix: quote the value to keep it a string")
    elif words:
        sink.add(path, f"{words}, not {show(value)}")
    else:
        sink.add(path, f"Invalid value: {show(value)}: {err.get('msg', 'invalid')}")
