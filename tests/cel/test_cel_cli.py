"""``labkit cel``: per-device results, exit codes, one-line errors."""

from __future__ import annotations

import io
import json

import pytest

from labkit.cli import main
from tests.paths import TEST_DATA


@pytest.fixture
def slices(cel_slices):
    return cel_slices


SLICES = TEST_DATA / "cel" / "slices.yaml"


def run(capsys, *argv):
    code = main(["cel", *argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("engine", ["cel-expr-python", "cel-python"])
def test_json_rows(capsys, slices, engine):
    expr = 'device.attributes["gpu.nvidia.com"].driverVersion.major() >= 550'
    code, out, err = run(capsys, expr, "-f", slices, "-o", "json", "--engine", engine)
    assert code == 0, err
    rows = {r["device"]: r for r in json.loads(out)["devices"]}
    assert rows["gpu-0"]["result"] == "match"
    assert rows["gpu-1"]["result"] == "error"
    assert rows["gpu-1"]["message"].startswith("no such key: driverVersion")
    # a missing domain is an empty map, so the lookup of the key fails the same way
    assert rows["nic-0"]["result"] == "error"
    assert rows["nic-0"]["node"] == "<all nodes>"
    assert rows["gpu-0"]["node"] == "node-1" and rows["gpu-0"]["pool"] == "node-1"


def test_table(capsys, slices):
    code, out, _ = run(capsys, 'device.driver == "gpu.nvidia.com"', "-f", slices)
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == ["NODE", "DRIVER", "POOL", "DEVICE", "RESULT", "MESSAGE"]
    assert "gpu-0" in lines[1] and lines[1].rstrip().endswith("match")
    assert "nic-0" in lines[3] and "no match" in lines[3]


def test_stdin(capsys, monkeypatch):
    monkeypatch.setattr("sys.stdin", io.StringIO(SLICES.read_text()))
    code, out, _ = run(capsys, "true", "-f", "-", "-o", "json")
    assert code == 0
    assert [r["result"] for r in json.loads(out)["devices"]] == ["match"] * 3


def test_compile_error_exit_2_one_line(capsys, slices):
    code, out, err = run(capsys, 'device.capacity["gpu.nvidia.com"].memory >= quantity("40Gi")', "-f", slices)
    assert code == 2 and out == ""
    assert err.count("\n") == 1
    assert "compareTo" in err and "Traceback" not in err


def test_unreadable_input_exit_2(capsys, tmp_path):
    code, _, err = run(capsys, "true", "-f", str(tmp_path / "missing.yaml"))
    assert code == 2 and err.count("\n") == 1 and "no such file" in err
    bad = tmp_path / "bad.yaml"
    bad.write_text("kind: [unclosed\n")
    code, _, err = run(capsys, "true", "-f", str(bad))
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err


def test_the_cli_and_the_cel_explorer_list_the_same_rows(capsys, slices):
    """CEL over slices has one home (labkit.cel.slices): `labkit cel` and the widget agree, row
    for row, including errors and where each device is."""
    from labkit.api import load
    from labkit.widgets.logic import match_devices

    expr = 'device.attributes["gpu.nvidia.com"].driverVersion.major() >= 550'
    code, out, _ = run(capsys, expr, "-f", slices, "-o", "json")
    assert code == 0
    widget = [vars(m) for m in match_devices([expr], load(SLICES.read_text()))]
    assert widget == json.loads(out)["devices"]
    assert [(r["device"], r["node"], r["result"]) for r in widget] == [
        ("gpu-0", "node-1", "match"), ("gpu-1", "node-1", "error"), ("nic-0", "<all nodes>", "error")]
    # several selectors are ANDed and stop at the first false, like the allocator
    both = match_devices(['device.driver == "gpu.nvidia.com"', expr], load(SLICES.read_text()))
    assert [m.result for m in both] == ["match", "error", "no match"]


def test_a_selector_failing_on_every_device_exits_2(capsys, slices):
    """kube-scheduler's allocator aborts on a selector's runtime error: one that errors on every
    device would fail every allocation, so `labkit cel` lists the rows and then refuses it."""
    code, out, err = run(capsys, 'device.attributes["gpu.nvidia.com"].nosuch == 1', "-f", slices)
    assert code == 2 and err.count("\n") == 1
    assert err.startswith("labkit cel: the selector fails on every device (3), first: no such key: nosuch")
    assert "kube-scheduler would fail every allocation" in err and "fix: guard the lookup with has(" in err
    assert [" error " in ln for ln in out.splitlines()[1:]] == [True] * 3  # the rows are still listed
