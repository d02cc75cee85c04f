"""Unit tests of the allocator's building blocks and Python API."""

from __future__ import annotations

from fractions import Fraction

import pytest

from labkit.allocator import AllocatedState, Allocator, features_for, select_variant
from labkit.allocator.capacity import CapacityError, check_capacity, consumed_quantities
from labkit.allocator.constraints import DistinctAttribute, MatchAttribute
from labkit.allocator.features import Features
from labkit.allocator.model import CapacityInfo
from labkit.allocator.nodes import NodeSelectorError, node_matches, selector_matches
from labkit.allocator.taints import blocking_taint, tolerates
from labkit.api.attributes import lookup_attribute
from labkit.api.features import FeatureGateError

GPU = "gpu.nvidia.com"


# -- features and variants -------------------------------------------------------------------
def test_features_for_1_37_defaults_select_incubating():
    f = features_for("1.37")
    assert f.AdminAccess and f.PrioritizedList and f.PartitionableDevices and f.DeviceTaints
    assert f.ConsumableCapacity and f.DeviceBindingAndStatus and f.FractionalCapacityRange
    assert not f.ListTypeAttributes
    assert select_variant(f) == "incubating" and f.profile.combinations and f.profile.sort_pools


def test_list_type_attributes_force_experimental():
    assert features_for("1.37", {"DRAListTypeAttributes": True}).variant == "experimental"


def test_stable_when_only_stable_features():
    f = features_for("1.37", {"DRAConsumableCapacity": False, "DRADeviceBindingConditions": False,
                              "DRAFractionalCapacityRange": False})
    assert f.variant == "stable" and not f.profile.combinations and not f.profile.node_local_slices


def test_binding_and_status_needs_both_gates():
    assert not features_for("1.36", {"DRAResourceClaimDeviceStatus": False}).DeviceBindingAndStatus
    assert features_for("1.36").DeviceBindingAndStatus


def test_older_versions():
    f34 = features_for("v1.34.2")
    assert f34.version == "1.34" and f34.AdminAccess and f34.PrioritizedList and not f34.PartitionableDevices
    assert not features_for("1.35").ConsumableCapacity


def test_unknown_gate_and_version_raise():
    with pytest.raises(FeatureGateError):
        features_for("1.37", {"DRANoSuchGate": True})
    with pytest.raises(FeatureGateError):
        features_for("1.20")


# -- node selection ----------------------------------------------------------------------------
NODE = {"metadata": {"name": "n1", "labels": {"zone": "a", "gpus": "8"}}}


def term(*exprs, fields=()):
    t = {}
    if exprs:
        t["matchExpressions"] = list(exprs)
    if fields:
        t["matchFields"] = list(fields)
    return {"nodeSelectorTerms": [t]}


@pytest.mark.parametrize("expr, want", [
    ({"key": "zone", "operator": "In", "values": ["a", "b"]}, True),
    ({"key": "zone", "operator": "NotIn", "values": ["a"]}, False),
    ({"key": "rack", "operator": "NotIn", "values": ["a"]}, True),
    ({"key": "zone", "operator": "Exists"}, True),
    ({"key": "zone", "operator": "DoesNotExist"}, False),
    ({"key": "gpus", "operator": "Gt", "values": ["4"]}, True),
    ({"key": "gpus", "operator": "Lt", "values": ["4"]}, False),
])
def test_match_expressions(expr, want):
    assert selector_matches(term(expr), NODE) is want


def test_match_fields_and_empty_terms():
    assert selector_matches(term(fields=[{"key": "metadata.name", "operator": "In", "values": ["n1"]}]), NODE)
    assert not selector_matches({"nodeSelectorTerms": [{}]}, NODE)
    assert selector_matches({"nodeSelectorTerms": [{}, term({"key": "zone", "operator": "Exists"})
                                                   ["nodeSelectorTerms"][0]]}, NODE)


def test_invalid_selectors_raise():
    with pytest.raises(NodeSelectorError):
        selector_matches(term({"key": "zone", "operator": "In", "values": []}), NODE)
    with pytest.raises(NodeSelectorError):
        selector_matches(term(fields=[{"key": "metadata.name", "operator": "In", "values": ["n1", "n2"]}]), NODE)


def test_node_matches_precedence():
    assert node_matches(NODE, "n1", False, None) and not node_matches(NODE, "n2", True, None)
    assert node_matches(NODE, "", True, None) and not node_matches(NODE, "", False, None)


# -- capacity ----------------------------------------------------------------------------------
def cap(name, value, policy=None):
    from labkit.api.quantity import parse_quantity
    return CapacityInfo(name, parse_quantity(value).value, value, policy)


RANGE = {"default": "1Gi", "validRange": {"min": "1Gi", "max": "8Gi", "step": "1Gi"}}


