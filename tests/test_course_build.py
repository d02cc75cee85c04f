"""The committed notebooks are exactly what notebooks/build.py writes, carry no outputs, and follow
the course conventions (title + goals, BACKEND cell first, an exercise, a recap)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"


def _build():
    spec = importlib.util.spec_from_file_location("course_build", NOTEBOOKS / "build.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


BUILD = _build()
NAMES = list(BUILD.NOTEBOOKS)
#: notebooks written as plain .ipynb outside build.py, on purpose (to be folded into the course format)
STANDALONE = {"13_platform_engineer"}


def test_thirteen_notebooks_numbered_in_order():
    assert [n[:2] for n in NAMES] == [f"{i:02d}" for i in range(13)]
    assert sorted(p.stem for p in NOTEBOOKS.glob("[0-9][0-9]_*.ipynb") if p.stem not in STANDALONE) == NAMES


@pytest.mark.parametrize("name", sorted(STANDALONE))
def test_standalone_notebooks_are_stored_without_outputs(name: str):
    nb = json.loads((NOTEBOOKS / f"{name}.ipynb").read_text(encoding="utf-8"))
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert code and all(c["outputs"] == [] and c["execution_count"] is None for c in code)
    assert 'BACKEND = os.environ.get("LABKIT_BACKEND", "sim")' in "".join(code[0]["source"])


@pytest.mark.parametrize("name", NAMES)
def test_committed_notebook_matches_build(name: str):
    committed = (NOTEBOOKS / f"{name}.ipynb").read_text(encoding="utf-8")
    assert committed == BUILD.render(name), f"run `python notebooks/build.py {name[:2]}`"


@pytest.mark.parametrize("name", NAMES)
def test_no_outputs_stored(name: str):
    nb = json.loads((NOTEBOOKS / f"{name}.ipynb").read_text(encoding="utf-8"))
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            assert cell["outputs"] == [] and cell["execution_count"] is None


@pytest.mark.parametrize("name", NAMES)
def test_course_conventions(name: str):
    nb = json.loads((NOTEBOOKS / f"{name}.ipynb").read_text(encoding="utf-8"))
    cells = [("".join(c["source"]), c["cell_type"]) for c in nb["cells"]]
    first_md = cells[0][0]
    assert first_md.startswith(f"# {name[:2]} ·") and "Learning goals" in first_md
    first_code = next(src for src, kind in cells if kind == "code")
    assert 'BACKEND = os.environ.get("LABKIT_BACKEND", "sim")' in first_code
    assert "connect(BACKEND, " in first_code
    assert any("## Exercise" in src for src, kind in cells if kind == "markdown")
    assert any("checks.check_" in src for src, kind in cells if kind == "code")
    assert any("## Recap" in src for src, kind in cells if kind == "markdown")
    assert cells[-1][0].startswith("cluster.down()")


def test_checked_cells_exist_and_are_marked_first():
    marked = 0
    for name in NAMES:
        nb = json.loads((NOTEBOOKS / f"{name}.ipynb").read_text(encoding="utf-8"))
        for cell in nb["cells"]:
            src = "".join(cell["source"])
            if "NBVAL_CHECK_OUTPUT" in src:
                assert src.startswith("# NBVAL_CHECK_OUTPUT\n")
                assert "checks." not in src  # exercise cells print ❌ until solved: never compared
                marked += 1
    assert marked >= 30


def test_readme_lists_every_notebook():
    readme = (NOTEBOOKS / "README.md").read_text(encoding="utf-8")
    missing = [n for n in NAMES if f"`{n}`" not in readme]
    assert missing == []
    assert "Half day" in readme and "Full day" in readme
