"""Lifecycle without leaks (issue 17.3), shared by tests/e2e/test_lifecycle_leaks.py (small) and
tools/reliability.py (20 cycles).

A cycle is `labkit cluster up` + `labkit cluster down` as typed, in its own run dir
(`LABKIT_RUN_DIR`), so nothing of another session on this machine is counted: `snapshot()`
lists what belongs to that run dir -- processes whose command line or working files name it or a
state dir it recorded, listening sockets of those processes, kind containers and networks of the
cluster name, the run dir's files, /tmp/lk-* state dirs it recorded, and the contexts of
~/.kube/config -- before and after, and `diff()` says what was left behind.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil
import yaml
from jupyter_client.manager import KernelManager

from .kindutil import ROOT, docker, run

MARK_ENV = "LABKIT_LEAK_MARK"


def _kube_contexts() -> set[str]:
    path = Path(os.environ.get("KUBECONFIG", "").split(os.pathsep)[0] or Path.home() / ".kube" / "config")
    try:
        doc = yaml.safe_load(path.read_text()) or {}
    except OSError:
        return set()
    return {c.get("name", "") for c in doc.get("contexts") or []}


def _ours(p: psutil.Process, marks: list[str]) -> bool:
    try:
        text = " ".join(p.cmdline())
        if any(m in text for m in marks):
            return True
        return p.environ().get(MARK_ENV) in marks
    except (psutil.Error, OSError):
        return False


def snapshot(run_dir: Path, cluster_name: str | None = None, state_dirs: set[str] | None = None) -> dict[str, Any]:
    """What of this run dir (and kind cluster) exists now."""
    marks = [str(run_dir), *(state_dirs or set())]
    procs = [p for p in psutil.process_iter() if p.pid != os.getpid() and _ours(p, marks)]
    listening = set()
    for p in procs:
        try:
            for conn in p.net_connections(kind="inet"):
                if conn.status == psutil.CONN_LISTEN:
                    listening.add(f"{conn.laddr.ip}:{conn.laddr.port}")
        except (psutil.Error, OSError):
            pass
    out: dict[str, Any] = {
        "processes": sorted(f"{p.pid} {' '.join(_safe_cmdline(p))[:120]}" for p in procs),
        "ports": sorted(listening),
        "runDirFiles": sorted(str(f.relative_to(run_dir)) for f in run_dir.rglob("*")) if run_dir.exists() else [],
        "stateDirs": sorted(d for d in (state_dirs or set()) if Path(d).exists()),
        "kubeconfigContexts": sorted(_kube_contexts()),
    }
    if cluster_name:
        out["containers"] = sorted(run(docker(), "ps", "-a", "--format", "{{.Names}}", "--filter",
                                       f"label=io.x-k8s.kind.cluster={cluster_name}").stdout.split())
        out["networks"] = sorted(run(docker(), "network", "ls", "--format", "{{.Name}}").stdout.split())
    return out


def _safe_cmdline(p: psutil.Process) -> list[str]:
    try:
        return p.cmdline()
    except (psutil.Error, OSError):
        return ["?"]


def diff(before: dict[str, Any], after: dict[str, Any]) -> dict[str, list[str]]:
    """Entries of `after` that were not in `before` (the leaks), per kind; only non-empty kinds."""
    out = {}
    for key, items in after.items():
        new = sorted(set(items) - set(before.get(key, [])))
        if new:
            out[key] = new
    return out


def labkit(*args: str, env: dict[str, str], timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "labkit", *args], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=timeout)


def env_for(run_dir: Path) -> dict[str, str]:
    return {**os.environ, "LABKIT_RUN_DIR": str(run_dir), MARK_ENV: str(run_dir),
            "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}


def recorded_state_dirs(run_dir: Path) -> set[str]:
    out = set()
    for f in run_dir.glob("*/state.json") if run_dir.exists() else []:
        try:
            d = json.loads(f.read_text()).get("stateDir")
        except (OSError, ValueError):
            continue
        if d:
            out.add(d)
    return out


def cycle(backend: str, profile: str, run_dir: Path, *, name: str | None = None) -> dict[str, Any]:
    """One `labkit cluster up` / `labkit cluster down`; returns the times and what leaked."""
    env = env_for(run_dir)
    before = snapshot(run_dir, name)
    t0 = time.monotonic()
    up = labkit("cluster", "up", "--backend", backend, "--profile", profile, *(["--name", name] if name else []),
                env=env)
    t_up = time.monotonic() - t0
    states = recorded_state_dirs(run_dir)
    during = snapshot(run_dir, name, states)
    t1 = time.monotonic()
    down = labkit("cluster", "down", "--backend", backend, "--profile", profile, env=env)
    t_down = time.monotonic() - t1
    after = _settle(run_dir, name, states, before)
    return {"upExit": up.returncode, "downExit": down.returncode, "upSeconds": round(t_up, 1),
            "downSeconds": round(t_down, 1), "processesWhileUp": len(during["processes"]),
            "containersWhileUp": len(during.get("containers", [])),
            "portsWhileUp": during["ports"], "leaked": diff(before, after),
            "upError": "" if up.returncode == 0 else (up.stderr or up.stdout)[-600:]}


#: s: how long what `down` (or a killed kernel) stopped may take to be gone before it counts as leaked. A
#: hang guard: a clean run returns as soon as nothing is left; on 2 loaded cores (the kind lanes) a
#: kube-apiserver or etcd can take tens of seconds to exit after its SIGTERM.
SETTLE = 180.0


def _settle(run_dir: Path, name: str | None, states: set[str], before: dict[str, Any],
            wait: float = SETTLE) -> dict[str, Any]:
    """The snapshot once nothing new is left, or after `wait` seconds (processes exit asynchronously)."""
    deadline = time.monotonic() + wait
    while True:
        after = snapshot(run_dir, name, states)
        if not diff(before, after) or time.monotonic() > deadline:
            return after
        time.sleep(1.0)


def interrupted_up(backend: str, profile: str, run_dir: Path, *, name: str | None = None, seed: int = 0,
                   latest: float = 20.0) -> dict[str, Any]:
    """SIGINT to `labkit cluster up`'s process group (what Ctrl-C sends) at a random moment within
    `latest` seconds; then what is left once it exited (nothing, or a cluster that `down` removes
    -- `up` may have finished first)."""
    env = env_for(run_dir)
    before = snapshot(run_dir, name)
    started = time.time()
    at = random.Random(seed).uniform(0.5, latest)
    proc = subprocess.Popen([sys.executable, "-m", "labkit", "cluster", "up", "--backend", backend, "--profile",
                             profile, *(["--name", name] if name else [])], cwd=ROOT, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
                            preexec_fn=_default_sigint)
    try:
        proc.wait(timeout=at)
        finished_first = True
    except subprocess.TimeoutExpired:
        finished_first = False
        os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=600)
    states = recorded_state_dirs(run_dir)
    if finished_first:  # up won the race: the cluster is up, and `down` must remove it
        labkit("cluster", "down", "--backend", backend, "--profile", profile, env=env)
    after = _settle(run_dir, name, states | _state_dirs_named(err + out), before)
    return {"sigintAfterSeconds": round(at, 1), "upFinishedFirst": finished_first, "exit": proc.returncode,
            "stderrTail": err.strip().splitlines()[-1:] if err.strip() else [], "leaked": diff(before, after),
            "newTmpStateDirs": new_tmp_state_dirs(started)}


def _default_sigint() -> None:
    """Ctrl-C's target is a terminal's foreground job, where SIGINT has its default action. A test run
    in the background (make test's lanes: bash makes asynchronous commands ignore SIGINT, and an
    ignored signal stays ignored across exec) would otherwise start a `labkit` that Python never
    gives a KeyboardInterrupt."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def new_tmp_state_dirs(since: float) -> list[str]:
    """/tmp/lk-* dirs (local state dirs) made after `since` that still exist. Another session on this
    machine may own one, so this is a hint for a human, not a test assertion."""
    out = []
    for d in Path("/tmp").glob("lk-*"):
        try:
            if d.is_dir() and d.stat().st_ctime >= since:
                out.append(str(d))
        except OSError:
            continue
    return sorted(out)