def test_range_rounds_up_to_step():
    caps = {"memory": cap("memory", "40Gi", RANGE)}
    assert consumed_quantities({"memory": "1500Mi"}, caps, True)["memory"].canonical() == "2Gi"
    assert consumed_quantities({"memory": "100Mi"}, caps, True)["memory"].canonical() == "1Gi"
    assert consumed_quantities(None, caps, True)["memory"].canonical() == "1Gi"


def test_policy_violation_and_overcommit():
    caps = {"memory": cap("memory", "40Gi", RANGE)}
    ok, why = check_capacity({"memory": "9Gi"}, caps, None, None, True)
    assert not ok and why[:2] == ("policy", "memory")
    ok, why = check_capacity({"memory": "2Gi"}, caps, {"memory": Fraction(39 * 2**30)}, None, True)
    assert not ok and why == ("exceeds", "memory", Fraction(2**30))
    assert check_capacity({"memory": "2Gi"}, caps, None, {"memory": Fraction(38 * 2**30)}, True) == (True, None)


def test_valid_values_and_missing_name():
    caps = {"compute": cap("compute", "100", {"default": "10", "validValues": ["10", "50", "100"]})}
    assert consumed_quantities({"compute": "20"}, caps, True)["compute"].canonical() == "50"
    assert check_capacity({"bandwidth": "1"}, caps, None, None, True) == (False, ("missing", "bandwidth"))
    # without a policy an unrequested capacity is consumed whole
    assert consumed_quantities(None, {"m": cap("m", "4Gi")}, True)["m"].canonical() == "4Gi"


def test_fractional_range_uses_milli_units():
    caps = {"cpu": cap("cpu", "4", {"default": "500m", "validRange": {"min": "500m", "step": "250m"}})}
    assert consumed_quantities({"cpu": "600m"}, caps, True)["cpu"].canonical() == "750m"
    with pytest.raises(CapacityError):
        consumed_quantities({"cpu": "0.0001"}, {"cpu": cap("cpu", "4", {"validRange": {"min": "0", "step": "250m"}})},
                            True)


# -- constraints and taints --------------------------------------------------------------------
def test_lookup_attribute_bare_name_only_for_own_driver():
    attrs = {"model": {"string": "A100"}, "other.io/x": {"int": 1}}
    assert lookup_attribute(attrs, GPU, "gpu.nvidia.com/model") == {"string": "A100"}
    assert lookup_attribute(attrs, GPU, "other.io/model") is None
    assert lookup_attribute(attrs, GPU, "other.io/x") == {"int": 1}


def test_match_attribute_scalar_and_removal():
    m = MatchAttribute(0, [], "gpu.nvidia.com/model", False)
    assert m.add("a", None, {"model": {"string": "A100"}}, GPU)
    assert not m.add("a", None, {"model": {"string": "H100"}}, GPU)
    assert not m.add("a", None, {"model": {"int": 1}}, GPU)
    m.remove("a", None)
    assert m.count == 0 and m.add("a", None, {"model": {"string": "H100"}}, GPU)


def test_match_attribute_only_for_named_requests():
    m = MatchAttribute(0, ["b", "c/x"], "gpu.nvidia.com/model", False)
    assert m.add("a", None, {}, GPU)            # not covered: always fine
    assert not m.add("b", None, {}, GPU)        # covered, attribute missing
    assert not m.add("c", "x", {}, GPU)
    assert m.add("c", "y", {}, GPU)


def test_list_mode_intersection_and_disjointness():
    m = MatchAttribute(0, [], "gpu.nvidia.com/g", True)
    assert m.add("a", None, {"g": {"strings": ["x", "y"]}}, GPU)
    assert m.add("a", None, {"g": {"string": "y"}}, GPU)
    assert not m.add("a", None, {"g": {"strings": ["x"]}}, GPU)  # running intersection is {y}
    d = DistinctAttribute(0, [], "gpu.nvidia.com/g", True)
    assert d.add("a", None, {"g": {"strings": ["x", "y"]}}, GPU)
    assert not d.add("a", None, {"g": {"string": "y"}}, GPU)
    assert d.add("a", None, {"g": {"ints": [1]}}, GPU)


def test_distinct_scalar():
    d = DistinctAttribute(0, [], "gpu.nvidia.com/numa", False)
    assert d.add("a", None, {"numa": {"int": 0}}, GPU)
    assert not d.add("b", None, {"numa": {"int": 0}}, GPU)
    assert d.add("b", None, {"numa": {"int": 1}}, GPU)
    d.remove("b", None)
    assert d.add("b", None, {"numa": {"int": 1}}, GPU)


@pytest.mark.parametrize("tol, ok", [
    ({"key": "k", "operator": "Equal", "value": "v"}, True),
    ({"key": "k", "operator": "Equal", "value": "w"}, False),
    ({"key": "k", "operator": "Exists"}, True),
    ({"operator": "Exists"}, True),
    ({"operator": "Exists", "effect": "NoExecute"}, False),
    ({"key": "k", "value": "v"}, True),           # empty operator means Equal
    ({"key": "k", "operator": "Bogus"}, False),
])
def test_tolerations(tol, ok):
    assert tolerates(tol, {"key": "k", "value": "v", "effect": "NoSchedule"}) is ok


