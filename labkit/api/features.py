"""DRA feature gates per Kubernetes version (1.34–1.38), as data.

``FEATURE_DEFAULTS[version][gate]`` is the default of ``gate`` in that release; a gate missing
from a version's table did not exist in that release. ``LOCKED[version]`` holds the gates that
release locks to their default (setting them the other way makes components refuse to start).
``MATURITY[version][gate]`` is "alpha", "beta" or "GA". The data is ``feature_gates.json``
beside this module, the same file the Go oracle embeds (a gate or a version is added there, once).
Source: dra-reference.md §2 (the versioned feature-gate specs of the Kubernetes sources); 1.38 from
``kubernetes@v1.38.0-beta.0:pkg/features/kube_features.go`` (the release in tools/kubernetes-releases.env).
"""

from __future__ import annotations

import json
from pathlib import Path

from labkit.errors import InputError

__all__ = [
    "FEATURE_DEFAULTS",
    "FIELD_GATES",
    "LOCKED",
    "MATURITY",
    "SUPPORTED_VERSIONS",
    "DEFAULT_VERSION",
    "TABLE_PATH",
    "FeatureGateError",
    "minor_key",
    "normalize_version",
    "parse_feature_gates",
    "resolve_gates",
]

#: the one gate table, shared with the Go oracle (tools/build-oracle.sh embeds it there)
TABLE_PATH = Path(__file__).with_name("feature_gates.json")
_DATA = json.loads(TABLE_PATH.read_text(encoding="utf-8"))

SUPPORTED_VERSIONS: tuple[str, ...] = tuple(_DATA["versions"])
DEFAULT_VERSION: str = _DATA["default"]

# {gate: {version: (maturity, default, locked)}}
_TABLE: dict[str, dict[str, tuple[str, bool, bool]]] = {
    gate: {v: (m, bool(d), bool(locked)) for v, (m, d, locked) in specs.items()}
    for gate, specs in _DATA["gates"].items()
}

FEATURE_DEFAULTS: dict[str, dict[str, bool]] = {
    v: {g: specs[v][1] for g, specs in _TABLE.items() if v in specs} for v in SUPPORTED_VERSIONS
}
LOCKED: dict[str, frozenset[str]] = {
    v: frozenset(g for g, specs in _TABLE.items() if v in specs and specs[v][2])
    for v in SUPPORTED_VERSIONS
}
MATURITY: dict[str, dict[str, str]] = {
    v: {g: specs[v][0] for g, specs in _TABLE.items() if v in specs} for v in SUPPORTED_VERSIONS
}


class FeatureGateError(InputError, ValueError):
    """An unknown version, an unknown gate or a malformed ``--feature-gates`` value."""


#: fields (by name, each unambiguous among the kinds validated) that the API server drops on create
#: when their feature gate is off: what is inside them is then not validated either, so the schema's
#: required subfields are not asked for (labkit.api.schema.check_structure `dropped`)
FIELD_GATES: dict[str, str] = {
    "derivedAttributes": "DRADerivedAttributes",
    "nodeAllocatableResources": "DRANodeAllocatableResources",
    "requestPolicy": "DRAConsumableCapacity",
    "consumesCounters": "DRAPartitionableDevices",
    "sharedCounters": "DRAPartitionableDevices",
}


def minor_key(version: str) -> tuple[int, int]:
    """``"v1.36.4"`` / ``"1.36"`` -> ``(1, 36)``: Kubernetes versions in the order they were released."""
    major, minor = str(version).strip().lstrip("v").split(".")[:2]
    return int(major), int(minor)


def normalize_version(version: str) -> str:
    """``"v1.36.4"`` / ``"1.36"`` -> ``"1.36"``; raise for a version outside SUPPORTED_VERSIONS."""
    text = str(version).strip().lstrip("v")
    parts = text.split(".")
    short = ".".join(parts[:2])
    if short not in FEATURE_DEFAULTS:
        raise FeatureGateError(
            f"kubernetes version {version!r} is not supported; use one of {', '.join(SUPPORTED_VERSIONS)}"
        )
    return short


def parse_feature_gates(text: str) -> dict[str, bool]:
    """Parse ``"G1=true,G2=false"`` (the kube component flag syntax)."""
    gates: dict[str, bool] = {}
    for item in filter(None, (p.strip() for p in text.split(","))):
        name, sep, value = item.partition("=")
        if not sep or value.strip().lower() not in ("true", "false"):
            raise FeatureGateError(f"feature gate {item!r}: expected NAME=true or NAME=false")
        gates[name.strip()] = value.strip().lower() == "true"
    return gates


def resolve_gates(version: str = DEFAULT_VERSION, overrides: dict[str, bool] | None = None,
                  *, strict: bool = False) -> tuple[dict[str, bool], list[str]]:
    """Defaults for ``version`` with ``overrides`` applied.

    Returns ``(gates, warnings)``. Unknown gates always raise. Setting a locked gate against its
    default gives a warning (a real cluster of that version refuses it), or raises if ``strict``.
    """
    v = normalize_version(version)
    gates = dict(FEATURE_DEFAULTS[v])
    warnings: list[str] = []
    for name, value in (overrides or {}).items():
        if name not in gates:
            raise FeatureGateError(f"feature gate {name!r} does not exist in Kubernetes {v}{_unknown_hint(name, v)}")
        if name in LOCKED[v] and value != gates[name]:
            # kube-scheduler's own words: k8s.io/component-base featuregate/feature_gate.go (SetFromMap)
            msg = (f"feature gate {name} is locked to {str(gates[name]).lower()} in Kubernetes {v}; a real cluster "
                   f"refuses to start with it set otherwise (cannot set feature gate {name} to "
                   f"{str(bool(value)).lower()}, feature is locked to {str(gates[name]).lower()})")
            if strict:
                raise FeatureGateError(msg)
            warnings.append(msg)
        gates[name] = bool(value)
    return gates, warnings


def _unknown_hint(name: str, version: str) -> str:
    """Why ``name`` is unknown in ``version``: misspelt, removed (kube-scheduler then refuses it as
    "unrecognized feature gate", k8s.io/component-base featuregate/feature_gate.go), or not there yet."""
    if name not in _TABLE:
        known = [g for g in _TABLE if g.lower() == name.lower()]
        return f" (did you mean {known[0]!r}?)" if known else ""
    had = sorted(_TABLE[name], key=minor_key)
    if minor_key(had[-1]) < minor_key(version):
        return (f" (removed after {had[-1]}: kube-scheduler {version} refuses it with "
                f"\"unrecognized feature gate: {name}\"; leave it out)")
    return f" (it is new in {had[0]})"