def _state_dirs_named(text: str) -> set[str]:
    return {w.strip("'\",.:;()") for w in text.split() if w.startswith(("/tmp/lk-", "'/tmp/lk-"))}


KERNEL_CODE = """
from labkit.cluster import connect
c = connect("local", "tiny", progress=False)
print("UP", c.server, c.state_dir)
"""


def kernel_killed(run_dir: Path, settle: float = SETTLE) -> dict[str, Any]:
    """A Jupyter kernel connects a local cluster, then is SIGKILLed (no atexit, no down()), as a
    crashed or force-restarted notebook kernel is; what it started must go with it."""
    env = env_for(run_dir)
    before = snapshot(run_dir)
    km = KernelManager(kernel_name="python3")
    km.start_kernel(env=env, cwd=str(ROOT))
    kc = km.client()
    kc.start_channels()
    out: dict[str, Any] = {"connected": False, "processesWhileUp": 0}
    try:
        kc.wait_for_ready(timeout=120)
        reply = kc.execute_interactive(KERNEL_CODE, timeout=300)
        out["connected"] = reply["content"]["status"] == "ok"
        out["processesWhileUp"] = len(snapshot(run_dir)["processes"])
    finally:
        kc.stop_channels()
        os.kill(km.provisioner.pid, signal.SIGKILL)
        km.shutdown_kernel(now=True)
    deadline = time.monotonic() + settle
    leaked: dict[str, list[str]] = {}
    while time.monotonic() < deadline:
        leaked = diff(before, snapshot(run_dir))
        if not leaked:
            break
        time.sleep(1)
    out["leaked"] = leaked
    return out
