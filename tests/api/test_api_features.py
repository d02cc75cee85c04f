"""labkit.api.features: the gate table and option parsing."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from labkit.api.features import (
    FEATURE_DEFAULTS,
    LOCKED,
    MATURITY,
    SUPPORTED_VERSIONS,
    TABLE_PATH,
    FeatureGateError,
    normalize_version,
    parse_feature_gates,
    resolve_gates,
)
from tests.paths import TEST_DATA

pytestmark = pytest.mark.slow  # heavy: `make check` leaves it out, `make test` runs it


def test_versions_and_key_defaults() -> None:
    assert SUPPORTED_VERSIONS == ("1.34", "1.35", "1.36", "1.37", "1.38")
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


def test_the_table_is_the_shared_json() -> None:
    doc = json.loads(TABLE_PATH.read_text())
    assert tuple(doc["versions"]) == SUPPORTED_VERSIONS
    for gate, by_version in doc["gates"].items():
        for version, (maturity, default, locked) in by_version.items():
            assert FEATURE_DEFAULTS[version][gate] is default and MATURITY[version][gate] == maturity
            assert (gate in LOCKED[version]) is locked


CASE = TEST_DATA / "allocator" / "exact-count" / "input.yaml"


@pytest.mark.oracle
def test_oracle_knows_exactly_the_gates_of_each_version(oracle: Path) -> None:
    """The oracle embeds the same JSON: a gate set off is accepted iff the table has it for that
    version (off, so that no release lacks the allocator field it would need)."""
    every_gate = sorted({g for gates in FEATURE_DEFAULTS.values() for g in gates})
    for version in SUPPORTED_VERSIONS:
        for gate in every_gate:
            run = subprocess.run([str(oracle), "-f", str(CASE), "--node", "node-1", "-o", "json",
                                  "--kubernetes-version", version, "--feature-gates", f"{gate}=false"],
                                 capture_output=True, text=True)
            error = json.loads(run.stdout)["error"] or ""
            assert ("does not exist in Kubernetes" not in error) is (gate in FEATURE_DEFAULTS[version]), \
                (version, gate, error)
