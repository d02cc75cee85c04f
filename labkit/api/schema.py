"""Structural checks (unknown fields, wrong types) against the API's schema, held as data.

The schema of the kinds labkit validates is a JSON file per Kubernetes version
(``schema_<version>.json`` beside this module), generated from the ``kubernetes`` client's models by
``tools/gen_schema.py``: the kit validates without the client or pydantic (a browser cannot load
them; a learner's install is lighter). The checks are the client's own: unknown fields by a walk
over the camelCase field names (with a suggestion), wrong types with the client's (pydantic's)
rules, strict or lax per field, in the client's field order; the messages are written in our style.
There is a file for each Kubernetes version the profiles offer (1.34 to 1.38); the checks use the one of
the target version (the profile's, ``--kubernetes-version``), so a field the version's API does not have
is an unknown field, as its API server says. Fields the version has behind a feature gate are handled by
the validation rules (:mod:`labkit.api.features` gates).
"""

from __future__ import annotations

import datetime
import difflib
import functools
import json
import math
import re
from pathlib import Path
from typing import Any

from labkit.api.features import DEFAULT_VERSION
from labkit.api.problem import Sink, show

__all__ = ["MODEL_FOR", "SCHEMA_VERSION", "SCHEMA_VERSIONS", "check_structure", "model_fields", "schema_path", "schema_version",
           "type_errors"]

#: (apiVersion, kind) -> the model's name in the schema (the client's class name)
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


_HERE = Path(__file__).resolve().parent


def schema_path(version: str) -> Path:
    """Where the schema of Kubernetes ``version`` (``1.37``) lives."""
    return _HERE / f"schema_{version}.json"


def _minor(version: str) -> tuple[int, ...]:
    return tuple(int(x) for x in version.split("."))


#: the Kubernetes versions with a schema file, oldest first
SCHEMA_VERSIONS = sorted((p.stem.removeprefix("schema_") for p in _HERE.glob("schema_1.*.json")), key=_minor)
#: the checks' schema when no version is given: the default version's (1.37 while 1.38 is a beta whose
#: schema tools/gen_schema.py derives from 1.37's), else the newest
SCHEMA_VERSION = DEFAULT_VERSION if DEFAULT_VERSION in SCHEMA_VERSIONS else (SCHEMA_VERSIONS[-1] if SCHEMA_VERSIONS else "")


def schema_version(version: str | None = None) -> str:
    """The schema the checks use for Kubernetes ``version``: its own, else the newest older one, else the
    oldest (None: the default version's)."""
    if not version or not SCHEMA_VERSIONS:
        return SCHEMA_VERSION
    try:
        wanted = _minor(version)
    except ValueError:
        return SCHEMA_VERSION
    older = [v for v in SCHEMA_VERSIONS if _minor(v) <= wanted]
    return older[-1] if older else SCHEMA_VERSIONS[0]


@functools.cache
def _models(version: str = "") -> dict[str, list[list[Any]]]:
    # the layout tools/gen_schema.py writes: model -> [[field, type code, required], ...]
    models: dict[str, list[list[Any]]] = json.loads(schema_path(version or SCHEMA_VERSION).read_text())["models"]
    return models


def model_fields(model: str, version: str | None = None) -> list[tuple[str, str, bool]]:
    """(camelCase name, type code, required by the OpenAPI schema) of each field of `model`, e.g.
    ``V1Device``, in Kubernetes ``version``'s schema (None: the default version's); type codes as in
    tools/gen_schema.py (``s`` string, ``i`` integer, ``M:V1X`` object, ``[..`` list, ``{..`` map)."""
    return [(alias, code, bool(req)) for alias, _snake, code, req in _models(schema_version(version))[model]]


@functools.cache
def _fields(model: str, version: str = "") -> dict[str, str]:
    """camelCase field name -> type code (see tools/gen_schema.py)."""
    return {alias: code for alias, _snake, code, _req in _models(version)[model]}


