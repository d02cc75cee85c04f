"""Run every course source, solutions included, the way a learner's Run All does (cwd notebooks/,
sim backend) and read the outputs: no error, no `Out: True`, every exercise says ❌ until solved
and its solution says ✅, no 15-digit floats, no CEL string wrapped mid-quote, and the sentences
that quote an output say what the output says."""

from __future__ import annotations

import re
from pathlib import Path

import jupytext
import pytest
from nbclient import NotebookClient

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
SOURCES = sorted(NOTEBOOKS.glob("[0-9][0-9]_*.md"))


def _text(cell) -> str:
    out = []
    for o in cell.get("outputs", []):
        if o.output_type == "stream":
            out.append(o.text)
        elif o.output_type in ("execute_result", "display_data"):
            out.append(o.get("data", {}).get("text/plain", ""))
    return "".join(out)


@pytest.fixture(scope="module")
def executed():
    """Run a source once per test session (kernels inherit LABKIT_BACKEND=sim)."""
    cache: dict[str, object] = {}
    env = pytest.MonkeyPatch()
    env.setenv("LABKIT_BACKEND", "sim")

    def run(path: Path):
        if path.stem not in cache:
            nb = jupytext.read(path)
            NotebookClient(nb, timeout=900, kernel_name="python3", allow_errors=True,
                           resources={"metadata": {"path": str(NOTEBOOKS)}}).execute()
            cache[path.stem] = nb
        return cache[path.stem]

    yield run
    env.undo()


def _tags(cell) -> list[str]:
    return cell.get("metadata", {}).get("tags", [])


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.stem[:2])
def test_run_all_with_solutions(path: Path, executed):
    nb = executed(path)
    code = [c for c in nb.cells if c.cell_type == "code"]
    errors = [(c.source.splitlines()[0], o.ename, o.evalue) for c in code for o in c.outputs if o.output_type == "error"]
    assert errors == []
    bools = [c.source for c in code for o in c.outputs if o.output_type == "execute_result"
             and o.data.get("text/plain") in ("True", "False")]
    assert bools == [], "these cells show Out: True/False"
    for cell in code:
        text = _text(cell)
        if "exercise" in _tags(cell):
            assert text.startswith("❌"), text
        if "solution" in _tags(cell):
            assert text.startswith("✅") and "tied with" not in text, text  # exactly one right answer
        assert not re.search(r"\d\.\d{7,}", text), f"unrounded number in:\n{text}"
        for line in text.splitlines():
            if re.match(r"\s*(- )?(cel: \{)?expression: ", line):
                assert line.count('"') % 2 == 0 and line.count("'") % 2 == 0, f"YAML wraps a CEL string: {line}"


def _outputs(nb) -> str:
    return "\n".join(_text(c) for c in nb.cells if c.cell_type == "code")


def test_06_the_dynamic_node_lists_what_the_text_says(executed):
    nb = executed(NOTEBOOKS / "06_mig.md")
    text = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    listing = next(line for line in _outputs(nb).splitlines() if "devices for gpu-0:" in line)
    assert "'whole'" not in listing and "on these Ampere A100s it is not" in text
    assert "plus the whole GPU" not in text


def test_09_the_symptom_table_quotes_the_messages_shown(executed):
    nb = executed(NOTEBOOKS / "09_why_is_my_pod_pending.md")
    shown = _outputs(nb)
    table = next(c.source for c in nb.cells if c.cell_type == "markdown" and "| symptom |" in c.source)
    rows = [line for line in table.splitlines() if line.startswith("| ") and "symptom" not in line]
    assert len(rows) == 6
    for row in rows:
        for quoted in re.findall(r"`([^`]+)`", row.split("|")[1]):
            for piece in (p.strip() for p in quoted.split("…")):
                assert not piece or piece in shown, f"the table quotes {piece!r}, which no output shows"
    pending = [line for line in shown.splitlines() if line.endswith("Pending  -")]
    assert len(pending) == 4  # "four are valid objects ... stay Pending"
    assert "compilation failed" in shown  # "the fifth is refused when it is created"
