"""labkit.api.load: sources, lists, errors, and dump round trips."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from labkit.api import LoadError, dump, load, load_files
from tests.paths import TEST_DATA

DATA = TEST_DATA / "api"
CLAIM = """\
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata:
  name: one-gpu
  namespace: team-a
spec:
  devices:
    requests:
    - name: gpu
      exactly:
        deviceClassName: gpu.nvidia.com
"""


def test_load_yaml_string_path_and_pathlike(tmp_path: Path) -> None:
    f = tmp_path / "c.yaml"
    f.write_text(CLAIM)
    assert load(CLAIM) == load(str(f)) == load(f)
    assert load(CLAIM)[0]["metadata"]["name"] == "one-gpu"


def test_load_stdin(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(CLAIM))
    assert load("-")[0]["kind"] == "ResourceClaim"


def test_load_dict_and_list_are_copied() -> None:
    obj = load(CLAIM)[0]
    loaded = load(obj)
    assert loaded == [obj] and loaded[0] is not obj
    assert load([obj, obj]) == [obj, obj]


def test_json_and_multidoc() -> None:
    obj = load(CLAIM)[0]
    assert load(json.dumps(obj)) == [obj]
    assert len(load(CLAIM + "---\n" + CLAIM + "---\n")) == 2
    assert load(json.dumps([obj, obj])) == [obj, obj]


def test_default_namespace_only_for_namespaced_kinds() -> None:
    objs = load("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n---\n"
                "apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {name: c}\n",
                default_namespace="lab")
    assert objs[0]["metadata"]["namespace"] == "lab"
    assert "namespace" not in objs[1]["metadata"]
    assert "namespace" not in load("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n",
                                   default_namespace=None)[0]["metadata"]


def test_timestamps_stay_strings() -> None:
    obj = load("kind: Pod\napiVersion: v1\nmetadata: {name: p, creationTimestamp: 2026-11-20T10:15:02Z}\n")[0]
    assert obj["metadata"]["creationTimestamp"] == "2026-11-20T10:15:02Z"


def test_kubectl_list_dump_is_flattened() -> None:
    objs = load(DATA / "kubectl-claims-list.yaml")
    assert [o["metadata"]["name"] for o in objs] == ["pod-mem-ok-gpu-x4j2c"]
    assert objs[0]["status"]["allocation"]["devices"]["results"][0]["device"] == "gpu-0"
    assert objs[0]["metadata"]["managedFields"][0]["manager"] == "kube-controller-manager"


def test_kind_list_items_get_apiversion_and_kind() -> None:
    objs = load(DATA / "slices.yaml")
    assert objs[0]["apiVersion"] == "resource.k8s.io/v1" and objs[0]["kind"] == "ResourceSlice"
    assert list(objs[0])[:2] == ["apiVersion", "kind"]


def test_nested_list() -> None:
    text = ("apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: List\n  items:\n"
            "  - {apiVersion: v1, kind: Node, metadata: {name: n1}}\n")
    assert load(text)[0]["metadata"]["name"] == "n1"


@pytest.mark.parametrize(("text", "expected"), [
    ("a: [\n", "<string>:doc 1: line 2:"),
    ("kind: Pod\nkind: Node\n", "<string>:doc 1: line 2: duplicate key 'kind'"),
    ("- 1\n- 2\n", "<string>:doc 1[0]: expected a Kubernetes object"),
    ("{\"a\": ", "<string>:doc 1: line 1: invalid JSON"),
    ("just-a-word", "just-a-word: no such file"),
])
def test_errors_name_file_doc_and_line(text: str, expected: str) -> None:
    with pytest.raises(LoadError) as err:
        load(text)
    assert str(err.value).startswith(expected), str(err.value)


def test_error_per_bad_document() -> None:
    with pytest.raises(LoadError) as err:
        load("a: 1\n---\nb: [x\n---\nc: 2\n---\nd: {\n")
    lines = str(err.value).splitlines()
    assert [ln.split(":")[1] for ln in lines] == ["doc 2", "doc 4"]


def test_file_errors(tmp_path: Path) -> None:
    with pytest.raises(LoadError, match="no such file"):
        load(tmp_path / "missing.yaml")
    with pytest.raises(LoadError, match="directory has no .yaml"):
        load(tmp_path)
    bad = tmp_path / "bin.yaml"
    bad.write_bytes(b"\x80\x00garbage")
    with pytest.raises(LoadError, match="not UTF-8"):
        load(bad)
    bad.write_bytes(b"\xff\xfe\x00garbag")  # a UTF-16LE BOM, then an odd number of bytes
    with pytest.raises(LoadError, match="not UTF-16-LE text after its byte order mark"):
        load(bad)
    bad.write_bytes(CLAIM.encode("utf-16-le"))  # no BOM: kubectl reads it as UTF-8 and fails too
    with pytest.raises(LoadError, match="looks like UTF-16 without a byte order mark"):
        load(bad)


@pytest.mark.parametrize("codec", ["utf-8-sig", "utf-16", "utf-16-le", "utf-16-be"])
def test_a_byte_order_mark_picks_the_encoding_as_kubectl_does(tmp_path: Path, codec: str) -> None:
    """cli-runtime's FileVisitor decodes through BOMOverride: UTF-8, UTF-16LE and UTF-16BE with a BOM."""
    f = tmp_path / "claim.yaml"
    bom = {"utf-16-le": b"\xff\xfe", "utf-16-be": b"\xfe\xff"}.get(codec, b"")
    f.write_bytes(bom + CLAIM.encode(codec))
    assert load(f) == load(CLAIM)


