"""Kubernetes 1.38's allocator verdicts (issue 42 item 2), 1.37 unchanged.

The table: the cases that are new or changed in v0.38's shared allocator test table
(k8s.io/dynamic-resource-allocation@v0.38.0-beta.0:structured/internal/allocatortesting/allocator_testing.go,
``TestAllocator``), as data in tests/data/upstream/allocator-v0.38.json: each case's objects,
allocator flags, in-use state and the outcome the real allocator gave for it (``NewAllocator``
picking the variant, as kube-scheduler does). The rest: the changes listed in
shared/docs/k8s-138.md section 1.2, through `labkit allocate` as a user types it, each checked
against the Go oracle built from v0.38.0-beta.0 (tools/oracle) where Go is here.
"""

from __future__ import annotations

import json
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import pytest
import yaml

from labkit.allocator import AllocatedState, Allocator, Features, features_for
from labkit.allocator.quantities import qvalue
from tests.paths import TEST_DATA

TABLE = TEST_DATA / "upstream" / "allocator-v0.38.json"
CASES = json.loads(TABLE.read_text())["cases"]
SHARE = "00000000-0000-0000-0000-000000000000"


def _device_id(text: str) -> tuple[str, str, str]:
    driver, pool, device = text.split("/", 2)
    return driver, pool, device


def _state(case: dict, consumable: bool) -> AllocatedState:
    """The in-use state upstream's test hands the allocator (device IDs, not claims)."""
    state = AllocatedState(consumable_capacity=consumable)
    for text in case["allocated"]:
        state.devices[_device_id(text)] = 1
    for i, text in enumerate(case["shared"]):
        dev = _device_id(text)
        state.shared[(*dev, f"share-{i}")] = 1
        state.shared_devices[dev] = state.shared_devices.get(dev, 0) + 1
    for text, consumed in case["capacity"].items():
        per: dict[str, Fraction] = state.capacity.setdefault(_device_id(text), {})
        for name, quantity in consumed.items():
            per[name] = per.get(name, Fraction(0)) + qvalue(quantity)
    return state


def _normalized(results: list[dict] | None) -> list[str]:
    """Upstream compares with ConsistOf and a fixed shareID: order-free, shareIDs blanked."""
    out = []
    for result in results or []:
        result = json.loads(json.dumps(result))
        for r in (result.get("devices") or {}).get("results") or []:
            if r.get("shareID"):
                r["shareID"] = SHARE
        out.append(json.dumps(result, sort_keys=True))
    return sorted(out)


def run_case(case: dict, version: str = "1.38"):
    features = Features(version=version, **case["features"])
    alloc = Allocator(features, case["classes"], case["slices"], _state(case, features.ConsumableCapacity))
    return alloc.allocate(case["node"], case["claims"], timeout=None)


def test_the_table_holds_the_new_and_changed_cases():
    assert len(CASES) >= 40
    assert sum(c["origin"] == "new in v0.38" for c in CASES) == 40
    kinds = {c["expect"]["status"] for c in CASES}
    assert kinds == {"allocated", "unsatisfiable", "error"}


def _param(case: dict):
    gap = case.get("labkitGap")
    return pytest.param(case, id=case["name"], marks=[pytest.mark.xfail(reason=gap, strict=True)] if gap else [])


@pytest.mark.parametrize("case", [_param(c) for c in CASES])
def test_upstream_case(case: dict):
    got = run_case(case)
    want = case["expect"]
    assert got.status == want["status"], (got.error, want.get("error"))
    if want["status"] == "error" or want.get("error"):
        assert want["error"] in (got.error or ""), got.error
    if want["status"] == "allocated":
        assert _normalized(got.allocations) == _normalized(want["results"])


# -- the changes, as `labkit allocate` shows them ------------------------------------------------
GPU = "gpu.nvidia.com"
V1 = "resource.k8s.io/v1"
CLASS = {"apiVersion": V1, "kind": "DeviceClass", "metadata": {"name": "gpu"},
         "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{GPU}"'}}]}}


def _slice(devices: list[dict], pool: str = "node-1", **spec) -> dict:
    return {"apiVersion": V1, "kind": "ResourceSlice", "metadata": {"name": pool},
            "spec": {"driver": GPU, "nodeName": "node-1", "pool": {"name": pool, "generation": 1,
                                                                   "resourceSliceCount": 1},
                     "devices": devices, **spec}}


def _claim(name: str = "c1", count: int = 2, constraints: list | None = None, capacity: dict | None = None,
           mode: str = "ExactCount", allocation: dict | None = None) -> dict:
    exactly: dict = {"deviceClassName": "gpu", "allocationMode": mode}
    if mode == "ExactCount":
        exactly["count"] = count
    if capacity is not None:
        exactly["capacity"] = {"requests": capacity}
    claim: dict = {"apiVersion": V1, "kind": "ResourceClaim", "metadata": {"name": name, "namespace": "default"},
                   "spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}],
                                        "constraints": constraints or []}}}
    if allocation is not None:
        claim["status"] = {"allocation": allocation}
    return claim


