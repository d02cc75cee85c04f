"""The repository's GitHub Actions workflows (.github/workflows/) pass `actionlint` (rhysd/actionlint, built
from the Go module proxy at a pinned version by tools/build-actionlint.sh, cached in ~/.cache/dra-labkit/bin;
`make test` builds it first), and the course-site workflow builds the site with the repository's own command
and publishes it with GitHub's Pages actions (issue #43, item 4)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from tests.paths import REPO

ROOT = REPO
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.y*ml"))


@pytest.fixture(scope="session")
def actionlint() -> str:
    """The cached actionlint binary (a cold build takes a few seconds to a minute)."""
    out = subprocess.run(["bash", str(ROOT / "tools" / "build-actionlint.sh")], capture_output=True, text=True)
    assert out.returncode == 0, f"tools/build-actionlint.sh failed:\n{out.stderr}"
    return out.stdout.strip().splitlines()[-1]


def _lint(actionlint: str, *files: Path) -> subprocess.CompletedProcess[str]:
    # -shellcheck= and -pyflakes= empty: only actionlint's own checks, the same on every machine
    return subprocess.run([actionlint, "-no-color", "-shellcheck=", "-pyflakes=", *map(str, files)], cwd=ROOT,
                          capture_output=True, text=True)


def test_every_workflow_passes_actionlint(actionlint: str) -> None:
    assert WORKFLOWS, "no workflow in .github/workflows"
    out = _lint(actionlint, *WORKFLOWS)
    assert out.returncode == 0, out.stdout + out.stderr


def test_actionlint_fails_on_a_broken_workflow(actionlint: str, tmp_path: Path) -> None:
    """A copy of the Pages workflow with a key GitHub does not know (`run-on` for `runs-on`) is refused,
    naming the file, the line and the key: the check above can fail."""
    broken = tmp_path / ".github" / "workflows" / "pages.yml"
    broken.parent.mkdir(parents=True)
    text = (ROOT / ".github" / "workflows" / "pages.yml").read_text()
    assert "    runs-on: ubuntu-latest\n" in text
    broken.write_text(text.replace("    runs-on: ubuntu-latest\n", "    run-on: ubuntu-latest\n", 1))
    out = _lint(actionlint, broken)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "pages.yml:" in out.stdout and '"run-on"' in out.stdout, out.stdout


def test_the_pages_workflow_builds_the_site_with_make_and_deploys_with_the_pages_actions() -> None:
    wf = yaml.safe_load((ROOT / ".github" / "workflows" / "pages.yml").read_text())
    assert wf[True]["push"]["branches"] == ["main"]  # YAML 1.1 reads the key `on` as true
    assert wf["permissions"] == {"contents": "read", "pages": "write", "id-token": "write"}
    assert wf["concurrency"]["group"] == "pages"
    steps = wf["jobs"]["build"]["steps"]
    uses = [s.get("uses", "").split("@")[0] for s in steps]
    assert "actions/configure-pages" in uses and "actions/upload-pages-artifact" in uses
    assert any(s.get("run") == "make site" for s in steps)
    upload = next(s for s in steps if s.get("uses", "").startswith("actions/upload-pages-artifact"))
    make = subprocess.run(["make", "-n", "--no-print-directory", "site", "STAMP=/dev/null"], cwd=ROOT,
                          capture_output=True, text=True, check=False)
    assert "notebooks/site.py" in make.stdout, make.stdout + make.stderr
    assert upload["with"]["path"] == "build/site"  # notebooks/site.py's default --out
    deploy = wf["jobs"]["deploy"]
    assert deploy["needs"] == "build" and deploy["environment"]["name"] == "github-pages"
    assert [s["uses"].split("@")[0] for s in deploy["steps"]] == ["actions/deploy-pages"]


def test_make_test_builds_actionlint_first() -> None:
    """`make test` lists `actionlint` among its prerequisites (read from the Makefile: `make -n test` would run
    its recursive $(MAKE) line), and `make actionlint` runs the install script."""
    rule = next(ln for ln in (ROOT / "Makefile").read_text().splitlines() if ln.startswith("test:"))
    assert "actionlint" in rule.split(":", 1)[1].split(), rule
    out = subprocess.run(["make", "-n", "--no-print-directory", "actionlint"], cwd=ROOT, capture_output=True,
                         text=True, check=False)
    assert out.stdout.strip() == "bash tools/build-actionlint.sh", out.stdout + out.stderr