def test_none_effect_never_blocks():
    assert blocking_taint([{"key": "k", "effect": "None"}, {"key": "k", "effect": "Future"}], []) is None


# -- AllocatedState ----------------------------------------------------------------------------
def result(device, **extra):
    return {"request": "r", "driver": GPU, "pool": "p", "device": device, **extra}


def test_allocated_state_kinds():
    claim = {"metadata": {"name": "c", "namespace": "ns"}, "status": {"allocation": {"devices": {"results": [
        result("a"), result("b", adminAccess=True),
        result("c", shareID="s1", consumedCapacity={"memory": "1Gi"}),
        result("c", shareID="s2", consumedCapacity={"memory": "2Gi"})]}}}}
    state = AllocatedState.from_claims([claim])
    assert set(state.devices) == {(GPU, "p", "a")}
    assert state.capacity[(GPU, "p", "c")] == {"memory": 3 * 2**30}
    assert state.is_allocated((GPU, "p", "c")) and not state.is_allocated((GPU, "p", "b"))
    assert state.owners[(GPU, "p", "a")] == ["ns/c"]
    state.remove(claim["status"]["allocation"], owner="ns/c")
    assert not state.devices and not state.capacity and not state.shared


def test_shared_results_are_dedicated_without_consumable_capacity():
    state = AllocatedState.from_claims([{"metadata": {"name": "c"}, "status": {"allocation": {"devices": {
        "results": [result("c", shareID="s1")]}}}}], consumable_capacity=False)
    assert (GPU, "p", "c") in state.devices


# -- Allocator API -----------------------------------------------------------------------------
def _world(n=2):
    classes = [{"metadata": {"name": "gpu"}, "spec": {"selectors": [
        {"cel": {"expression": f'device.driver == "{GPU}"'}}]}}]
    slices = [{"metadata": {"name": "s"}, "spec": {"driver": GPU, "nodeName": "n1", "pool": {
        "name": "n1", "generation": 0, "resourceSliceCount": 1},
        "devices": [{"name": f"gpu-{i}"} for i in range(n)]}}]
    return classes, slices


def _claim(name, count=1):
    return {"metadata": {"name": name, "namespace": "default"}, "spec": {"devices": {"requests": [
        {"name": "r", "exactly": {"deviceClassName": "gpu", "allocationMode": "ExactCount", "count": count}}]}}}


def test_incremental_state_is_seen_by_the_same_allocator():
    classes, slices = _world(2)
    state = AllocatedState()
    alloc = Allocator(features_for(), classes, slices, state)
    node = {"metadata": {"name": "n1"}}
    first = alloc.allocate(node, [_claim("a")])
    state.add(first.allocations[0], owner="default/a")
    second = alloc.allocate(node, [_claim("b")])
    third_state_full = alloc.allocate(node, [_claim("c", 2)])
    assert first.allocations[0]["devices"]["results"][0]["device"] == "gpu-0"
    assert second.allocations[0]["devices"]["results"][0]["device"] == "gpu-1"
    assert third_state_full.status == "unsatisfiable"
    state.remove(first.allocations[0], owner="default/a")
    assert alloc.allocate(node, [_claim("c", 2)]).status == "allocated"


def test_allocated_claims_list_and_custom_engine():
    classes, slices = _world(3)
    compiled = []

    class Prog:
        def __init__(self, expr):
            compiled.append(expr)

        def evaluate(self, device):
            return device["name"] != "gpu-0"

    alloc = Allocator(Features(PrioritizedList=True), classes, slices, [], cel_engine=Prog)
    out = alloc.allocate({"metadata": {"name": "n1"}}, [_claim("a", 2)])
    assert out.status == "allocated" and alloc.variant == "stable"
    assert [r["device"] for r in out.allocations[0]["devices"]["results"]] == ["gpu-1", "gpu-2"]
    assert compiled == [f'device.driver == "{GPU}"'] and out.steps > 0


def test_compile_error_only_when_a_device_is_visited():
    classes, slices = _world(0)
    classes[0]["spec"]["selectors"][0]["cel"]["expression"] = "device.("
    alloc = Allocator(features_for(), classes, slices)
    assert alloc.allocate({"metadata": {"name": "n1"}}, [_claim("a")]).status == "unsatisfiable"
    classes, slices = _world(1)
    classes[0]["spec"]["selectors"][0]["cel"]["expression"] = "device.("
    out = Allocator(features_for(), classes, slices).allocate({"metadata": {"name": "n1"}}, [_claim("a")])
    assert out.status == "error" and out.error.startswith("class gpu: selector #0: CEL compile error: ")
