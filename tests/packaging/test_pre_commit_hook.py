"""The kit's pre-commit hook (.pre-commit-hooks.yaml: `labkit-validate`) in a user's repository, through
pre-commit itself: `pre-commit try-repo` with the kit as the hook repository (pre-commit installs the kit
into an environment of its own, from PyPI) on a sample repository holding a good and a bad manifest. The
bad claim is refused with exactly what `labkit validate` prints; other Kubernetes objects and YAML files
that are not Kubernetes objects pass untouched; the Kubernetes version and feature gates are hook args.

The hook repository is a git snapshot of this checkout as it is (tracked and untracked files, not the
ignored ones), so uncommitted work is what gets tested; its environment is built once per test session.
pre-commit builds the hook's environments with uv, not pip (pre-commit-uv, a dev dependency, patches
pre-commit when it is installed beside it): the same install of the kit from PyPI, at a sixth of the CPU.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.paths import REPO

pytestmark = [pytest.mark.slow]

ROOT = REPO
LABKIT = Path(sys.executable).parent / "labkit"

GOOD = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: web, image: nginx}]
---
apiVersion: v1
kind: Service
metadata: {name: web}
spec: {ports: [{port: 80}]}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: half-a-gpu}
spec:
  devices:
    requests:
    - name: gpu
      exactly:
        deviceClassName: gpu.nvidia.com
        capacity:
          requests: {memory: 10Gi}
"""

BAD = """\
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: bad}
spec:
  devices:
    requests:
    - name: GPU
      exactly: {deviceClassName: gpu.nvidia.com, allocationMode: All, count: 2}
"""

NOT_KUBERNETES = """\
name: ci
on: [push]
jobs:
  test: {runs-on: ubuntu-latest, steps: [{run: make test}]}
"""


def git(cwd: Path, *args: str) -> str:
    out = subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args], cwd=cwd,
                         capture_output=True, text=True)
    assert out.returncode == 0, f"git {' '.join(args)}: {out.stderr}"
    return out.stdout


@pytest.fixture(scope="session")
def kit_repo(tmp_path_factory) -> Path:
    """This checkout's files (what `git ls-files -co --exclude-standard` lists) committed to a fresh repo."""
    dest = tmp_path_factory.mktemp("kit") / "dra-labkit"
    files = git(ROOT, "ls-files", "-co", "--exclude-standard", "-z").split("\0")
    for rel in filter(None, files):
        src = ROOT / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    git(dest, "init", "-q")
    git(dest, "add", "-A")
    git(dest, "commit", "-qm", "snapshot")
    return dest


@pytest.fixture(scope="session")
def pre_commit_home(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("pre-commit-home")


@pytest.fixture
def sample(tmp_path) -> Path:
    repo = tmp_path / "infra"
    (repo / "k8s").mkdir(parents=True)
    (repo / "k8s" / "good.yaml").write_text(GOOD)
    (repo / "k8s" / "bad.yaml").write_text(BAD)
    (repo / "ci.yaml").write_text(NOT_KUBERNETES)
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "manifests")
    return repo


def pre_commit(cwd: Path, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).parent / "pre-commit"
    env = {**os.environ, "PRE_COMMIT_HOME": str(home), "NO_COLOR": "1"}
    return subprocess.run([str(exe), *args, "--color", "never"], cwd=cwd, capture_output=True, text=True, env=env)


def test_try_repo_refuses_the_bad_claim_with_labkit_validates_message(kit_repo, pre_commit_home, sample):
    want = subprocess.run([str(LABKIT), "validate", "k8s/bad.yaml"], cwd=sample, capture_output=True, text=True)
    assert want.returncode == 1 and want.stdout.startswith("ResourceClaim/bad: spec.devices.requests[0].name:")
    out = pre_commit(sample, pre_commit_home, "try-repo", str(kit_repo), "labkit-validate", "--all-files")
    assert out.returncode == 1, out.stdout + out.stderr
    assert "labkit validate (DRA manifests)" in out.stdout and "Failed" in out.stdout
    assert "- exit code: 1" in out.stdout
    assert want.stdout in out.stdout, out.stdout
    # only the bad claim: the Deployment, the Service, the good claim and ci.yaml say nothing
    refused = [ln for ln in out.stdout.splitlines() if ln.startswith(("ResourceClaim/", "Deployment/", "Service/",
                                                                       "<no kind>"))]
    assert refused == want.stdout.splitlines()


