"""Child processes of a local cluster: each in its own process group, logs to files, stopped in
reverse start order (SIGTERM, wait, SIGKILL). An atexit hook stops whatever is still running if
the Python process exits without `down()`; a watchdog process does it when the Python process is
killed (SIGKILL of a notebook kernel: no atexit), and removes the directories named with
`remove_on_death`.

Signals go through `labkit.cluster.processes`: only to a group whose leader is still the process
started here. A component that exits stays unreaped (a zombie) until `Supervisor.stop`, so its
pid and group number stay its own and the group's stragglers can still be stopped."""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from labkit.cluster import processes
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
    #: who the leader is (None without /proc: then it is never signalled)
    identity: processes.Identity | None = field(init=False)

    def __post_init__(self) -> None:
        self.pgid = self.popen.pid  # start_new_session makes the child its group leader
        self.identity = processes.identify_started(self.popen.pid)

    @property
    def pid(self) -> int:
        return self.popen.pid

    def _exited(self) -> os.waitid_result | None:
        """The exit status without reaping (WNOWAIT), or None while it runs."""
        try:
            return os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:  # reaped already: Popen knows how it ended
            self.popen.poll()
            return None

    def running(self) -> bool:
        return self.popen.returncode is None and self._exited() is None and self.popen.returncode is None

    @property
    def returncode(self) -> int | None:
        """As Popen's (negative: killed by that signal), also for an exited component not yet reaped."""
        if self.popen.returncode is not None:
            return self.popen.returncode
        info = self._exited()
        if info is None:
            return None
        return -info.si_status if info.si_code in (os.CLD_KILLED, os.CLD_DUMPED) else info.si_status

    def signal_group(self, sig: int) -> bool:
        """Signal the component's process group if its leader is still the process started here."""
        return self.identity is not None and processes.send_group(self.identity, sig)

    def tail(self, lines: int = 5) -> str:
        try:
            text = self.log.read_text(errors="replace").strip().splitlines()
        except OSError:
            return ""
        return " | ".join(text[-lines:])


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
            self._watchdog = processes.start_watchdog(self._listing)

    def remove_on_death(self, path: Path) -> None:
        """Remove `path` if this Python process is killed before `stop_all()`."""
        self._note(f"remove {path}")

    def start(self, name: str, argv: Sequence[str], *, ports: Sequence[int] = (),
              env: dict[str, str] | None = None, cwd: Path | None = None, group: str = "") -> Component:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        log = self.log_dir / f"{name}.log"
        popen: subprocess.Popen[bytes] | None = None
        try:
            with open(log, "ab") as out:
                popen = subprocess.Popen(list(argv), stdout=out, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, start_new_session=True, env=env, cwd=cwd)
            comp = Component(name, popen, log, tuple(ports), group or name)
            with self._lock:
                self.components.append(comp)
        except BaseException:  # Ctrl-C between the start and the record: stop_all() would not know it
            if popen is not None:
                self._stop_batch([Component(name, popen, log, tuple(ports), group or name)], 0.0)
            raise
        if comp.identity is not None:
            self._note(processes.group_line(comp.identity))
        return comp

    def get(self, name: str) -> Component | None:
        return next((c for c in self.components if c.name == name), None)

    def dead(self) -> list[Component]:
        return [c for c in self.components if not c.running()]

    def stop(self, comp: Component, timeout: float = 10.0) -> None:
        self._stop_batch([comp], timeout)

    @staticmethod
    def _stop_batch(comps: list[Component], timeout: float) -> None:
        """SIGTERM the process groups, SIGKILL whatever is left after `timeout` seconds, then reap
        the leaders (not before: until then their group numbers cannot go to anyone else)."""
        for c in comps:
            c.signal_group(signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while any(c.running() for c in comps) and time.monotonic() < deadline:
            time.sleep(0.05)
        for c in comps:
            c.signal_group(signal.SIGKILL)  # stragglers in the group, or the leader itself
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
            self._watchdog.kill()  # Popen signals its own child only until it has reaped it
            self._watchdog.wait()
            self._watchdog = None
        _LIVE.discard(self)


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
            raise ProcessError(f"{comp.name} exited with code {comp.returncode} while waiting for "
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
