"""The repository's GitHub Actions workflows (.github/workflows/) pass `actionlint` (rhysd/actionlint, built
from the Go module proxy at a pinned version by tools/build-actionlint.sh, cached in ~/.cache/dra-labkit/bin;
`make test` builds it first), and the course-site workflow builds the site with the repository's own command
and publishes it with GitHub's Pages actions (issue #43, item 4)."""

from __future__ import annotations

import os
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


def _make_value(variable: str, **env: str) -> list[str]:
    """A Makefile variable's value as make expands it (`env`: the environment's variables)."""
    out = subprocess.run(["make", "-s", "--no-print-directory", "--eval", f"labkit-show: ; @echo $({variable})",
                          "labkit-show"], cwd=ROOT, capture_output=True, text=True, check=False,
                         env={**os.environ, **env})
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout.split()


def test_make_test_builds_what_its_lanes_need_first_several_at_a_time() -> None:
    """`make test` builds actionlint, the oracles, the control plane, helm and the kind node image's parts (and lints)
    before its lanes, in one `make -j3` (read from make's database: `make -n test` would run its recursive $(MAKE)
    lines); without the kind tests (LABKIT_KIND_TESTS=0) not the node image's parts. `make actionlint` runs the
    install script, and `make -j oracle` builds each release's oracle as a target of its own."""
    builds = _make_value("TEST_BUILDS")
    assert {"lint", "oracle", "controlplane", "helm", "actionlint", "kind-node-parts"} == set(builds), builds
    assert "kind-node-parts" not in _make_value("TEST_BUILDS", LABKIT_KIND_TESTS="0")
    db = subprocess.run(["make", "-pqR"], cwd=ROOT, capture_output=True, text=True, check=False).stdout
    rule = db[db.index("\ntest: "):].split("\n\n", 1)[0]
    recipe = [ln.strip() for ln in rule.splitlines() if ln.startswith("\t")]
    assert len(recipe) == 2 and "-j3 $(TEST_BUILDS)" in recipe[0] and "tools/with-kind.sh" in recipe[1], rule
    out = subprocess.run(["make", "-n", "--no-print-directory", "actionlint"], cwd=ROOT, capture_output=True,
                         text=True, check=False)
    assert out.stdout.strip() == "bash tools/build-actionlint.sh", out.stdout + out.stderr
    oracles = subprocess.run(["make", "-n", "--no-print-directory", "oracle"], cwd=ROOT, capture_output=True,
                             text=True, check=False).stdout.splitlines()
    assert sorted(oracles) == sorted([f"bash tools/build-oracle.sh 0.{m}" for m in range(34, 39)]
                                     + ["bash tools/build-cel-oracle.sh"]), oracles
