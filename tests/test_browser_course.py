"""Real browser: open course notebook 04 (the one with the ClaimBuilder) in JupyterLab, Run All, and
require that every cell ran without an error; save a screenshot under test-artifacts/browser/."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest

from tests.browser_lab import ARTIFACTS, jupyter_lab, launch, missing_requirements, wait_kernel_idle

NOTEBOOK = "04_claiming_by_attributes.ipynb"
SOURCE = Path(__file__).resolve().parents[1] / "notebooks" / NOTEBOOK
pytestmark = [pytest.mark.browser, pytest.mark.skipif(missing_requirements() is not None,
                                                      reason=missing_requirements() or "")]


def _saved(path: Path, code_cells: int) -> dict:
    """The notebook as JupyterLab saved it, once every code cell carries an execution count."""
    nb: dict = {}
    for _ in range(120):  # a hang guard, not a performance limit
        nb = json.loads(path.read_text(encoding="utf-8"))
        if sum(1 for c in nb["cells"] if c["cell_type"] == "code" and c.get("execution_count")) == code_cells:
            return nb
        time.sleep(0.5)
    return nb


def test_course_notebook_runs_all_in_a_real_browser(tmp_path: Path):
    from playwright.sync_api import expect, sync_playwright

    shutil.copy(SOURCE, tmp_path / NOTEBOOK)
    code_cells = sum(1 for c in json.loads(SOURCE.read_text())["cells"] if c["cell_type"] == "code")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shot = ARTIFACTS / "course_04_run_all.png"
    with jupyter_lab(tmp_path) as base, sync_playwright() as p:
        browser = launch(p)
        page = browser.new_page(viewport={"width": 1400, "height": 1600})
        page.goto(f"{base}/lab/workspaces/course-04/tree/{NOTEBOOK}?reset")
        page.wait_for_selector(".jp-NotebookPanel .jp-CodeCell", timeout=60_000)
        wait_kernel_idle(base, NOTEBOOK)

        page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
        page.locator(".lm-Menu-itemLabel", has_text="Run All Cells").first.click()
        last_prompt = page.locator(".jp-NotebookPanel .jp-CodeCell .jp-InputPrompt").last
        expect(last_prompt).to_have_text(f"[{code_cells}]:", timeout=300_000)

        # the ClaimBuilder rendered as a live widget, not as a text repr
        builder = page.locator(".labkit-claim-builder")
        expect(builder).to_be_visible(timeout=60_000)
        expect(builder.locator(".labkit-preview")).to_contain_text("devices", timeout=60_000)
        builder.scroll_into_view_if_needed()
        page.screenshot(path=str(shot), full_page=True)

        page.keyboard.press("Control+s")
        nb = _saved(tmp_path / NOTEBOOK, code_cells)
        browser.close()

    errors = [(i, o.get("ename"), o.get("evalue")) for i, c in enumerate(nb["cells"]) if c["cell_type"] == "code"
              for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert errors == []
    counts = [c.get("execution_count") for c in nb["cells"] if c["cell_type"] == "code"]
    assert counts == list(range(1, code_cells + 1))
    # the exercise cell printed its verdict (❌ on the placeholder) instead of raising
    assert any("❌" in "".join(o.get("text", "")) for c in nb["cells"] for o in c.get("outputs", []))
    assert shot.stat().st_size > 20_000
