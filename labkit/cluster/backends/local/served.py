"""The run state of a detached local server (``python -m labkit.cluster.backends.local.serve``), read by the
server itself and by the processes that look for it (``connect``, ``labkit cluster status``), and
the clients' side of it: ``start`` (spawn the server, wait until the cluster is up) and ``stop``.
The state names the server and its components by identity (`labkit.cluster.processes`): a stale
one is reported (`runstate.StaleState`), and only processes that still are the recorded ones are
ever signalled.

Its own module because ``serve`` runs as ``__main__``: a client importing ``serve`` would load it a
second time (and runpy warns), and ``serve`` imports the cluster module that reads this state.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from labkit.cluster import processes, runstate
from labkit.cluster.base import ClusterError
from labkit.cluster.processes import Identity
from labkit.cluster.runstate import StaleState
from labkit.model.profiles import load_profile

BACKEND = "local"
#: a local state file's own fields (runstate.COMMON_FIELDS aside), name -> JSON type
STATE_FIELDS: dict[str, type] = {"pid": int, "process": dict, "componentGroups": list, "server": str,
                                 "kubeconfig": str, "stateDir": str, "kubernetesVersion": str}
#: the server's module (`start` runs it)
SERVER_MODULE = "labkit.cluster.backends.local.serve"


def _server(state: dict[str, Any], path: Path) -> Identity:
    """The recorded server's identity, checked: StaleState BAD when it is not one `start` records."""
    try:
        server = Identity.from_json(state["process"])
    except ValueError as exc:
        raise StaleState(path, f"process: {exc}", StaleState.BAD) from None
    if server.pid != state["pid"]:
        raise StaleState(path, f"process: pid {server.pid}, but pid says {state['pid']}", StaleState.BAD)
    if server.uid != os.getuid():
        raise StaleState(path, f"process: uid {server.uid}, not yours (uid {os.getuid()}); nothing was signalled",
                         StaleState.BAD)
    return server


def _groups(state: dict[str, Any], path: Path) -> list[Identity]:
    try:
        return [Identity.from_json(g) for g in state["componentGroups"]]
    except ValueError as exc:
        raise StaleState(path, f"componentGroups: {exc}", StaleState.BAD) from None


def running_state(profile_name: str) -> dict[str, Any] | None:
    """The run state of this profile's live server, or None when none is recorded. StaleState
    when the state cannot be trusted (BAD, FOREIGN) or its server is no longer the process that
    recorded it (GONE: exited, or its pid is someone else's now). Reads only: nothing is signalled
    or removed."""
    state = runstate.read_state(BACKEND, profile_name, STATE_FIELDS)
    if state is None:
        return None
    path = runstate.run_dir(BACKEND, profile_name) / runstate.STATE_FILE
    server = _server(state, path)
    _groups(state, path)
    why = processes.mismatch(server)
    if why:
        raise StaleState(path, f"its server is gone: {why}", StaleState.GONE, state)
    return state


def alive(state: dict[str, Any]) -> bool:
    """Whether the server a running state names still runs (a connection attached to it asks)."""
    try:
        return not processes.mismatch(Identity.from_json(state.get("process")))
    except ValueError:
        return False


def tidy(stale: StaleState) -> str:
    """Remove a stale run dir, and what a gone server left behind: its components' process groups
    whose leaders are still the processes it started (SIGKILL), and its state dir when that is one
    it made (``/tmp/lk-*``, this user's). Returns what was done, for a message. A FOREIGN one is
    left as it is (ClusterError)."""
    if not stale.removable:
        raise stale
    killed = 0
    if stale.kind == StaleState.GONE and stale.state is not None:
        killed = kill_components(stale.state)
        _remove_state_dir(stale.state.get("stateDir"))
    removed = runstate.remove_run_dir(stale.run_dir)
    done = f"removed its run dir {stale.run_dir}" if removed else f"could not remove its run dir {stale.run_dir}"
    return done + (f" and stopped {killed} leftover process group(s) it had started" if killed
                   else "; no process was signalled")


