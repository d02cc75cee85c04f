"""Allocator feature flags (``structured.Features``) and variant selection.

Flags are derived from Kubernetes gate names exactly as kube-scheduler 1.37 and 1.38 do
(``AllocatorFeatures`` in the DynamicResources plugin). The variant (stable / incubating /
experimental) is the first whose supported set covers every enabled flag, as ``NewAllocator``
picks it. Behaviour differences between the variants live in :class:`VariantProfile`.

1.38 rotated the variants: its "stable" is 1.37's "incubating" code and its "incubating" and
"experimental" are 1.37's "experimental" code (k8s.io/dynamic-resource-allocation@v0.38.0-beta.0:
structured/allocator.go, structured/internal/*), plus the 1.38 fixes (``VariantProfile.v38``).
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
    #: Kubernetes minor version whose variant table applies ("1.34" .. "1.38")
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

_OLD_INCUBATING = _STABLE
_OLD_EXPERIMENTAL = _STABLE | {"DeviceBindingAndStatus", "ConsumableCapacity"}

#: supported flag sets per release (first covering variant wins), read from the
#: k8s.io/dynamic-resource-allocation release branches v0.34 .. v0.38.
VARIANT_SETS: dict[str, list[tuple[str, frozenset[str]]]] = {
    "1.34": [("stable", frozenset()), ("incubating", _OLD_INCUBATING), ("experimental", _OLD_EXPERIMENTAL)],
    "1.35": [("stable", frozenset()), ("incubating", _OLD_INCUBATING), ("experimental", _OLD_EXPERIMENTAL)],
    "1.36": [("stable", _STABLE), ("incubating", _INCUBATING - {"FractionalCapacityRange"}),
             ("experimental", _EXPERIMENTAL)],
    "1.37": [("stable", _STABLE), ("incubating", _INCUBATING), ("experimental", _EXPERIMENTAL)],
    "1.38": [("stable", _INCUBATING), ("incubating", _EXPERIMENTAL), ("experimental", _EXPERIMENTAL)],
}

#: 1.38's variant -> the 1.37 variant whose code it carries (earlier releases: itself)
_LINEAGE_38 = {"stable": "incubating", "incubating": "experimental", "experimental": "experimental"}


def select_variant(features: Features) -> str:
    enabled = features.enabled()
    for name, supported in VARIANT_SETS.get(features.version, VARIANT_SETS["1.37"]):
        if enabled <= supported:
            return name
    return "experimental"


@dataclass(frozen=True)
class VariantProfile:
    """The variant profile: how one variant of one release behaves (k8s.io/dynamic-resource-allocation
    v0.34-v0.38). Not a cluster, node or MIG profile. Behaviour keys on ``code`` (the variant whose
    code runs, in 1.37's naming) rather than ``name`` (what ``NewAllocator`` calls it)."""

    name: str
    release: int  # Kubernetes minor: 34 .. 38
    #: pools sorted by (driver, pool), binding-condition pools last (1.36+, not stable). Otherwise
    #: Go map order, which is random; LabKit then uses sorted order too (documented caveat).
    sort_pools: bool
    #: slices of a pool sorted by metadata.name
    sort_slices: bool
    #: next device of the same request starts after the previous one (combinations, 1.36+)
    combinations: bool
    #: only slices with nodeName == node or without nodeName are read
    node_local_slices: bool
    #: consumable capacity / binding conditions code present
    incubating_code: bool
    #: list-type attributes, skipNodeOperations
    experimental_code: bool
    #: the variant's code in 1.37's naming: 1.38 rotated them (see the module docstring)
    code: str

    @classmethod
    def for_features(cls, features: Features) -> VariantProfile:
        hit = _PROFILES.get(features)
        if hit is None:
            name = select_variant(features)
            release = int(features.version.split(".")[1])
            code = _LINEAGE_38[name] if release >= 38 else name
            modern = release >= 36 and code != "stable"
            hit = _PROFILES[features] = cls(name, release, modern, modern, modern, modern, code != "stable",
                                            code == "experimental", code)
        return hit

    # -- behaviour that changed between releases ---------------------------------------------
    @property
    def counters_leak(self) -> bool:
        """<= 1.35: counters taken before a taint/constraint refusal are not given back."""
        return self.release <= 35

    @property
    def selector_error_names_device(self) -> bool:
        """1.37: CEL runtime errors name the device and carry the "no such key" hint."""
        return self.release >= 37

    @property
    def config_v37(self) -> bool:
        """1.37: a claim config is added once; configs covering every request lose `requests`."""
        return self.release >= 37

    @property
    def distinct_by_request(self) -> bool:
        """<= 1.36: distinctAttribute remembers one value per request name (quirk)."""
        return self.release <= 36

    @property
    def knows_capacity(self) -> bool:
        """Capacity requests and distinctAttribute are known (never in stable; <= 1.35 only in
        the experimental variant)."""
        return self.code == "experimental" or (self.code == "incubating" and self.release >= 36)

    @property
    def copies_tolerations(self) -> bool:
        return self.release >= 36 or (self.release == 35 and self.code != "stable")

    @property
    def binds_to_node(self) -> bool:
        return self.code != "stable" and (self.release >= 36 or self.code == "experimental")

    @property
    def skips_incomplete_pools(self) -> bool:
        """1.34 searched incomplete pools too and failed hard on invalid ones."""
        return self.release >= 35

    @property
    def every_taint_blocks(self) -> bool:
        """1.34 (and 1.35's stable variant): every untolerated taint blocks, whatever its effect."""
        return self.release <= 34 or (self.release == 35 and self.code == "stable")

    @property
    def counter_slices_everywhere(self) -> bool:
        """Slices with sharedCounters count as relevant for every node, whatever their node
        selection (stable; 1.35 and 1.36 in every variant)."""
        return self.code == "stable" or 35 <= self.release <= 36

    @property
    def shared_ids_mark_capacity_in_use(self) -> bool:
        return self.release >= 37

    @property
    def v38(self) -> bool:
        """1.38's fixes (k8s-138.md section 1.2): versions compared as semver, an attribute a
        constraint cannot compare is an error, ``All`` over an incomplete/invalid pool fails the
        node only, capacity names resolved with the driver as default domain, negative requests
        refused, a live share blocks exclusive use, a qualified attribute wins over its twin."""
        return self.release >= 38


#: Features -> its VariantProfile (both immutable; one Allocator is built per node)
_PROFILES: dict[Features, VariantProfile] = {}
