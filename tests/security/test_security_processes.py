"""Only our own processes (issue #41, point 2): `labkit cluster status|down|up` as typed, on run dirs
whose state.json is stale, garbage or someone else's, with `up`s running at once, and with Ctrl-C.

No control plane starts: a stale state names processes this test started itself (`sleep 300`), and
the `up`s run fake control-plane binaries whose etcd never becomes ready and tells the test over a
unix socket when it starts and when it is asked to stop, so every step waits for a state, not a time.

How the kernel tells one process from a later one with the same pid (what the kit records): the
start time is field 22 of /proc/<pid>/stat, in clock ticks after boot, and /proc/sys/kernel/random/
boot_id changes at every boot (man 5 proc: /proc/pid/stat "(22) starttime", /proc/sys/kernel/random/
boot_id). pidfd_open(2) / pidfd_send_signal(2) signal a process without a pid race. flock(2): a lock
is released when the last descriptor of its open file is closed, so also when its holder dies.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from labkit.cluster.backends.kind.backend import KindCluster
from labkit.cluster.backends.kind.preflight import HostFacts
from labkit.cluster.backends.kind.runner import RecordingRunner
from tests.cluster.test_cluster_kind import ALL_TOOLS, HEALTHY
from tests.paths import REPO

pytestmark = pytest.mark.slow  # heavy: `make check` leaves it out, `make test` runs it

ROOT = REPO
PROFILE = "tiny"
#: set in the environment of everything a test's `labkit` starts: how the leak check finds them
MARK = "LABKIT_TEST_PROCS_MARK"


# -- helpers ---------------------------------------------------------------------------------------
def _env(tmp: Path, **extra: str) -> dict[str, str]:
    """`labkit` with its own run root and cache, and fake control-plane binaries (never a real build)."""
    return {**os.environ, "LABKIT_RUN_DIR": str(tmp / "run"), "LABKIT_CACHE": str(tmp / "cache"),
            "LABKIT_CONTROLPLANE_BIN": str(_fake_binaries(tmp)), "PYTHONPATH": str(ROOT), MARK: str(tmp), **extra}


def _labkit(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "labkit", *args], capture_output=True, text=True, env=env, cwd=ROOT,
                          stdin=subprocess.DEVNULL)


def _lines(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln.strip()]


FAKE_ETCD = """\
#!{python}
# etcd that never becomes ready: it says "up PID ARGS" on $FAKE_ETCD_SOCKET, and on SIGTERM says
# "term" and waits for the test's word before it exits
import os, signal, socket, sys
conn = socket.socket(socket.AF_UNIX)
conn.connect(os.environ["FAKE_ETCD_SOCKET"])
talk = conn.makefile("rw")
def term(*_):
    talk.write("term\\n"); talk.flush()
    talk.readline()
    os._exit(0)
signal.signal(signal.SIGTERM, term)
talk.write("up %d %s\\n" % (os.getpid(), " ".join(sys.argv[1:]))); talk.flush()
while True:
    signal.pause()
"""


def _fake_binaries(tmp: Path) -> Path:
    bin_dir = tmp / "controlplane" / "bin"
    if not bin_dir.is_dir():
        bin_dir.mkdir(parents=True)
        (bin_dir.parent / "VERSION").write_text("v1.37.1\n")
        for name in ("etcd", "kube-apiserver", "kube-scheduler", "kube-controller-manager"):
            script = FAKE_ETCD.format(python=sys.executable) if name == "etcd" else "#!/bin/sh\nexit 1\n"
            (bin_dir / name).write_text(script)
            (bin_dir / name).chmod(0o755)
    return bin_dir


def _identity(pid: int, **change: object) -> dict[str, object]:
    """What the kit records of a process, read from /proc as the module docstring says."""
    stat = Path(f"/proc/{pid}/stat").read_bytes()
    start = int(stat[stat.rindex(b")") + 2:].split()[19])  # field 22; the fields after "(comm)" start at 3
    cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().rstrip(b"\0").decode().split("\0")
    boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    return {"pid": pid, "start": start, "boot": boot, "uid": os.getuid(), "cmdline": cmdline, **change}


SERVE_CMDLINE = [sys.executable, "-m", "labkit.cluster.backends.local.serve", "--profile", PROFILE]


def _write_state(tmp: Path, server: dict[str, object], groups: list[dict[str, object]], **extra: object) -> Path:
    """A local state.json as `labkit cluster up --backend local` records it."""
    rd = tmp / "run" / f"local-{PROFILE}"
    rd.mkdir(parents=True, exist_ok=True)
    state = {"backend": "local", "profile": PROFILE, "fingerprint": "0123456789abcdef", "runDir": str(rd),
             "pid": server["pid"], "process": server, "componentGroups": groups,
             "server": "https://127.0.0.1:1", "kubeconfig": str(rd / "kubeconfig"), "stateDir": str(tmp / "lk-none"),
             "kubernetesVersion": "v1.37.1", "log": str(rd / "serve.log"), **extra}
    (rd / "state.json").write_text(json.dumps(state))
    return rd


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    """A process of this test's own, in a session of its own: what a reused pid belongs to now."""
    proc = subprocess.Popen(["sleep", "300"], start_new_session=True)
    yield proc
    proc.kill()
    proc.wait()


