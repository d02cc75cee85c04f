"""Each lesson's metadata, read from its MyST source's front matter (`notebooks/NN_name.md`):

    lesson:
      learn: 'DeviceClasses, CEL selectors, ...'   # the README table's "you learn", the site's landing page
      minutes: 30
      group: basics                                 # the landing page's section: one of GROUPS
      profile: workshop                             # the cluster profile its first cell connects to
      backends: [sim, local, kind]                  # where the test lanes run it

and its title, the source's first heading (``# 03 · DeviceClasses and CEL``) less its number.

The one place those facts are written; the Makefile, tools/kind-notebooks.sh,
tests/e2e/test_cluster_kind_e2e.py, the notebooks/README.md table and the site's landing page
(notebooks/site.py) read them through this tool:

    python3 tools/lessons.py notebooks --backend local     # the .ipynb paths, one line
    python3 tools/lessons.py groups --backend kind         # profile:path path ... per line
    python3 tools/lessons.py json                          # everything, for tests
    python3 tools/lessons.py table                         # the README table (Markdown)

Standard library only (the Makefile runs it before any virtual environment exists).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
BACKENDS = ("sim", "local", "kind")
KEYS = ("learn", "minutes", "group", "profile", "backends")
#: the landing page's sections, in its order, each with its heading
GROUPS = {"basics": "Basics", "scheduling": "Scheduling", "hardware": "Hardware",
          "platform": "Platform", "research": "Research"}


class LessonError(ValueError):
    """A lesson source whose front matter lacks or garbles the lesson block."""


def _value(raw: str) -> object:
    raw = raw.strip()
    if raw.startswith("[") and raw.endswith("]"):
        return [v.strip() for v in raw[1:-1].split(",") if v.strip()]
    if raw.startswith("'") and raw.endswith("'"):
        return raw[1:-1].replace("''", "'")
    if raw.startswith('"') and raw.endswith('"'):
        return json.loads(raw)
    if raw.isdigit():
        return int(raw)
    return raw


def read_lesson(path: Path) -> dict[str, object]:
    """The ``lesson:`` mapping of one source's front matter, checked."""
    lines = path.read_text(encoding="utf-8").splitlines()
    if not lines or lines[0] != "---" or "---" not in lines[1:]:
        raise LessonError(f"{path.name}: no front matter (a '---' block at the top)")
    front = lines[1:lines.index("---", 1)]
    if "lesson:" not in front:
        raise LessonError(f"{path.name}: front matter has no 'lesson:' block; fix: add {', '.join(KEYS)}")
    out: dict[str, object] = {}
    for line in front[front.index("lesson:") + 1:]:
        m = re.match(r"^  (\w+): (.+)$", line)
        if m is None:
            break
        out[m[1]] = _value(m[2])
    missing = [k for k in KEYS if k not in out]
    if missing:
        raise LessonError(f"{path.name}: lesson: missing {', '.join(missing)}")
    bad = [b for b in out["backends"] if b not in BACKENDS]  # type: ignore[attr-defined]
    if bad or "sim" not in out["backends"]:  # type: ignore[operator]
        raise LessonError(f"{path.name}: lesson.backends: {out['backends']}; use some of {', '.join(BACKENDS)}, sim always")
    if out["group"] not in GROUPS:
        raise LessonError(f"{path.name}: lesson.group: {out['group']!r}; use one of {', '.join(GROUPS)}")
    if not isinstance(out["minutes"], int):
        raise LessonError(f"{path.name}: lesson.minutes: {out['minutes']!r}; use a whole number of minutes")
    heading = next((ln for ln in lines[len(front) + 2:] if ln.startswith("# ")), None)
    if heading is None:
        raise LessonError(f"{path.name}: no title; fix: start the lesson with a '# NN · Title' heading")
    out["title"] = re.sub(r"^#\s+\d+\s*·\s*", "", heading).strip()
    return out


def lessons() -> list[dict[str, object]]:
    """Every lesson in number order, with its ``number``, ``name`` and ``notebook`` path."""
    out = []
    for src in sorted(NOTEBOOKS.glob("[0-9][0-9]_*.md")):
        lesson = read_lesson(src)
        lesson.update(number=src.name[:2], name=src.stem, notebook=f"notebooks/{src.stem}.ipynb")
        out.append(lesson)
    return out


def table(items: list[dict[str, object]]) -> str:
    rows = ["| # | notebook | you learn | time | tested on | cluster profile |", "|---|---|---|---|---|---|"]
    rows += [f"| {x['number']} | `{x['name']}` | {x['learn']} | {x['minutes']} min | "
             f"{', '.join(x['backends'])} | `{x['profile']}` |" for x in items]  # type: ignore[arg-type]
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="tools/lessons.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("what", choices=["notebooks", "groups", "json", "table"])
    ap.add_argument("--backend", choices=BACKENDS, default="sim")
    args = ap.parse_args(argv)
    try:
        items = lessons()
    except LessonError as exc:
        print(f"tools/lessons.py: {exc}", file=sys.stderr)
        return 2
    mine = [x for x in items if args.backend in x["backends"]]  # type: ignore[operator]
    if args.what == "notebooks":
        print(" ".join(str(x["notebook"]) for x in mine))
    elif args.what == "groups":
        profiles: dict[str, list[str]] = {}
        for x in mine:
            profiles.setdefault(str(x["profile"]), []).append(str(x["notebook"]))
        for profile, books in profiles.items():
            print(f"{profile}:{' '.join(books)}")
    elif args.what == "json":
        print(json.dumps(items, indent=1))
    else:
        print(table(items))
    return 0


if __name__ == "__main__":
    sys.exit(main())
