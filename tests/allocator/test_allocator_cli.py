"""``labkit allocate``: JSON shape, exit codes, warnings, output formats."""

from __future__ import annotations

import json

import pytest
import yaml

from labkit.cli import main
from tests.paths import TEST_DATA

DATA = TEST_DATA / "allocator"


def run(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["allocate", *args])
    out, err = capsys.readouterr()
    return code, out, err


def case_file(name: str) -> str:
    return str(DATA / name / "input.yaml")


def test_allocated_json_shape_and_exit_0(capsys):
    code, out, _ = run(capsys, "-f", case_file("exact-count"), "--node", "node-1")
    doc = json.loads(out)
    assert code == 0
    assert list(doc) == ["status", "allocations", "error", "explanation"]
    assert doc["status"] == "allocated" and doc["error"] is None and doc["explanation"] is None
    results = doc["allocations"]["default/c1"]["devices"]["results"]
    assert [r["device"] for r in results] == ["gpu-0", "gpu-1", "gpu-2"]


def test_unsatisfiable_exit_3_with_explanation(capsys):
    code, out, _ = run(capsys, "-f", case_file("in-use"), "--node", "node-1", "--explain")
    doc = json.loads(out)
    assert code == 3 and doc["status"] == "unsatisfiable" and doc["allocations"] == {}
    assert doc["explanation"]["failingClaim"] == "default/new"
    assert doc["explanation"]["requests"][0]["reasons"] == {"in-use": 2}


def test_allocator_error_exit_2(capsys):
    code, out, _ = run(capsys, "-f", case_file("missing-class"), "--node", "node-1", "--no-validate")
    doc = json.loads(out)
    assert code == 2 and doc["status"] == "error"
    assert doc["error"].startswith("claim default/c1, request gpu: could not retrieve device class nope")


def test_node_scoped_error_is_unsatisfiable(capsys):
    code, out, _ = run(capsys, "-f", case_file("invalid-pool-duplicate"), "--node", "node-1", "--no-validate")
    doc = json.loads(out)
    assert code == 3 and doc["error"] == "invalid resource pools were encountered"


def test_validation_problem_is_bad_input(capsys, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                                   "metadata": {"name": "c", "namespace": "default"},
                                   "spec": {"devices": {"requests": [{"name": "r", "exactly": {
                                       "deviceClassName": "gpu", "count": -1}}]}}}))
    code, out, err = run(capsys, "-f", str(bad), "--node", "n")
    doc = json.loads(out)
    assert code == 2 and doc["status"] == "error" and "count" in doc["error"]
    assert "\n" not in doc["error"] and err


def test_unreadable_file_is_bad_input(capsys, tmp_path):
    code, out, _ = run(capsys, "-f", str(tmp_path / "nope.yaml"), "--node", "n")
    assert code == 2 and json.loads(out)["status"] == "error"


def test_unknown_gate_is_bad_input(capsys):
    code, out, _ = run(capsys, "-f", case_file("exact-count"), "--node", "node-1", "--feature-gates", "DRANope=true")
    assert code == 2 and "DRANope" in json.loads(out)["error"]


def test_locked_gate_warns_but_runs(capsys):
    code, out, err = run(capsys, "-f", case_file("first-available"), "--node", "node-1", "--no-validate",
                         "--feature-gates", "DRAPrioritizedList=false")
    assert code == 2 and "DRAPrioritizedList feature is disabled" in json.loads(out)["error"]
    assert "warning:" in err and "DRAPrioritizedList" in err


def test_node_absent_from_files_has_no_labels(capsys):
    code, out, _ = run(capsys, "-f", case_file("node-selector-slice"), "--node", "node-9", "--no-validate")
    assert code == 3
    code, out, _ = run(capsys, "-f", case_file("node-selector-slice"), "--node", "node-1", "--no-validate")
    assert code == 0


@pytest.mark.parametrize("fmt", ["yaml", "table"])
def test_other_formats(capsys, fmt):
    code, out, _ = run(capsys, "-f", case_file("consumable-capacity"), "--node", "node-1", "-o", fmt)
    assert code == 0
    if fmt == "yaml":
        assert yaml.safe_load(out)["status"] == "allocated"
    else:
        assert out.splitlines()[0].split() == ["CLAIM", "REQUEST", "DEVICE", "NOTE"]
        assert "memory=2Gi" in out and out.rstrip().endswith("status: allocated")


def test_table_explain_prints_summary(capsys):
    code, out, _ = run(capsys, "-f", case_file("in-use"), "--node", "node-1", "-o", "table", "--explain")
    assert code == 3 and "all 2 are in use by default/old" in out


def test_deterministic_share_ids(capsys, monkeypatch):
    monkeypatch.setenv("LABKIT_DETERMINISTIC_SHAREID", "1")
    _, out, _ = run(capsys, "-f", case_file("consumable-capacity"), "--node", "node-1")
    ids = [r["shareID"] for a in json.loads(out)["allocations"].values() for r in a["devices"]["results"]]
    assert ids == ["00000000-0000-0000-0000-000000000001", "00000000-0000-0000-0000-000000000002"]
    monkeypatch.delenv("LABKIT_DETERMINISTIC_SHAREID")
    _, out, _ = run(capsys, "-f", case_file("consumable-capacity"), "--node", "node-1")
    ids = [r["shareID"] for a in json.loads(out)["allocations"].values() for r in a["devices"]["results"]]
    assert len(set(ids)) == 2 and all(len(i) == 36 and i[14] == "1" for i in ids)  # uuid v1


def test_validated_input_still_allocates(capsys):
    code, out, err = run(capsys, "-f", case_file("partitionable-two"), "--node", "node-1")
    assert code == 0, err
    devices = [r["device"] for r in json.loads(out)["allocations"]["default/c1"]["devices"]["results"]]
    assert devices == ["gpu-0-mig-3g", "gpu-0-mig-3g-b"]
