"""The course sources and their learner copies: each notebooks/NN_name.md (jupytext MyST) is the one
source of a notebook; NN_name.ipynb is built from it by `python notebooks/build.py`, without
outputs and without the solution cells. An edit made to the .ipynb (JupyterLab) is carried back
into the source by the same command; the tests say so when something is out of step."""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys
from pathlib import Path

import jupytext
import nbformat
import pytest

from tests.paths import REPO

pytestmark = pytest.mark.slow  # heavy: `make check` leaves it out, `make test` runs it

ROOT = REPO
NOTEBOOKS = ROOT / "notebooks"


def _build():
    spec = importlib.util.spec_from_file_location("course_build", NOTEBOOKS / "build.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


BUILD = _build()
NAMES = BUILD.names()


def _source(name: str) -> nbformat.NotebookNode:
    return jupytext.read(NOTEBOOKS / f"{name}.md")


def _learner(name: str) -> nbformat.NotebookNode:
    return nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)


def _tags(cell) -> list[str]:
    return cell.get("metadata", {}).get("tags", [])


def test_numbered_in_order_one_source_each():
    assert [n[:2] for n in NAMES] == [f"{i:02d}" for i in range(len(NAMES))] and len(NAMES) >= 13
    assert [p.stem for p in sorted(NOTEBOOKS.glob("[0-9][0-9]_*.md"))] == NAMES
    assert not (NOTEBOOKS / "solutions").exists()  # the answers live in the sources now


def test_every_learner_copy_is_in_step_with_its_source():
    problems = [BUILD.explain(n, s) for n in NAMES if (s := BUILD.state(n)) != "ok"]
    assert problems == [], "\n".join(problems)


@pytest.mark.parametrize("name", NAMES)
def test_learner_copy_has_no_outputs_and_no_solutions(name: str):
    nb = _learner(name)
    for cell in nb.cells:
        assert "solution" not in _tags(cell)
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None


@pytest.mark.parametrize("name", NAMES)
def test_course_conventions(name: str):
    cells = [(c.source, c.cell_type) for c in _learner(name).cells]
    first_md = cells[0][0]
    assert first_md.startswith(f"# {name[:2]} ·") and "Learning goals" in first_md
    first_code = next(src for src, kind in cells if kind == "code")
    assert 'BACKEND = os.environ.get("LABKIT_BACKEND", "sim")' in first_code
    assert "connect(BACKEND, " in first_code
    assert any("## Exercise" in src for src, kind in cells if kind == "markdown")
    assert any("## Recap" in src for src, kind in cells if kind == "markdown")
    # Run All safe: no cell after the first stops the cluster (checks and widgets keep working), except
    # the last one on kind (a kind cluster outlives the kernel, and the next notebook creates its own)
    later = [src for src, kind in cells if kind == "code" and src != first_code]
    assert cells[-1] == ('if BACKEND == "kind":\n    cluster.down()', "code")
    assert not [src for src in later[:-1] if "cluster.down()" in src]
    # a sentence before each code cell
    for (src, kind), (_, before_kind) in zip(cells[1:], cells[:-1], strict=True):
        if kind == "code":
            assert before_kind == "markdown", f"no text before:\n{src}"


@pytest.mark.parametrize("name", NAMES)
def test_each_exercise_has_its_solution_right_after_it(name: str):
    cells = _source(name).cells
    exercises = [i for i, c in enumerate(cells) if "exercise" in _tags(c)]
    assert exercises, "no cell tagged exercise"
    for i in exercises:
        checker = re.search(r"checks\.(check_\w+)\(", cells[i].source)
        assert checker, f"the exercise cell calls no checks.check_*:\n{cells[i].source}"
        solution = cells[i + 1]
        assert "solution" in _tags(solution), "the cell after an exercise must be its solution (tag: solution)"
        assert f"checks.{checker.group(1)}(" in solution.source


def test_checked_cells_are_marked_first():
    for name in NAMES:
        for cell in _source(name).cells:
            if "NBVAL_CHECK_OUTPUT" in cell.source:
                assert cell.source.startswith("# NBVAL_CHECK_OUTPUT\n")
                assert "checks." not in cell.source  # exercise cells print ❌ until solved: never compared


def test_manifests_come_from_examples():
    """Manifests live in examples/<scenario>/ (README + YAML); every file a notebook reads exists."""
    used = set()
    for name in NAMES:
        for cell in _source(name).cells:
            assert "kind: Pod" not in cell.source or "tags" in cell.get("metadata", {}), \
                f"{name}: a manifest inside a cell; put it in examples/<scenario>/ and apply the file"
            for ref in re.findall(r'EXAMPLES / f?"([\w./{}-]+\.ya?ml)"', cell.source):
                found = sorted((ROOT / "examples").glob(re.sub(r"\{[^}]*\}", "*", ref)))
                assert found, f"{name}: examples/{ref} does not exist"
                used.add(ref.split("/")[0])
    scenarios = {p.name for p in (ROOT / "examples").iterdir() if p.is_dir()}
    assert used == scenarios, f"scenarios no notebook uses: {scenarios - used}"
    for scenario in scenarios:
        assert (ROOT / "examples" / scenario / "README.md").is_file(), f"examples/{scenario} has no README.md"


# examples that show a refusal: the API server (and labkit.api.validate) must reject them
REFUSED = {"debugging/bad-cel.yaml", "policies/admin-access-refused.yaml", "real-cluster/old-api.yaml"}


