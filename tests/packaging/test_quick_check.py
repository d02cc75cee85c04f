"""The quick check a contributor runs before a commit (issue 44 item 6): `make check` (lint, types, the fast
tests), the project's own `.pre-commit-config.yaml`, and the CI workflow that runs `make check` on every push and
the README's test command on the default branch."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.paths import REPO

ROOT = REPO


def _make_n(target: str) -> str:
    out = subprocess.run(["make", "-n", "--no-print-directory", target, "STAMP=/dev/null"], cwd=ROOT,
                         capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


def test_make_check_runs_lint_types_and_the_fast_tests_only() -> None:
    steps = _make_n("check")
    for tool in ("ruff check", "lint-imports", "tools/check_imports.py", "mypy"):
        assert tool in steps, f"make check does not run {tool}:\n{steps}"
    pytest_line = next(ln for ln in steps.splitlines() if "pytest" in ln)
    assert "-n 2" in pytest_line  # two workers: the machine's two cores
    for heavy in ("slow", "kind", "local", "browser", "site", "oracle"):
        assert f"not {heavy}" in pytest_line, pytest_line


def test_a_heavy_module_is_left_out_of_make_check() -> None:
    """The marker `make check` relies on is where it was put: the differential runs in `make test` only."""
    out = subprocess.run([str(ROOT / ".venv" / "bin" / "pytest"), "--collect-only", "-q", "-p", "no:cacheprovider",
                          "-m", "not slow", "tests/allocator/test_differential.py", "tests/cli/test_bad_input.py"],
                         cwd=ROOT, capture_output=True, text=True, check=False)
    assert "no tests collected" in out.stdout or "deselected" in out.stdout, out.stdout
    assert "::" not in out.stdout, out.stdout


def test_the_ci_workflow_checks_every_push_and_tests_the_default_branch() -> None:
    wf = yaml.safe_load((ROOT / ".github" / "workflows" / "ci.yml").read_text())
    on = wf[True]  # YAML 1.1 reads the key `on` as true
    assert "push" in on and "pull_request" in on and on["push"] is None  # every branch
    check, test = wf["jobs"]["check"], wf["jobs"]["test"]
    assert [s["run"] for s in check["steps"] if "run" in s] == ["make check"]
    assert [s["run"] for s in test["steps"] if "run" in s] == ["bash .ci/run"]
    assert "default_branch" in test["if"] and test["needs"] == "check"
    # .ci/run is the README's test command
    assert "make test" in (ROOT / ".ci" / "run").read_text() and "make test" in (ROOT / "README.md").read_text()


@pytest.mark.skipif(not (ROOT / ".venv" / "bin" / "pre-commit").exists(), reason="pre-commit is not installed")
def test_the_pre_commit_config_refuses_a_bad_file_and_passes_a_good_one(tmp_path: Path) -> None:
    """The project's own hooks, as a contributor's `git commit` runs them: ruff on the staged file."""
    repo = tmp_path / "repo"
    repo.mkdir()
    shutil.copy(ROOT / ".pre-commit-config.yaml", repo)
    shutil.copy(ROOT / "pyproject.toml", repo)  # ruff's settings
    (repo / ".venv").symlink_to(ROOT / ".venv")
    env = {**os.environ, "PRE_COMMIT_HOME": str(tmp_path / "pc-home"), "GIT_CONFIG_GLOBAL": os.devnull,
           "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.com"}

    def run(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(list(argv), cwd=repo, env=env, capture_output=True, text=True, check=False)

    assert run("git", "init", "-q").returncode == 0
    (repo / "bad.py").write_text("import os\n")
    (repo / "good.py").write_text('"""A module."""\n\nVALUE = 1\n')
    run("git", "add", "-A")
    bad = run(str(ROOT / ".venv" / "bin" / "pre-commit"), "run", "ruff", "--files", "bad.py")
    assert bad.returncode == 1 and "F401" in bad.stdout, bad.stdout + bad.stderr
    good = run(str(ROOT / ".venv" / "bin" / "pre-commit"), "run", "ruff", "--files", "good.py")
    assert good.returncode == 0, good.stdout + good.stderr


@pytest.mark.parametrize("built", [False, True], ids=["fresh clone", "after make site"])
def test_lint_does_not_depend_on_what_a_build_left_behind(tmp_path: Path, built: bool) -> None:
    """`make lint` gives a fresh clone's verdict in a checkout that has built the site: its output folder `build/`
    has the name of a module notebooks/site.py imports, and ruff sorts a name that is a folder at the root as
    first-party (a fresh clone's lint failed on an import order that passed in the checkout it was made from)."""
    shutil.copy(ROOT / "pyproject.toml", tmp_path)  # ruff's settings
    shutil.copytree(ROOT / "notebooks", tmp_path / "notebooks", ignore=shutil.ignore_patterns("__pycache__", "*.ipynb"))
    if built:
        (tmp_path / "build" / "site").mkdir(parents=True)
    out = subprocess.run([str(ROOT / ".venv" / "bin" / "ruff"), "check", "--no-cache", "notebooks"], cwd=tmp_path,
                         capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stdout + out.stderr
