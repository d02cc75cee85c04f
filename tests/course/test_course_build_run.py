"""Run every course source, solutions included, the way a learner's Run All does (cwd notebooks/,
sim backend) and read the outputs with tests/coursechecks.py.

`make test` reads the same outputs from the real browser's Run All (tests/course/test_browser_notebooks.py),
so this file runs only where the browser test cannot: it is the fallback, not a second run.
"""

from __future__ import annotations

from pathlib import Path

import jupytext
import pytest
from nbclient import NotebookClient

from tests.browser_lab import missing_requirements
from tests.coursechecks import output_problems, text_matches_output_problems
from tests.paths import REPO

NOTEBOOKS = REPO / "notebooks"
SOURCES = sorted(NOTEBOOKS.glob("[0-9][0-9]_*.md"))



@pytest.mark.skipif(missing_requirements() is None,
                    reason="the real-browser test applies these checks to JupyterLab's Run All")
@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.stem[:2])
def test_run_all_with_solutions(path: Path, monkeypatch):
    monkeypatch.setenv("LABKIT_BACKEND", "sim")
    nb = jupytext.read(path)
    NotebookClient(nb, timeout=900, kernel_name="python3", allow_errors=True,
                   resources={"metadata": {"path": str(NOTEBOOKS)}}).execute()
    assert output_problems(nb) + text_matches_output_problems(path.stem, nb) == []


def _cell(source: str, tags: list[str], *outputs: dict) -> dict:
    return {"cell_type": "code", "source": source, "metadata": {"tags": tags}, "outputs": list(outputs)}


def _stream(text: str) -> dict:
    return {"output_type": "stream", "name": "stdout", "text": [text]}


def test_the_checks_catch_each_kind_of_problem():
    """The checks both the browser and the fallback apply, on outputs saved as JupyterLab writes them."""
    good = {"cells": [_cell("ANSWER = ...\ncheck(ANSWER)", ["exercise"], _stream("❌ not yet")),
                      _cell("ANSWER = 4\ncheck(ANSWER)", ["solution"], _stream("✅ right"))]}
    assert output_problems(good) == []
    bad = {"cells": [
        _cell("check(...)", ["exercise"], _stream("✅ already")),
        _cell("ANSWER = 4", ["solution"], _stream("✅ right, tied with 5")),
        _cell("x == 1", [], {"output_type": "execute_result", "data": {"text/plain": ["True"]}}),
        _cell("boom()", [], {"output_type": "error", "ename": "NameError", "evalue": "boom"}),
        _cell("print(1/3)", [], _stream("0.3333333333")),
        _cell("show()", [], _stream('  - expression: device.driver == "gpu.\n')),
    ]}
    found = output_problems(bad)
    assert [p.split(":")[0].split(" ")[0] for p in found] == ["exercise", "solution", "cell", "cell", "cell", "cell"]
    assert any("Out: True" in p for p in found) and any("NameError" in p for p in found)
    assert text_matches_output_problems("09_x", {"cells": []}) != []
