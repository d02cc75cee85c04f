"""DRA feature gates per Kubernetes version (1.34–1.37), as data.

``FEATURE_DEFAULTS[version][gate]`` is the default of ``gate`` in that release; a gate missing
from a version's table did not exist in that release. ``LOCKED[version]`` holds the gates that
release locks to their default (setting them the other way makes components refuse to start).
``MATURITY[version][gate]`` is "alpha", "beta" or "GA". Source: dra-reference.md §2 (the
versioned feature-gate specs of the Kubernetes sources).
"""

from __future__ import annotations

from labkit.errors import InputError

__all__ = [
    "FEATURE_DEFAULTS",
    "LOCKED",
    "MATURITY",
    "SUPPORTED_VERSIONS",
    "DEFAULT_VERSION",
    "FeatureGateError",
    "normalize_version",
    "parse_feature_gates",
    "resolve_gates",
]

SUPPORTED_VERSIONS = ("1.34", "1.35", "1.36", "1.37")
DEFAULT_VERSION = "1.37"

# (gate, {version: (maturity, default, locked)})
_A, _B, _G = "alpha", "beta", "GA"
_TABLE: dict[str, dict[str, tuple[str, bool, bool]]] = {
    "DynamicResourceAllocation": {
        "1.34": (_G, True, False), "1.35": (_G, True, True),
        "1.36": (_G, True, True), "1.37": (_G, True, True),
    },
    "DRAAdminAccess": {
        "1.34": (_B, True, False), "1.35": (_B, True, False),
        "1.36": (_G, True, True), "1.37": (_G, True, True),
    },
    "DRAResourceClaimDeviceStatus": {
        "1.34": (_B, True, False), "1.35": (_B, True, False),
        "1.36": (_B, True, False), "1.37": (_G, True, True),
    },
    "DRAPrioritizedList": {
        "1.34": (_B, True, False), "1.35": (_B, True, False),
        "1.36": (_G, True, False), "1.37": (_G, True, True),
    },
    "DRAPartitionableDevices": {
        "1.34": (_A, False, False), "1.35": (_A, False, False),
        "1.36": (_B, True, False), "1.37": (_B, True, False),
    },
    "DRADeviceTaints": {
        "1.34": (_A, False, False), "1.35": (_A, False, False),
        "1.36": (_B, True, False), "1.37": (_G, True, False),
    },
    "DRADeviceTaintRules": {
        "1.35": (_A, False, False), "1.36": (_B, False, False), "1.37": (_G, True, False),
    },
    "DRAConsumableCapacity": {
        "1.34": (_A, False, False), "1.35": (_A, False, False),
        "1.36": (_B, True, False), "1.37": (_B, True, False),
    },
    "DRADeviceBindingConditions": {
        "1.34": (_A, False, False), "1.35": (_A, False, False),
        "1.36": (_B, True, False), "1.37": (_B, True, False),
    },
    "DRAExtendedResource": {
        "1.34": (_A, False, False), "1.35": (_A, False, False),
        "1.36": (_B, True, False), "1.37": (_G, True, True),
    },
    "DRASchedulerFilterTimeout": {
        "1.34": (_B, True, False), "1.35": (_B, True, False),
        "1.36": (_B, True, False), "1.37": (_B, True, False),
    },
    "DRAListTypeAttributes": {"1.36": (_A, False, False), "1.37": (_A, False, False)},
    "DRANodeAllocatableResources": {"1.36": (_A, False, False), "1.37": (_A, False, False)},
    "DRAWorkloadResourceClaims": {"1.36": (_A, False, False), "1.37": (_B, False, False)},
    "DRAResourcePoolStatus": {"1.36": (_A, False, False), "1.37": (_A, False, False)},
    "DRAResourceClaimGranularStatusAuthorization": {
        "1.36": (_B, True, False), "1.37": (_B, True, False),
    },
    "ResourceHealthStatus": {
        "1.34": (_A, False, False), "1.35": (_A, False, False),
        "1.36": (_B, True, False), "1.37": (_B, True, False),
    },
    "KubeletPodResourcesDynamicResources": {
        "1.34": (_B, True, False), "1.35": (_B, True, False),
        "1.36": (_G, True, False), "1.37": (_G, True, False),
    },
    "DRAFractionalCapacityRange": {"1.37": (_B, True, False)},
    "DRAPartitionableDevicesType": {"1.37": (_A, False, False)},
    "DRAOptionalNodeOperations": {"1.37": (_A, False, False)},
    "DRADerivedAttributes": {"1.37": (_A, False, False)},
    "DRADeviceCompatibilityGroups": {"1.37": (_A, False, False)},
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


def normalize_version(version: str) -> str:
    """``"v1.36.4"`` / ``"1.36"`` -> ``"1.36"``; raise for versions outside 1.34–1.37."""
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
            known = [g for g in _TABLE if g.lower() == name.lower()]
            hint = f" (did you mean {known[0]!r}?)" if known else ""
            raise FeatureGateError(f"feature gate {name!r} does not exist in Kubernetes {v}{hint}")
        if name in LOCKED[v] and value != gates[name]:
            msg = (f"feature gate {name} is locked to {str(gates[name]).lower()} in Kubernetes {v}; "
                   "a real cluster refuses to start with it set otherwise")
            if strict:
                raise FeatureGateError(msg)
            warnings.append(msg)
        gates[name] = bool(value)
    return gates, warnings
