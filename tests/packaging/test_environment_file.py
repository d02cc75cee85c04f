"""environment.yml must list every runtime dependency pyproject.toml declares (names may differ on conda-forge)."""

from __future__ import annotations

import re
import tomllib

import yaml

from tests.paths import REPO

ROOT = REPO
CONDA_NAMES = {"pyyaml": "pyyaml", "kubernetes": "python-kubernetes"}


def _name(spec: str) -> str:
    return re.split(r"[<>=!\[ ]", spec.strip(), maxsplit=1)[0].lower()


def test_environment_covers_pyproject_dependencies_and_cluster_tools():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    conda = {_name(d) for d in env["dependencies"] if isinstance(d, str)}
    pip = {_name(d) for entry in env["dependencies"] if isinstance(entry, dict) for d in entry.get("pip", [])}
    available = conda | pip
    wanted = [*project["dependencies"], *project["optional-dependencies"]["notebooks"]]
    wanted += [d for d in project["optional-dependencies"]["dev"] if not d.startswith("dra-labkit")]
    missing = [d for d in wanted if CONDA_NAMES.get(_name(d), _name(d)) not in available]
    assert missing == []
    assert {"kind", "kubernetes-client", "go", "python"} <= conda
    assert "conda-forge" in env["channels"]
