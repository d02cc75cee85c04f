"""``labkit validate``: exit codes and output contract."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from labkit.cli import main
from tests.paths import TEST_DATA

DATA = TEST_DATA / "api"
BAD = """\
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: c}
spec:
  devices:
    requests:
    - name: gpu
      exactly: {deviceClassName: gpu.nvidia.com, cuont: 2}
"""


def test_valid_files_exit_0(capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["validate", "-f", str(DATA / "nvidia-claims.yaml"), "-f", str(DATA / "slices.yaml")])
    out, err = capsys.readouterr()
    assert rc == 0 and out == "" and err.strip() == "9 objects valid"


def test_problems_exit_1_one_line_each(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "bad.yaml"
    f.write_text(BAD)
    rc = main(["validate", "-f", str(f)])
    out, _ = capsys.readouterr()
    assert rc == 1
    assert out == ('ResourceClaim/c: spec.devices.requests[0].exactly.cuont: unknown field "cuont" '
                   '(did you mean "count"?)\n')


def test_stdin(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(BAD))
    assert main(["validate", "-f", "-"]) == 1
    assert "cuont" in capsys.readouterr().out


def test_version_and_gates(capsys: pytest.CaptureFixture[str]) -> None:
    slices = str(DATA / "slices.yaml")  # has device taints: off by default in 1.35
    assert main(["validate", "-f", slices, "--kubernetes-version", "1.35"]) == 1
    assert "DRADeviceTaints" in capsys.readouterr().out
    assert main(["validate", "-f", slices, "--kubernetes-version", "1.35",
                 "--feature-gates", "DRADeviceTaints=true"]) == 0


PROBE_POD = """\
apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  containers:
  - name: c
    image: busybox
    livenessProbe: {httpGet: {port: 8080, path: /healthz, protocol: HTTP}}
"""


@pytest.mark.parametrize("version, out", [
    ("1.37", ""),
    ("1.36", 'Pod/p: spec.containers[0].livenessProbe.httpGet.protocol: unknown field "protocol"\n'),
    ("1.35", 'Pod/p: spec.containers[0].livenessProbe.httpGet.protocol: unknown field "protocol"\n'),
    ("1.34", 'Pod/p: spec.containers[0].livenessProbe.httpGet.protocol: unknown field "protocol"\n'),
])
def test_fields_are_those_of_the_target_version(version: str, out: str, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    """labkit/api/schema_<version>.json of the version asked for: a field that version's API does not have
    (HTTPGetAction.protocol, in the API since 1.37) is unknown there, as its API server says."""
    f = tmp_path / "pod.yaml"
    f.write_text(PROBE_POD)
    rc = main(["validate", "-f", str(f), "--kubernetes-version", version])
    assert (rc, capsys.readouterr().out) == (1 if out else 0, out)


@pytest.mark.parametrize("args", [
    ["-f", "/nonexistent/x.yaml"],
    ["-f", "DATA", "--kubernetes-version", "1.2"],
    ["-f", "DATA", "--feature-gates", "Nope=true"],
    ["-f", "DATA", "--feature-gates", "garbage"],
])
def test_bad_input_exit_2_clean_message(args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    args = [str(DATA / "slices.yaml") if a == "DATA" else a for a in args]
    assert main(["validate", *args]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("labkit validate: ") and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_unparsable_yaml_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "broken.yaml"
    f.write_text("a: 1\n---\nb: [\n")
    assert main(["validate", "-f", str(f)]) == 2
    err = capsys.readouterr().err
    assert f"{f}:doc 2: line" in err


def test_locked_gate_warns(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", "-f", str(DATA / "slices.yaml"), "--feature-gates", "DRAPrioritizedList=false"]) == 0
    assert "warning: feature gate DRAPrioritizedList is locked" in capsys.readouterr().err


def test_internal_errors_are_one_clean_line(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import importlib

    cli = importlib.import_module("labkit.api.cli")

    def boom(*_a: object, **_k: object) -> list:
        raise KeyError("surprise")
    monkeypatch.setattr(cli, "check_objects", boom)
    assert main(["validate", "-f", str(DATA / "slices.yaml")]) == 70  # labkit.errors.EXIT_INTERNAL
    err = capsys.readouterr().err
    assert err.strip() == ("labkit validate: internal error: KeyError: 'surprise' (a LabKit bug: "
                           "please report it; LABKIT_DEBUG=1 shows the traceback)")


def test_cel_selectors_are_compiled_and_costed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """labkit.api cannot compile CEL: `labkit validate` hands it labkit.cel's checks (labkit.cli)."""
    path = tmp_path / "classes.yaml"
    nested = "lists.range(1000).all(x, lists.range(1000).all(y, true))"
    path.write_text(f"""\
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {{name: bad}}
spec:
  selectors:
  - cel: {{expression: 'device.driver == 0'}}
  - cel: {{expression: '{nested}'}}
""")
    assert main(["validate", "-f", str(path)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out == [
        "DeviceClass/bad: spec.selectors[0].cel.expression: Invalid value: \"device.driver == 0\": compilation "
        "failed: ERROR: <input>:1:15: found no matching overload for '_==_' applied to '(string, int)'",
        "DeviceClass/bad: spec.selectors[1].cel.expression: Forbidden: too complex, exceeds cost limit",
    ]
