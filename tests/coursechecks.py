"""What the course's outputs must say after Run All with the solutions, read from an executed notebook.

One home for these checks: the real-browser test applies them to the notebook JupyterLab saved
(tests/course/test_browser_notebooks.py); where no browser can run, tests/course/test_course_build_run.py
executes the sources with nbclient and applies the same checks.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from tests.coursefacts import (
    quoted_message_problems,
    registry_quotes,
    symptom_quotes,
    topology_output_problems,
)


def _joined(value: Any) -> str:
    return "".join(value) if isinstance(value, list) else str(value or "")


def cell_text(cell: Mapping[str, Any]) -> str:
    """The text a learner reads under a cell: streams and the plain-text form of results."""
    out = []
    for o in cell.get("outputs", []):
        if o["output_type"] == "stream":
            out.append(_joined(o.get("text")))
        elif o["output_type"] in ("execute_result", "display_data"):
            out.append(_joined(o.get("data", {}).get("text/plain", "")))
    return "".join(out)


def _tags(cell: Mapping[str, Any]) -> list[str]:
    return cell.get("metadata", {}).get("tags", [])


def _first_line(cell: Mapping[str, Any]) -> str:
    lines = _joined(cell.get("source")).strip().splitlines()
    return lines[0] if lines else ""


def output_problems(nb: Mapping[str, Any]) -> list[str]:
    """No error, no `Out: True`, every exercise says ❌ until solved and its solution says ✅ (one right
    answer), no 15-digit floats, no CEL string wrapped mid-quote."""
    problems: list[str] = []
    for cell in (c for c in nb["cells"] if c["cell_type"] == "code"):
        where = f"cell {_first_line(cell)!r}"
        for o in cell.get("outputs", []):
            if o["output_type"] == "error":
                problems.append(f"{where}: {o.get('ename')}: {o.get('evalue')}")
            elif o["output_type"] in ("execute_result", "display_data") and _joined(o.get("data", {}).get("text/plain")) in ("True", "False"):
                problems.append(f"{where} shows Out: {_joined(o['data']['text/plain'])}")
        text = cell_text(cell)
        if "exercise" in _tags(cell) and not text.startswith("❌"):
            problems.append(f"exercise {where} does not start with ❌ before it is solved: {text[:200]!r}")
        if "solution" in _tags(cell) and (not text.startswith("✅") or "tied with" in text):
            problems.append(f"solution {where} is not one ✅ answer: {text[:200]!r}")
        if re.search(r"\d\.\d{7,}", text):
            problems.append(f"{where}: an unrounded number in {text[:200]!r}")
        for line in text.splitlines():
            if re.match(r"\s*(- )?(cel: \{)?expression: ", line) and (line.count('"') % 2 or line.count("'") % 2):
                problems.append(f"{where}: YAML wraps a CEL string: {line}")
    return problems


def all_outputs(nb: Mapping[str, Any]) -> str:
    return "\n".join(cell_text(c) for c in nb["cells"] if c["cell_type"] == "code")


def _markdown(nb: Mapping[str, Any]) -> list[str]:
    return [_joined(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown"]


def text_matches_output_problems(name: str, nb: Mapping[str, Any]) -> list[str]:
    """Sentences that quote an output say what the output says (notebooks 06, 07 and 09), and every
    Kubernetes message a lesson quotes is upstream's and printed by the kit (tests/coursefacts.py)."""
    shown = all_outputs(nb)
    problems: list[str] = quoted_message_problems(registry_quotes(_markdown(nb)), shown)
    if name.startswith("07_"):
        problems += topology_output_problems("dgx-h100", shown)
    if name.startswith("06_"):
        listing = next((ln for ln in shown.splitlines() if "devices for gpu-0:" in ln), "")
        text = "\n".join(_markdown(nb))
        if not listing or "'whole'" in listing or "on these Ampere A100s it is not" not in text:
            problems.append(f"06: the dynamic node's listing and the text disagree: {listing!r}")
        if "plus the whole GPU" in text:
            problems.append("06: the text still says 'plus the whole GPU'")
    if name.startswith("09_"):
        table = next((m for m in _markdown(nb) if "| symptom |" in m), "")
        rows = [ln for ln in table.splitlines() if ln.startswith("| ") and "symptom" not in ln]
        if len(rows) != 6:
            problems.append(f"09: the symptom table has {len(rows)} rows, not 6")
        problems += [f"09: {p}" for p in quoted_message_problems(symptom_quotes(_markdown(nb)), shown)]
        pending = [ln for ln in shown.splitlines() if ln.endswith("Pending  -")]
        if len(pending) != 4:  # "four are valid objects ... stay Pending"
            problems.append(f"09: {len(pending)} pods shown Pending, the text says four")
        if "compilation failed" not in shown:  # "the fifth is refused when it is created"
            problems.append("09: no output shows the fifth claim refused ('compilation failed')")
    return problems
