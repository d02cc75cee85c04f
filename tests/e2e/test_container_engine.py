"""tools/container-engine.sh: the runtime shim dockerd gets on hosts whose capability bounding set
lacks CAP_SYS_RESOURCE (this one). runc is replaced by a recorder, so the test sees exactly what
the real runc would be given."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.paths import REPO

pytestmark = pytest.mark.slow  # heavy: `make check` leaves it out, `make test` runs it

ROOT = REPO
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


# --- start and stop, with a stand-in dockerd and docker client on PATH -------------------------

FAKE_DOCKERD = """#!/bin/sh
# a stand-in dockerd: waits $DELAY s (a cold machine), then writes its pidfile (unless
# NO_PIDFILE) and answers (the ready file the fake client reads); FAIL makes it exit at once
[ -n "$FAIL" ] && { echo "failed to start daemon: $FAIL"; exit 1; }
pidfile=""
prev=""
for a in "$@"; do [ "$prev" = --pidfile ] && pidfile="$a"; prev="$a"; done
sleep "${DELAY:-0}"
[ -n "$NO_PIDFILE" ] || echo $$ > "$pidfile"
touch "$READY"
while :; do sleep 0.2; done
"""

FAKE_DOCKER = """#!/bin/sh
# a stand-in docker client: a daemon answers on our socket once the stand-in dockerd is ready
[ "$DOCKER_HOST" = "unix://$ENGINE/docker.sock" ] && [ -e "$READY" ] || exit 1
case "$1" in version) echo fake-1.0 ;; esac
exit 0
"""


@pytest.fixture
def engine(tmp_path: Path):
    """Runs container-engine.sh with the stand-ins first on PATH and its own engine dir; `ip`
    is a stand-in too (stop removes docker0 with it). Whatever the stand-in dockerd left running
    is killed at the end."""
    bin_dir, engine_dir = tmp_path / "bin", tmp_path / "engine"
    bin_dir.mkdir()
    for name, text in (("dockerd", FAKE_DOCKERD), ("docker", FAKE_DOCKER), ("ip", "#!/bin/sh\nexit 0\n"), ("podman", "#!/bin/sh\nexit 1\n")):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    base = {
        "PATH": f"{bin_dir}:/usr/bin:/bin:/usr/sbin:/sbin",
        "LABKIT_ENGINE_DIR": str(engine_dir),
        "ENGINE": str(engine_dir),
        "READY": str(tmp_path / "ready"),
        "HOME": str(tmp_path),
    }

    def run(command: str, **env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["bash", str(SCRIPT), command], env={**base, **env}, capture_output=True, text=True, timeout=120)

    yield run
    subprocess.run(["pkill", "-f", f"{bin_dir}/dockerd"], check=False)


def _running(engine_dir: Path) -> bool:
    return subprocess.run(["pgrep", "-f", "--", f"--exec-root {engine_dir}/run"], capture_output=True).returncode == 0


def test_start_waits_for_a_dockerd_slow_to_write_its_pidfile(engine, tmp_path):
    # a cold CI machine: dockerd wrote its pidfile after more than 2 s, and start said "dockerd exited"
    got = engine("start", DELAY="3.5")
    assert got.returncode == 0, got.stderr
    assert "up on unix://" in got.stderr and "exited" not in got.stderr
    stop = engine("stop")
    assert stop.returncode == 0 and "stopped dockerd" in stop.stderr, stop.stderr
    assert not _running(tmp_path / "engine")


def test_start_reports_a_dockerd_that_exits_with_its_own_log_lines(engine, tmp_path):
    log = tmp_path / "engine" / "dockerd.log"
    log.parent.mkdir()
    log.write_text("a line from an earlier run\n")
    got = engine("start", FAIL="bad config")
    assert got.returncode == 1
    assert "failed to start daemon: bad config" in got.stderr and "dockerd exited" in got.stderr
    assert "earlier run" not in got.stderr  # only what this dockerd wrote


def test_stop_finds_our_dockerd_without_its_pidfile(engine, tmp_path):
    got = engine("start", NO_PIDFILE="1")
    assert got.returncode == 0, got.stderr
    assert _running(tmp_path / "engine")
    stop = engine("stop")
    assert stop.returncode == 0 and "stopped dockerd" in stop.stderr, stop.stderr
    assert not _running(tmp_path / "engine")
    assert "no dockerd of ours" in engine("stop").stderr
