"""Explanations: every rejection kind, readable summaries, and no influence on the result."""

from __future__ import annotations

import pytest
import yaml

from labkit.allocator import AllocatedState
from tests.allocator.test_allocator_differential import allocator_for
from tests.paths import TEST_DATA

DATA = TEST_DATA / "allocator"


def load_case(name: str, **gates):
    objs = list(yaml.safe_load_all((DATA / name / "input.yaml").read_text()))
    case = yaml.safe_load((DATA / name / "case.yaml").read_text())
    overrides = {**(case.get("featureGates") or {}), **gates}
    alloc, by, pending, _done = allocator_for(objs, case.get("kubernetesVersion", "1.37"), overrides)
    nodes = {n["metadata"]["name"]: n for n in by.get("Node", [])}
    node = nodes.get(case["node"], {"metadata": {"name": case["node"]}})
    return alloc, node, pending


def explain_case(name: str, **gates):
    alloc, node, pending = load_case(name, **gates)
    outcome = alloc.allocate(node, pending)
    return outcome, outcome.explanation


def rules_of(exp, request_index: int = 0) -> dict[str, int]:
    return exp.requests[request_index].counts()


def test_in_use_names_the_owner():
    outcome, exp = explain_case("in-use")
    assert outcome.status == "unsatisfiable"
    assert rules_of(exp) == {"in-use": 2}
    assert exp.requests[0].rejected[0].data["by"] == ["default/old"]
    assert "2 of 2 devices match class gpu.nvidia.com; all 2 are in use by default/old" in exp.summary()


def test_in_use_by_an_earlier_claim_of_the_same_run():
    outcome, exp = explain_case("consumable-capacity-full")
    assert exp.failing_claim == "default/b" and exp.allocated == ["default/a"]
    assert rules_of(exp) == {"capacity": 1}
    assert "short by 1Gi" in exp.summary()


def test_class_selector_false():
    _, exp = explain_case("cel-class-false")
    rej = exp.requests[0].rejected[0]
    assert rej.rule == "class-selector" and rej.data["expression"] == 'device.driver == "other"'
    assert "0 of 1 devices match" in exp.summary() and "1 is excluded by the device class selector" in exp.summary()


def test_request_selector_false_and_summary_shape():
    alloc, node, pending = load_case("basic-selector")
    pending[0]["spec"]["devices"]["requests"][0]["exactly"]["selectors"][0]["cel"]["expression"] = (
        'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("100Gi")) >= 0')
    exp = alloc.allocate(node, pending).explanation
    assert rules_of(exp) == {"request-selector": 2}
    assert exp.summary().splitlines()[-1].startswith(
        'claim default/c1, request gpu (needs 1): 0 of 2 devices match `device.capacity["gpu.nvidia.com"]')


def test_cel_runtime_error_is_reported_per_device():
    outcome, exp = explain_case("cel-runtime-error")
    assert outcome.status == "error" and "no such key" in outcome.error
    rej = exp.requests[0].rejected[0]
    assert rej.rule == "cel-error" and "no such key" in rej.detail


def test_counters_exhausted_names_counter_and_shortfall():
    _, exp = explain_case("partitionable-whole-in-use")
    rejected = {r.device: r for r in exp.requests[0].rejected}
    r = rejected["gpu.nvidia.com/node-1/gpu-0-mig-1g"]
    assert r.rule == "counters" and r.data["counterSet"] == "gpu-0-counters" and r.data["shortBy"] in ("5Gi", "1")
    assert rejected["gpu.nvidia.com/node-1/gpu-0"].rule == "in-use"


def test_combination_failure_is_called_out():
    _, exp = explain_case("partitionable")
    assert "4 usable, but no 3 of them fit together" in exp.summary()


def test_constraint_missing_attribute():
    _, exp = explain_case("match-attribute-missing")
    assert rules_of(exp) == {"constraint": 2}
    assert "constraint #0 (matchAttribute gpu.nvidia.com/pcieRoot): attribute not set" in exp.summary()


