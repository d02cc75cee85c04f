"""Signals for the kit's own processes only: who a process is, and a signal sent only after checking
that the pid still is that process.

A pid alone names whoever holds the number now: once a process the kit started has exited (and
been reaped), the kernel gives the number to some later process (pids are handed out in cycles up
to /proc/sys/kernel/pid_max). A recorded `Identity` adds what a reused pid does not share: the
process's start time (field 22 of /proc/<pid>/stat, clock ticks after boot; procfs(5)), the boot it
started in (/proc/sys/kernel/random/boot_id), its owner and its command line. `send` and
`send_group` signal only when the pid still is the recorded process; `send` holds a pidfd
(pidfd_open(2), Linux 5.3+) across the check and the signal, so both name the same process even if
it exits in between.

Every signal the kit sends to a process it started goes through here (the local backend's
Supervisor, the servers of `labkit cluster up`, the watchdog below), except Popen's own to a child
it has not reaped yet (Popen checks that first; until then the pid cannot be anyone else's). Linux
only (/proc), like the local backend. Only the standard library is imported: the watchdog runs this
file as a script (``python -I -S processes.py --watchdog PARENT LISTING``) without the kit on its path.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

__all__ = ["Identity", "finishing", "identify", "identify_started", "mismatch", "send", "send_group", "start_watchdog",
           "wait_gone"]


@dataclass(frozen=True)
class Identity:
    """What tells a process from a later one with the same pid (see the module docstring)."""

    pid: int
    start: int  # /proc/<pid>/stat field 22: start time, clock ticks after boot
    boot: str  # /proc/sys/kernel/random/boot_id when it was recorded
    uid: int  # owner of /proc/<pid>
    cmdline: tuple[str, ...]  # empty for a zombie

    def to_json(self) -> dict[str, Any]:
        return {"pid": self.pid, "start": self.start, "boot": self.boot, "uid": self.uid,
                "cmdline": list(self.cmdline)}

    @classmethod
    def from_json(cls, value: object) -> Identity:
        """An Identity from `to_json`'s form; ValueError saying which field is wrong."""
        if not isinstance(value, dict):
            raise ValueError(f"expected an object with pid, start, boot, uid and cmdline, got {_json_type(value)}")
        for name, kind in (("pid", int), ("start", int), ("boot", str), ("uid", int), ("cmdline", list)):
            if name not in value:
                raise ValueError(f"field {name} is missing")
            got = value[name]
            if not isinstance(got, kind) or isinstance(got, bool):
                raise ValueError(f"{name}: expected {_JSON_NAMES[kind]}, got {_json_type(got)}")
        if value["pid"] <= 0 or value["start"] < 0 or value["uid"] < 0:
            raise ValueError(f"pid {value['pid']}, start {value['start']}, uid {value['uid']}: "
                             "expected a pid > 0 and a start and uid >= 0")
        if not all(isinstance(a, str) for a in value["cmdline"]):
            raise ValueError("cmdline: expected a list of strings")
        return cls(value["pid"], value["start"], value["boot"], value["uid"], tuple(value["cmdline"]))

    def command(self, width: int = 80) -> str:
        """The command line, short enough for a message."""
        text = " ".join(self.cmdline) or "(no command line: a zombie)"
        return text if len(text) <= width else text[:width - 3] + "..."


_JSON_NAMES: dict[type, str] = {int: "an integer", str: "a string", list: "a list", dict: "an object",
                                bool: "true or false", float: "a number"}


def _json_type(value: object) -> str:
    if value is None:
        return "null"
    return next((name for kind, name in _JSON_NAMES.items() if type(value) is kind), type(value).__name__)