def _alive(proc: subprocess.Popen[bytes]) -> bool:
    return proc.poll() is None


def _status(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return _labkit("cluster", "status", *args, env=env)


LOCAL = ("--backend", "local", "--profile", PROFILE)


# -- a stale state: its pid is someone else's now ---------------------------------------------------
@pytest.mark.parametrize("recorded", ["start time", "command line"])
def test_a_pid_that_is_now_another_process_is_never_signalled(tmp_path, sleeper, recorded):
    """The recorded server and component pids are the sleeper's, which `labkit` did not start: its
    start time (or command line) is not the recorded one. status says stale, down removes only the
    run dir, and the sleeper lives on."""
    me = _identity(sleeper.pid)
    server = ({**me, "start": me["start"] + 1, "cmdline": SERVE_CMDLINE} if recorded == "start time"
              else {**me, "cmdline": SERVE_CMDLINE})
    rd = _write_state(tmp_path, server, [{**me, "start": me["start"] + 1}])
    env = _env(tmp_path)
    why = (f"pid {sleeper.pid} is now another process (sleep 300)" if recorded == "start time"
           else f"pid {sleeper.pid} now runs another command (sleep 300)")

    st = _status(env, *LOCAL)  # a pipe: the document on stdout, why not on stderr
    assert st.returncode == 3, st.stderr
    assert json.loads(st.stdout) == {"clusters": []}
    [line, *_] = _lines(st.stderr)
    assert line.startswith(f"local cluster of profile {PROFILE}: stale, not running: {rd / 'state.json'}: ")
    assert why in line and "`labkit cluster down --backend local --profile tiny` removes its run dir" in line
    st = _status(env, *LOCAL, "-o", "table")
    assert (st.returncode, _lines(st.stdout)) == (3, [line]), st.stderr
    st = _status(env)  # every cluster
    assert st.returncode == 3 and line in _lines(st.stderr)
    assert _alive(sleeper) and rd.is_dir()  # status acts on nothing

    down = _labkit("cluster", "down", *LOCAL, env=env)
    assert down.returncode == 0, down.stderr
    [said] = _lines(down.stdout)
    assert said.startswith(f"local cluster of profile {PROFILE} was stale: {rd / 'state.json'}: its server is gone: ")
    assert why in said and said.endswith(f"removed its run dir {rd}; no process was signalled")
    assert down.stderr == ""
    assert _alive(sleeper) and not rd.exists()


def test_the_command_line_of_whoever_has_the_pid_now_reaches_the_terminal_escaped(tmp_path):
    """The stale line quotes the command line of the process that holds the pid now: anyone's, so
    its ESC sequences are written out, not sent to the terminal."""
    hostile = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)", "\x1b]0;owned\x07\x1b[2J"],
                               start_new_session=True)
    try:
        me = _identity(hostile.pid)
        _write_state(tmp_path, {**me, "start": me["start"] + 1, "cmdline": SERVE_CMDLINE}, [])
        env = _env(tmp_path)
        for args in (LOCAL, (*LOCAL, "-o", "table"), ()):
            st = _status(env, *args)
            assert st.returncode == 3 and f"pid {hostile.pid} is now another process" in st.stdout + st.stderr
            assert "\x1b" not in st.stdout + st.stderr and "\x07" not in st.stdout + st.stderr
        down = _labkit("cluster", "down", *LOCAL, env=env)
        assert down.returncode == 0 and "was stale" in down.stdout and "\x1b" not in down.stdout
        assert _alive(hostile)
    finally:
        hostile.kill()
        hostile.wait()


