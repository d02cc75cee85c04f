"""Child processes of a local cluster: each in its own process group, logs to files, stopped in
reverse start order (SIGTERM, wait, SIGKILL). An atexit hook stops whatever is still running if
the Python process exits without `down()`; a watchdog process does it when the Python process is
killed (SIGKILL of a notebook kernel: no atexit), and removes the directories named with
`remove_on_death`."""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from labkit.errors import EngineError


class ProcessError(EngineError, RuntimeError):
    """A component exited or never became ready (one line, with the log file to read)."""


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.2)
        return s.connect_ex((host, port)) == 0


def pid_alive(pid: int) -> bool:
    """True while `pid` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False


@dataclass
class Component:
    name: str
    popen: subprocess.Popen
    log: Path
    ports: tuple[int, ...] = ()
    group: str = ""  # consecutive components of one group are stopped together
    pgid: int = field(init=False)

    def __post_init__(self) -> None:
        self.pgid = self.popen.pid  # start_new_session makes the child its group leader

    @property
    def pid(self) -> int:
        return self.popen.pid

    def running(self) -> bool:
        return self.popen.poll() is None

    def tail(self, lines: int = 5) -> str:
        try:
            text = self.log.read_text(errors="replace").strip().splitlines()
        except OSError:
            return ""
        return " | ".join(text[-lines:])


#: the watchdog (python -c): waits until its parent is gone, then SIGKILLs the process groups listed
#: in the file and removes the directories listed there ("group N" / "remove PATH" lines)
_WATCHDOG = """
import os, shutil, signal, sys, time
parent, listing = int(sys.argv[1]), sys.argv[2]
signal.signal(signal.SIGINT, signal.SIG_IGN)
while os.getppid() == parent:
    time.sleep(0.5)
try:
    lines = open(listing).read().splitlines()
except OSError:
    lines = []
for line in lines:
    kind, _, arg = line.partition(" ")
    if kind == "group":
        try:
            os.killpg(int(arg), signal.SIGKILL)
        except (OSError, ValueError):
            pass
for line in lines:
    kind, _, arg = line.partition(" ")
    if kind == "remove":
        shutil.rmtree(arg, ignore_errors=True)
"""


class Supervisor:
    """Starts components and guarantees they are gone after `stop_all()` (or interpreter exit)."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.components: list[Component] = []
        self._lock = threading.Lock()
        self._watchdog: subprocess.Popen[bytes] | None = None
        _LIVE.add(self)  # strong reference: an abandoned Supervisor must still be stopped at exit

    @property
    def _listing(self) -> Path:
        return self.log_dir / "watchdog.list"

    def _note(self, line: str) -> None:
        """Tell the watchdog (started on first use) about a process group or a directory."""
        self.log_dir.mkdir(parents=True, exist_ok=True)
        with open(self._listing, "a") as fh:
            fh.write(line + "\n")
        if self._watchdog is None:
            self._watchdog = subprocess.Popen(
                [sys.executable, "-S", "-c", _WATCHDOG, str(os.getpid()), str(self._listing)],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                start_new_session=True)

    def remove_on_death(self, path: Path) -> None:
        """Remove `path` if this Python process is killed before `stop_all()`."""
        self._note(f"remove {path}")

    def start(self, name: str, argv: Sequence[str], *, ports: Sequence[int] = (),
              env: dict[str, str] | None = None, cwd: Path | None = None, group: str = "") -> Component:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        log = self.log_dir / f"{name}.log"
        with open(log, "ab") as out:
            popen = subprocess.Popen(list(argv), stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     start_new_session=True, env=env, cwd=cwd)
        comp = Component(name, popen, log, tuple(ports), group or name)
        with self._lock:
            self.components.append(comp)
        self._note(f"group {comp.pgid}")
        return comp

    def get(self, name: str) -> Component | None:
        return next((c for c in self.components if c.name == name), None)

    def dead(self) -> list[Component]:
        return [c for c in self.components if not c.running()]

    def stop(self, comp: Component, timeout: float = 10.0) -> None:
        self._stop_batch([comp], timeout)

    @staticmethod
    def _stop_batch(comps: list[Component], timeout: float) -> None:
        """SIGTERM the process groups, SIGKILL whatever is left after `timeout` seconds."""
        for c in comps:
            _signal_group(c.pgid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for c in comps:
            with contextlib.suppress(subprocess.TimeoutExpired):
                c.popen.wait(max(0.0, deadline - time.monotonic()))
        for c in comps:
            _signal_group(c.pgid, signal.SIGKILL)  # stragglers in the group, or the leader itself
            with contextlib.suppress(subprocess.TimeoutExpired):  # unkillable (D state): give up
                c.popen.wait(5)

    def stop_all(self, timeout: float = 10.0) -> None:
        """Stop in reverse start order; a run of components of one group stops in parallel."""
        with self._lock:
            comps, self.components = list(reversed(self.components)), []
        while comps:
            batch = [comps.pop(0)]
            while comps and comps[0].group == batch[0].group:
                batch.append(comps.pop(0))
            self._stop_batch(batch, timeout)
        if self._watchdog is not None:  # nothing left to guard
            self._watchdog.kill()
            self._watchdog.wait()
            self._watchdog = None
        _LIVE.discard(self)


def _signal_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def wait_until(pred, timeout: float, interval: float = 0.1, what: str = "", comp: Component | None = None) -> None:
    """Poll `pred()` until true; raise ProcessError after `timeout` s or when `comp` exits."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if pred():
                return
        except Exception:  # noqa: BLE001 - not ready yet (connection refused, 503, ...)
            pass
        if comp is not None and not comp.running():
            raise ProcessError(f"{comp.name} exited with code {comp.popen.returncode} while waiting for "
                               f"{what or 'it'}; see {comp.log}: {comp.tail(3)}")
        if time.monotonic() > deadline:
            hint = f"; see {comp.log}: {comp.tail(3)}" if comp is not None else ""
            raise ProcessError(f"timed out after {timeout:.0f}s waiting for {what}{hint}")
        time.sleep(interval)


_LIVE: set[Supervisor] = set()


@atexit.register
def _stop_everything() -> None:  # pragma: no cover - exercised by subprocess test
    for sup in list(_LIVE):
        sup.stop_all(timeout=3)