@pytest.mark.parametrize("path", sorted((ROOT / "examples").glob("*/*.yaml")),
                         ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_example_is_valid_unless_it_shows_a_refusal(path: Path):
    from labkit.api import load
    from labkit.cel.validation import validate

    name = f"{path.parent.name}/{path.name}"
    try:
        problems = validate(load(path))
    except Exception as exc:  # noqa: BLE001 - a LoadError is a refusal too
        problems = [str(exc)]
    if name in REFUSED:
        assert problems, f"{name} is meant to be refused"
    else:
        assert problems == [], problems


def test_readme_lists_every_notebook():
    readme = (NOTEBOOKS / "README.md").read_text(encoding="utf-8")
    missing = [n for n in NAMES if f"`{n}`" not in readme]
    assert missing == []
    assert "Half day" in readme and "Full day" in readme


# --- the authoring workflow, through the command a course writer types --------------------------

SOURCE = """\
---
jupytext:
  text_representation:
    extension: .md
    format_name: myst
    format_version: 0.13
kernelspec:
  display_name: Python 3
  language: python
  name: python3
---

# 98 · Demo

**Learning goals**
- none

```{code-cell}
X = 1
```

## Exercise

```{code-cell}
:tags: [exercise]

ANSWER = ...
checks.check_gpu_count(ANSWER, cluster)
```

```{code-cell}
:tags: [solution]

ANSWER = 16
checks.check_gpu_count(ANSWER, cluster)
```

## Recap
- done
"""


@pytest.fixture
def course(tmp_path: Path) -> Path:
    shutil.copy(NOTEBOOKS / "build.py", tmp_path / "build.py")
    (tmp_path / "98_demo.md").write_text(SOURCE, encoding="utf-8")
    return tmp_path


class Result:
    def __init__(self, returncode: int, stdout: str) -> None:
        self.returncode, self.stdout = returncode, stdout


@pytest.fixture
def run(course: Path, monkeypatch, capsys):
    """`python notebooks/build.py ARGS` on the demo course, in this process (importing jupytext takes
    seconds; the command line itself is tested once, below)."""
    monkeypatch.setattr(BUILD, "HERE", course)

    def call(*args: str) -> Result:
        code = BUILD.main(list(args))
        return Result(code, capsys.readouterr().out)

    return call


def test_the_command_line(course: Path):
    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, str(course / "build.py"), *args], capture_output=True, text=True,
                              cwd=course, check=False)

    first = cli("--check")
    assert first.returncode == 1 and "98_demo.ipynb does not exist yet" in first.stdout
    assert cli().returncode == 0 and (course / "98_demo.ipynb").is_file()
    assert cli("--check").returncode == 0


def test_a_new_source_becomes_a_learner_notebook_without_its_solution(course: Path, run):
    assert run("--check").returncode == 1
    assert run().returncode == 0
    nb = nbformat.read(course / "98_demo.ipynb", as_version=4)
    code = [c.source for c in nb.cells if c.cell_type == "code"]
    assert code == ["X = 1", "ANSWER = ...\nchecks.check_gpu_count(ANSWER, cluster)"]
    assert run("--check").returncode == 0


def test_an_edit_made_in_jupyterlab_is_carried_into_the_source(course: Path, run):
    run()
    path = course / "98_demo.ipynb"
    nb = nbformat.read(path, as_version=4)
    nb.cells[1].source = "X = 2  # edited in JupyterLab"
    nb.cells[1].outputs = [nbformat.v4.new_output("stream", text="ran\n")]
    nb.cells[1].execution_count = 3
    nb.cells.insert(2, nbformat.v4.new_markdown_cell("A new sentence."))
    nbformat.write(nb, path)
    check = run("--check")
    assert check.returncode == 1
    assert "98_demo.ipynb was edited" in check.stdout and "run `python notebooks/build.py`" in check.stdout
    assert run().returncode == 0
    source = (course / "98_demo.md").read_text(encoding="utf-8")
    assert "X = 2  # edited in JupyterLab" in source and "A new sentence." in source
    assert "ANSWER = 16" in source  # the solution survived the round trip, right after its exercise
    cells = jupytext.read(course / "98_demo.md").cells
    assert _tags(cells[-2]) == ["solution"] and _tags(cells[-3]) == ["exercise"]
    nb = nbformat.read(path, as_version=4)
    assert all(not c.get("outputs") for c in nb.cells) and "ANSWER = 16" not in path.read_text()
    assert run("--check").returncode == 0


def test_outputs_saved_in_jupyterlab_are_cleaned(course: Path, run):
    run()
    path = course / "98_demo.ipynb"
    nb = nbformat.read(path, as_version=4)
    nb.cells[1].outputs = [nbformat.v4.new_output("stream", text="ran\n")]
    nbformat.write(nb, path)
    assert "holds outputs" in run("--check").stdout
    run()
    assert run("--check").returncode == 0
    assert (course / "98_demo.md").read_text(encoding="utf-8") == SOURCE


def test_both_sides_edited_is_refused_with_what_to_do(course: Path, run):
    run()
    path = course / "98_demo.ipynb"
    nb = nbformat.read(path, as_version=4)
    nb.cells[1].source = "X = 3"
    nbformat.write(nb, path)
    (course / "98_demo.md").write_text(SOURCE.replace("X = 1", "X = 4"), encoding="utf-8")
    result = run()
    assert result.returncode == 1 and "both" in result.stdout and "by hand" in result.stdout
    assert "X = 3" in path.read_text()  # nothing overwritten


def test_a_notebook_made_in_jupyterlab_gets_its_source(course: Path, run):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# 99 · New"),
                                         nbformat.v4.new_code_cell("print(1)", outputs=[])])
    nbformat.write(nb, course / "99_new.ipynb")
    assert "has no source" in run("--check").stdout
    assert run().returncode == 0
    assert "print(1)" in (course / "99_new.md").read_text(encoding="utf-8")
    assert run("--check").returncode == 0
