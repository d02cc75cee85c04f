"""Real browser, every course notebook, as a learner sees it: one JupyterLab, Debian's Chromium driven
by Playwright. For each notebook: Run All (with the exercise answered wrong, then with the solution, as a
learner does), then

- no cell has an error output;
- every drawing cell shows a picture (an <img> with pixels, on screen);
- every widget rendered as a widget (not as its text repr) and answers a click;
- the solution cell shows ✅, and still does when run again after Run All (the last cell leaves the
  cluster up; checks and widgets keep working);
- the outputs JupyterLab saved pass tests/coursechecks.py (every exercise ❌ until solved, one ✅
  answer, no `Out: True`, no unrounded number, text that quotes an output says what it shows).

The first picture of each notebook (else its first widget, else the exercise verdict) is saved under
test-artifacts/browser/NN_name.png.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from tests.browser_lab import (
    ARTIFACTS,
    HANG,
    course_lab,
    missing_requirements,
    new_page,
    once_more_if_network_changed,
    open_lab,
    shutdown_kernels,
    wait_kernel_idle,
)
from tests.coursechecks import output_problems, text_matches_output_problems
from tests.paths import REPO

NOTEBOOKS = REPO / "notebooks"
NAMES = sorted(p.stem for p in NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
#: a cell that draws with matplotlib (draw_node, the notebooks' own picture() helpers, results.plot())
DRAWS = re.compile(r"\bdraw_node\(|\bpicture\(|\.plot\(")
#: what a learner clicks in each widget, and what must change (css class of the widget root)
WIDGETS = ("labkit-claim-builder", "labkit-inventory", "labkit-cel-playground", "labkit-topology")

pytestmark = [pytest.mark.browser, pytest.mark.skipif(missing_requirements() is not None,
                                                      reason=missing_requirements() or "")]


def solved_copy(name: str) -> dict:
    """The learner notebook with each exercise cell followed by its solution cell(s) from the source
    (NN_name.md, cells tagged `solution` after the cell tagged `exercise`)."""
    import jupytext

    learner = json.loads((NOTEBOOKS / f"{name}.ipynb").read_text(encoding="utf-8"))
    source = jupytext.reads((NOTEBOOKS / f"{name}.md").read_text(encoding="utf-8"), fmt="md:myst")
    groups: list[list[dict]] = []
    previous_was_solution = False
    for cell in source.cells:
        if "solution" in cell.metadata.get("tags", []):
            if not previous_was_solution:
                groups.append([])
            groups[-1].append({"cell_type": "code", "metadata": {"tags": ["solution"]}, "source": cell.source,
                               "outputs": [], "execution_count": None})
            previous_was_solution = True
        else:
            previous_was_solution = False
    cells: list[dict] = []
    exercises = 0
    for cell in learner["cells"]:
        cells.append(cell)
        if "exercise" in cell.get("metadata", {}).get("tags", []):
            cells.extend(groups[exercises] if exercises < len(groups) else [])
            exercises += 1
    assert exercises == len(groups) >= 1, f"{name}: {exercises} exercise cells, {len(groups)} solutions"
    return {**learner, "cells": cells}


def _saved(path: Path, code_cells: int) -> dict:
    """The notebook as JupyterLab saved it, once every code cell carries an execution count."""
    nb: dict = {}
    deadline = time.monotonic() + HANG  # a hang guard, not a performance limit
    while time.monotonic() < deadline:
        try:
            nb = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError:  # read while JupyterLab was writing it (an empty or partial file)
            nb = {"cells": []}
        if sum(1 for c in nb["cells"] if c["cell_type"] == "code" and c.get("execution_count")) == code_cells:
            return nb
        time.sleep(0.5)  # the interval between two looks at the file, not a wait for it
    return nb


#: Run All is over in the page: no cell queued or running ([*]: JupyterLab marks every cell of Run All
#: at once, and each keeps its [*] until the kernel's reply), and at least one ran ([n])
RUN_ALL_DONE = """() => {
  const prompts = [...document.querySelectorAll('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-InputPrompt')]
    .map(p => p.innerText);
  return !prompts.some(p => p.includes('*')) && prompts.some(p => /\\[\\d+\\]/.test(p));
}"""


def _wait_run_all(page, base: str, path: str) -> None:
    """Until Run All is over (it also ends early, at the first cell that raises): the page shows no
    cell queued or running, and the server says the kernel is idle."""
    page.wait_for_function(RUN_ALL_DONE, polling=250)
    wait_kernel_idle(base, path)


@pytest.fixture(scope="module")
def lab(request):
    """The session's JupyterLab and Chromium (browser_lab.course_lab), one page for every notebook."""
    root, lab, browser = course_lab(request.config)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page, watch = new_page(browser, lab, viewport={"width": 1280, "height": 1000})
    yield root, lab, page, watch
    page.close()


