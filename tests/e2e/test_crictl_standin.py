"""tools/kind-node/crictl-inspecti.sh, the `crictl inspecti` stand-in of the test node images, against a
recording `ctr` and a content store of files: the answers kind reads and what each question costs.

kind's `kind load docker-image` asks every node `crictl inspecti sha256:<image ID>` for every image
(kubernetes-sigs/kind pkg/cluster/nodeutils/util.go ImageTags) and skips a node whose answer lists the
image's name among repoTags (the ID: `docker image inspect -f {{.Id}}`, the config digest).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.paths import REPO

SCRIPT = REPO / "tools" / "kind-node" / "crictl-inspecti.sh"
#: the stand-in runs in a node image, which has jq; the host running the tests may not
pytestmark = pytest.mark.skipif(shutil.which("jq") is None, reason="jq is not installed")


def _put(store: Path, doc: dict) -> str:
    data = json.dumps(doc).encode()
    digest = hashlib.sha256(data).hexdigest()
    (store / digest).write_bytes(data)
    return f"sha256:{digest}"


@pytest.fixture
def node(tmp_path: Path) -> dict:
    """A node's containerd: two images by tag, one import index (arm64 first, then amd64) and the CRI's
    own `sha256:<ID>` reference, behind a `ctr` that logs each call and serves `images ls` and
    `content get` from the files."""
    root = tmp_path / "containerd"
    store = root / "io.containerd.content.v1.content" / "blobs" / "sha256"
    store.mkdir(parents=True)
    cfg_a, cfg_b, cfg_arm = "sha256:" + "a" * 64, "sha256:" + "b" * 64, "sha256:" + "c" * 64
    man_a = _put(store, {"schemaVersion": 2, "config": {"digest": cfg_a}})
    man_b = _put(store, {"schemaVersion": 2, "config": {"digest": cfg_b}})
    man_arm = _put(store, {"schemaVersion": 2, "config": {"digest": cfg_arm}})
    index = _put(store, {"schemaVersion": 2, "manifests": [
        {"digest": man_arm, "platform": {"os": "linux", "architecture": "arm64"}},
        {"digest": man_a, "platform": {"os": "linux", "architecture": "amd64"}}]})
    refs = [("docker.io/labkit/fake-gpus:dev", man_a), (f"import-2026-12-05@{index}", index),
            (cfg_a, man_a), ("docker.io/labkit/workload:dev", man_b), (cfg_b, man_b)]
    listing = tmp_path / "images.txt"
    listing.write_text("REF TYPE DIGEST SIZE PLATFORMS LABELS\n"
                       + "".join(f"{r} application/json {d} 1.0MiB linux/amd64 -\n" for r, d in refs))
    bindir, log = tmp_path / "bin", tmp_path / "ctr.log"
    bindir.mkdir()
    ctr = bindir / "ctr"
    ctr.write_text(f"""#!/bin/bash
echo "$*" >> {log}
last="${{@: -1}}"
case " $* " in
  *" images ls "*)
    filter=""; [[ $last == name==* ]] && filter="${{last#name==}}"
    head -1 {listing}
    tail -n +2 {listing} | while read -r ref rest; do
      if [[ -z $filter || $ref == "$filter" ]]; then echo "$ref $rest"; fi
    done ;;
  *" content get "*) cat "{store}/${{last#sha256:}}" ;;
  *) exit 2 ;;
esac
""")
    ctr.chmod(0o755)
    return {"root": root, "bin": bindir, "log": log, "cfg_a": cfg_a, "cfg_b": cfg_b, "index": index}


def inspecti(node: dict, image: str, *, files: bool = True) -> tuple[int, dict | str, list[str]]:
    node["log"].write_text("")
    env = {"PATH": f"{node['bin']}:/usr/bin:/bin",
           "CONTAINERD_ROOT": str(node["root"] if files else node["root"] / "elsewhere")}
    out = subprocess.run(["bash", str(SCRIPT), "inspecti", image], capture_output=True, text=True, env=env,
                         timeout=60)
    calls = node["log"].read_text().splitlines()
    return out.returncode, (json.loads(out.stdout) if out.returncode == 0 else out.stderr.strip()), calls


@pytest.mark.parametrize("files", [True, False], ids=["content-store-files", "ctr-content-get"])
def test_by_id_lists_every_tag_whose_config_is_that_id(node, files):
    rc, answer, _ = inspecti(node, node["cfg_a"], files=files)
    assert rc == 0
    # the CRI's sha256:<ID> reference is not a tag; the index counts through its linux/amd64 manifest
    assert answer == {"status": {"id": node["cfg_a"],
                                 "repoTags": ["docker.io/labkit/fake-gpus:dev", f"import-2026-12-05@{node['index']}"]}}
    rc, answer, _ = inspecti(node, node["cfg_b"], files=files)
    assert (rc, answer) == (0, {"status": {"id": node["cfg_b"], "repoTags": ["docker.io/labkit/workload:dev"]}})


def test_by_name_normalizes_like_the_cri_and_a_missing_image_exits_1(node):
    rc, answer, _ = inspecti(node, "labkit/workload:dev")
    assert (rc, answer) == (0, {"status": {"id": node["cfg_b"], "repoTags": ["docker.io/labkit/workload:dev"]}})
    assert inspecti(node, "nothere") == (1, 'crictl: no such image "docker.io/library/nothere:latest" present',
                                         ["--namespace=k8s.io images ls name==docker.io/library/nothere:latest"])
    rc, answer, _ = inspecti(node, "sha256:" + "d" * 64)
    assert (rc, answer) == (1, f'crictl: no such image "sha256:{"d" * 64}" present')


def test_kinds_question_by_id_costs_one_ctr_call_not_one_per_reference(node):
    """kind asks each node once per image on every `labkit cluster up` (and the e2e start several
    clusters): the manifests are read from the content store in one jq, not with a `ctr content get`
    (and two jq) per reference, which took ~1 CPU-s a question on a node of 22 references."""
    rc, _, calls = inspecti(node, node["cfg_a"])
    assert rc == 0
    assert calls == ["--namespace=k8s.io images ls"]
