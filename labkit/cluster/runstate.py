"""Clusters that outlive the command that started them: one run dir per backend and profile.

`labkit cluster up --backend kind|local --profile P` leaves the cluster running and records it in
``<run root>/<backend>-<P>/state.json`` (run root: ``$LABKIT_RUN_DIR``, default
``~/.cache/dra-labkit/run``). `labkit cluster status` and `connect(backend, P)` from any other
process read that file: `connect` then attaches to the running cluster instead of starting a
second one, and its `down()` removes only what that session applied, leaving the cluster up.
`labkit cluster down` removes the cluster and its run dir.

A state file is trusted only as far as it checks out (`read_state`): this user's, a JSON object
with the fields of its backend, written for this very run dir; the processes it names are signalled
only while they are still the ones recorded (`labkit.cluster.processes`). Anything else is a
`StaleState`, reported in one line and never acted on. `exclusive` keeps two `up`/`down` of one
cluster from running at once.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import re
import shutil
import stat
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from labkit.cluster.base import ClusterError
from labkit.output import escape_terminal

STATE_FILE = "state.json"
LOCK_FILE = "lock"
#: `labkit cluster status`: no such cluster is running
EXIT_NOT_RUNNING = 3
#: a state file is a few kB; more is not one the kit wrote
MAX_STATE_BYTES = 1 << 20
#: what every state file holds, whatever the backend (name -> JSON type)
COMMON_FIELDS: dict[str, type] = {"backend": str, "profile": str, "runDir": str}


def cache_dir() -> Path:
    """Where LabKit keeps what it builds or downloads (binaries, images, run state), for every backend."""
    return Path(os.environ.get("LABKIT_CACHE") or Path.home() / ".cache" / "dra-labkit")


def run_root() -> Path:
    """Absolute: a state file records its run dir, and a relative one names another dir from another cwd."""
    return Path(os.path.abspath(os.environ.get("LABKIT_RUN_DIR") or cache_dir() / "run"))


def run_dir(backend: str, profile_name: str) -> Path:
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "-", profile_name).strip("-") or "profile"
    return run_root() / f"{backend}-{safe}"


def fingerprint(profile: Any) -> str:
    """Content hash of a ClusterProfile: a same-named profile with other nodes is another cluster."""
    import dataclasses

    data = dataclasses.asdict(profile) if dataclasses.is_dataclass(profile) else profile
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()[:16]


class StaleState(ClusterError):
    """A run dir's state file the kit does not act on; the message names the file and what is wrong.

    `kind`: GONE (well formed and this user's, but what it records has stopped: its server has
    exited, or its pid is someone else's now), BAD (this user's run dir, but the file is not one
    the kit wrote for it: unreadable, not JSON, a field missing or of the wrong type, another run
    dir's), FOREIGN (not this user's run dir: not removed either). `state`: the parsed state (GONE)."""

    GONE, BAD, FOREIGN = "gone", "bad", "foreign"

    def __init__(self, path: Path, why: str, kind: str, state: dict[str, Any] | None = None) -> None:
        backend, _, profile = path.parent.name.partition("-")
        fix = f"`labkit cluster down --backend {backend} --profile {profile}` removes its run dir"
        why = escape_terminal(why, layout=False)  # it may quote the file, or another process's command line
        super().__init__(f"{path}: {why}", fix=fix if kind != self.FOREIGN else None)
        self.path, self.why, self.kind, self.state = path, why, kind, state

    @property
    def run_dir(self) -> Path:
        return self.path.parent

    @property
    def removable(self) -> bool:
        return self.kind != self.FOREIGN

    def status_line(self) -> str:
        """What `labkit cluster status` says of it (it acts on nothing)."""
        backend, _, profile = self.run_dir.name.partition("-")
        return f"{backend} cluster of profile {profile}: stale, not running: {self}" + (
            f"; {self.fix}" if self.fix else "")


def _json_name(value: object) -> str:
    names = {bool: "true or false", int: "an integer", float: "a number", str: "a string", list: "a list",
             dict: "an object", type(None): "null"}
    return names.get(type(value), type(value).__name__)


def _type_name(kind: type) -> str:
    return {int: "an integer", str: "a string", list: "a list", dict: "an object", bool: "true or false"}.get(
        kind, kind.__name__)


def _owned(path: Path, state_path: Path) -> None:
    """StaleState FOREIGN unless `path` is this user's own, a real directory or file (no symlink)."""
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        raise StaleState(state_path, f"{path} is a symbolic link, not what labkit made; nothing was signalled or "
                         "removed", StaleState.FOREIGN)
    if st.st_uid != os.getuid():
        raise StaleState(state_path, f"{path} is owned by uid {st.st_uid}, not by you (uid {os.getuid()}): another "
                         "user's run dir; nothing was signalled or removed", StaleState.FOREIGN)


