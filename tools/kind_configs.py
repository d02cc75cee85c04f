"""The kind cluster configurations of the lessons that run on kind, as files to open and copy:
clusters/kind/<profile>.yaml, one for each profile `tools/lessons.py groups --backend kind` names.

    .venv/bin/python tools/kind_configs.py --write    # after a profile or the kind backend changed
    .venv/bin/python tools/kind_configs.py --check    # exit 1 if a file differs (tests/model/test_clusters_dir.py)
    .venv/bin/python tools/kind_configs.py PROFILE    # print one (any cluster profile), write nothing

Each file is the kind config `labkit cluster up --backend kind --profile P` writes
(labkit.cluster.backends.kind.config.kind_config) with its defaults: cluster name labkit-P, the pinned kindest/node
image (not $LABKIT_KIND_NODE_IMAGE), on a host with cgroup v2 and CAP_SYS_RESOURCE. On other hosts the
backend adds a kubelet patch (failCgroupV1: false) or a containerd one (restrict_oom_score_adj); the copy
it used is kind-config.yaml in the cluster's run folder ($LABKIT_RUN_DIR, else ~/.cache/dra-labkit/run,
then kind-P/).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import lessons  # noqa: E402 - tools/lessons.py, beside this file

from labkit.cluster.backends.kind.backend import default_cluster_name  # noqa: E402
from labkit.cluster.backends.kind.config import kind_config  # noqa: E402
from labkit.cluster.backends.kind.images import node_image  # noqa: E402
from labkit.model.profiles import load_profile  # noqa: E402

KIND_DIR = ROOT / "clusters" / "kind"


def kind_profiles() -> list[str]:
    """The cluster profiles of the lessons that run on kind, in lesson order."""
    out: list[str] = []
    for lesson in lessons.lessons():
        if "kind" in lesson["backends"] and str(lesson["profile"]) not in out:  # type: ignore[operator]
            out.append(str(lesson["profile"]))
    return out


def reference_config(profile: str) -> dict[str, Any]:
    """The kind config of `profile` as `labkit cluster up --backend kind` writes it with its defaults."""
    prof = load_profile(profile)
    return kind_config(prof, cluster_name=default_cluster_name(prof.name),
                       node_image_override=node_image(prof.kubernetes_version))


class _Dumper(yaml.SafeDumper):
    """Multi-line strings (the kubeadm and containerd patches) as literal blocks, to read as they are."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|" if "\n" in value else None)


_Dumper.add_representer(str, _str)


def render(profile: str) -> str:
    head = (f"# kind cluster config of the cluster profile {profile} (clusters/{profile}.yaml), as `labkit cluster up\n"
            f"# --backend kind --profile {profile}` writes it. Generated: .venv/bin/python tools/kind_configs.py "
            "--write\n# (do not edit; clusters/README.md says what the backend adds on some hosts)\n")
    return head + yaml.dump(reference_config(profile), Dumper=_Dumper, sort_keys=False, width=110)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="tools/kind_configs.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("profile", nargs="?", help="print this profile's kind config")
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true", help="write clusters/kind/<profile>.yaml")
    mode.add_argument("--check", action="store_true", help="exit 1 if clusters/kind/ is not what --write writes")
    args = ap.parse_args(argv)
    if args.profile:
        print(render(args.profile), end="")
        return 0
    if not (args.write or args.check):
        ap.error("give --write, --check or a PROFILE")
    want = {f"{p}.yaml": render(p) for p in kind_profiles()}
    have = {f.name: f.read_text(encoding="utf-8") for f in KIND_DIR.glob("*.yaml")} if KIND_DIR.is_dir() else {}
    if args.write:
        KIND_DIR.mkdir(parents=True, exist_ok=True)
        for name, text in want.items():
            if have.get(name) != text:
                (KIND_DIR / name).write_text(text, encoding="utf-8")
                print(f"wrote clusters/kind/{name}")
        for name in sorted(set(have) - set(want)):
            (KIND_DIR / name).unlink()
            print(f"removed clusters/kind/{name} (no lesson runs that profile on kind)")
        return 0
    stale = sorted(n for n in set(want) | set(have) if want.get(n) != have.get(n))
    for name in stale:
        why = "missing" if name not in have else "not a lesson's kind profile" if name not in want else "differs"
        print(f"clusters/kind/{name}: {why}; fix: .venv/bin/python tools/kind_configs.py --write", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
