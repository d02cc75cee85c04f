"""Build the learner notebooks from their sources: `python notebooks/build.py`.

Each notebook has one source, `notebooks/NN_name.md` (MyST Markdown, read and written by jupytext),
holding the text, the code, the exercise (a code cell tagged `exercise`) and its solution (the
next code cell, tagged `solution`). The learner copy `NN_name.ipynb` is derived from it: solution
cells dropped, no outputs, and the SHA-256 of the source in its metadata, so that this script
can tell which side changed:

- the source changed                  -> the .ipynb is rebuilt;
- the .ipynb was edited (JupyterLab)  -> the edit is carried into the source (solutions kept), then rebuilt;
- both changed                        -> nothing is written; the message says what to do;
- an .ipynb without a source          -> its source is created from it (a new notebook made in JupyterLab).

    python notebooks/build.py           # bring every notebook in step (what the tests ask for)
    python notebooks/build.py 06        # only notebooks whose name starts with 06
    python notebooks/build.py --check   # change nothing; list what is out of step (exit 1 if any)
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import jupytext
import nbformat

HERE = Path(__file__).resolve().parent
FIX = "python notebooks/build.py"
SOURCE_FORMAT = "md:myst"
KERNEL = {"display_name": "Python 3", "language": "python", "name": "python3"}


def names() -> list[str]:
    """Every notebook of the course: a source, a learner copy, or both."""
    found = {p.stem for p in HERE.glob("[0-9][0-9]_*.md")} | {p.stem for p in HERE.glob("[0-9][0-9]_*.ipynb")}
    return sorted(found)


def source_path(name: str) -> Path:
    return HERE / f"{name}.md"


def notebook_path(name: str) -> Path:
    return HERE / f"{name}.ipynb"


def _tags(cell: dict) -> list[str]:
    return list(cell.get("metadata", {}).get("tags", []))


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def read_source(name: str) -> nbformat.NotebookNode:
    return jupytext.reads(source_path(name).read_text(encoding="utf-8"), fmt=SOURCE_FORMAT)


def _cells(nb: nbformat.NotebookNode, *, solutions: bool) -> list[tuple[str, str, list[str]]]:
    """(kind, text, tags) of each cell; the learner's view leaves solution cells out."""
    return [(c.cell_type, c.source.strip("\n"), _tags(c)) for c in nb.cells
            if solutions or "solution" not in _tags(c)]


def _cells_digest(nb: nbformat.NotebookNode) -> str:
    return _digest(json.dumps(_cells(nb, solutions=False), ensure_ascii=False))


def learner(name: str, *, solutions: bool = False) -> nbformat.NotebookNode:
    """The learner copy of notebook `name`: its source without solution cells and without outputs
    (``solutions``: with them, each after its exercise, as in the source: the instructor's copy)."""
    text = source_path(name).read_text(encoding="utf-8")
    nb = nbformat.v4.new_notebook()
    nb.metadata = {"kernelspec": KERNEL, "language_info": {"name": "python"},
                   "labkit": {"source": f"{name}.md", "source_sha256": _digest(text)}}
    for i, (kind, body, tags) in enumerate(_cells(jupytext.reads(text, fmt=SOURCE_FORMAT), solutions=solutions)):
        cell = nbformat.v4.new_markdown_cell(body) if kind == "markdown" else nbformat.v4.new_code_cell(body)
        if tags:
            cell.metadata["tags"] = tags
        cell["id"] = f"{name[:2]}-{i:02d}"
        nb.cells.append(cell)
    nb.metadata["labkit"]["cells_sha256"] = _cells_digest(nb)  # tells an edit of the .ipynb from a stale one
    return nb


def render(name: str) -> str:
    return nbformat.writes(learner(name)) + "\n"


def state(name: str) -> str:
    """'ok', 'stale' (source changed), 'edited' (.ipynb cells edited), 'conflict' (both), 'unclean'
    (outputs or metadata only), 'missing' (no .ipynb) or 'new' (no source)."""
    src, ipynb = source_path(name), notebook_path(name)
    if not src.exists():
        return "new"
    if not ipynb.exists():
        return "missing"
    stored_text = ipynb.read_text(encoding="utf-8")
    if stored_text == render(name):
        return "ok"
    stored = nbformat.reads(stored_text, as_version=4)
    recorded = stored.metadata.get("labkit", {})
    if not recorded:
        return "stale"  # written by something else than this script (the old generator)
    source_changed = recorded.get("source_sha256") != _digest(src.read_text(encoding="utf-8"))
    cells_edited = recorded.get("cells_sha256") != _cells_digest(stored)
    if source_changed and cells_edited:
        return "conflict"
    if cells_edited:
        return "edited"
    return "stale" if source_changed else "unclean"