def _load(d: Path, backend: str, fields: Mapping[str, type]) -> dict[str, Any] | None:
    path = d / STATE_FILE
    try:
        os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StaleState(path, f"cannot be read ({exc.strerror})", StaleState.BAD) from None
    _owned(d, path)
    _owned(path, path)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
        with os.fdopen(fd, "rb") as fh:
            if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
                raise StaleState(path, "not a regular file", StaleState.BAD)
            raw = fh.read(MAX_STATE_BYTES + 1)
    except OSError as exc:
        raise StaleState(path, f"cannot be read ({exc.strerror})", StaleState.BAD) from None
    if len(raw) > MAX_STATE_BYTES:
        raise StaleState(path, f"larger than {MAX_STATE_BYTES} bytes: not a state file labkit wrote", StaleState.BAD)
    try:
        doc = json.loads(raw)
    except ValueError as exc:
        where = f" (line {exc.lineno} column {exc.colno}: {exc.msg})" if isinstance(exc, json.JSONDecodeError) else ""
        raise StaleState(path, f"not JSON{where}", StaleState.BAD) from None
    if not isinstance(doc, dict):
        raise StaleState(path, f"expected a JSON object, got {_json_name(doc)}", StaleState.BAD)
    for name, kind in {**COMMON_FIELDS, **fields}.items():
        if name not in doc:
            raise StaleState(path, f"field {name} is missing", StaleState.BAD)
        value = doc[name]
        if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
            raise StaleState(path, f"{name}: expected {_type_name(kind)}, got {_json_name(value)}", StaleState.BAD)
    if doc["backend"] != backend:
        raise StaleState(path, f"backend: {doc['backend']!r} in the run dir of {backend}", StaleState.BAD)
    if run_dir(backend, doc["profile"]) != d:
        raise StaleState(path, f"profile: {doc['profile']!r} does not go with the run dir {d.name}", StaleState.BAD)
    if doc["runDir"] != str(d):
        raise StaleState(path, f"runDir: written for {doc['runDir']!r}, not for {d} (copied from another run root?)",
                         StaleState.BAD)
    return doc


def read_state(backend: str, profile_name: str, fields: Mapping[str, type] | None = None) -> dict[str, Any] | None:
    """The recorded state of this backend's cluster of this profile; None when none is recorded.

    Raises StaleState when the file cannot be trusted: the run dir or file is another user's or a
    symbolic link, the file is not a JSON object, a field of COMMON_FIELDS or `fields` is missing
    or of another type, or it was written for another run dir."""
    return _load(run_dir(backend, profile_name), backend, fields or {})


def write_state(backend: str, profile_name: str, state: dict[str, Any]) -> Path:
    d = run_dir(backend, profile_name)
    _make_dir(d)
    tmp = d / (STATE_FILE + ".tmp")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(json.dumps({**state, "runDir": str(d)}, indent=2, sort_keys=True))
    tmp.replace(d / STATE_FILE)
    return d / STATE_FILE


def _make_dir(d: Path) -> None:
    """The run dir, made private; ClusterError when it is there but not this user's own directory."""
    d.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileExistsError):
        d.mkdir(mode=0o700)
    try:
        _owned(d, d / STATE_FILE)
    except StaleState as exc:
        raise ClusterError(str(exc)) from None


def clear(backend: str, profile_name: str) -> bool:
    """Remove the run dir, if it is this user's own directory (never a link or another user's).
    True when it is gone."""
    return remove_run_dir(run_dir(backend, profile_name))


def remove_run_dir(d: Path) -> bool:
    """`clear` by path: a run dir under the run root, if it is this user's own directory."""
    if d.parent != run_root():
        return False
    try:
        _owned(d, d / STATE_FILE)
    except FileNotFoundError:
        return True
    except StaleState:
        return False
    shutil.rmtree(d, ignore_errors=True)
    return not d.exists()


def all_states() -> list[dict[str, Any] | StaleState]:
    """Every recorded cluster, sorted by run dir name: its state (running or not; `read_state`'s
    checks, the backend's own fields aside), or the StaleState that says why it cannot be trusted."""
    root = run_root()
    out: list[dict[str, Any] | StaleState] = []
    for d in sorted(root.glob("*/")) if root.is_dir() else []:
        try:
            state = _load(d, d.name.split("-", 1)[0], {})
        except StaleState as exc:
            out.append(exc)
            continue
        if state is not None:
            out.append(state)
    return out