def _text(cell) -> str:
    return cell.locator(".jp-OutputArea").inner_text()


def _click_widget(cls: str, widget, page) -> str | None:
    """Click in one widget like a learner; None when it answered, else what went wrong."""
    from playwright.sync_api import expect

    try:
        if cls == "labkit-claim-builder":
            widget.locator(".labkit-allocate").click()
            expect(widget.locator(".labkit-result")).to_contain_text("allocated on")
            picture = widget.locator("img").first
            expect(picture).to_be_visible()
            if not picture.evaluate("i => i.complete && i.naturalWidth > 100"):
                return "Allocate shows no placement picture"
        elif cls == "labkit-inventory":
            before = widget.locator(".labkit-inventory-summary").inner_text()
            widget.locator(".labkit-inventory-type select").select_option("nic")
            expect(widget.locator(".labkit-inventory-summary")).not_to_have_text(before)
            widget.locator(".labkit-inventory-refresh").click()
            expect(widget.locator(".labkit-inventory-summary")).to_contain_text("devices")
        elif cls == "labkit-cel-playground":
            widget.locator(".labkit-cel-only button", has_text="no match").click()
            expect(widget.locator("table tr").nth(1)).to_contain_text("no match")
        elif cls == "labkit-topology":
            box = widget.locator("g.labkit-node[data-device='gpu-0']").first
            box.click()
            expect(widget.locator(".labkit-topology-info")).to_contain_text("gpu-0")
            expect(widget.locator(".labkit-topology-info")).to_contain_text("held by")
        if widget.locator(".labkit-error").count():
            return widget.locator(".labkit-error").first.inner_text()
    except AssertionError as exc:
        return str(exc).splitlines()[0]
    return None


def _truncated(widget) -> list[str]:
    """Labels and buttons of a widget whose text is cut (an ellipsis, or past the widget's right edge)."""
    return widget.evaluate("""w => {
        const right = w.getBoundingClientRect().right;
        return [...w.querySelectorAll(
            '.widget-label, .widget-label-basic, .widget-toggle-button, .widget-checkbox label, button')]
        .filter(e => e.offsetParent !== null &&
                     (e.scrollWidth > e.clientWidth + 1 || e.getBoundingClientRect().right > right + 1))
        .map(e => e.textContent.trim()); }""")


def _fits(widget) -> str | None:
    """The TopologyView shows the whole node on open: every box inside the visible svg."""
    svg = widget.locator("svg.labkit-topology-svg")
    outside = svg.evaluate("""svg => {
        const box = svg.getBoundingClientRect();
        if (box.width < 200 || box.height < 100) return ['svg is ' + box.width + 'x' + box.height];
        return [...svg.querySelectorAll('g.labkit-node rect')].filter(r => {
            const b = r.getBoundingClientRect();
            return b.left < box.left - 1 || b.right > box.right + 1 || b.top < box.top - 1 || b.bottom > box.bottom + 1;
        }).map(r => r.parentNode.getAttribute('data-id'));
    }""")
    return f"outside the view: {outside}" if outside else None


@pytest.mark.parametrize("name", NAMES)
def test_notebook_as_a_learner_sees_it(lab, name: str):
    root, server, page, watch = lab

    def run() -> None:
        watch.dialogs.clear()
        watch.failed.clear()
        with watch.explain():
            _as_a_learner(root, server.base, page, watch, name)

    once_more_if_network_changed(run, evidence=lambda: "\n".join(watch.failed))


