"""Each lesson's metadata lives once, in its MyST source's front matter (`lesson:`), and every
reader takes it from there (tools/lessons.py): the README table, the Makefile's local lane,
tools/kind-notebooks.sh and tests/e2e/test_cluster_kind_e2e.py."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

from tests.paths import REPO

ROOT = REPO


def lessons_tool(*args: str, root: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(root / "tools/lessons.py"), *args], cwd=root,
                          capture_output=True, text=True, check=False)


def test_the_readme_table_is_the_front_matter():
    table = lessons_tool("table").stdout.strip()
    readme = (ROOT / "notebooks/README.md").read_text()
    assert table in readme, "notebooks/README.md: regenerate the table with `python3 tools/lessons.py table`"
    assert len(table.splitlines()) == 2 + len(list((ROOT / "notebooks").glob("[0-9][0-9]_*.md")))


def test_every_lesson_names_the_profile_its_first_cell_connects_to():
    for lesson in json.loads(lessons_tool("json").stdout):
        source = (ROOT / "notebooks" / f"{lesson['name']}.md").read_text()
        connect = re.search(r'connect\(BACKEND, "([^"]+)"', source)
        assert connect and connect[1] == lesson["profile"], lesson["name"]


def test_the_makefile_runs_the_lessons_marked_local():
    out = subprocess.run(["make", "-n", "--no-print-directory", "notebooks-local", "STAMP=/dev/null"], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout
    books = lessons_tool("notebooks", "--backend", "local").stdout.split()
    assert books and f"--nbval-current-env {' '.join(books)}" in out, out


def test_kind_groups_follow_the_front_matter():
    groups = dict(line.split(":", 1) for line in lessons_tool("groups", "--backend", "kind").stdout.splitlines())
    assert groups["mig-lab"] == "notebooks/06_mig.ipynb"
    assert "notebooks/11_the_real_thing.ipynb" in groups["workshop"].split()


def test_a_lesson_without_its_block_is_refused(tmp_path):
    (tmp_path / "tools").mkdir()
    shutil.copy(ROOT / "tools/lessons.py", tmp_path / "tools/lessons.py")
    shutil.copytree(ROOT / "notebooks", tmp_path / "notebooks", ignore=shutil.ignore_patterns("*.ipynb", "solutions"))
    src = tmp_path / "notebooks/05_sharing.md"
    src.write_text(re.sub(r"lesson:\n(  .*\n)+", "", src.read_text(), count=1))
    out = lessons_tool("table", root=tmp_path)
    assert out.returncode == 2
    assert out.stderr == ("tools/lessons.py: 05_sharing.md: front matter has no 'lesson:' block; "
                          "fix: add learn, minutes, group, profile, backends\n")