def test_a_stale_state_never_removes_a_directory_labkit_did_not_make(tmp_path):
    """The server has exited; its state names as its state dir a folder of the user's. `down`
    removes the run dir only."""
    gone = subprocess.Popen(["sleep", "300"], start_new_session=True)
    server = {**_identity(gone.pid), "cmdline": SERVE_CMDLINE}
    gone.kill()
    gone.wait()
    precious = tmp_path / "my-work"
    (precious / "etcd").mkdir(parents=True)
    rd = _write_state(tmp_path, server, [], stateDir=str(precious))
    env = _env(tmp_path)
    st = _status(env, *LOCAL, "-o", "table")
    assert precious.is_dir() and rd.is_dir()  # status acts on nothing
    assert st.returncode == 3 and f"its server is gone: process {gone.pid} has exited" in st.stdout
    down = _labkit("cluster", "down", *LOCAL, env=env)
    assert down.returncode == 0 and len(_lines(down.stdout)) == 1 and "was stale" in down.stdout, down.stderr
    assert precious.is_dir() and not rd.exists()


# -- garbage -----------------------------------------------------------------------------------------
GARBAGE = {
    "not JSON": ('{"pid": 12', "not JSON (line 1 column 11"),
    "not an object": ("[1, 2]", "expected a JSON object, got a list"),
    "an older labkit's": (None, "field runDir is missing"),  # pid and componentGroups, no identity
    "a pid of the wrong type": ({"pid": "4242; rm -rf ~"}, "pid: expected an integer, got a string"),
    "an identity of the wrong type": ({"process": {"pid": 1}}, "process: field start is missing"),
    "another run root's": ({"runDir": "/elsewhere/run/local-tiny"}, "runDir: written for '/elsewhere/run/local-tiny'"),
    "another profile's": ({"profile": "workshop"}, "profile: 'workshop' does not go with the run dir local-tiny"),
}


@pytest.mark.parametrize("case", GARBAGE)
def test_a_state_file_that_is_not_the_kits_is_reported_in_one_line_and_never_acted_on(tmp_path, sleeper, case):
    content, says = GARBAGE[case]
    me = _identity(sleeper.pid)
    rd = _write_state(tmp_path, {**me, "cmdline": SERVE_CMDLINE}, [me])  # a live, verifiable one, then spoilt
    path = rd / "state.json"
    if content is None:  # what an older labkit wrote: pids only
        path.write_text(json.dumps({"backend": "local", "profile": PROFILE, "pid": sleeper.pid,
                                    "componentGroups": [sleeper.pid], "stateDir": str(tmp_path / "lk-x")}))
    elif isinstance(content, dict):
        path.write_text(json.dumps({**json.loads(path.read_text()), **content}))
    else:
        path.write_text(content)
    env = _env(tmp_path)

    st = _status(env, *LOCAL, "-o", "table")
    assert st.returncode == 3, st.stderr
    [line] = _lines(st.stdout)
    assert line.startswith(f"local cluster of profile {PROFILE}: stale, not running: {path}: {says}"), line
    assert "Traceback" not in st.stderr

    up = _labkit("cluster", "up", *LOCAL, env=env)  # not started over it: `down` removes it first
    assert up.returncode == 1
    assert _lines(up.stderr) == [up.stderr.strip()] and up.stderr.startswith(f"labkit cluster: {path}: {says}")
    assert up.stderr.strip().endswith("; fix: `labkit cluster down --backend local --profile tiny` removes its run dir")
    assert not (rd / "serve.log").exists() and _alive(sleeper)

    down = _labkit("cluster", "down", *LOCAL, env=env)
    assert down.returncode == 0, down.stderr
    [said] = _lines(down.stdout)
    assert said.startswith(f"local cluster of profile {PROFILE} was stale: {path}: {says}")
    assert said.endswith(f"removed its run dir {rd}; no process was signalled")
    assert _alive(sleeper) and not rd.exists()


