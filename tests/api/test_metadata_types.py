"""ObjectMeta's types are checked for every kind, as the API server's decoding checks them
(a Job's, a ConfigMap's or a CRD's metadata.name that is not a string is refused: "json: cannot
unmarshal array into Go struct field ObjectMeta.metadata.name of type string" from
k8s.io/apimachinery's decoder), one line naming the object and the field - never an internal
error (exit 70), which a deep list as a Job's name gave `labkit simulate` (found by the fuzzer).

Each command line runs in its own process forked from one that imported the CLI once (tests/cliserver.py,
which tests/cli/test_bad_input.py holds to the console script's answers): 32 commands, one import."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import yaml

from tests.cliserver import CliServer

DOCS = {
    "Job": {"apiVersion": "batch/v1", "kind": "Job", "spec": {"template": {"spec": {
        "restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}},
    "ConfigMap": {"apiVersion": "v1", "kind": "ConfigMap", "data": {"a": "b"}},
    "ComputeDomain": {"apiVersion": "resource.nvidia.com/v1beta1", "kind": "ComputeDomain",
                      "spec": {"channel": {"resourceClaimTemplate": {"name": "t"}}}},
    "Widget": {"apiVersion": "example.com/v1", "kind": "Widget", "spec": {}},
}
BAD = {
    "list": ({"name": [{"k": [{"k": "leaf"}]}]}, "metadata.name: must be a string, not [{"),
    "int": ({"name": 5}, "metadata.name: must be a string, not 5; fix: quote the value"),
    "namespace": ({"name": "x", "namespace": {"a": 1}}, "metadata.namespace: must be a string"),
    "label": ({"name": "x", "labels": {"a": 1}}, "metadata.labels[a]: must be a string, not 1; fix: quote"),
}


@pytest.fixture(scope="module")
def cli() -> Iterator[CliServer]:
    server = CliServer()
    try:
        yield server
    finally:
        server.close()


@pytest.mark.parametrize("command", ["simulate", "validate"])
@pytest.mark.parametrize("bad", sorted(BAD))
@pytest.mark.parametrize("kind", sorted(DOCS))
def test_metadata_of_the_wrong_type_is_one_line_for_every_kind(cli, tmp_path, kind, bad, command):
    meta, words = BAD[bad]
    path = tmp_path / "in.yaml"
    path.write_text(yaml.safe_dump({**DOCS[kind], "metadata": meta}))
    rc, stdout, stderr = cli.run("labkit", [command, "-f", str(path)])
    assert rc in (1, 2), (rc, stderr)
    assert "internal error" not in stderr and "Traceback" not in stderr
    assert words in stdout + stderr, stdout + stderr
