"""The run state of a detached local server (``python -m labkit.cluster.local.serve``), read by the
server itself and by the processes that look for it (``connect``, ``labkit cluster status``), and
the clients' side of it: ``start`` (spawn the server, wait until the cluster is up) and ``stop``.

Its own module because ``serve`` runs as ``__main__``: a client importing ``serve`` would load it a
second time (and runpy warns), and ``serve`` imports the cluster module that reads this state.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from labkit.cluster import runstate
from labkit.cluster.base import ClusterError
from labkit.cluster.local.procs import pid_alive
from labkit.model.profiles import load_profile

BACKEND = "local"


def running_state(profile_name: str) -> dict[str, Any] | None:
    """The run state of the live server for this profile, or None (stale state is removed)."""
    state = runstate.read_state(BACKEND, profile_name)
    if state is None:
        return None
    if not pid_alive(int(state.get("pid", 0))):
        kill_components(state)
        if state.get("stateDir"):
            shutil.rmtree(state["stateDir"], ignore_errors=True)
        runstate.clear(BACKEND, profile_name)
        return None
    return state


def kill_components(state: dict[str, Any]) -> None:
    """Last resort for a server that died without down(): its children's process groups."""
    for pgid in state.get("componentGroups") or []:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(int(pgid), signal.SIGKILL)


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