@pytest.mark.parametrize("cluster", ["--all", "dev cluster"])
def test_a_kind_state_naming_no_kind_cluster_deletes_none(tmp_path, cluster):
    """A kind state's cluster name goes to `kind delete cluster --name`: one kind would refuse (kind's
    pkg/internal/apis/config/validate.go, validNameRE ^[a-z0-9.-]+$), or one that reads as an option,
    makes the state stale; `down` deletes no cluster. PATH holds no kind: nothing could run anyway."""
    rd = tmp_path / "run" / f"kind-{PROFILE}"
    rd.mkdir(parents=True)
    path = rd / "state.json"
    path.write_text(json.dumps({"backend": "kind", "profile": PROFILE, "fingerprint": "0", "runDir": str(rd),
                                "cluster": cluster, "kubeconfig": str(rd / "kubeconfig")}))
    env = _env(tmp_path, PATH=str(tmp_path / "no-tools"), LABKIT_KIND_BIN_DIR=str(tmp_path / "no-tools"))
    why = f"{path}: cluster: {cluster!r} is not a kind cluster name"
    st = _labkit("cluster", "status", "--backend", "kind", "--profile", PROFILE, "-o", "table", env=env)
    assert (st.returncode, _lines(st.stdout)) == (3, [
        f"kind cluster of profile {PROFILE}: stale, not running: {why}; `labkit cluster down --backend kind "
        f"--profile {PROFILE}` removes its run dir"]), st.stderr
    down = _labkit("cluster", "down", "--backend", "kind", "--profile", PROFILE, env=env)
    assert (down.returncode, _lines(down.stdout)) == (0, [
        f"kind cluster of profile {PROFILE} was stale: {why}; removed its run dir; no kind cluster was deleted"])
    assert not rd.exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root")
def test_another_users_run_dir_is_neither_signalled_nor_removed(tmp_path, sleeper):
    me = _identity(sleeper.pid)
    rd = _write_state(tmp_path, {**me, "cmdline": SERVE_CMDLINE}, [me])
    os.chown(rd / "state.json", 65534, 65534)
    env = _env(tmp_path)
    why = f"{rd / 'state.json'} is owned by uid 65534, not by you (uid 0): another user's run dir"
    st = _status(env, *LOCAL, "-o", "table")
    assert st.returncode == 3 and _lines(st.stdout) == [
        f"local cluster of profile {PROFILE}: stale, not running: {rd / 'state.json'}: {why}; nothing was signalled "
        "or removed"]
    down = _labkit("cluster", "down", *LOCAL, env=env)
    assert down.returncode == 1 and _lines(down.stderr) == [
        f"labkit cluster: {rd / 'state.json'}: {why}; nothing was signalled or removed"]
    assert _alive(sleeper) and (rd / "state.json").exists()


# -- one `up` at a time ------------------------------------------------------------------------------
HOLD = textwrap.dedent("""
    import fcntl, os, sys
    fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    os.write(fd, b"up (pid %d)" % os.getpid())
    print("held", flush=True)
    sys.stdin.read()
""")


@pytest.mark.parametrize("backend", ["local", "kind"])
@pytest.mark.parametrize("action", ["up", "down"])
def test_a_held_lock_makes_up_and_down_refuse_at_once(tmp_path, backend, action):
    """A process holds <run dir>/lock (flock(2)), as a `labkit cluster up` does while it runs: a
    second `up` or a `down` refuses in one line before doing anything (kind: before its preflight;
    PATH without docker or kind, so the old code's preflight failed, nothing else)."""
    rd = tmp_path / "run" / f"{backend}-{PROFILE}"
    rd.mkdir(parents=True)
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(rd / "lock")], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        env = _env(tmp_path, PATH=str(tmp_path / "no-tools"), LABKIT_KIND_BIN_DIR=str(tmp_path / "no-tools"))
        out = _labkit("cluster", action, "--backend", backend, "--profile", PROFILE, env=env)
        assert out.returncode == 1, out.stdout
        assert _lines(out.stderr) == [
            f"labkit cluster: {backend} cluster of profile {PROFILE}: another `labkit cluster up (pid {holder.pid})` "
            f"is working on it ({rd / 'lock'} is locked); wait until it is done, then try again"]
        assert out.stdout == "" and sorted(p.name for p in rd.iterdir()) == ["lock"]
    finally:
        holder.kill()
        holder.wait()


