"""labkit.api.features: the gate table and option parsing."""

from __future__ import annotations

import pytest

from labkit.api.features import (
    FEATURE_DEFAULTS,
    LOCKED,
    MATURITY,
    SUPPORTED_VERSIONS,
    FeatureGateError,
    normalize_version,
    parse_feature_gates,
    resolve_gates,
)


def test_versions_and_key_defaults() -> None:
    assert SUPPORTED_VERSIONS == ("1.34", "1.35", "1.36", "1.37")
    assert FEATURE_DEFAULTS["1.37"]["DRAConsumableCapacity"] is True
    assert FEATURE_DEFAULTS["1.35"]["DRAConsumableCapacity"] is False
    assert FEATURE_DEFAULTS["1.34"]["DRAPrioritizedList"] is True
    assert FEATURE_DEFAULTS["1.36"]["DRADeviceTaintRules"] is False
    assert FEATURE_DEFAULTS["1.37"]["DRADeviceTaintRules"] is True
    assert "DRAListTypeAttributes" not in FEATURE_DEFAULTS["1.35"]
    assert FEATURE_DEFAULTS["1.37"]["DRAWorkloadResourceClaims"] is False
    assert MATURITY["1.37"]["DRAWorkloadResourceClaims"] == "beta"


def test_locked_gates_are_ga_and_match_defaults() -> None:
    assert "DynamicResourceAllocation" not in LOCKED["1.34"]
    assert {"DynamicResourceAllocation", "DRAPrioritizedList", "DRAExtendedResource"} <= LOCKED["1.37"]
    for version, gates in LOCKED.items():
        for gate in gates:
            assert MATURITY[version][gate] == "GA"


def test_normalize_version() -> None:
    assert normalize_version("v1.36.4") == "1.36"
    with pytest.raises(FeatureGateError):
        normalize_version("1.33")


def test_parse_feature_gates() -> None:
    assert parse_feature_gates("A=true, B=False,") == {"A": True, "B": False}
    for bad in ("A", "A=yes"):
        with pytest.raises(FeatureGateError, match="NAME=true"):
            parse_feature_gates(bad)


def test_resolve_gates() -> None:
    gates, warnings = resolve_gates("1.35", {"DRAConsumableCapacity": True})
    assert gates["DRAConsumableCapacity"] and warnings == []
    gates, warnings = resolve_gates("1.37", {"DRAPrioritizedList": False})
    assert gates["DRAPrioritizedList"] is False and "locked" in warnings[0]
    with pytest.raises(FeatureGateError, match="locked"):
        resolve_gates("1.37", {"DRAPrioritizedList": False}, strict=True)
    with pytest.raises(FeatureGateError, match="did you mean 'DRAPrioritizedList'"):
        resolve_gates("1.37", {"draprioritizedlist": True})
