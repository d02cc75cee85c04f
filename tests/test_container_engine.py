"""tools/container-engine.sh: the runtime shim dockerd gets on hosts whose capability bounding set
lacks CAP_SYS_RESOURCE (this one). runc is replaced by a recorder, so the test sees exactly what
the real runc would be given."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "tools" / "container-engine.sh"
CAPS = ["CAP_CHOWN", "CAP_SYS_ADMIN", "CAP_SYS_RESOURCE", "CAP_NET_ADMIN"]
KINDS = ("bounding", "effective", "permitted", "inheritable", "ambient")


@pytest.fixture
def shim(tmp_path: Path) -> tuple[Path, Path]:
    record = tmp_path / "runc-args"
    fake_runc = tmp_path / "runc"
    fake_runc.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > {record}\n')
    fake_runc.chmod(0o755)
    dest = tmp_path / "shim"
    subprocess.run(["bash", str(SCRIPT), "write-shim", str(dest), str(fake_runc)], check=True)
    return dest, record


def _caps() -> dict[str, list[str]]:
    return {k: list(CAPS) for k in KINDS}


def test_shim_drops_sys_resource_from_the_bundle_on_create(shim, tmp_path):
    dest, record = shim
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    (bundle / "config.json").write_text(json.dumps({"ociVersion": "1.0.2", "process": {"args": ["sh"], "capabilities": _caps()}}))
    argv = ["--root", "/run/x", "--log", "/tmp/log.json", "create", "--bundle", str(bundle), "--pid-file", "p", "ctr-1"]
    subprocess.run([str(dest), *argv], check=True)
    spec = json.loads((bundle / "config.json").read_text())
    for kind in KINDS:
        assert spec["process"]["capabilities"][kind] == ["CAP_CHOWN", "CAP_SYS_ADMIN", "CAP_NET_ADMIN"]
    assert spec["process"]["args"] == ["sh"] and spec["ociVersion"] == "1.0.2"
    assert record.read_text().split("\n")[:-1] == argv  # the real runc gets the same arguments


def test_shim_drops_sys_resource_from_the_exec_process_file(shim, tmp_path):
    dest, record = shim
    process = tmp_path / "process.json"
    process.write_text(json.dumps({"args": ["env"], "capabilities": _caps(), "cwd": "/"}))
    subprocess.run([str(dest), "exec", "--process", str(process), "--detach", "ctr-1"], check=True)
    got = json.loads(process.read_text())
    assert all("CAP_SYS_RESOURCE" not in got["capabilities"][k] for k in KINDS)
    assert got["capabilities"]["bounding"] == ["CAP_CHOWN", "CAP_SYS_ADMIN", "CAP_NET_ADMIN"]
    assert got["args"] == ["env"] and "exec" in record.read_text()


def test_shim_leaves_other_commands_alone(shim, tmp_path):
    dest, record = shim
    bundle = tmp_path / "b"
    bundle.mkdir()
    text = json.dumps({"process": {"capabilities": _caps()}})
    (bundle / "config.json").write_text(text)
    subprocess.run([str(dest), "state", "ctr-1"], check=True, cwd=bundle)
    assert (bundle / "config.json").read_text() == text
    assert record.read_text().split() == ["state", "ctr-1"]