def _shape(code: str) -> tuple[str, str | None]:
    """('model'|'list'|'dict'|'other', inner model) for a type code."""
    if code.startswith("M:"):
        return "model", code[2:]
    if code[:1] in "[{" and code[1:].startswith("M:"):
        return ("list" if code[0] == "[" else "dict"), code[3:]
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


def _walk(value: Any, model: str, path: str, sink: Sink, skip: set[str], version: str = "") -> None:
    if not isinstance(value, dict):
        return
    fields = _fields(model, version)
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
        if inner is None:  # "other": no model inside
            continue
        if kind == "model":
            _walk(item, inner, child, sink, skip, version)
        elif kind == "list" and isinstance(item, list):
            for i, elem in enumerate(item):
                _walk(elem, inner, f"{child}[{i}]", sink, skip, version)
        elif kind == "dict" and isinstance(item, dict):
            for k, elem in item.items():
                _walk(elem, inner, f"{child}[{k}]", sink, skip, version)


_TRUE = {"1", "on", "t", "true", "y", "yes"}
_FALSE = {"0", "off", "f", "false", "n", "no"}
_UNION_TAGS = {"s": "str", "S": "str", "i": "int", "I": "int", "b": "bool", "B": "bool", "t": "datetime"}
_MESSAGES = {"finite_number": "Input should be a finite number", "missing": "Field required"}


def _leaf_error(value: Any, code: str) -> str | None:
    """The error type pydantic gives ``value`` for a leaf of type ``code`` (None: valid)."""
    is_bool = isinstance(value, bool)
    if code in "sS":
        return None if isinstance(value, str) else "string_type"
    if code == "i":
        if not isinstance(value, int) or is_bool:
            return "int_type"
        # the API server decodes into int64 (int32 fields are narrower still): json "cannot unmarshal number"
        return None if -(2**63) <= value < 2**63 else "int64_range"
    if code == "I":
        if isinstance(value, int):
            return None
        if isinstance(value, float):
            if not math.isfinite(value):
                return "finite_number"
            return None if value.is_integer() else "int_from_float"
        if isinstance(value, str):
            return None if re.fullmatch(r"\s*[+-]?\d+\s*", value) else "int_parsing"
        return "int_type"
    if code == "b":
        return None if is_bool else "bool_type"
    if code == "B":
        if is_bool:
            return None
        if isinstance(value, int):
            return None if value in (0, 1) else "bool_parsing"
        if isinstance(value, float):
            return None if value in (0.0, 1.0) else ("bool_parsing" if value.is_integer() else "bool_type")
        if isinstance(value, str):
            return None if value.strip().lower() in _TRUE | _FALSE else "bool_parsing"
        return "bool_type"
    if code == "t":
        return _time_error(value)
    return None  # "a": anything


def _time_error(value: Any) -> str | None:
    if isinstance(value, bool) or not isinstance(value, str | int | float | datetime.date):
        return "datetime_type"
    if isinstance(value, datetime.date):
        return None
    if isinstance(value, int | float):
        return None if math.isfinite(value) and abs(value) < 2e13 else "datetime_parsing"
    if value.isdigit():
        return None
    try:
        datetime.datetime.fromisoformat(value)
    except ValueError:
        return "datetime_from_date_parsing"
    return None


#: fields the OpenAPI schema marks required that the API server does not ask for: the Go field is
#: not a pointer, so a missing one is stored as its zero value (a 1.37 kube-apiserver stored a slice
#: without them, dry run; labkit.api.defaults fills in the same zero)
STORED_AS_ZERO = frozenset({("V1ResourcePool", "generation"), ("V1Counter", "value"), ("V1DeviceCapacity", "value")})


