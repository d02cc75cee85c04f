"""The top-level clusters/ folder (issue 44 item 8): the home of the shipped cluster profiles and of the kind
configs the lessons use. labkit finds exactly those profiles by name, ./clusters of the working directory
still overrides them, and clusters/kind/ is what the kind backend generates. (The wheel carries them too:
tests/packaging/test_packaging_wheel.py.)"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import yaml

from tests.paths import REPO

ROOT = REPO
CLUSTERS = ROOT / "clusters"
LABKIT = [sys.executable, "-m", "labkit"]


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "LABKIT_CLUSTERS_PATH"}


def _known_profiles(cwd: Path) -> list[str]:
    """The profile names labkit lists, as a user sees them: the "known profiles" of a name it does not know."""
    res = subprocess.run([*LABKIT, "cluster", "up", "--profile", "no-such-profile"], cwd=cwd, env=_env(),
                         capture_output=True, text=True)
    assert res.returncode == 3, res.stderr
    found = re.search(r"known profiles: (.*?) \(or pass a path", res.stderr)
    assert found, res.stderr
    return found.group(1).split(", ")


def test_the_clusters_folder_holds_every_shipped_profile(tmp_path):
    shipped = sorted(p.stem for p in CLUSTERS.glob("*.yaml"))
    assert {"workshop", "mig-lab", "topology-lab", "tiny", "fleet-1000"} <= set(shipped)
    assert _known_profiles(tmp_path) == shipped  # from anywhere: exactly the folder's profiles
    # from the repository, where ./clusters is the shipped folder itself: each name once
    assert _known_profiles(ROOT) == shipped


def test_no_profiles_left_inside_the_package():
    assert not (ROOT / "labkit" / "model" / "clusters").exists()
    tracked = subprocess.run(["git", "ls-files", "labkit/model/clusters"], cwd=ROOT, capture_output=True,
                             text=True, check=True).stdout.split()
    assert [f for f in tracked if (ROOT / f).exists()] == []


def test_a_profile_in_dot_clusters_overrides_a_shipped_one(tmp_path):
    mine = tmp_path / "clusters"
    mine.mkdir()
    (mine / "workshop.yaml").write_text("name: workshop\ndescription: my own workshop\n"
                                        "nodes: [{name: box-0, nodeProfile: t4-inference}]\n")
    (mine / "my-lab.yaml").write_text("nodes: [{name: lab-0, nodeProfile: dgx-a100}]\n")
    up = subprocess.run([*LABKIT, "cluster", "up", "--profile", "workshop"], cwd=tmp_path, env=_env(),
                        capture_output=True, text=True)
    assert up.returncode == 0, up.stderr
    assert up.stdout.splitlines()[:3] == ["profile workshop: 1 node(s), Kubernetes 1.37", "  my own workshop",
                                          "      1 x t4-inference: box-0"]
    # the user's names beside the shipped ones, each once
    assert _known_profiles(tmp_path) == sorted({*(p.stem for p in CLUSTERS.glob("*.yaml")), "my-lab"})
    assert "workshop" in _known_profiles(tmp_path)


def test_kind_configs_are_what_the_kind_backend_generates():
    from labkit.cluster.backends.kind.backend import default_cluster_name
    from labkit.cluster.backends.kind.config import kind_config
    from labkit.cluster.backends.kind.images import node_image
    from labkit.model.profiles import load_profile

    lessons = subprocess.run([sys.executable, "tools/lessons.py", "groups", "--backend", "kind"], cwd=ROOT,
                             capture_output=True, text=True, check=True).stdout.split()
    profiles = [line.split(":")[0] for line in lessons if ":" in line]
    assert "workshop" in profiles
    assert sorted(p.name for p in (CLUSTERS / "kind").glob("*.yaml")) == sorted(f"{p}.yaml" for p in profiles)
    for profile in profiles:
        committed = yaml.safe_load((CLUSTERS / "kind" / f"{profile}.yaml").read_text())
        prof = load_profile(profile)
        # what `labkit cluster up --backend kind` writes with its defaults (cgroup v2, CAP_SYS_RESOURCE, the
        # pinned node image)
        assert committed == kind_config(prof, cluster_name=default_cluster_name(profile),
                                        node_image_override=node_image(prof.kubernetes_version))
        assert [n["labels"]["labkit.dev/profile-node"] for n in committed["nodes"][1:]] == [n.name for n in prof.nodes]
    # byte for byte what the documented command writes
    check = subprocess.run([sys.executable, "tools/kind_configs.py", "--check"], cwd=ROOT, capture_output=True,
                           text=True, env={k: v for k, v in _env().items() if k != "LABKIT_KIND_NODE_IMAGE"})
    assert check.returncode == 0, check.stderr