def allocate(tmp_path: Path, objs: list[dict], version: str) -> tuple[int, dict]:
    path = tmp_path / f"in-{version}.yaml"
    path.write_text(yaml.safe_dump_all(objs))
    # --no-validate: the objects are what an older API server stored (1.38 validation refuses some)
    proc = subprocess.run([sys.executable, "-m", "labkit", "allocate", "-f", str(path), "--node", "node-1",
                           "--kubernetes-version", version, "--no-validate", "-o", "json"],
                          capture_output=True, text=True)
    return proc.returncode, json.loads(proc.stdout)


def go_allocate(oracle: Path, tmp_path: Path, objs: list[dict], version: str) -> tuple[int, dict]:
    path = tmp_path / f"go-{version}.yaml"
    path.write_text(yaml.safe_dump_all(objs))
    proc = subprocess.run([str(oracle), "-f", str(path), "--node", "node-1", "--kubernetes-version", version],
                          capture_output=True, text=True)
    return proc.returncode, json.loads(proc.stdout)


def _devices(out: dict) -> list[str]:
    return [r["device"] for a in out["allocations"].values() for r in a["devices"]["results"]]


def _versions(*texts: str) -> list[dict]:
    return [{"name": f"gpu-{i}", "attributes": {"driverVersion": {"version": t}}} for i, t in enumerate(texts)]


