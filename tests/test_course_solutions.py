"""Every exercise solution in notebooks/solutions/ passes its checker (✅), and each solution file
matches a notebook whose exercise cell calls the same checker."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from labkit.cluster import connect

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
SOLUTIONS = sorted((NOTEBOOKS / "solutions").glob("[0-9][0-9]_*.py"))


def load(path: Path):
    spec = importlib.util.spec_from_file_location(f"solution_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_one_solution_per_notebook():
    from tests.test_course_build import STANDALONE  # hand-written notebooks without a graded exercise

    notebooks = sorted(p.stem for p in NOTEBOOKS.glob("[0-9][0-9]_*.ipynb") if p.stem not in STANDALONE)
    assert [p.stem for p in SOLUTIONS] == notebooks


@pytest.mark.parametrize("path", SOLUTIONS, ids=lambda p: p.stem)
def test_solution_passes_its_checker(path: Path, capsys):
    sol = load(path)
    if sol.PROFILE:
        with connect("sim", sol.PROFILE, progress=False) as cluster:
            passed = sol.check(cluster)
    else:
        passed = sol.check(None)
    out = capsys.readouterr().out
    assert passed is True, out
    assert out.startswith("✅"), out


@pytest.mark.parametrize("path", SOLUTIONS, ids=lambda p: p.stem)
def test_notebook_exercise_uses_the_same_checker(path: Path):
    sol = load(path)
    src = path.read_text()
    checker = src.split("checks.", 1)[1].split("(", 1)[0]
    nb = json.loads((NOTEBOOKS / f"{sol.NOTEBOOK}.ipynb").read_text())
    cells = ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]
    assert any(f"checks.{checker}(" in c for c in cells), f"{sol.NOTEBOOK} has no cell calling {checker}"