def explain(name: str, what: str) -> str:
    """One line per problem: the file, what is wrong, the one command that fixes it."""
    src, nb = f"notebooks/{name}.md", f"notebooks/{name}.ipynb"
    return {
        "stale": f"{nb} is older than its source {src}: run `{FIX}` to rebuild it",
        "missing": f"{nb} does not exist yet: run `{FIX}` to build it from {src}",
        "unclean": f"{nb} holds outputs or extra metadata (saved after running it): run `{FIX}` to clean it",
        "edited": f"{nb} was edited (in JupyterLab?) but the source is {src}: run `{FIX}` "
                  f"to carry the edit into {src} and rebuild",
        "new": f"{nb} has no source {src}: run `{FIX}` to create the source from it",
        "conflict": f"both {src} and {nb} changed: copy your .ipynb edit into {src} by hand, then run "
                    f"`{FIX}` (it rebuilds the .ipynb from the source)",
    }[what]


def write_source(name: str, nb: nbformat.NotebookNode) -> None:
    # the header names the format (so JupyterLab + jupytext open it as a notebook) and the kernel,
    # not the jupytext version that wrote it
    nb.metadata["jupytext"] = {"notebook_metadata_filter": "kernelspec,jupytext,-jupytext.notebook_metadata_filter,"
                                                           "-jupytext.text_representation.jupytext_version"}
    nb.metadata["kernelspec"] = KERNEL
    text = jupytext.writes(nb, fmt=SOURCE_FORMAT)
    source_path(name).write_text(text, encoding="utf-8")


def _clean(cell: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """A cell as a source keeps: its kind, its text and its tags."""
    tags = _tags(cell)
    body = cell.source.strip("\n")
    out = nbformat.v4.new_markdown_cell(body) if cell.cell_type == "markdown" else nbformat.v4.new_code_cell(body)
    if tags:
        out.metadata["tags"] = tags
    out.pop("id", None)
    return out


def pull(name: str) -> None:
    """Carry an edited learner .ipynb back into its source; each solution cell goes back right
    after the exercise cell it followed (the k-th solution group after the k-th exercise cell)."""
    edited = nbformat.reads(notebook_path(name).read_text(encoding="utf-8"), as_version=4)
    groups: list[list[nbformat.NotebookNode]] = []  # solutions, in order, one group per exercise
    for cell in read_source(name).cells:
        if "solution" in _tags(cell):
            if not groups:
                groups.append([])
            groups[-1].append(cell)
        elif "exercise" in _tags(cell):
            groups.append([])
    groups = [g for g in groups if g] if groups else []
    exercises = [i for i, c in enumerate(edited.cells) if "exercise" in _tags(c)]
    if groups and len(exercises) != len(groups):
        raise SystemExit(f"notebooks/{name}.ipynb: {len(exercises)} cells tagged `exercise`, the source has "
                         f"{len(groups)} solutions; keep the exercise tag on each exercise cell, or copy the edit "
                         f"into notebooks/{name}.md by hand")
    cells = []
    for i, cell in enumerate(edited.cells):
        if "solution" in _tags(cell):
            continue
        cells.append(_clean(cell))
        if i in exercises:
            cells.extend(_clean(c) for c in groups[exercises.index(i)])
    nb = nbformat.v4.new_notebook()
    nb.cells = cells
    write_source(name, nb)


def sync(name: str) -> str:
    what = state(name)
    if what == "new":
        nb = nbformat.reads(notebook_path(name).read_text(encoding="utf-8"), as_version=4)
        nb.cells = [_clean(c) for c in nb.cells]
        write_source(name, nb)
    elif what == "edited":
        pull(name)
    elif what == "conflict":
        return what
    if what != "ok":
        notebook_path(name).write_text(render(name), encoding="utf-8")
    return what


def main(argv: list[str]) -> int:
    check = "--check" in argv
    wanted = [a for a in argv if not a.startswith("--")]
    todo = [n for n in names() if not wanted or any(n.startswith(w) for w in wanted)]
    bad = 0
    for name in todo:
        if check:
            what = state(name)
            if what != "ok":
                print(explain(name, what))
                bad += 1
            continue
        what = sync(name)
        if what == "conflict":
            print(explain(name, what))
            bad += 1
        elif what != "ok":
            print(f"notebooks/{name}: {what} -> " + ("source written, " if what in ("new", "edited") else "")
                  + ".ipynb rebuilt")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
