"""Hand-written allocator scenarios (tests/data/allocator/<case>/): labkit must print what the Go
allocator printed (expected.json was written by the oracle, tools/oracle)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from labkit.allocator.cli import EXIT, allocate_files
from tests.paths import TEST_DATA

DATA = TEST_DATA / "allocator"
CASES = sorted(p.name for p in DATA.iterdir() if (p / "expected.json").exists())


def run_case(name: str) -> dict:
    d = DATA / name
    case = yaml.safe_load((d / "case.yaml").read_text())
    gates = case.get("featureGates") or {}
    text = gates if isinstance(gates, str) else ",".join(f"{k}={str(v).lower()}" for k, v in sorted(gates.items()))
    return allocate_files([str(d / "input.yaml")], case["node"], feature_gates=text,
                          kubernetes_version=case.get("kubernetesVersion", "1.37"), validate_input=False,
                          warn=lambda line: None)


def comparable(doc: dict) -> dict:
    return {"status": doc["status"], "allocations": json.loads(json.dumps(doc["allocations"])),
            "error": doc["error"]}


def _oracle_rows(oracle: Path, directory: Path) -> dict[str, dict]:
    out = subprocess.run([str(oracle), "--batch", str(directory)], capture_output=True, text=True, check=True,
                         env={**os.environ, "LABKIT_DETERMINISTIC_SHAREID": "1"})
    return {json.loads(line)["name"]: json.loads(line) for line in out.stdout.splitlines()}


def test_there_are_many_cases():
    assert len(CASES) >= 60


@pytest.mark.parametrize("name", CASES)
def test_scenario_matches_go(name, monkeypatch):
    monkeypatch.setenv("LABKIT_DETERMINISTIC_SHAREID", "1")
    expected = json.loads((DATA / name / "expected.json").read_text())
    got = run_case(name)
    assert comparable(got) == comparable(expected)
    assert EXIT[got["status"]] == expected["exit"]


def test_scenarios_cover_every_status():
    statuses = {json.loads((DATA / n / "expected.json").read_text())["status"] for n in CASES}
    assert statuses == {"allocated", "unsatisfiable", "error"}


@pytest.mark.oracle
@pytest.mark.slow
def test_expected_files_are_what_the_oracle_prints_now(tmp_path: Path, oracle: Path, oracle_of):
    rows = _oracle_rows(oracle, DATA)
    older: dict[str, list[str]] = {}
    for name in CASES:
        version = str(yaml.safe_load((DATA / name / "case.yaml").read_text()).get("kubernetesVersion", "1.37"))
        if version != "1.37":
            rows.pop(name, None)
            older.setdefault(version, []).append(name)
    for version, names in sorted(older.items()):  # each with its own release's oracle
        batch = tmp_path / version
        for name in names:
            shutil.copytree(DATA / name, batch / name)
        rows.update(_oracle_rows(oracle_of(version), batch))
    assert set(CASES) <= set(rows), sorted(set(CASES) - set(rows))
    for name in CASES:
        expected = json.loads((DATA / name / "expected.json").read_text())
        assert comparable(rows[name]["output"]) == comparable(expected), name
