"""Allocator feature flags (``structured.Features``) and variant selection.

Flags are derived from Kubernetes gate names exactly as kube-scheduler 1.37 does
(``AllocatorFeatures`` in the DynamicResources plugin). The variant (stable / incubating /
experimental) is the first whose supported set covers every enabled flag, as ``NewAllocator``
picks it. Behaviour differences between the variants live in :class:`VariantProfile`.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from labkit.api.features import DEFAULT_VERSION, normalize_version, resolve_gates

__all__ = ["Features", "VariantProfile", "features_for", "select_variant", "FLAG_GATES"]

#: allocator flag -> the gates that must all be on
FLAG_GATES: dict[str, tuple[str, ...]] = {
    "AdminAccess": ("DRAAdminAccess",),
    "PrioritizedList": ("DRAPrioritizedList",),
    "PartitionableDevices": ("DRAPartitionableDevices",),
    "DeviceTaints": ("DRADeviceTaints",),
    "DeviceBindingAndStatus": ("DRADeviceBindingConditions", "DRAResourceClaimDeviceStatus"),
    "ConsumableCapacity": ("DRAConsumableCapacity",),
    "FractionalCapacityRange": ("DRAFractionalCapacityRange",),
    "ListTypeAttributes": ("DRAListTypeAttributes",),
    "OptionalNodeOperations": ("DRAOptionalNodeOperations",),
    "DerivedAttributes": ("DRADerivedAttributes",),
    "CompatibilityGroups": ("DRADeviceCompatibilityGroups",),
}


@dataclass(frozen=True)
class Features:
    """The flags the structured allocator looks at (Go field names on purpose)."""

    AdminAccess: bool = False
    ConsumableCapacity: bool = False
    DeviceBindingAndStatus: bool = False
    DeviceTaints: bool = False
    ListTypeAttributes: bool = False
    PartitionableDevices: bool = False
    PrioritizedList: bool = False
    FractionalCapacityRange: bool = False
    OptionalNodeOperations: bool = False
    DerivedAttributes: bool = False
    CompatibilityGroups: bool = False
    #: Kubernetes minor version whose variant table applies ("1.34" .. "1.37")
    version: str = DEFAULT_VERSION

    def enabled(self) -> frozenset[str]:
        return frozenset(f.name for f in fields(self) if f.name != "version" and getattr(self, f.name))

    @property
    def variant(self) -> str:
        return select_variant(self)

    @property
    def profile(self) -> VariantProfile:
        return VariantProfile.for_features(self)


def features_for(kubernetes_version: str = DEFAULT_VERSION,
                 overrides: dict[str, bool] | None = None) -> Features:
    """Allocator flags for a version's gate defaults plus ``overrides`` (Kubernetes gate names).

    Locked gates set the other way are accepted here (the CLI warns); unknown gates raise
    ``labkit.api.features.FeatureGateError``.
    """
    version = normalize_version(kubernetes_version)
    gates, _warnings = resolve_gates(version, overrides or {})
    values = {flag: all(gates.get(g, False) for g in needed) for flag, needed in FLAG_GATES.items()}
    return Features(version=version, **values)


_STABLE = frozenset({"AdminAccess", "PrioritizedList", "PartitionableDevices", "DeviceTaints"})
_INCUBATING = _STABLE | {"DeviceBindingAndStatus", "ConsumableCapacity", "FractionalCapacityRange"}
_EXPERIMENTAL = frozenset(FLAG_GATES)

#: supported flag sets per version (first covering variant wins). 1.34 from dra-reference §3.2;
#: 1.35/1.36 assumed like 1.37 (not verified against those release branches).
VARIANT_SETS: dict[str, list[tuple[str, frozenset[str]]]] = {
    "1.34": [("stable", frozenset()),
             ("incubating", _STABLE),
             ("experimental", _EXPERIMENTAL)],
    "1.35": [("stable", _STABLE), ("incubating", _INCUBATING), ("experimental", _EXPERIMENTAL)],
    "1.36": [("stable", _STABLE), ("incubating", _INCUBATING), ("experimental", _EXPERIMENTAL)],
    "1.37": [("stable", _STABLE), ("incubating", _INCUBATING), ("experimental", _EXPERIMENTAL)],
}


def select_variant(features: Features) -> str:
    enabled = features.enabled()
    for name, supported in VARIANT_SETS.get(features.version, VARIANT_SETS["1.37"]):
        if enabled <= supported:
            return name
    return "experimental"


@dataclass(frozen=True)
class VariantProfile:
    """How one variant of one release searches (see dra-reference §3.2)."""

    name: str
    #: pools sorted by (driver, pool), binding-condition pools last. Otherwise Go map order,
    #: which is random; LabKit then uses sorted order too (documented caveat).
    sort_pools: bool
    #: slices of a pool sorted by metadata.name
    sort_slices: bool
    #: next device of the same request starts after the previous one (combinations)
    combinations: bool
    #: only slices with nodeName == node or without nodeName are read
    node_local_slices: bool
    #: consumable capacity / binding conditions code present
    incubating_code: bool
    #: list-type attributes, skipNodeOperations
    experimental_code: bool

    @classmethod
    def for_features(cls, features: Features) -> VariantProfile:
        name = select_variant(features)
        modern = features.version in ("1.36", "1.37")
        if name == "stable":
            return cls(name, False, False, False, False, False, False)
        return cls(name, modern, modern, modern, modern, True, name == "experimental")