def test_load_files_collects_all_problems(tmp_path: Path) -> None:
    good, bad = tmp_path / "good.yaml", tmp_path / "bad.yaml"
    good.write_text(CLAIM)
    bad.write_text("x: [\n")
    assert len(load_files([good, good])) == 2
    with pytest.raises(LoadError) as err:
        load_files([bad, tmp_path / "nope.yaml", good])
    assert len(err.value.problems) == 2
    assert str(bad) in err.value.problems[0]


@pytest.mark.parametrize("name", ["nvidia-claims.yaml", "kubectl-claims-list.yaml", "slices.yaml",
                                  "kubectl-pod-node.yaml"])
@pytest.mark.parametrize("fmt", ["yaml", "json"])
def test_round_trip_unchanged(name: str, fmt: str) -> None:
    objs = load(DATA / name)
    again = load(dump(objs, fmt))
    assert again == objs
    # key order is preserved too
    assert [list(o) for o in again] == [list(o) for o in objs]
    assert json.dumps(again) == json.dumps(objs)


def test_dump_keeps_quantities_as_written_and_adds_nothing() -> None:
    text = ("apiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata:\n  name: s\nspec:\n"
            "  devices:\n  - name: d\n    capacity:\n      memory:\n        value: 81920Mi\n"
            "      cores:\n        value: 108\n")
    out = dump(load(text))
    assert out == text
    assert "allocationMode" not in dump(load(CLAIM))


def test_dump_multiline_cel_uses_block_style() -> None:
    objs = load(DATA / "nvidia-claims.yaml")
    assert "expression: |-" in dump(objs)


def test_dump_single_json_object_and_bad_format() -> None:
    obj = load(CLAIM)[0]
    assert json.loads(dump(obj, "json")) == obj
    assert json.loads(dump([obj, obj], "json"))["kind"] == "List"
    with pytest.raises(ValueError, match="unknown output format"):
        dump(obj, "xml")


def test_directory_like_kubectl(tmp_path: Path) -> None:
    (tmp_path / "b.yaml").write_text(CLAIM)
    (tmp_path / "a.json").write_text(json.dumps(load(CLAIM)[0] | {"metadata": {"name": "first"}}))
    (tmp_path / "notes.txt").write_text("not a manifest: [")
    names = [o["metadata"]["name"] for o in load(tmp_path)]
    assert names == ["first", "one-gpu"]
    (tmp_path / "c.yml").write_text("x: [\n")
    with pytest.raises(LoadError, match="c.yml:doc 1"):
        load_files([tmp_path])


@pytest.mark.parametrize("value", ["\x85", "a\u2028b", "x\r\ny", "line1\nline2\x85", "tab\there", " lead",
                                   "trail ", "\ufeffbom", "a\x00b", "multi\nline\n", "ends\n\n", "2026-11-20",
                                   "yes", "1e3", "0x10", "~", ""])
def test_awkward_strings_round_trip(value: str) -> None:
    obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "data": {"k": value}}
    for fmt in ("yaml", "json"):
        assert load(dump(obj, fmt), default_namespace=None) == [obj]
