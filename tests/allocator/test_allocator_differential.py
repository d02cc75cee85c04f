"""Random scenarios through labkit and the Go oracle (real kube-scheduler allocator code).

Marked ``oracle``/``slow``: needs ``bash tools/build-oracle.sh``. The generator is also used by
the fast invariant tests in test_allocator_properties.py.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
from pathlib import Path

import pytest
import yaml

from labkit.allocator import Allocator, features_for
from labkit.allocator.cli import allocate_files
from labkit.api import with_defaults
from tests.differential import harness
from tests.differential.generator import DUMPER
from tests.paths import TEST_DATA

pytestmark = pytest.mark.slow  # heavy: `make check` leaves it out, `make test` runs it

GPU = "gpu.nvidia.com"
V1 = "resource.k8s.io/v1"
GATE_CHOICES = ["DRAPartitionableDevices", "DRAConsumableCapacity", "DRADeviceTaints", "DRAPrioritizedList",
                "DRADeviceBindingConditions", "DRAListTypeAttributes"]


def allocator_for(objs: list[dict], version: str, gates: dict) -> tuple[Allocator, dict[str, list], list, list]:
    """An Allocator over `objs` (defaulted) as `labkit allocate` builds one: (allocator, objects by
    kind, pending claims, allocated claims)."""
    by: dict[str, list] = {}
    for o in objs:
        by.setdefault(o["kind"], []).append(with_defaults(o))
    claims = by.get("ResourceClaim", [])
    pending = [c for c in claims if not (c.get("status") or {}).get("allocation")]
    done = [c for c in claims if (c.get("status") or {}).get("allocation")]
    alloc = Allocator(features_for(version, gates), by.get("DeviceClass", []), by.get("ResourceSlice", []), done,
                      taint_rules=by.get("DeviceTaintRule", []))
    return alloc, by, pending, done


def random_scenario(rng: random.Random) -> tuple[list[dict], dict]:
    """A small random node inventory and claims mixing most allocator features."""
    objs: list[dict] = [
        {"apiVersion": V1, "kind": "DeviceClass", "metadata": {"name": "gpu"},
         "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{GPU}"'}}]}},
        {"apiVersion": V1, "kind": "DeviceClass", "metadata": {"name": "big"},
         "spec": {"selectors": [{"cel": {"expression": 'device.attributes["gpu.nvidia.com"].mem >= 40'}}],
                  "config": [{"opaque": {"driver": GPU, "parameters": {"big": True}}}]}},
    ]
    devices = []
    n = rng.randint(2, 8)
    mig = rng.random() < 0.4
    shared = rng.random() < 0.3
    for i in range(n):
        d: dict = {"name": f"gpu-{i}", "attributes": {"mem": {"int": rng.choice([20, 40, 80])},
                                                     "root": {"string": rng.choice(["p0", "p1"])},
                                                     "numa": {"int": rng.randint(0, 1)}}}
        if rng.random() < 0.2:
            d["taints"] = [{"key": "k", "value": "v", "effect": rng.choice(["NoSchedule", "NoExecute", "None"])}]
        if mig:
            d["consumesCounters"] = [{"counterSet": "cs", "counters": {"mem": {"value": f"{rng.choice([10, 10, 20, 40])}Gi"}}}]
        if shared and i == 0:
            d["allowMultipleAllocations"] = True
            d["capacity"] = {"bw": {"value": "100", "requestPolicy": {
                "default": "10", "validRange": {"min": "10", "step": "10"}}}}
        devices.append(d)
    slices = [{"apiVersion": V1, "kind": "ResourceSlice", "metadata": {"name": "s-dev"},
               "spec": {"driver": GPU, "nodeName": "node-1",
                        "pool": {"name": "node-1", "generation": 1, "resourceSliceCount": 2 if mig else 1},
                        "devices": devices}}]
    if mig:
        slices.append({"apiVersion": V1, "kind": "ResourceSlice", "metadata": {"name": "s-counters"},
                       "spec": {"driver": GPU, "nodeName": "node-1",
                                "pool": {"name": "node-1", "generation": 1, "resourceSliceCount": 2},
                                "sharedCounters": [{"name": "cs", "counters": {"mem": {"value": "80Gi"}}}]}})
    objs += slices
    in_use = rng.sample(range(n), k=rng.choice([0, 0, 1, 2]))
    if in_use:
        objs.append({"apiVersion": V1, "kind": "ResourceClaim", "metadata": {"name": "old", "namespace": "default"},
                     "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "gpu"}}]}},
                     "status": {"allocation": {"devices": {"results": [
                         {"request": "r", "driver": GPU, "pool": "node-1", "device": f"gpu-{i}"} for i in in_use]}}}})
    for c in range(rng.choice([1, 1, 2, 3])):
        reqs = []
        for r in range(rng.randint(1, 2)):
            cls = rng.choice(["gpu", "gpu", "big"])
            if rng.random() < 0.25:
                reqs.append({"name": f"r{r}", "firstAvailable": [
                    {"name": "a", "deviceClassName": cls, "count": rng.randint(2, 3)},
                    {"name": "b", "deviceClassName": "gpu"}]})
                continue
            ex: dict = {"deviceClassName": cls}
            if rng.random() < 0.15:
                ex["allocationMode"] = "All"
            else:
                ex["count"] = rng.randint(1, 2)
            if rng.random() < 0.3:
                ex["selectors"] = [{"cel": {"expression": f'device.attributes["gpu.nvidia.com"].numa == {rng.randint(0, 1)}'}}]
            if rng.random() < 0.3:
                ex["tolerations"] = [{"key": "k", "operator": "Exists"}]
            if shared and rng.random() < 0.3:
                ex["capacity"] = {"requests": {"bw": str(rng.choice([5, 15, 30, 60]))}}
            reqs.append({"name": f"r{r}", "exactly": ex})
        devs: dict = {"requests": reqs}
        if rng.random() < 0.3:
            devs["constraints"] = [{rng.choice(["matchAttribute", "distinctAttribute"]):
                                    rng.choice(["gpu.nvidia.com/root", "gpu.nvidia.com/numa"])}]
        if rng.random() < 0.2:
            devs["config"] = [{"requests": ["r0"], "opaque": {"driver": GPU, "parameters": {"c": c}}}]
        objs.append({"apiVersion": V1, "kind": "ResourceClaim", "metadata": {"name": f"c{c}", "namespace": "default"},
                     "spec": {"devices": devs}})
    gates = {g: rng.random() < 0.7 for g in rng.sample(GATE_CHOICES, k=rng.randint(0, 2))}
    return objs, {"node": "node-1", "featureGates": gates} if gates else {"node": "node-1"}


def write_cases(root: Path, seeds: range) -> None:
    for seed in seeds:
        objs, case = random_scenario(random.Random(seed))
        d = root / f"r{seed:05d}"
        d.mkdir(parents=True)
        (d / "input.yaml").write_text(yaml.dump_all(objs, Dumper=DUMPER, sort_keys=False))
        (d / "case.yaml").write_text(yaml.dump(case, Dumper=DUMPER))


def labkit_output(d: Path, version: str = "1.37") -> dict:
    case = yaml.safe_load((d / "case.yaml").read_text())
    gates = ",".join(f"{k}={str(v).lower()}" for k, v in sorted((case.get("featureGates") or {}).items()))
    doc = allocate_files([str(d / "input.yaml")], case["node"], feature_gates=gates, kubernetes_version=version,
                         validate_input=False, warn=lambda s: None)
    return {"status": doc["status"], "allocations": json.loads(json.dumps(doc["allocations"])), "error": doc["error"]}


@pytest.mark.oracle
@pytest.mark.slow
def test_random_scenarios_match_go(tmp_path, monkeypatch, oracle):
    monkeypatch.setenv("LABKIT_DETERMINISTIC_SHAREID", "1")
    n = int(os.environ.get("LABKIT_DIFF_CASES", "400"))
    write_cases(tmp_path, range(n))
    diffs = []
    for name, row in sorted(harness.run_oracle_batch(oracle, tmp_path).items()):
        go = {k: row["output"][k] for k in ("status", "allocations", "error")}
        mine = labkit_output(tmp_path / name)
        if mine != go:
            diffs.append((name, go, mine))
    assert not diffs, f"{len(diffs)} of {n} differ; first: {diffs[0]}"


# -- other releases: the same inputs through oracle-0.3x with kubernetesVersion 1.3x -----------
CORPUS = TEST_DATA / "allocator"
#: Go map order decides the pool order before 1.36 (random): multi-pool cases cannot be compared
RANDOM_ORDER = {"pool-order", "node-selector-slice"}
#: 1.34/1.35 fail on an invalid pool only when the search meets it before a good one (map order)
RANDOM_ORDER_BEFORE_136 = {"invalid-pool-other-ok"}


def _gate_problem(mine: dict, go: dict) -> bool:
    """Cases whose gates do not exist in that release (labkit's and the oracle's gate tables)."""
    return ("does not exist in Kubernetes" in (mine["error"] or "")
            or "not supported by this allocator release" in (go["error"] or ""))


def _run_release(oracle: Path, version: str, source_dirs: list[Path], tmp_path: Path) -> list:
    for d in source_dirs:
        case = yaml.safe_load((d / "case.yaml").read_text())
        case["kubernetesVersion"] = version
        t = tmp_path / d.name
        t.mkdir()
        (t / "input.yaml").write_text((d / "input.yaml").read_text())
        (t / "case.yaml").write_text(yaml.safe_dump(case))
    diffs = []
    for name, row in sorted(harness.run_oracle_batch(oracle, tmp_path).items()):
        go = {k: row["output"][k] for k in ("status", "allocations", "error")}
        mine = labkit_output(tmp_path / name, version)
        if mine != go and not _gate_problem(mine, go):
            diffs.append((name, go, mine))
    return diffs


@pytest.mark.oracle
@pytest.mark.slow
@pytest.mark.parametrize("version", ["1.38", "1.36", "1.35", "1.34"])
def test_corpus_matches_older_releases(version, tmp_path, monkeypatch, oracle_of):
    monkeypatch.setenv("LABKIT_DETERMINISTIC_SHAREID", "1")
    skip = RANDOM_ORDER | (RANDOM_ORDER_BEFORE_136 if version in ("1.34", "1.35") else set())
    dirs = [p for p in sorted(CORPUS.iterdir()) if (p / "case.yaml").exists() and p.name not in skip]
    diffs = _run_release(oracle_of(version), version, dirs, tmp_path)
    assert not diffs, diffs[:2]


@pytest.mark.oracle
@pytest.mark.slow
@pytest.mark.parametrize("version", ["1.38", "1.36", "1.35"])
def test_random_scenarios_match_older_releases(version, tmp_path, monkeypatch, oracle_of):
    monkeypatch.setenv("LABKIT_DETERMINISTIC_SHAREID", "1")
    src = tmp_path / "src"
    write_cases(src, range(int(os.environ.get("LABKIT_DIFF_CASES", "400")) // 2))
    out = tmp_path / "run"
    out.mkdir()
    diffs = _run_release(oracle_of(version), version, sorted(src.iterdir()), out)
    assert not diffs, diffs[:2]


# -- a list-valued attribute in matchAttribute with DRAListTypeAttributes off (issue 28) -----------
LIST_MATCH = [
    {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": GPU},
     "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{GPU}"'}}]}},
    {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "s"},
     "spec": {"driver": GPU, "nodeName": "node-1", "pool": {"name": "node-1", "generation": 1, "resourceSliceCount": 1},
              "devices": [{"name": f"gpu-{i}", "attributes": {"zone": {"strings": zones}}}
                          for i, zones in enumerate([["a", "b"], ["b", "c"], ["a", "b"]])]}},
]


@pytest.mark.oracle
@pytest.mark.parametrize("count", [1, 2])
def test_list_valued_match_attribute_with_the_gate_off_answers_as_go(tmp_path, count, oracle):
    """The stable allocator matches scalars only: a list value matches no second device, and
    answers without an error (labkit ended in `TypeError: unhashable type: 'list'`)."""
    claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "c", "namespace": "default"},
             "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": GPU, "count": count}}],
                                  "constraints": [{"matchAttribute": f"{GPU}/zone"}]}}}
    d = tmp_path / "list-match"
    d.mkdir()
    (d / "input.yaml").write_text(yaml.safe_dump_all([*LIST_MATCH, claim], sort_keys=False))
    (d / "case.yaml").write_text(yaml.safe_dump({"node": "node-1"}))
    out = subprocess.run([str(oracle), "--batch", str(tmp_path)], capture_output=True, text=True, check=True)
    go = json.loads(out.stdout.splitlines()[0])["output"]
    doc = allocate_files([str(d / "input.yaml")], "node-1", validate_input=False, warn=lambda s: None)
    assert (doc["status"], doc["error"]) == (go["status"], go["error"])
    assert json.loads(json.dumps(doc["allocations"])) == go["allocations"]
    assert doc["status"] == ("allocated" if count == 1 else "unsatisfiable")
