"""labkit.api.validate: ResourceSlice and DeviceTaintRule rules (incl. version-dependent limits)."""

from __future__ import annotations

from tests.api.test_api_helpers import V1, device, messages, one, slice_

GPU = device(attributes={"model": {"string": "A100"}, "gpu.nvidia.com/uuid": {"string": "GPU-1"}},
             capacity={"memory": {"value": "80Gi"}})


def test_valid_slice() -> None:
    assert messages(slice_([GPU])) == []


def test_node_selection_exactly_one() -> None:
    msg = "exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required"
    s = slice_([GPU])
    del s["spec"]["nodeName"]
    assert one(s) == f"ResourceSlice/s: spec: Required value: {msg}"
    assert one(slice_([GPU], allNodes=True, nodeName="n")).endswith(
        f'spec: Invalid value: "{{`nodeName`, `allNodes`}}": {msg}, but multiple fields are set')
    assert "must be either unset or set to true" in one(slice_([GPU], allNodes=False, nodeName="n"))
    assert messages(slice_([GPU], allNodes=True)) == []
    sel = {"nodeSelectorTerms": [{"matchLabels": {}}]}
    assert "unknown field" in one(slice_([GPU], nodeSelector=sel))
    two = {"nodeSelectorTerms": [{"matchExpressions": []}, {"matchExpressions": []}]}
    assert "nodeSelector.nodeSelectorTerms" in one(slice_([GPU], nodeSelector=two))
    assert "must have exactly one node selector term" in one(slice_([GPU], nodeSelector=two))


def test_pool_rules() -> None:
    s = slice_([GPU])
    s["spec"]["pool"] = {"name": "Bad Pool", "generation": -1, "resourceSliceCount": 0}
    found = messages(s)
    assert any("spec.pool.name" in m for m in found)
    assert any(m.endswith("spec.pool.generation: Invalid value: -1: must be greater than or equal to zero")
               for m in found)
    assert any(m.endswith("spec.pool.resourceSliceCount: Invalid value: 0: must be greater than zero")
               for m in found)
    s["spec"]["pool"] = {"name": "rack-a/node-1", "generation": 3, "resourceSliceCount": 2}
    assert messages(s) == []


def test_driver_name() -> None:
    s = slice_([GPU])
    s["spec"]["driver"] = "x" * 64 + ".com"
    assert "spec.driver" in one(s)


def test_device_names_and_duplicates() -> None:
    assert 'devices[0].name: Invalid value: "GPU_0"' in one(slice_([device("GPU_0")]))
    assert one(slice_([device("a"), device("a")])).endswith('spec.devices[1].name: Duplicate value: "a"')


def test_device_limits() -> None:
    assert one(slice_([device(f"d{i}") for i in range(129)])).endswith(
        "spec.devices: Too many: 129: must have at most 128 items")
    tainted = [device(f"d{i}", taints=[{"key": "k", "effect": "NoSchedule"}]) for i in range(65)]
    assert one(slice_(tainted)).endswith("spec.devices: Too many: 65: must have at most 64 items")


def test_attributes() -> None:
    attrs = {f"a{i}": {"int": i} for i in range(33)}
    assert "the total number of attributes and capacities must not exceed 32" in one(slice_([device(attributes=attrs)]))
    bad = device(attributes={"v": {"version": "1.0"}})
    assert one(slice_([bad])).endswith(
        'attributes[v].version: Invalid value: "1.0": must be a string compatible with semver.org spec 2.0.0')
    assert messages(slice_([device(attributes={"v": {"version": "550.163.1-rc.1+build.5"}})])) == []
    assert "exactly one value must be specified" in one(slice_([device(attributes={"x": {}})]))
    assert "exactly one value must be specified" in one(slice_([device(attributes={"x": {"int": 1, "bool": True}})]))
    long = device(attributes={"s": {"string": "x" * 65}})
    assert one(slice_([long])).endswith("attributes[s].string: Too long: may not be more than 64 bytes")
    assert messages(slice_([device(attributes={"a/b/c": {"int": 1}})])) == []  # the API server stores it
    assert messages(slice_([device(attributes={"GPU.example.com/x": {"int": 1}})])) == []  # checked lowercased
    assert "must be a C identifier" in one(slice_([device(attributes={"1abc": {"int": 1}})]))
    assert "must be no more than 32 characters" in one(slice_([device(attributes={"a" * 33: {"int": 1}})]))
    assert "domain" in one(slice_([device(attributes={"Bad_Domain!/x": {"int": 1}})]))