def _remove_state_dir(path: object) -> None:
    """A server's state dir, only if it is one `LocalCluster` makes: /tmp/lk-*, this user's directory."""
    if not isinstance(path, str):
        return
    d = Path(path)
    if d.parent not in (Path(tempfile.gettempdir()), Path("/tmp")) or not d.name.startswith("lk-"):
        return
    try:
        st = os.lstat(d)
    except OSError:
        return
    if st.st_uid == os.getuid() and not os.path.islink(d) and os.path.isdir(d):
        shutil.rmtree(d, ignore_errors=True)


def kill_components(state: dict[str, Any]) -> int:
    """Last resort for a server that died without down(): SIGKILL its components' process groups
    whose leaders are still the processes it started. Returns how many were signalled."""
    path = runstate.run_dir(BACKEND, str(state.get("profile"))) / runstate.STATE_FILE
    return sum(processes.send_group(g, signal.SIGKILL) for g in _groups(state, path))


def start(profile: Any, *, timeout: float = 300.0) -> dict[str, Any]:
    """Start the server for `profile` (name, YAML path or ClusterProfile) unless one runs; return
    its state once the cluster is up. Raises ClusterError with the server's reason on failure.
    A stale state whose server is gone is tidied first (one line on stderr says so); one that
    cannot be trusted is left, and StaleState says why."""
    prof = load_profile(profile)
    try:
        state = running_state(prof.name)
    except StaleState as exc:
        if exc.kind != StaleState.GONE:
            raise
        print(f"local cluster of profile {prof.name}: stale: {exc}; {tidy(exc)}", file=sys.stderr, flush=True)
        state = None
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
    proc: subprocess.Popen[bytes] | None = None
    try:
        with open(rd / "serve.log", "ab") as log:
            proc = subprocess.Popen([sys.executable, "-m", SERVER_MODULE, "--profile", arg],
                                    stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                    start_new_session=True, close_fds=True)
        deadline = time.monotonic() + timeout
        while True:
            state = runstate.read_state(BACKEND, prof.name, STATE_FIELDS)
            if state is not None and state["pid"] == proc.pid:
                return state
            if proc.poll() is not None:
                why = _read(rd / "error") or _tail(rd / "serve.log")
                runstate.clear(BACKEND, prof.name)
                raise ClusterError(f"local cluster {prof.name}: the server exited: {why}")
            if time.monotonic() > deadline:
                raise ClusterError(f"local cluster {prof.name}: not up after {timeout:.0f}s; see {rd / 'serve.log'}")
            time.sleep(0.3)
    except BaseException as exc:  # Ctrl-C, a timeout: the server started here goes too (it runs in its own session)
        if isinstance(exc, KeyboardInterrupt):
            print(f"local cluster {prof.name}: interrupted; stopping what was started", file=sys.stderr, flush=True)
        with processes.finishing(f"local cluster {prof.name}: still stopping what was started (one moment)"):
            if proc is not None:
                _stop_server(proc)
            runstate.clear(BACKEND, prof.name)
        raise


def _stop_server(proc: subprocess.Popen[bytes], timeout: float = 60.0) -> None:
    """SIGTERM the server (it aborts a start-up under way and stops what it started); SIGKILL after
    `timeout`. It is this process's child, not reaped until `wait` returns: Popen signals only it."""
    proc.terminate()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()  # its Supervisor's watchdog then stops the components
        proc.wait()


def stop(profile_name: str, *, timeout: float = 60.0) -> str:
    """Stop the server of this profile and wait until it and its processes are gone; say what was
    done. A stale state is tidied (`tidy`): nothing is signalled but what is still verifiably the
    kit's. StaleState for one that is not this user's."""
    try:
        state = running_state(profile_name)
    except StaleState as exc:
        return f"was stale: {exc}; {tidy(exc)}"
    if state is None:
        return "was not running"
    path = runstate.run_dir(BACKEND, profile_name) / runstate.STATE_FILE
    server = _server(state, path)
    if processes.send(server, signal.SIGTERM) and not processes.wait_gone(server, timeout):
        processes.send(server, signal.SIGKILL)
        processes.wait_gone(server, 10.0)
    kill_components(state)
    _remove_state_dir(state.get("stateDir"))
    runstate.clear(BACKEND, profile_name)
    return "is down"


def _read(p: Path) -> str:
    try:
        return p.read_text().strip()
    except OSError:
        return ""


def _tail(p: Path, n: int = 3) -> str:
    return " | ".join(_read(p).splitlines()[-n:]) or "no output"