class Etcd:
    """The fake etcd of an `up`, over its socket: what it says, and the word that lets it exit."""

    def __init__(self, conn: socket.socket, up: subprocess.Popen[str]) -> None:
        self.conn, self.up = conn, up
        said = self.said().split()
        assert said[0] == "up", said
        self.pid, self.argv = int(said[1]), said[2:]

    def said(self) -> str:
        """Its next line; fails (instead of waiting for ever) when the up ends first (its stdout closes)."""
        line = b""
        while not line.endswith(b"\n"):
            assert self.up.stdout is not None
            ready, _, _ = select.select([self.conn, self.up.stdout], [], [])
            if self.conn not in ready:
                pytest.fail(f"labkit cluster up ended first (exit {self.up.wait()}): {self.up.communicate()}")
            got = self.conn.recv(1)
            assert got, "the fake etcd closed its socket"
            line += got
        return line.decode().rstrip("\n")

    def exit(self) -> None:
        with contextlib.suppress(OSError):  # gone already
            self.conn.sendall(b"exit\n")

    @property
    def state_dir(self) -> Path:
        data = next(a for a in self.argv if a.startswith("--data-dir="))
        return Path(data.split("=", 1)[1]).parent


@contextlib.contextmanager
def _up_in_progress(tmp: Path) -> Iterator[tuple[subprocess.Popen[str], Etcd]]:
    """`labkit cluster up --backend local` in a session of its own (a terminal's foreground job:
    SIGINT at its default action), held at the point where its etcd runs: yields the up and its
    etcd. Whatever of it is left afterwards is killed."""
    sock_dir = Path(tempfile.mkdtemp(prefix="procs-", dir="/tmp"))  # a unix socket path: 108 bytes at most
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(sock_dir / "etcd"))
    listener.listen(1)
    env = _env(tmp, FAKE_ETCD_SOCKET=str(sock_dir / "etcd"))
    up = subprocess.Popen([sys.executable, "-m", "labkit", "cluster", "up", *LOCAL], cwd=ROOT, env=env, text=True,
                          stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          start_new_session=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    etcd = None
    try:
        assert up.stdout is not None
        ready, _, _ = select.select([listener, up.stdout], [], [])  # etcd runs, or the up ended first
        assert listener in ready, f"labkit cluster up ended first: {up.communicate()}"
        etcd = Etcd(listener.accept()[0], up)
        yield up, etcd
    finally:
        if etcd is not None:
            etcd.exit()
            etcd.conn.close()
        listener.close()
        if up.poll() is None:
            up.kill()
        up.communicate()
        for p in _marked(tmp):
            with contextlib.suppress(psutil.Error):
                p.kill()
        sock_dir.joinpath("etcd").unlink(missing_ok=True)
        sock_dir.rmdir()


def _marked(tmp: Path) -> list[psutil.Process]:
    """Live processes this test's `labkit` started (they carry its mark in their environment)."""
    out = []
    for p in psutil.process_iter():
        with contextlib.suppress(psutil.Error):
            if p.pid != os.getpid() and p.status() != psutil.STATUS_ZOMBIE and p.environ().get(MARK) == str(tmp):
                out.append(p)
    return out


def test_two_ups_at_once_one_refuses_in_one_line(tmp_path):
    rd = tmp_path / "run" / f"local-{PROFILE}"
    with _up_in_progress(tmp_path) as (first, etcd):
        env = _env(tmp_path)
        second = _labkit("cluster", "up", *LOCAL, env=env)
        assert second.returncode == 1 and second.stdout == ""
        assert _lines(second.stderr) == [
            f"labkit cluster: local cluster of profile {PROFILE}: another `labkit cluster up (pid {first.pid})` is "
            f"working on it ({rd / 'lock'} is locked); wait until it is done, then try again"]
        down = _labkit("cluster", "down", *LOCAL, env=env)  # nor is it stopped half-started
        assert down.returncode == 1 and "another `labkit cluster up" in down.stderr
        assert etcd.state_dir.is_dir() and rd.is_dir()
        # Ctrl-C: the first one stops what it started
        os.killpg(first.pid, signal.SIGINT)
        assert etcd.said() == "term"
        etcd.exit()
        _, err = first.communicate()
        assert first.returncode == 130, err
        assert _lines(err) == [f"local cluster {PROFILE}: interrupted; stopping what was started"]
    assert not rd.exists() and not etcd.state_dir.exists()


def test_ctrl_c_twice_during_up_leaves_no_process_and_no_state(tmp_path):
    """Ctrl-C (SIGINT to the up's process group), then Ctrl-C again while it stops what it started:
    the second does not cut the clean-up short. Afterwards no process it started is left (server,
    etcd, watchdog), nor its run dir, nor its state dir."""
    rd = tmp_path / "run" / f"local-{PROFILE}"
    with _up_in_progress(tmp_path) as (up, etcd):
        state_dir = etcd.state_dir
        assert state_dir.is_dir() and rd.is_dir() and len(_marked(tmp_path)) >= 3  # up, its server, etcd
        os.killpg(up.pid, signal.SIGINT)
        assert etcd.said() == "term"  # the up's server is stopping etcd
        os.killpg(up.pid, signal.SIGINT)
        assert up.stderr is not None
        said = []
        for line in up.stderr:  # until the up says it goes on stopping (or ends: the old code did)
            said.append(line.rstrip("\n"))
            if "still stopping" in line:
                break
        assert said == [f"local cluster {PROFILE}: interrupted; stopping what was started",
                        f"local cluster {PROFILE}: still stopping what was started (one moment)"]
        etcd.exit()
        up.wait()
        assert up.returncode == 130
        assert _marked(tmp_path) == []
        assert not rd.exists() and not state_dir.exists()


class _CtrlCTwice(RecordingRunner):
    """A machine where Ctrl-C comes while `kind load` runs (the cluster exists by then), and again
    while the half-made cluster is being deleted."""

    def run(self, cmd, *, input=None, check=True, env=None):  # noqa: A002 - Runner's signature
        if list(cmd[:3]) == ["kind", "load", "docker-image"]:
            self.commands.append(list(cmd))
            raise KeyboardInterrupt
        if list(cmd[:3]) == ["kind", "delete", "cluster"]:
            os.kill(os.getpid(), signal.SIGINT)  # to this process: delivered before kill(2) returns
        return super().run(cmd, input=input, check=check, env=env)


def test_kind_up_interrupted_twice_still_deletes_the_half_made_cluster(tmp_path, monkeypatch, capsys):
    """kind's containers are the engine's: for kind, "no process left" is the cluster deleted (and
    kind's network, made by this up) and no run state. A second Ctrl-C does not cut that short."""
    monkeypatch.setenv("LABKIT_RUN_DIR", str(tmp_path / "run"))
    runner = _CtrlCTwice(responses={
        **HEALTHY, "kind get clusters": (0, "No kind clusters found.\n"),
        "docker network inspect kind": (1, "Error: No such network: kind"),
        "docker network inspect kind --format": (0, "0\n")})
    cluster = KindCluster(runner=runner, facts=HostFacts(dict(ALL_TOOLS)), state_dir=tmp_path / "state",
                          progress=False, image="img", workload_image="wl", log=print)
    with pytest.raises(KeyboardInterrupt):
        cluster.up(PROFILE)
    lines = runner.lines()
    assert lines.count("kind delete cluster --name labkit-tiny") == 1
    assert lines[-1] == "docker network rm kind"  # this up made kind's network: it goes too
    assert not (tmp_path / "run" / "kind-tiny").exists()
    out, err = capsys.readouterr()
    assert out.splitlines()[-1] == "kind cluster labkit-tiny: interrupted; deleting what was made"
    assert err == "kind cluster labkit-tiny: still deleting what was made (one moment)\n"
