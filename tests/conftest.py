"""Fixtures more than one test file needs: the Go oracles (built here when Go is installed, so the
tests that compare with Kubernetes run wherever they can) and shared sample inputs."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.differential import harness

DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="session")
def oracle() -> Path:
    """The 1.37 allocator oracle (tools/oracle): built or found; skipped only without Go and binary."""
    path, reason = harness.ensure_oracle()
    if path is None:
        pytest.skip(reason)
    return path


@pytest.fixture(scope="session")
def cel_oracle() -> Callable[[list[dict[str, Any]]], list[dict[str, Any]]]:
    """Kubernetes' own DRA CEL environment behind a CLI (tools/cel-oracle), built or found: a
    function from request rows ({"expr", "driver", ...}) to its answers, one per row, in order."""
    path, reason = harness.ensure_cel_oracle()
    if path is None:
        pytest.skip(reason)

    def ask(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        proc = subprocess.run([str(path)], input="".join(json.dumps(r) + "\n" for r in rows),
                              capture_output=True, text=True, check=True)
        answers = [json.loads(line) for line in proc.stdout.splitlines()]
        assert len(answers) == len(rows), f"{path}: {len(rows)} rows in, {len(answers)} answers out"
        return answers

    return ask


@pytest.fixture
def cel_slices() -> str:
    """Two ResourceSlices for `labkit cel`: two GPUs on node-1 (one A100 with a driverVersion, one T4)
    and a NIC pool on all nodes."""
    return str(DATA / "cel" / "slices.yaml")


@pytest.fixture(scope="session")
def oracle_of() -> Callable[[str], Path]:
    """The allocator oracle of a Kubernetes release ("1.36" -> oracle-0.36), built or found."""

    def get(version: str) -> Path:
        path, reason = harness.ensure_oracle("0." + version.split(".")[1])
        if path is None:
            pytest.skip(reason)
        return path

    return get