def test_config_args_pick_the_kubernetes_version_and_feature_gates(kit_repo, pre_commit_home, sample):
    """A .pre-commit-config.yaml as a user writes it (`pre-commit run`; its environment is kept in
    PRE_COMMIT_HOME, while try-repo builds one of its own each time): good manifests and YAML that is not
    Kubernetes pass; on 1.35 capacity requests need DRAConsumableCapacity (alpha, off), and turning the gate
    on accepts the claim."""
    rev = git(kit_repo, "rev-parse", "HEAD").strip()

    def run_with(args: str, *files: str) -> subprocess.CompletedProcess[str]:
        (sample / ".pre-commit-config.yaml").write_text(
            f"repos:\n- repo: {kit_repo}\n  rev: {rev}\n  hooks:\n  - id: labkit-validate\n    args: {args}\n")
        return pre_commit(sample, pre_commit_home, "run", "--files", *(files or ("k8s/good.yaml",)))

    passed = run_with("[]", "k8s/good.yaml", "ci.yaml")
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert "labkit validate (DRA manifests)" in passed.stdout and "Passed" in passed.stdout

    want = subprocess.run([str(LABKIT), "validate", "--kubernetes-version", "1.35", "k8s/good.yaml"], cwd=sample,
                          capture_output=True, text=True)
    assert want.returncode == 1 and "DRAConsumableCapacity" in want.stdout, want.stdout + want.stderr
    old = run_with("[--kubernetes-version=1.35]")
    assert old.returncode == 1 and want.stdout in old.stdout, old.stdout
    gated = run_with("[--kubernetes-version=1.35, --feature-gates=DRAConsumableCapacity=true]")
    assert gated.returncode == 0, gated.stdout + gated.stderr


# -- what the hook runs, as typed: labkit validate --skip-non-kubernetes FILE... -----------------------------
def labkit(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(LABKIT), *argv], cwd=cwd, capture_output=True, text=True)


def test_validate_takes_files_as_arguments_like_f(sample):
    by_f = labkit("validate", "-f", "k8s/bad.yaml", "-f", "k8s/good.yaml", cwd=sample)
    by_arg = labkit("validate", "k8s/bad.yaml", "k8s/good.yaml", cwd=sample)
    assert by_f.returncode == by_arg.returncode == 1
    assert by_arg.stdout == by_f.stdout and by_arg.stdout.startswith("ResourceClaim/bad: ")
    none = labkit("validate", cwd=sample)
    assert none.returncode == 2
    assert none.stderr == "labkit validate: no manifests given; fix: name them with -f FILE or as arguments\n"


def test_skip_non_kubernetes_leaves_other_yaml_alone_but_not_broken_yaml(sample):
    (sample / "empty.yaml").write_text("# nothing yet\n")
    plain = labkit("validate", "ci.yaml", "k8s/good.yaml", cwd=sample)
    assert plain.returncode == 1 and plain.stdout.startswith("<no kind>/<unnamed>: apiVersion: Required value")
    skipping = labkit("validate", "--skip-non-kubernetes", "ci.yaml", "empty.yaml", "k8s/good.yaml", cwd=sample)
    assert (skipping.returncode, skipping.stdout, skipping.stderr) == (0, "", "3 objects valid\n")
    nothing = labkit("validate", "--skip-non-kubernetes", "ci.yaml", "empty.yaml", cwd=sample)
    assert (nothing.returncode, nothing.stderr) == (0, "no Kubernetes objects in 2 file(s): nothing to validate\n")
    (sample / "template.yaml").write_text("metadata:\n  name: {{ .Values.name }}\n")
    broken = labkit("validate", "--skip-non-kubernetes", "template.yaml", "k8s/good.yaml", cwd=sample)
    assert broken.returncode == 2 and broken.stderr.startswith("labkit validate: template.yaml:doc 1: ")
    assert len(broken.stderr.splitlines()) == 1