@lru_cache(maxsize=1)
def boot_id() -> str:
    """This boot's random id: a start time recorded in another boot means nothing in this one."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def _read(pid: int) -> tuple[Identity, str] | None:
    """(the identity, the state letter of /proc/<pid>/stat field 3) of the process holding `pid` now."""
    if pid <= 0:
        return None
    try:
        uid = os.stat(f"/proc/{pid}").st_uid
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    # "pid (comm) state ppid ...": comm may hold spaces and parentheses, so split after the last ")";
    # the fields after it start at field 3, so field 22 is the 20th
    fields = stat[stat.rindex(b")") + 2:].split()
    cmdline = tuple(raw.rstrip(b"\0").decode(errors="surrogateescape").split("\0")) if raw.strip(b"\0") else ()
    return Identity(pid, int(fields[19]), boot_id(), uid, cmdline), fields[0].decode()


def identify(pid: int) -> Identity | None:
    """The process holding `pid` now (a zombie too), or None when there is none (or no /proc)."""
    got = _read(pid)
    return got[0] if got else None


def identify_started(pid: int, wait: float = 5.0) -> Identity | None:
    """`identify` for a child just started: Popen returns once the exec has begun, a moment before
    the kernel shows the new command line (a read in between finds none); wait up to `wait` s for it."""
    deadline = time.monotonic() + wait
    while True:
        got = _read(pid)
        if got is None or got[0].cmdline or got[1] in ("Z", "X") or time.monotonic() > deadline:
            return got[0] if got else None
        time.sleep(0.001)


def mismatch(recorded: Identity) -> str:
    """'' when pid `recorded.pid` still is the process `recorded` describes; else why not, as a
    clause for a message ("pid 4242 is now another process (sleep 300)")."""
    pid = recorded.pid
    if recorded.boot != boot_id():
        return f"pid {pid} was recorded before this machine last started"
    now = identify(pid)
    if now is None:
        return f"process {pid} has exited"
    if (now.start, now.uid) != (recorded.start, recorded.uid):
        return f"pid {pid} is now another process ({now.command()})"
    # a zombie has no command line, nor has a process in the middle of its exec: the start time decides
    if now.cmdline and recorded.cmdline and now.cmdline != recorded.cmdline:
        return f"pid {pid} now runs another command ({now.command()})"
    return ""


def _pidfd(pid: int) -> int | None:
    """A pidfd of `pid` (Linux 5.3+), or None (no such process, or no pidfd here)."""
    if not hasattr(os, "pidfd_open"):
        return None
    try:
        return os.pidfd_open(pid)
    except OSError:
        return None


def send(recorded: Identity, sig: int) -> bool:
    """Send `sig` to the process `recorded` names, if it still is that process. True when sent."""
    fd = _pidfd(recorded.pid)  # opened before the check: the check then proves it names the recorded process
    try:
        if mismatch(recorded):
            return False
        if fd is not None:
            signal.pidfd_send_signal(fd, sig)
        else:  # no pidfd: the kernel hands pids out in cycles, so the number is not reused within a check
            os.kill(recorded.pid, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False
    finally:
        if fd is not None:
            os.close(fd)


def send_group(leader: Identity, sig: int) -> bool:
    """Send `sig` to the process group `leader` leads (its pgid is its pid: it was started in a new
    session), if the leader still is the recorded process (running, or exited and not yet reaped).

    While the leader exists its number is its own, and only processes of its session (its
    descendants) can be in a group of that number, so the group is the kit's. A group whose leader
    is gone is not signalled: its number may belong to someone else's group by now. True when sent."""
    if mismatch(leader):
        return False
    try:  # there is no pidfd for a group; pids go round in cycles, so the number is not reused within a check
        os.killpg(leader.pid, sig)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def wait_gone(recorded: Identity, timeout: float) -> bool:
    """Wait until the process `recorded` names has exited (True), or `timeout` seconds (False)."""
    fd = _pidfd(recorded.pid)
    try:
        if mismatch(recorded):
            return True
        if fd is not None:  # readable once the process has exited
            return bool(select.select([fd], [], [], max(0.0, timeout))[0])
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            time.sleep(0.1)
            if mismatch(recorded):
                return True
        return False
    finally:
        if fd is not None:
            os.close(fd)


@contextlib.contextmanager
def finishing(note: str) -> Iterator[None]:
    """Run the block to its end whatever Ctrl-C does: each SIGINT prints `note` on stderr instead of
    raising KeyboardInterrupt. For the clean-up after an interrupted start, which a second Ctrl-C
    would otherwise cut short, leaving half of what was started behind. (Main thread only: Python
    runs signal handlers there; elsewhere the block runs as it is.)"""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(*_: object) -> None:
        print(note, file=sys.stderr, flush=True)

    previous = signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


# -- the watchdog ----------------------------------------------------------------------------------
def group_line(leader: Identity) -> str:
    """A watchdog listing line: SIGKILL this group once the parent is gone."""
    return "group " + json.dumps(leader.to_json())


def start_watchdog(listing: Path) -> subprocess.Popen[bytes]:
    """A process that waits until this one exits, then SIGKILLs the process groups listed in
    `listing` (`group_line`) whose leaders are still the recorded processes, and removes the
    directories listed ("remove PATH"). For a parent that is killed (no atexit, no clean-up)."""
    return subprocess.Popen([sys.executable, "-I", "-S", str(Path(__file__).resolve()), "--watchdog",
                             str(os.getpid()), str(listing)],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)


def _watchdog(parent: int, listing: Path) -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    while os.getppid() == parent:
        time.sleep(0.5)
    try:
        lines = listing.read_text().splitlines()
    except OSError:
        lines = []
    for line in lines:
        kind, _, arg = line.partition(" ")
        if kind == "group":
            with contextlib.suppress(ValueError):
                send_group(Identity.from_json(json.loads(arg)), signal.SIGKILL)
    for line in lines:
        kind, _, arg = line.partition(" ")
        if kind == "remove":
            shutil.rmtree(arg, ignore_errors=True)
    return 0


def _main(argv: Sequence[str]) -> int:
    if len(argv) == 3 and argv[0] == "--watchdog":
        return _watchdog(int(argv[1]), Path(argv[2]))
    print("usage: processes.py --watchdog PARENT_PID LISTING", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
