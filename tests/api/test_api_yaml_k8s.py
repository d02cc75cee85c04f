"""YAML is read as Kubernetes reads it (sigs.k8s.io/yaml over go-yaml v2), and random input never
escapes the commands as anything but one line and exit code 1 or 2."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from labkit.api import LoadError, dump, load, load_files
from labkit.api.load import go_scalar
from labkit.cli import main

FUZZ = settings(max_examples=60, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])

# What go-yaml v2's resolve() makes of a plain scalar (goyaml.v2/resolve.go in kubernetes-sigs/yaml).
GO_READS = [
    ("y", True), ("Y", True), ("yes", True), ("on", True), ("ON", True), ("true", True),
    ("n", False), ("N", False), ("no", False), ("off", False), ("False", False),
    ("~", None), ("null", None), ("", None),
    ("1e3", 1000.0), (".5", 0.5), ("1.", 1.0), ("08", 8.0), ("+.inf", math.inf),
    ("0o17", 15), ("017", 15), ("0x1F", 31), ("0b101", 5), ("-0b11", -3), ("1_000", 1000),
    ("1:20", "1:20"), ("=", "="), ("2001-12-14", "2001-12-14"), ("1.2.3", "1.2.3"),
    ("yES", "yES"), ("0b2", "0b2"), ("12abc", "12abc"), ("<<", "<<"),
]


@pytest.mark.parametrize(("text", "value"), GO_READS)
def test_plain_scalars_read_as_go_yaml_v2_reads_them(text: str, value: object) -> None:
    assert go_scalar(text)[1] == value
    if text not in ("", "<<"):
        loaded = load(f"k: {text}\n", default_namespace=None)[0]["k"]
        assert loaded == value and type(loaded) is type(value)


def test_merge_keys_and_anchors_give_independent_copies() -> None:
    doc = load("a: &x {p: 1, q: 2}\nb:\n  <<: *x\n  q: 3\nc: *x\n", default_namespace=None)[0]
    assert doc == {"a": {"p": 1, "q": 2}, "b": {"p": 1, "q": 3}, "c": {"p": 1, "q": 2}}
    doc["a"]["p"] = 9
    assert doc["c"]["p"] == 1  # JSON has no sharing: neither does what load returns


def test_map_keys_become_strings_like_sigs_k8s_io_yaml() -> None:
    assert load("y: 1\n1: 2\n", default_namespace=None) == [{"true": 1, "1": 2}]


tricky = st.sampled_from([s for s, _ in GO_READS] + ["Yes", "NO", "0.0", "-1", "+1", ".nan", "0x", "0o8"])
json_value = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-2**53, 2**53), tricky,
              st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)),
    lambda inner: st.one_of(st.lists(inner, max_size=3),
                            st.dictionaries(st.one_of(tricky, st.text("abcxyz-", min_size=1, max_size=6)),
                                            inner, max_size=3)),
    max_leaves=12)


@FUZZ
@given(json_value)
def test_dump_then_load_gives_the_same_value(value: object) -> None:
    """Strings a Go reader would take for something else ("y", "1e3") are quoted on output."""
    obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "data": {"v": value}}
    assert load(dump(obj), default_namespace=None) == [obj]


yamlish = st.lists(st.sampled_from([
    "apiVersion: resource.k8s.io/v1\n", "kind: ResourceClaim\n", "kind: Foo\n", "metadata:\n",
    "  name: x\n", "  name: y\n", "spec:\n", "  devices: {requests: [{name: g, exactly: {deviceClassName: c}}]}\n",
    "---\n", "- y\n", "\t", "&a [*a]\n", "<<: *b\n", "{", "}", "[", "]", "\ufeff", "\x00", ": ", "n\n",
    "  count: many\n", "  labels: {a: on}\n", "1e3\n", "'unterminated\n", "# comment\n",
]), max_size=12).map("".join)


@FUZZ
@given(yamlish)
def test_random_manifests_through_labkit_validate(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                 text: str) -> None:
    path = tmp_path / "in.yaml"
    path.write_text(text)
    rc = main(["validate", "-f", str(path)])
    out, err = capsys.readouterr()
    assert rc in (0, 1, 2)
    assert "internal error" not in err and "Traceback" not in out + err
    if rc == 0:
        objs = load_files([str(path)])
        assert objs and err.strip().endswith("valid")
    elif rc == 2:
        assert err.startswith("labkit validate: ")
        with pytest.raises(LoadError):
            load_files([str(path)])
    else:
        assert out and all(": " in line for line in out.splitlines())


@FUZZ
@given(st.binary(max_size=300))
def test_random_bytes_through_labkit_cel(tmp_path: Path, capsys: pytest.CaptureFixture[str], data: bytes) -> None:
    path = tmp_path / "in.yaml"
    path.write_bytes(data)
    rc = main(["cel", "true", "-f", str(path)])
    _out, err = capsys.readouterr()
    assert rc == 2 and err.startswith("labkit cel: ") and "internal error" not in err
