"""Kubernetes 1.38 converts a device's attribute values for CEL lazily (issue 42 item 2).

k8s.io/dynamic-resource-allocation@v0.38.0-beta.0: api/conversion.go ``attrValue`` leaves an
attribute without a value when CEL cannot represent it (a version semver cannot parse, an empty
list, no value field set), and cel/compile.go ``nameToAttributes.Find`` reports
"attribute <id>: value is invalid or its type is not supported by this version" only when an
expression reads that value: every other selector on the device evaluates normally. 1.37
(v0.37.x cel/compile.go ``getAttributeValue``, called for every attribute before any selector
runs) fails every selector on such a device.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from labkit.allocator import Allocator, features_for
from labkit.cel.facade import ENGINES, NATIVE_ENGINE

GPU = "gpu.nvidia.com"
V1 = "resource.k8s.io/v1"
M = f'device.attributes["{GPU}"]'
BAD_VERSION = "99999999999999999999.0.0"  # over uint64: older API servers stored it
INVALID = "attribute driverVersion: value is invalid or its type is not supported by this version"


def _objects(expr: str, attributes: dict) -> list[dict]:
    return [
        {"apiVersion": V1, "kind": "DeviceClass", "metadata": {"name": "gpu"},
         "spec": {"selectors": [{"cel": {"expression": expr}}]}},
        {"apiVersion": V1, "kind": "ResourceSlice", "metadata": {"name": "node-1-gpus"},
         "spec": {"driver": GPU, "nodeName": "node-1",
                  "pool": {"name": "node-1", "generation": 1, "resourceSliceCount": 1},
                  "devices": [{"name": "gpu-0", "attributes": attributes}]}},
        {"apiVersion": V1, "kind": "ResourceClaim", "metadata": {"name": "c1", "namespace": "default"},
         "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
             "deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 1}}]}}},
    ]


def _allocate_cli(tmp_path: Path, objs: list[dict], version: str) -> dict:
    path = tmp_path / f"in-{version}.yaml"
    path.write_text(yaml.safe_dump_all(objs))
    # --no-validate: these values are what an older API server stored (validation refuses them now)
    proc = subprocess.run([sys.executable, "-m", "labkit", "allocate", "-f", str(path), "--node", "node-1",
                           "--kubernetes-version", version, "--no-validate", "-o", "json"],
                          capture_output=True, text=True)
    out = json.loads(proc.stdout)
    assert proc.returncode == {"allocated": 0, "unsatisfiable": 3, "error": 2}[out["status"]], proc.stderr
    return out


def test_a_selector_not_reading_the_bad_value_matches_on_1_38_and_fails_on_1_37(tmp_path: Path):
    attrs = {"model": {"string": "a100"}, "driverVersion": {"version": BAD_VERSION}}
    objs = _objects(f'{M}.model == "a100"', attrs)
    new = _allocate_cli(tmp_path, objs, "1.38")
    assert new["status"] == "allocated", new
    assert [r["device"] for r in new["allocations"]["default/c1"]["devices"]["results"]] == ["gpu-0"]
    old = _allocate_cli(tmp_path, objs, "1.37")
    assert old["status"] == "error"
    assert "CEL runtime error: attribute driverVersion: parse semantic version" in old["error"]


def test_a_selector_reading_the_bad_value_fails_on_1_38_with_upstreams_text(tmp_path: Path):
    objs = _objects(f"{M}.driverVersion.major >= 1", {"model": {"string": "a100"},
                                                      "driverVersion": {"version": BAD_VERSION}})
    out = _allocate_cli(tmp_path, objs, "1.38")
    assert out["status"] == "error"
    assert out["error"] == f"class gpu: selector #0 on device {GPU}/node-1/gpu-0: CEL runtime error: {INVALID}"


# The device: one good attribute (model) and driverVersion, which CEL cannot represent on 1.38
# in each of these ways.
BAD_VALUES = {
    "unparsable-version": {"version": BAD_VERSION},
    "unparsable-version-in-list": {"versions": ["1.0.0", BAD_VERSION]},
    "empty-list": {"strings": []},
    "no-value-field": {},
}
# expression -> 1.38's answer: True / False / the runtime error (cel-go: has() reports Find's
# error, `in` calls Contains, which finds nothing; size and iteration see the key)
CASES = {
    'device.driver == "gpu.nvidia.com"': True,
    f'{M}.model == "a100"': True,
    f"{M}.driverVersion == 1": INVALID,
    f'{M}["driverVersion"] == 1': INVALID,
    f"false && {M}.driverVersion == 1": False,
    f"{M}.driverVersion == 1 || true": True,
    f"has({M}.driverVersion)": INVALID,
    f"has({M}.model)": True,
    f'"driverVersion" in {M}': False,
    f"size({M}) == 2": True,
    f'{M}.exists(k, k == "driverVersion")': True,
    f'{M}.exists(k, {M}[k] == "a100")': True,
    f"{M}.all(k, {M}[k] != 1)": INVALID,
    f"{M} == {{}}": False,
    f'{{"model": "a100", "driverVersion": "1"}} == {M}': False,
    f"{M}.?driverVersion.orValue(1) == 1": INVALID,
    f'cel.bind(v, {M}.driverVersion, {M}.model == "a100")': True,
}


def _verdict(version: str, engine: str, expr: str, bad: dict) -> object:
    objs = _objects(expr, {"model": {"string": "a100"}, "driverVersion": bad})
    alloc = Allocator(features_for(version), [objs[0]], [objs[1]], None, cel_engine=engine)
    out = alloc.allocate({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-1"}}, [objs[2]],
                         timeout=None)
    if out.status == "error":
        return out.error.split("CEL runtime error: ", 1)[-1]
    return out.status == "allocated"


@pytest.mark.parametrize("engine", [e for e in ENGINES if NATIVE_ENGINE or e == "cel-python"])
@pytest.mark.parametrize("bad", sorted(BAD_VALUES))
def test_only_reading_the_value_fails_on_1_38(engine: str, bad: str):
    got = {expr: _verdict("1.38", engine, expr, BAD_VALUES[bad]) for expr in CASES}
    assert got == CASES


@pytest.mark.parametrize("engine", [e for e in ENGINES if NATIVE_ENGINE or e == "cel-python"])
def test_1_37_fails_every_selector_on_the_device(engine: str):
    for expr in ('device.driver == "gpu.nvidia.com"', f'{M}.model == "a100"', f'"driverVersion" in {M}'):
        assert _verdict("1.37", engine, expr, {}) == "attribute driverVersion: unsupported attribute value"


@pytest.mark.oracle
@pytest.mark.parametrize("bad", sorted(BAD_VALUES))
def test_the_table_is_what_go_answers(bad: str, tmp_path: Path, oracle_of):
    go = oracle_of("1.38")
    got = {}
    for i, expr in enumerate(CASES):
        path = tmp_path / f"{i}.yaml"
        path.write_text(yaml.safe_dump_all(_objects(expr, {"model": {"string": "a100"},
                                                           "driverVersion": BAD_VALUES[bad]})))
        proc = subprocess.run([str(go), "-f", str(path), "--node", "node-1", "--kubernetes-version", "1.38"],
                              capture_output=True, text=True)
        out = json.loads(proc.stdout)
        got[expr] = (out["error"].split("CEL runtime error: ", 1)[-1] if out["status"] == "error"
                     else out["status"] == "allocated")
    assert got == CASES