def test_list_attributes_gated() -> None:
    d = device(attributes={"numa": {"ints": [0, 1]}})
    # gate off: the API server drops `ints`, then finds no value at all
    gated, no_value = messages(slice_([d]))
    assert "DRAListTypeAttributes" in gated and no_value.endswith("exactly one value must be specified (int, bool, string or version)")
    # beside a scalar, a dropped list leaves one value: stored (a 1.37 kube-apiserver did)
    both = device(attributes={"numa": {"int": 0, "strings": ["a"]}})
    assert ["DRAListTypeAttributes" in m for m in messages(slice_([both]))] == [True]
    assert messages(slice_([d]), feature_gates={"DRAListTypeAttributes": True}) == []
    empty = device(attributes={"numa": {"ints": []}})
    assert "must not be empty if specified" in one(slice_([empty]), feature_gates={"DRAListTypeAttributes": True})
    values = device(attributes={f"l{i}": {"ints": list(range(10))} for i in range(5)})
    assert "the total number of attribute values must not exceed 48" in one(
        slice_([values]), feature_gates={"DRAListTypeAttributes": True})


def test_capacity_quantity() -> None:
    assert "capacity[memory].value: Invalid value: \"80GB\"" in one(slice_([device(capacity={"memory": {"value": "80GB"}})]))
    assert messages(slice_([device(capacity={"cores": {"value": 108}})])) == []
    # no value: a 1.37 kube-apiserver stored {"value": "0"} (a Quantity's zero), for capacity and counters
    assert messages(slice_([device(capacity={"cores": {}})])) == []
    assert messages(slice_([device(consumesCounters=[{"counterSet": "cs", "counters": {"mem": {}}}])])) == []
    no_generation = slice_([device()])
    del no_generation["spec"]["pool"]["generation"]  # stored as 0 too
    assert messages(no_generation) == []


def _policy(policy: dict, value: str = "40Gi") -> dict:
    return slice_([device(allowMultipleAllocations=True, capacity={"memory": {"value": value, "requestPolicy": policy}})])


def test_request_policy_rules() -> None:
    assert one(slice_([device(capacity={"m": {"value": "1", "requestPolicy": {"default": "1"}}})])).endswith(
        "capacity[m].requestPolicy: Forbidden: allowMultipleAllocations must be true")
    assert messages(_policy({"default": "10Gi", "validValues": ["10Gi", "20Gi"]})) == []
    # an empty validValues is no policy (Go: len() > 0): beside a validRange it is stored
    assert messages(_policy({"default": "10Gi", "validValues": [], "validRange": {"min": "1Gi"}})) == []
    assert "values must be sorted in ascending order" in one(_policy({"default": "10Gi", "validValues": ["20Gi", "10Gi"]}))
    assert "option is larger than capacity value: 40Gi" in one(_policy({"default": "10Gi", "validValues": ["10Gi", "80Gi"]}))
    assert "default value is not valid according to the requestPolicy" in one(_policy({"default": "5Gi", "validValues": ["10Gi"]}))
    assert "required when validValues is defined" in one(_policy({"validValues": ["10Gi"]}))
    assert 'cannot specify "validValues" and "validRange"' in one(
        _policy({"default": "1Gi", "validValues": ["1Gi"], "validRange": {"min": "1Gi"}}))
    assert "Too many: 11" in one(_policy({"default": "1Gi", "validValues": [f"{i}Gi" for i in range(1, 12)]}))
    assert messages(_policy({"default": "4Gi", "validRange": {"min": "2Gi", "max": "40Gi", "step": "2Gi"}})) == []
    assert "required when validRange is defined" in one(_policy({"default": "1Gi", "validRange": {}}))
    assert "default is less than min: 2Gi" in one(_policy({"default": "1Gi", "validRange": {"min": "2Gi"}}))
    assert "min is larger than capacity value: 40Gi" in messages(_policy({"default": "50Gi", "validRange": {"min": "50Gi"}}))[0]
    assert "max is larger than capacity value" in one(_policy({"default": "2Gi", "validRange": {"min": "2Gi", "max": "50Gi"}}))
    assert "value is not a multiple of a given step (2Gi) from (2Gi)" in one(
        _policy({"default": "3Gi", "validRange": {"min": "2Gi", "step": "2Gi"}}))
    assert "step: Invalid value: \"0\": must be greater than zero" in one(
        _policy({"default": "2Gi", "validRange": {"min": "2Gi", "step": "0"}}))
    assert "one step 60Gi is larger than capacity value: 40Gi" in one(
        _policy({"default": "20Gi", "validRange": {"min": "20Gi", "step": "40Gi"}}))


def test_fractional_range_gate_changes_arithmetic() -> None:
    s = _policy({"default": "1500m", "validRange": {"min": "500m", "step": "500m"}}, value="4")
    assert messages(s) == []
    # without DRAFractionalCapacityRange, Value() rounds 500m up to 1: 2 - 1 is a multiple of 1
    assert messages(s, feature_gates={"DRAFractionalCapacityRange": False}) == []
    s = _policy({"default": "1200m", "validRange": {"min": "500m", "step": "500m"}}, value="4")
    assert "not a multiple" in one(s)