def _check_value(value: Any, code: str, loc: tuple[Any, ...], out: list[dict[str, Any]], version: str = "") -> None:
    if code.startswith("M:"):
        if not isinstance(value, dict):
            out.append({"type": "model_type", "loc": loc, "input": value})
            return
        for alias, snake, field_code, required in _models(version)[code[2:]]:
            if alias in value:
                key = alias
            elif snake and snake in value:
                key = snake
            else:
                if required:
                    out.append({"type": "missing", "loc": loc + (alias,), "input": value, "model": code[2:]})
                continue
            item = value[key]
            if item is None and not required:
                continue
            _check_value(item, field_code, loc + (key,), out, version)
    elif code[0] == "[":
        if not isinstance(value, list):
            out.append({"type": "list_type", "loc": loc, "input": value})
            return
        for i, item in enumerate(value):
            _check_value(item, code[1:], loc + (i,), out, version)
    elif code[0] == "{":
        if not isinstance(value, dict):
            out.append({"type": "dict_type", "loc": loc, "input": value})
            return
        for key, item in value.items():
            _check_value(item, code[1:], loc + (key,), out, version)
    elif code[0] == "|":  # a union of leaves: pydantic reports each member's error, tagged
        errors = [_leaf_error(value, member) for member in code[1:]]
        if all(errors):
            out.extend({"type": etype, "loc": loc + (_UNION_TAGS[member],), "input": value}
                       for member, etype in zip(code[1:], errors))
    else:
        etype = _leaf_error(value, code)
        if etype is not None:
            out.append({"type": etype, "loc": loc, "input": value})


def type_errors(obj: dict[str, Any], model: str, version: str | None = None) -> list[dict[str, Any]]:
    """The client's type errors for ``obj`` as ``model`` (pydantic's error dicts: type, loc, input,
    msg), in its order; unknown fields are not among them (:func:`check_structure` reports those).
    ``version``: the Kubernetes version whose schema applies (None: the default version's)."""
    out: list[dict[str, Any]] = []
    _check_value(obj, "M:" + model, (), out, schema_version(version))
    for err in out:
        err["msg"] = _MESSAGES.get(err["type"], err["type"].replace("_", " "))
    return out


def _format_loc(loc: tuple[Any, ...]) -> str:
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


def _is_map_key(loc: tuple[Any, ...], i: int) -> bool:
    return loc[i - 1] in _MAP_FIELDS and not (i >= 2 and loc[i - 2] == "spec" and loc[i - 1] == "nodeSelector")


def _is_quantity_position(loc: tuple[Any, ...]) -> bool:
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
    "int64_range": ("must be a 64-bit integer, -9223372036854775808 to 9223372036854775807 (the API server "
                    "cannot decode a larger one)"),
}


def check_structure(obj: dict[str, Any], sink: Sink, *, skip: set[str] | None = None, version: str | None = None,
                    dropped: frozenset[str] = frozenset()) -> None:
    """Report unknown fields and wrong value types of a known kind (no-op for other kinds), by the schema
    of Kubernetes ``version`` (None: the default version's). ``dropped``: names of fields the API server drops
    (their feature gate is off): a required field inside them is not asked for."""
    model_name = MODEL_FOR.get((str(obj.get("apiVersion")), str(obj.get("kind"))))
    if model_name is None or not SCHEMA_VERSION:
        return
    if model_name not in _models(schema_version(version)):
        return  # a kind that version does not serve (DeviceTaintRule in resource.k8s.io/v1 before 1.37)
    skip = skip or set()
    _walk(obj, model_name, "", sink, skip, schema_version(version))
    seen: set[str] = set()
    for err in type_errors(obj, model_name, version):
        if err.get("type") == "missing" and _not_asked_for(err, dropped):
            continue
        _report(err, sink, skip, seen)


def _not_asked_for(missing: dict[str, Any], dropped: frozenset[str]) -> bool:
    """A required field the API server does not ask for: stored as its zero value, or inside a field
    it drops."""
    loc = missing.get("loc", ())
    return (missing.get("model"), loc[-1] if loc else None) in STORED_AS_ZERO \
        or bool(dropped.intersection(p for p in loc if isinstance(p, str)))


def _report(err: dict[str, Any], sink: Sink, skip: set[str], seen: set[str]) -> None:
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
