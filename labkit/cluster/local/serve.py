"""A local cluster that outlives `labkit cluster up`: a detached server process owns it.

The local backend's node agents and heartbeats are threads of the Python process that started
the cluster, so a cluster that stays up needs a process that stays up: `start()` launches
``python -m labkit.cluster.local.serve --profile P`` in its own session (stdin closed, output to
``<run dir>/serve.log``); that process brings the cluster up, records it in the run dir
(`labkit.cluster.runstate`) and keeps it running until SIGTERM, when it calls `down()` and removes
the run dir. `stop()` sends that signal; `connect("local", P)` attaches to the recorded cluster.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from labkit.cluster import runstate
from labkit.cluster.base import ClusterError
from labkit.cluster.local.cluster import LocalCluster
from labkit.cluster.local.procs import pid_alive
from labkit.cluster.local.served import BACKEND, kill_components, running_state
from labkit.model.profiles import load_profile


def start(profile: Any, *, timeout: float = 300.0) -> dict[str, Any]:
    """Start the server for `profile` (name, YAML path or ClusterProfile) unless one runs; return
    its state once the cluster is up. Raises ClusterError with the server's reason on failure."""
    prof = load_profile(profile)
    state = running_state(prof.name)
    if state is not None:
        if state.get("fingerprint") != runstate.fingerprint(prof):
            raise ClusterError(f"local: a cluster of another version of profile {prof.name} is running; "
                               f"`labkit cluster down --backend local --profile {prof.name}` first")
        return state
    rd = runstate.run_dir(BACKEND, prof.name)
    rd.mkdir(parents=True, exist_ok=True)
    (rd / "error").unlink(missing_ok=True)
    if not isinstance(profile, str | Path):
        raise ClusterError("local: the cluster server takes a profile name or a YAML path")
    arg = str(Path(profile).resolve()) if Path(profile).is_file() else str(profile)
    with open(rd / "serve.log", "ab") as log:
        proc = subprocess.Popen([sys.executable, "-m", "labkit.cluster.local.serve", "--profile", arg],
                                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True, close_fds=True)
    deadline = time.monotonic() + timeout
    try:
        while True:
            state = runstate.read_state(BACKEND, prof.name)
            if state is not None and state.get("pid") == proc.pid:
                return state
            if proc.poll() is not None:
                why = _read(rd / "error") or _tail(rd / "serve.log")
                runstate.clear(BACKEND, prof.name)
                raise ClusterError(f"local cluster {prof.name}: the server exited: {why}")
            if time.monotonic() > deadline:
                raise ClusterError(f"local cluster {prof.name}: not up after {timeout:.0f}s; see {rd / 'serve.log'}")
            time.sleep(0.3)
    except BaseException:  # Ctrl-C, a timeout: the server started here goes too (it runs in its own session)
        _stop_server(proc)
        runstate.clear(BACKEND, prof.name)
        raise


def _stop_server(proc: subprocess.Popen[bytes], timeout: float = 60.0) -> None:
    """SIGTERM the server (it aborts a start-up under way and stops what it started); SIGKILL after `timeout`."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def stop(profile_name: str, *, timeout: float = 60.0) -> bool:
    """Stop the server of this profile and wait until it and its processes are gone.
    Returns False when nothing was running."""
    state = runstate.read_state(BACKEND, profile_name)
    if state is None:
        return False
    pid = int(state.get("pid", 0))
    if pid and pid_alive(pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while pid_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        if pid_alive(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    kill_components(state)
    if state.get("stateDir"):
        shutil.rmtree(state["stateDir"], ignore_errors=True)
    runstate.clear(BACKEND, profile_name)
    return True


def _read(p: Path) -> str:
    try:
        return p.read_text().strip()
    except OSError:
        return ""


def _tail(p: Path, n: int = 3) -> str:
    return " | ".join(_read(p).splitlines()[-n:]) or "no output"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m labkit.cluster.local.serve")
    ap.add_argument("--profile", required=True)
    args = ap.parse_args(argv)
    prof = load_profile(args.profile)
    rd = runstate.run_dir(BACKEND, prof.name)
    stopping = threading.Event()

    def abort(*_: object) -> None:  # during start-up: up() stops what it started and re-raises
        raise KeyboardInterrupt

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, abort)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    # a short state dir: the plugins' unix sockets live below it (108-byte path limit)
    state_dir = Path(tempfile.mkdtemp(prefix="lk-", dir="/tmp"))
    try:
        cluster = LocalCluster(state_dir=state_dir, keep=True, progress=False, reuse=False)
        cluster.up(prof)
    except ClusterError as exc:
        (rd / "error").write_text(str(exc))
        shutil.rmtree(state_dir, ignore_errors=True)
        return 1
    except KeyboardInterrupt:
        shutil.rmtree(state_dir, ignore_errors=True)
        return 130
    for sig in (signal.SIGTERM, signal.SIGINT):  # up: a signal now asks for an orderly down()
        signal.signal(sig, lambda *_: stopping.set())
    assert cluster.state_dir is not None and cluster.sup is not None
    cluster.sup.remove_on_death(state_dir)  # this server killed: its watchdog removes the state dir
    runstate.write_state(BACKEND, prof.name, {
        "backend": BACKEND, "profile": prof.name, "fingerprint": runstate.fingerprint(prof), "pid": os.getpid(),
        "server": cluster.server, "kubeconfig": str(cluster.kubeconfig), "stateDir": str(cluster.state_dir),
        "kubernetesVersion": cluster.kubernetes_version, "emulatedVersion": cluster.emulated_version,
        "gates": cluster._gates, "componentGroups": [c.pgid for c in cluster.components()],
        "log": str(rd / "serve.log"), "timings": cluster.timings})
    print(f"local cluster {prof.name} up: {cluster.server} (pid {os.getpid()})", flush=True)
    try:
        while not stopping.wait(1.0):
            dead = cluster.sup.dead() if cluster.sup else []
            if dead:
                print(f"component {dead[0].name} exited; see {dead[0].log}", flush=True)
    finally:
        cluster.down()
        shutil.rmtree(state_dir, ignore_errors=True)
        runstate.clear(BACKEND, prof.name)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