# Each: (objects, what 1.37 answers or None, what 1.38 answers): status and a part of the error or devices
CHANGES = {
    # structured/internal/stable/constraint.go: semver.Equals, build metadata ignored
    "match-version-build-metadata": (
        [CLASS, _slice(_versions("1.2.3+a", "1.2.3+b")),
         _claim(constraints=[{"matchAttribute": f"{GPU}/driverVersion"}])],
        ("unsatisfiable", None), ("allocated", ["gpu-0", "gpu-1"])),
    "distinct-version-build-metadata": (
        [CLASS, _slice(_versions("1.2.3+a", "1.2.3+b")),
         _claim(constraints=[{"distinctAttribute": f"{GPU}/driverVersion"}])],
        ("allocated", ["gpu-0", "gpu-1"]), ("unsatisfiable", None)),
    # a list value with DRAListTypeAttributes off: 1.37 takes the first device unchecked and
    # refuses the next; 1.38 stops with an error when the search reaches it
    "match-list-value-gate-off": (
        [CLASS, _slice([{"name": f"gpu-{i}", "attributes": {"zone": {"strings": ["a", "b"]}}} for i in range(2)]),
         _claim(constraints=[{"matchAttribute": f"{GPU}/zone"}])],
        ("unsatisfiable", None),
        ("error", f"claim default/c1, request gpu: device {GPU}/node-1/gpu-0: unsupported attribute value for "
                  f"{GPU}/zone")),
    # api/conversion.go attrValue: a version semver cannot parse (a number over uint64) has no
    # value; a class without selectors lets the constraint meet it
    "match-unparsable-version": (
        [{**CLASS, "spec": {}}, _slice(_versions("1.2.3", "99999999999999999999.0.0")),
         _claim(constraints=[{"matchAttribute": f"{GPU}/driverVersion"}])],
        ("unsatisfiable", None),
        ("error", f"device {GPU}/node-1/gpu-1: unsupported attribute value for {GPU}/driverVersion")),
    # consumable_capacity.go resolveCapacityRequests: the driver is the default domain
    "capacity-request-qualified-device-unqualified": (
        [CLASS, _slice([{"name": "gpu-0", "capacity": {"memory": {"value": "40Gi"}}}]),
         _claim(count=1, capacity={f"{GPU}/memory": "10Gi"})],
        ("unsatisfiable", None), ("allocated", ["gpu-0"])),
    "capacity-named-both-ways": (
        [CLASS, _slice([{"name": "gpu-0", "capacity": {"memory": {"value": "40Gi"}}}]),
         _claim(count=1, capacity={f"{GPU}/memory": "10Gi", "memory": "10Gi"})],
        ("unsatisfiable", None),
        ("error", 'capacity "memory" requested both as "')),  # Go: in map order
    # calculateConsumedCapacity: a negative request aborts whatever the policy (1.37 rounds it up)
    "capacity-negative-request-range-policy": (
        [CLASS, _slice([{"name": "gpu-0", "allowMultipleAllocations": True,
                         "capacity": {"memory": {"value": "40Gi", "requestPolicy": {
                             "default": "1Gi", "validRange": {"min": "1Gi", "step": "1Gi"}}}}}]),
         _claim(count=1, capacity={"memory": "-1Gi"})],
        ("allocated", ["gpu-0"]),
        ("error", 'checking capacity for device gpu.nvidia.com/node-1/gpu-0: capacity "gpu.nvidia.com/memory": '
                  'capacity value is negative: request -1Gi')),
    # allocator_stable.go requestData, allocationMode All (#141898): only this node fails
    "all-devices-incomplete-pool": (
        [CLASS, {**_slice([{"name": "gpu-0"}]), "spec": {**_slice([{"name": "gpu-0"}])["spec"], "pool": {
            "name": "node-1", "generation": 1, "resourceSliceCount": 2}}},
         _claim(mode="All")],
        ("error", "asks for all devices, but resource pool gpu.nvidia.com/node-1 is currently being updated"),
        ("unsatisfiable", "asks for all devices, but resource pool gpu.nvidia.com/node-1 is currently being updated")),
    # deviceCapacityInUse (#140798): a share with no consumed capacity, then the slice stopped
    # allowing multiple allocations: the device cannot be taken exclusively
    "live-share-blocks-exclusive": (
        [CLASS, _slice([{"name": "gpu-0"}]),
         _claim(name="old", count=1, allocation={"devices": {"results": [
             {"request": "gpu", "driver": GPU, "pool": "node-1", "device": "gpu-0",
              "shareID": "11111111-1111-1111-1111-111111111111"}]}}),
         _claim(count=1)],
        ("allocated", ["gpu-0"]), ("unsatisfiable", None)),
    # api/conversion.go Convert_v1_To_api_DeviceAttributes: `<driver>/model` wins over `model` in
    # CEL too (1.37 picks either at random: no 1.37 answer to hold)
    "qualified-attribute-wins-in-cel": (
        [{**CLASS, "spec": {"selectors": [{"cel": {"expression": f'device.attributes["{GPU}"].model == "b"'}}]}},
         _slice([{"name": "gpu-0", "attributes": {"model": {"string": "a"}, f"{GPU}/model": {"string": "b"}}},
                 {"name": "gpu-1", "attributes": {f"{GPU}/model": {"string": "a"}, "model": {"string": "b"}}}]),
         _claim(count=1)],
        None, ("allocated", ["gpu-0"])),
}


def _check(code: int, out: dict, want: tuple) -> None:
    status, detail = want
    assert out["status"] == status, out
    assert code == {"allocated": 0, "unsatisfiable": 3, "error": 2}[status]
    if isinstance(detail, str):
        assert detail in (out["error"] or ""), out["error"]
    elif detail is not None:
        assert _devices(out) == detail


@pytest.mark.parametrize("name", sorted(CHANGES))
def test_1_38_verdict_and_1_37_unchanged(name: str, tmp_path: Path):
    objs, v137, v138 = CHANGES[name]
    if v137 is not None:
        _check(*allocate(tmp_path, objs, "1.37"), v137)
    _check(*allocate(tmp_path, objs, "1.38"), v138)


@pytest.mark.oracle
@pytest.mark.parametrize("name", sorted(CHANGES))
def test_changes_are_what_go_answers(name: str, tmp_path: Path, oracle_of):
    objs, v137, v138 = CHANGES[name]
    if v137 is not None:
        _check(*go_allocate(oracle_of("1.37"), tmp_path, objs, "1.37"), v137)
    _check(*go_allocate(oracle_of("1.38"), tmp_path, objs, "1.38"), v138)


def test_1_38_default_gates_select_stable_which_is_1_37_incubating():
    f38, f37 = features_for("1.38"), features_for("1.37")
    assert (f38.variant, f38.profile.code) == ("stable", "incubating")
    assert (f37.variant, f37.profile.code) == ("incubating", "incubating")