def _as_a_learner(root: Path, base: str, page, watch, name: str) -> None:
    from playwright.sync_api import expect

    nb = solved_copy(name)
    path = f"notebooks/{name}.ipynb"
    (root / path).write_text(json.dumps(nb), encoding="utf-8")
    cells = nb["cells"]
    code = [i for i, c in enumerate(cells) if c["cell_type"] == "code"]
    sources = ["".join(c["source"]) if isinstance(c["source"], list) else c["source"] for c in cells]
    drawing = [i for i in code if DRAWS.search(sources[i])]
    solution = [i for i in code if "solution" in cells[i].get("metadata", {}).get("tags", [])]

    open_lab(page, watch, f"{base}/lab/workspaces/course/tree/{path}?reset", ".jp-NotebookPanel .jp-CodeCell")
    wait_kernel_idle(base, path)
    page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
    page.locator(".lm-Menu-itemLabel", has_text="Run All Cells").first.click()
    dom_cells = page.locator(".jp-NotebookPanel:visible .jp-Notebook .jp-Cell")
    _wait_run_all(page, base, path)
    assert dom_cells.count() == len(cells)
    prompts = dom_cells.locator(".jp-InputPrompt").all_inner_texts()

    problems: list[str] = []
    if prompts[-1].strip() != f"[{len(code)}]:":
        problems.append(f"Run All stopped: the prompts read {' '.join(p.strip() for p in prompts)}")
    # every drawing cell shows a picture with pixels
    for i in drawing:
        img = dom_cells.nth(i).locator(".jp-OutputArea img")
        try:
            expect(img.first).to_be_visible()
            ok = img.first.evaluate("i => i.complete && i.naturalWidth > 100 && i.getBoundingClientRect().width > 100")
        except AssertionError:
            ok = False
        if not ok:
            problems.append(f"cell {i} draws but shows no picture: {sources[i].strip().splitlines()[-1]}")
    # every widget rendered, as a widget, and answers a click
    widget_cells = [i for i in code if re.search(
        r"^(ClaimBuilder|InventoryExplorer|CelPlayground|TopologyView)\(|^builder$", sources[i], re.M)]
    shown_widgets = []
    for i in widget_cells:
        cell = dom_cells.nth(i)
        found = [cls for cls in WIDGETS if cell.locator(f".{cls}").count()]
        if not found:
            problems.append(f"cell {i}: no widget rendered ({_text(cell)[:120]!r})")
            continue
        widget = cell.locator(f".{found[0]}").first
        shown_widgets.append(widget)
        if cut := _truncated(widget):
            problems.append(f"cell {i}: {found[0]} labels cut off: {cut}")
        if found[0] == "labkit-topology" and (why := _fits(widget)):
            problems.append(f"cell {i}: TopologyView {why}")
        if why := _click_widget(found[0], widget, page):
            problems.append(f"cell {i}: {found[0]} did not answer a click: {why}")
        widget.scroll_into_view_if_needed()
        widget.screenshot(path=str(ARTIFACTS / f"{name}.{found[0].removeprefix('labkit-')}.png"))
    # the solution shows ✅ after Run All, and again when run once more
    for i in solution:
        if "✅" not in _text(dom_cells.nth(i)):
            problems.append(f"solution cell {i} after Run All: {_text(dom_cells.nth(i))[:200]!r}")
    if solution and not problems:
        last = solution[-1]
        dom_cells.nth(last).locator(".jp-InputArea-prompt").click()
        page.keyboard.press("Control+Enter")
        expect(dom_cells.nth(last).locator(".jp-InputPrompt")).to_have_text(f"[{len(code) + 1}]:")
        if "✅" not in _text(dom_cells.nth(last)):
            problems.append(f"solution cell run again after Run All: {_text(dom_cells.nth(last))[:200]!r}")

    # what the learner sees first: a picture, else a widget, else the verdict
    shot = ARTIFACTS / f"{name}.png"
    if drawing:
        target = dom_cells.nth(drawing[0]).locator(".jp-OutputArea img").first
    elif shown_widgets:
        target = shown_widgets[0]
    else:
        target = dom_cells.nth(solution[-1] if solution else code[-1])
    # a tall picture (12's plot) is taken whole: the window grows to hold it, then shrinks back
    height = int(target.evaluate("e => e.getBoundingClientRect().height"))
    page.set_viewport_size({"width": 1280, "height": max(1000, height + 300)})
    target.scroll_into_view_if_needed()
    target.screenshot(path=str(shot))
    page.set_viewport_size({"width": 1280, "height": 1000})

    # errors, from the notebook as saved
    numbered = sum(1 for p in dom_cells.locator(".jp-InputPrompt").all_inner_texts() if re.search(r"\[\d+\]", p))
    page.keyboard.press("Control+s")
    saved = _saved(root / path, numbered)
    for i, c in enumerate(saved["cells"]):
        for o in c.get("outputs", []):
            if o.get("name") == "stderr" and "Traceback" in "".join(o.get("text", "")):
                problems.append(f"cell {i}: a traceback on stderr")
    problems += output_problems(saved) + text_matches_output_problems(name, saved)
    shutdown_kernels(base)
    assert shot.stat().st_size > 5_000
    assert problems == [], f"{name}:\n" + "\n".join(problems)


def test_every_drawing_and_widget_is_covered():
    """The regexes above find the course's pictures and widgets (a renamed helper must not hide one)."""
    found_draw = found_widgets = 0
    for name in NAMES:
        nb = json.loads((NOTEBOOKS / f"{name}.ipynb").read_text(encoding="utf-8"))
        for c in nb["cells"]:
            src = "".join(c["source"]) if isinstance(c["source"], list) else c["source"]
            if c["cell_type"] == "code":
                found_draw += bool(DRAWS.search(src))
                found_widgets += bool(re.search(r"^(ClaimBuilder|InventoryExplorer|CelPlayground|TopologyView)\(|"
                                                r"^builder$", src, re.M))
    assert found_draw >= 9 and found_widgets >= 4, (found_draw, found_widgets)
