"""Kubernetes 1.38 (v1.38.0-beta.0, tools/kubernetes-releases.env) through ``labkit validate``: the
version is accepted, its new validation rules apply behind the version switch, 1.37 keeps its own.

Upstream, at kubernetes@v1.38.0-beta.0 unless said otherwise:
- pkg/apis/resource/validation/validation.go: validateCapacityRequirements / validateCapacityNames
  (capacity request and consumedCapacity keys are qualified names), validateQualifiedName ("must not
  contain more than one slash"), semverRe ("... with at most 18 digits in numbers"), the per-device
  nodeSelector ("must have exactly one node selector term"); at kubernetes@v1.37.1 the same file
  checks no capacity request key at all (a 1.37.1 kube-apiserver stores `gpu-memory`).
- k8s.io/api@v0.38.0-beta.0 resource/v1/types.go: CapacityRequirements.requests and
  DeviceRequestAllocationResult.consumedCapacity carry `+k8s:maxProperties=32` and
  `+k8s:eachVal=+k8s:minimum=0`; their messages come from k8s.io/apimachinery@v0.38.0-beta.0
  pkg/api/validate/limits.go (field.TooMany, content.MinError).
- pkg/registry/resource/devicetaintrule/strategy.go: warningsForDeviceTaintRule.
- k8s.io/component-base@v0.38.0-beta.0 featuregate/feature_gate.go: "unrecognized feature gate: %s",
  "cannot set feature gate %v to %v, feature is locked to %v"; pkg/features/kube_features.go: the gates.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from labkit.cli import main

CLAIM = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "c", "namespace": "default"}}
SLICE_SPEC = {"driver": "gpu.example.com", "pool": {"name": "p", "generation": 1, "resourceSliceCount": 1},
              "nodeName": "node-1"}


def _validate(tmp_path: Path, capsys: pytest.CaptureFixture[str], version: str, *objs: dict,
              gates: str = "") -> tuple[int, str, str]:
    f = tmp_path / "in.yaml"
    f.write_text(yaml.safe_dump_all(objs))
    args = ["validate", "--kubernetes-version", version, "-f", str(f)]
    rc = main(args + (["--feature-gates", gates] if gates else []))
    out, err = capsys.readouterr()
    return rc, out, err


def _claim(capacity: dict) -> dict:
    request = {"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com", "capacity": {"requests": capacity}}}
    return {**CLAIM, "spec": {"devices": {"requests": [request]}}}


def _slice(device: dict, **spec: object) -> dict:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "s"},
            "spec": {**SLICE_SPEC, **spec, "devices": [{"name": "gpu-0", **device}]}}


def test_138_is_a_version_and_137_stays_the_default(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["validate", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "1.34-1.38; default 1.37" in help_text


def test_capacity_request_keys_on_137_are_stored_as_sent(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # a 1.37.1 kube-apiserver (dry-run) stores `gpu-memory`: its validation.go checks no request key
    assert _validate(tmp_path, capsys, "1.37", _claim({"gpu-memory": "1Gi", "a/b/c": "1"}))[0] == 0


def test_capacity_request_keys_on_138_are_qualified_names(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = _validate(tmp_path, capsys, "1.38", _claim({"gpu-memory": "1Gi", "a/b/c": "1", "memory": "-1"}))
    path = "ResourceClaim/c: spec.devices.requests[0].exactly.capacity.requests"
    assert rc == 1
    assert sorted(out.splitlines()) == sorted([
        f'{path}: Invalid value: "gpu-memory": must be a C identifier: letters, digits and \'_\', not starting with '
        "a digit (e.g. 'memory' or 'productName')",
        f'{path}: Invalid value: "a/b/c": must not contain more than one slash',
        f'{path}[memory]: Invalid value: "-1": must be greater than or equal to 0',
    ])
    # a firstAvailable subrequest has the same rules
    sub = {"name": "gpu", "firstAvailable": [{"name": "big", "deviceClassName": "gpu.example.com",
                                               "capacity": {"requests": {"a/b/c": "1"}}}]}
    rc, out, _ = _validate(tmp_path, capsys, "1.38", {**CLAIM, "spec": {"devices": {"requests": [sub]}}})
    assert rc == 1 and out.strip().endswith(
        'firstAvailable[0].capacity.requests: Invalid value: "a/b/c": must not contain more than one slash')


def test_at_most_32_capacity_requests_on_138(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    many = {f"c{i}": "1" for i in range(33)}
    assert _validate(tmp_path, capsys, "1.37", _claim(many))[0] == 0
    rc, out, _ = _validate(tmp_path, capsys, "1.38", _claim(many))
    assert rc == 1 and out == ("ResourceClaim/c: spec.devices.requests[0].exactly.capacity.requests: "
                               "Too many: 33: must have at most 32 items\n")
    assert _validate(tmp_path, capsys, "1.38", _claim(dict(list(many.items())[:32])))[0] == 0


def test_consumed_capacity_on_138(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    result = {"request": "gpu", "driver": "gpu.example.com", "pool": "p", "device": "gpu-0",
              "shareID": "5f0ce2a4-3c4b-4f5e-9d1a-2b3c4d5e6f70",
              "consumedCapacity": {"x/y/z": "1", "memory": "-2Gi"}}
    claim = _claim({"memory": "1Gi"})
    claim["status"] = {"allocation": {"devices": {"results": [result]}}}
    rc, out, _ = _validate(tmp_path, capsys, "1.37", claim)
    assert "consumedCapacity" not in out
    rc, out, _ = _validate(tmp_path, capsys, "1.38", claim)
    path = "ResourceClaim/c: status.allocation.devices.results[0].consumedCapacity"
    assert f'{path}: Invalid value: "x/y/z": must not contain more than one slash' in out.splitlines()
    assert f'{path}[memory]: Invalid value: "-2Gi": must be greater than or equal to 0' in out.splitlines()


def test_names_with_two_slashes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    device = {"attributes": {"a.example.com/b/c": {"int": 1}}, "capacity": {"x.example.com/y/z": {"value": "1"}}}
    assert _validate(tmp_path, capsys, "1.37", _slice(device))[0] == 0
    rc, out, _ = _validate(tmp_path, capsys, "1.38", _slice(device))
    assert rc == 1 and out.splitlines() == [
        'ResourceSlice/s: spec.devices[0].attributes: Invalid value: "a.example.com/b/c": '
        "must not contain more than one slash",
        'ResourceSlice/s: spec.devices[0].capacity: Invalid value: "x.example.com/y/z": '
        "must not contain more than one slash"]
    claim = {**CLAIM, "spec": {"devices": {
        "requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com", "count": 2}}],
        "constraints": [{"matchAttribute": "gpu.example.com/a/b"}]}}}
    assert _validate(tmp_path, capsys, "1.37", claim)[0] == 0
    rc, out, _ = _validate(tmp_path, capsys, "1.38", claim)
    assert rc == 1 and out == ('ResourceClaim/c: spec.devices.constraints[0].matchAttribute: Invalid value: '
                               '"gpu.example.com/a/b": must not contain more than one slash\n')


def test_version_numbers_of_at_most_18_digits(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    big = "1.0." + "9" * 19  # fits no int64
    device = {"attributes": {"driverVersion": {"version": big}, "ok": {"version": "1.0." + "9" * 18}}}
    assert _validate(tmp_path, capsys, "1.37", _slice(device))[0] == 0
    rc, out, _ = _validate(tmp_path, capsys, "1.38", _slice(device))
    assert rc == 1 and out == (f'ResourceSlice/s: spec.devices[0].attributes[driverVersion].version: Invalid value: '
                               f'"{big}": must be a string compatible with semver.org spec 2.0.0, with at most 18 '
                               "digits in numbers\n")
    # 1.38's words for any bad version, 1.37's without the digits
    bad = _slice({"attributes": {"v": {"version": "1.0"}}})
    assert _validate(tmp_path, capsys, "1.37", bad)[1].endswith('"1.0": must be a string compatible with '
                                                                 "semver.org spec 2.0.0\n")
    assert _validate(tmp_path, capsys, "1.38", bad)[1].endswith("with at most 18 digits in numbers\n")


def test_per_device_node_selector_has_exactly_one_term(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    term = {"matchExpressions": [{"key": "rack", "operator": "In", "values": ["a"]}]}
    two = _slice({"nodeSelector": {"nodeSelectorTerms": [term, term]}}, perDeviceNodeSelection=True, nodeName=None)
    del two["spec"]["nodeName"]
    assert _validate(tmp_path, capsys, "1.37", two)[0] == 0
    rc, out, _ = _validate(tmp_path, capsys, "1.38", two)
    assert rc == 1 and out.startswith("ResourceSlice/s: spec.devices[0].nodeSelector.nodeSelectorTerms: Invalid value: ")
    assert out.endswith(": must have exactly one node selector term\n")
    one = _slice({"nodeSelector": {"nodeSelectorTerms": [term]}}, perDeviceNodeSelection=True)
    del one["spec"]["nodeName"]
    assert _validate(tmp_path, capsys, "1.38", one)[0] == 0


def test_empty_device_taint_rule_selector_warns_on_138(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rule = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule", "metadata": {"name": "r"},
            "spec": {"deviceSelector": {}, "taint": {"key": "example.com/broken", "effect": "NoSchedule"}}}
    rc, _, err = _validate(tmp_path, capsys, "1.37", rule)
    assert rc == 0 and "Warning" not in err
    rc, _, err = _validate(tmp_path, capsys, "1.38", rule)
    assert rc == 0 and err.splitlines()[0] == ("Warning: DeviceTaintRule r: spec.deviceSelector: an empty selector "
                                               "matches every device from every driver in the cluster")
    rule["spec"]["deviceSelector"] = {"driver": "gpu.example.com"}
    assert "Warning" not in _validate(tmp_path, capsys, "1.38", rule)[2]


def test_removed_and_locked_gates_on_138(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    claim = _claim({"memory": "1Gi"})
    rc, out, err = _validate(tmp_path, capsys, "1.38", claim, gates="DynamicResourceAllocation=true")
    assert rc == 2 and "feature gate 'DynamicResourceAllocation' does not exist in Kubernetes 1.38" in err
    assert '"unrecognized feature gate: DynamicResourceAllocation"' in err
    assert _validate(tmp_path, capsys, "1.37", claim, gates="DynamicResourceAllocation=true")[0] == 0
    # GA and locked in 1.38, beta in 1.37: kube-scheduler 1.38 refuses it set off
    rc, _, err = _validate(tmp_path, capsys, "1.38", claim, gates="DRAPartitionableDevices=false")
    assert "cannot set feature gate DRAPartitionableDevices to false, feature is locked to true" in err
    assert "locked" not in _validate(tmp_path, capsys, "1.37", claim, gates="DRAPartitionableDevices=false")[2]


def test_a_cluster_profile_with_a_locked_gate_is_refused(tmp_path: Path) -> None:
    from labkit.errors import LabkitError
    from labkit.model.profiles import load_profile

    profile = tmp_path / "p.yaml"
    doc = {"name": "p", "kubernetesVersion": "1.38", "nodes": [{"name": "n1", "nodeProfile": "dgx-a100"}],
           "featureGates": {"DRADeviceTaints": False}}
    profile.write_text(json.dumps(doc))
    with pytest.raises(LabkitError, match="cannot set feature gate DRADeviceTaints to false, feature is locked to true"):
        load_profile(profile)
    doc["kubernetesVersion"] = "1.37"  # GA, not locked in 1.37
    profile.write_text(json.dumps(doc))
    assert load_profile(profile).kubernetes_version == "1.37"