def test_taints_and_version_limit() -> None:
    taints = [{"key": f"k{i}", "effect": "NoSchedule"} for i in range(5)]
    s = slice_([device(taints=taints)])
    assert messages(s) == []
    assert one(s, kubernetes_version="1.34", feature_gates={"DRADeviceTaints": True}).endswith(
        "spec.devices[0].taints: Too many: 5: must have at most 4 items")
    assert one(slice_([device(taints=[{"key": f"k{i}", "effect": "None"} for i in range(17)])])).endswith(
        "Too many: 17: must have at most 16 items")
    assert "taints[0].effect: Required value" in one(slice_([device(taints=[{"key": "k"}])]))
    assert "DRADeviceTaints" in one(s, kubernetes_version="1.35")


def test_shared_counters_exclusive_from_135() -> None:
    counters = [{"name": "gpu-0", "counters": {"memory": {"value": "80Gi"}}}]
    s = slice_([device()], sharedCounters=counters)
    assert one(s).endswith("spec: Invalid value: \"\": only one of `sharedCounters` or `devices` is allowed")
    assert messages(s, kubernetes_version="1.34", feature_gates={"DRAPartitionableDevices": True}) == []
    assert messages(slice_(sharedCounters=counters)) == []
    many = [{"name": f"s{i}", "counters": {"c": {"value": "1"}}} for i in range(9)]
    assert one(slice_(sharedCounters=many)).endswith("Too many: 9: must have at most 8 items")
    dup = [{"name": "a", "counters": {"c": {"value": "1"}}}] * 2
    assert "Duplicate value: \"a\"" in one(slice_(sharedCounters=dup))
    big = [{"name": "a", "counters": {f"c{i}": {"value": "1"} for i in range(20)}},
           {"name": "b", "counters": {f"c{i}": {"value": "1"} for i in range(20)}}]
    assert "Too many: 40" in one(slice_(sharedCounters=big), kubernetes_version="1.34",
                                 feature_gates={"DRAPartitionableDevices": True})
    assert "counters: Required value" in one(slice_(sharedCounters=[{"name": "a"}]))


def test_consumes_counters() -> None:
    d = device(consumesCounters=[{"counterSet": "gpu-0", "counters": {"memory": {"value": "10Gi"}}}])
    assert messages(slice_([d])) == []
    three = device(consumesCounters=[{"counterSet": f"s{i}", "counters": {"m": {"value": "1"}}} for i in range(3)])
    assert one(slice_([three])).endswith("consumesCounters: Too many: 3: must have at most 2 items")
    assert "DRAPartitionableDevices" in one(slice_([d]), kubernetes_version="1.35")


def test_per_device_node_selection() -> None:
    s = slice_([device(nodeName="node-1")], perDeviceNodeSelection=True)
    assert messages(s) == []
    s = slice_([device()], perDeviceNodeSelection=True)
    assert "exactly one of `nodeName`, `nodeSelector`, or `allNodes` is required when `perDeviceNodeSelection`" in one(s)
    s = slice_([device(nodeName="node-1")])
    assert "can only be set if `perDeviceNodeSelection` is set to true" in one(s)


def test_binding_conditions() -> None:
    d = device(bindingConditions=["ready"], bindingFailureConditions=["failed"], bindsToNode=True)
    assert messages(slice_([d])) == []
    assert "bindingFailureConditions are required to use bindingConditions" in one(
        slice_([device(bindingConditions=["ready"])]))
    assert "must not overlap" in one(slice_([device(bindingConditions=["a"], bindingFailureConditions=["a"])]))
    assert "DRADeviceBindingConditions" in one(slice_([d]), kubernetes_version="1.35")


def test_skip_node_operations_and_partition_type() -> None:
    s = slice_([device()], skipNodeOperations=["NodePrepareResources"])
    assert "DRAOptionalNodeOperations" in one(s)
    assert "cannot be skipped unless NodeUnprepareResources" in one(s, feature_gates={"DRAOptionalNodeOperations": True})
    s = slice_([device()], partitionTypeAttribute="gpu.nvidia.com/profile")
    assert "may only be set on a slice which declares devices that consume counters" in one(
        s, feature_gates={"DRAPartitionableDevicesType": True})
    assert "does not exist in Kubernetes 1.36" in one(s, kubernetes_version="1.36")


def test_device_taint_rule() -> None:
    rule = {"apiVersion": V1, "kind": "DeviceTaintRule", "metadata": {"name": "drain-gpu-0"},
            "spec": {"deviceSelector": {"driver": "gpu.nvidia.com", "pool": "node-1", "device": "gpu-0"},
                     "taint": {"key": "example.com/maintenance", "value": "planned", "effect": "NoExecute"}}}
    assert messages(rule) == []
    assert "served as resource.k8s.io/v1 from Kubernetes 1.37" in one(rule, kubernetes_version="1.36")
    rule["spec"]["taint"]["effect"] = "Evict"
    assert 'spec.taint.effect: Unsupported value: "Evict"' in one(rule)
    del rule["spec"]["taint"]
    assert "spec.taint: Required value" in one(rule)