def test_constraint_value_mismatch_names_the_other_device():
    alloc, node, pending = load_case("match-attribute")
    pending[0]["spec"]["devices"]["requests"] = [
        {"name": "a", "exactly": {"deviceClassName": "gpu.nvidia.com", "allocationMode": "ExactCount", "count": 3}}]
    exp = alloc.allocate(node, pending).explanation
    r = next(r for r in exp.requests[0].rejected if r.rule == "constraint")
    assert r.data["against"].startswith("gpu.nvidia.com/node-1/") and "differs from" in r.detail


def test_taint_from_rule():
    _, exp = explain_case("taint-rule-all")
    rej = exp.requests[0].rejected[0]
    assert rej.rule == "taint" and rej.data["taint"] == {"key": "drain", "effect": "NoSchedule"}


def test_node_mismatch_for_per_device_selection():
    alloc, node, pending = load_case("per-device-node-selection")
    pending[0]["spec"]["devices"]["requests"][0]["exactly"]["count"] = 3
    exp = alloc.allocate(node, pending).explanation
    assert rules_of(exp) == {"node-mismatch": 1}


def test_pool_problems():
    _, exp = explain_case("incomplete-pool")
    assert exp.pools[0]["problem"].startswith("incomplete")
    _, exp = explain_case("invalid-pool-duplicate")
    assert exp.pools[0] == {"pool": "gpu.nvidia.com/node-1", "problem": "invalid",
                            "reason": "duplicate device name gpu-0"}
    assert exp.error == "invalid resource pools were encountered"
    _, exp = explain_case("node-selector-mismatch")
    assert any(p["problem"] == "not visible from this node" for p in exp.pools)


def test_binding_conditions_and_partitionable_off():
    _, exp = explain_case("binding-conditions-off")
    assert rules_of(exp) == {"binding-conditions": 1}
    _, exp = explain_case("partitionable-off")
    assert rules_of(exp) == {"partitionable-off": 4}


def test_request_level_error():
    _, exp = explain_case("missing-class")
    assert exp.requests[0].error.endswith('deviceclass.resource.k8s.io "nope" not found')
    assert exp.to_dict()["requests"][0]["error"] == exp.requests[0].error


def test_allocated_outcome_has_trivial_explanation():
    outcome, exp = explain_case("exact-count")
    assert outcome.status == "allocated"
    assert exp.summary() == "all claims fit on node node-1" and exp.to_dict()["requests"] == []


@pytest.mark.parametrize("name", ["two-claims-backtrack", "in-use-partly", "partitionable-two-claims",
                                  "consumable-capacity", "first-available"])
def test_explaining_does_not_change_results(name, monkeypatch):
    monkeypatch.setenv("LABKIT_DETERMINISTIC_SHAREID", "1")
    alloc, node, pending = load_case(name)
    before_state = (dict(alloc.allocated.devices), dict(alloc.allocated.capacity))
    first = alloc.allocate(node, pending)
    _ = first.explanation
    second = alloc.allocate(node, pending)
    strip = lambda allocs: [{**a, "devices": {**a["devices"], "results": [  # noqa: E731
        {k: v for k, v in r.items() if k != "shareID"} for r in a["devices"].get("results", [])]}} for a in allocs]
    assert strip(first.allocations) == strip(second.allocations)
    assert before_state == (dict(alloc.allocated.devices), dict(alloc.allocated.capacity))


def test_to_dict_is_json_ready():
    import json
    _, exp = explain_case("partitionable-whole-in-use")
    doc = json.loads(json.dumps(exp.to_dict()))
    assert doc["failingClaim"] == "default/c1" and doc["requests"][0]["considered"] == 4


def test_state_owners_from_incremental_add():
    state = AllocatedState()
    state.add({"devices": {"results": [{"request": "r", "driver": "d", "pool": "p", "device": "x"}]}}, owner="ns/a")
    assert state.owners[("d", "p", "x")] == ["ns/a"]
    state.remove({"devices": {"results": [{"request": "r", "driver": "d", "pool": "p", "device": "x"}]}}, owner="ns/a")
    assert state.owners == {} and state.devices == {}


def test_too_few_devices_says_how_many_were_needed():
    _, exp = explain_case("exact-count-too-many")
    assert exp.requests[0].summary() == (
        "claim default/c1, request gpu (needs 3): 2 of 2 devices match class gpu.nvidia.com; 2 usable, 3 needed")