class Busy(ClusterError):
    """Another `labkit cluster up|down` of this cluster is running."""


@contextlib.contextmanager
def exclusive(backend: str, profile_name: str, action: str) -> Iterator[None]:
    """Held while `labkit cluster up|down` of this backend and profile runs: a second one refuses at
    once (Busy, one line) instead of starting a second cluster or stopping a half-started one.
    flock(2) on ``<run dir>/lock``: the kernel drops it when the holder exits, however it exits."""
    # lazy import of the standard library: fcntl is POSIX only, and this module is imported everywhere
    import fcntl

    d = run_dir(backend, profile_name)
    path = d / LOCK_FILE
    while True:
        _make_dir(d)
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0),
                         0o600)
        except FileNotFoundError:  # the holder just removed the run dir: make it again
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            holder = os.read(fd, 200).decode(errors="replace").strip()
            os.close(fd)
            if exc.errno not in (errno.EAGAIN, errno.EACCES):
                raise ClusterError(f"{path}: cannot lock ({exc.strerror})") from None
            raise Busy(f"{backend} cluster of profile {profile_name}: another `labkit cluster "
                       f"{holder or 'up or down'}` is working on it ({path} is locked); wait until it is done, "
                       "then try again") from None
        try:
            same = os.path.samestat(os.fstat(fd), os.stat(path, follow_symlinks=False))
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)  # locked a file that a finishing holder had just removed: lock the one there now
    try:
        os.ftruncate(fd, 0)
        os.write(fd, f"{action} (pid {os.getpid()})".encode())
        yield
    finally:
        with contextlib.suppress(OSError):  # nothing else in the run dir: it goes with the lock
            if os.listdir(d) == [LOCK_FILE]:
                path.unlink()
                d.rmdir()
        os.close(fd)


def usage_lines(backend: str, profile_name: str, kubeconfig: str | Path) -> list[str]:
    """What `labkit cluster up` prints after the cluster is up: how to use it, how to stop it."""
    return [
        f"{backend} cluster of profile {profile_name} is running; it stays up after this command.",
        "Use it from a shell:",
        f"  export KUBECONFIG={kubeconfig}",
        "  kubectl get nodes",
        "  kubectl get resourceslices",
        f'From Python or a notebook: connect("{backend}", "{profile_name}") reuses it.',
        f"Stop it: labkit cluster down --backend {backend} --profile {profile_name}",
    ]


# -- what an attached session applied -------------------------------------------------------------
#: deletion order: workloads first, then what they use, cluster-wide objects last
_DELETE_ORDER = {"Deployment": 0, "Job": 0, "DaemonSet": 0, "StatefulSet": 0, "ReplicaSet": 0, "Pod": 1,
                 "ResourceClaim": 2, "ResourceClaimTemplate": 2, "ConfigMap": 3, "ServiceAccount": 3,
                 "DeviceTaintRule": 4, "DeviceClass": 4, "PriorityClass": 4, "Namespace": 5}


def remember(applied: list[tuple[str, str, str | None]], objs: Iterable[dict]) -> None:
    """Record (kind, name, namespace) of objects applied through an attached connection."""
    for o in objs:
        meta = o.get("metadata") or {}
        key = (o.get("kind", ""), meta.get("name", ""), meta.get("namespace"))
        if key[0] and key[1] and key not in applied:
            applied.append(key)


def remove_applied(cluster: Any, applied: list[tuple[str, str, str | None]], timeout: float = 120.0) -> None:
    """Delete what this session applied (workloads first) and wait until its pods are gone, so the
    next notebook on the same running cluster starts from the state `labkit cluster up` left."""
    for kind, name, ns in sorted(applied, key=lambda k: _DELETE_ORDER.get(k[0], 1)):
        with contextlib.suppress(ClusterError):
            cluster.delete(kind, name, ns)
    mine = {(k, n, ns) for k, n, ns in applied if k in ("Pod", "ResourceClaim")}

    def gone(c: Any) -> bool:
        for kind in ("Pod", "ResourceClaim"):
            for o in c.list(kind):
                meta = o["metadata"]
                if (kind, meta["name"], meta.get("namespace")) in mine or meta.get("deletionTimestamp"):
                    return False
        return True

    _poll(lambda: gone(cluster), timeout)
    applied.clear()


def _poll(pred: Callable[[], bool], timeout: float, interval: float = 0.5) -> bool:
    deadline = time.monotonic() + timeout
    while True:
        if pred():
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(interval)
