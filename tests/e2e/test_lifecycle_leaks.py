"""Lifecycle without leaks (issue 17.3), the CI-sized run of tests/leaks.py: `labkit cluster up` /
`down` cycles, an `up` interrupted by SIGINT, and a notebook kernel killed while it holds a
cluster. Each run has its own LABKIT_RUN_DIR; what it leaves behind (processes, listening ports,
containers, networks, run-dir files, state dirs, ~/.kube/config contexts) must be nothing.
`tools/reliability.sh` runs 20 cycles of each backend.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time

import psutil
import pytest

from labkit.cluster.backends.kind.backend import KindCluster
from labkit.cluster.backends.kind.preflight import HostFacts
from labkit.cluster.backends.kind.runner import RecordingRunner
from labkit.cluster.backends.local.procs import Supervisor
from tests import leaks
from tests.cluster.test_cluster_kind import ALL_TOOLS, HEALTHY
from tests.kindutil import ROOT


@pytest.mark.local
@pytest.mark.slow
def test_local_up_down_cycles_leave_nothing(tmp_path):
    for i in range(2):
        r = leaks.cycle("local", "tiny", tmp_path / "run")
        assert (r["upExit"], r["downExit"]) == (0, 0), r["upError"]
        assert r["processesWhileUp"] >= 5 and r["portsWhileUp"], r  # it was really up
        assert r["leaked"] == {}, f"cycle {i}: {r['leaked']}"


@pytest.mark.local
@pytest.mark.slow
def test_local_up_interrupted_by_sigint_leaves_nothing(tmp_path):
    r = leaks.interrupted_up("local", "tiny", tmp_path / "run", seed=3, latest=8.0)
    assert r["leaked"] == {}, r


@pytest.mark.local
@pytest.mark.slow
def test_notebook_kernel_killed_while_connected_leaves_nothing(tmp_path):
    """A kernel that started a local cluster with connect() is SIGKILLed (no atexit, no down()):
    the control plane it started must go with it."""
    r = leaks.kernel_killed(tmp_path / "run")
    assert r["connected"] and r["processesWhileUp"] >= 5, r
    assert r["leaked"] == {}, r["leaked"]
    assert os.environ.get(leaks.MARK_ENV) is None  # the mark lives only in the children's env


@pytest.mark.kind
@pytest.mark.kind_standalone  # make test: the e2e's three up/down cycles end with the same leak check
@pytest.mark.slow
def test_kind_up_down_cycle_leaves_nothing(tmp_path):
    r = leaks.cycle("kind", "tiny", tmp_path / "run", name="labkit-leak-check")
    assert (r["upExit"], r["downExit"]) == (0, 0), r["upError"]
    assert r["containersWhileUp"] == 2  # control plane + the one worker: the snapshot sees the cluster
    assert r["leaked"] == {}, r["leaked"]


def test_supervisor_watchdog_cleans_up_after_a_killed_parent(tmp_path):
    """No control plane needed: a process that started `sleep` under a Supervisor is SIGKILLed;
    its watchdog kills the sleep's process group and removes the directory it was told about."""
    state = tmp_path / "state"
    code = textwrap.dedent(f"""
        import sys, pathlib
        from labkit.cluster.backends.local.procs import Supervisor
        sup = Supervisor(pathlib.Path({str(state)!r}) / "logs")
        sup.remove_on_death(pathlib.Path({str(state)!r}))
        comp = sup.start("sleeper", ["sleep", "300"])
        print(comp.pid, flush=True)
        sys.stdin.read()
    """)
    parent = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                              cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert parent.stdout is not None
    sleeper = int(parent.stdout.readline())
    assert psutil.pid_exists(sleeper) and state.is_dir()
    parent.kill()
    parent.wait()
    gone = psutil.wait_procs([psutil.Process(sleeper)], timeout=30)[0] if psutil.pid_exists(sleeper) else []
    assert not psutil.pid_exists(sleeper) or gone
    deadline = time.monotonic() + 30
    while state.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not state.exists()


def test_supervisor_stop_all_ends_its_watchdog(tmp_path):
    sup = Supervisor(tmp_path / "logs")
    comp = sup.start("sleeper", ["sleep", "300"])
    watchdog = sup._watchdog
    assert watchdog is not None and watchdog.poll() is None
    sup.stop_all(timeout=5)
    assert comp.popen.poll() is not None and watchdog.poll() is not None
    assert "group " in (tmp_path / "logs" / "watchdog.list").read_text()


class _InterruptedRunner(RecordingRunner):
    """A machine where Ctrl-C arrives while `kind load` runs (the cluster exists by then)."""

    def run(self, cmd, *, input=None, check=True, env=None):  # noqa: A002 - Runner's signature
        if list(cmd[:3]) == ["kind", "load", "docker-image"]:
            self.commands.append(list(cmd))
            raise KeyboardInterrupt
        return super().run(cmd, input=input, check=check, env=env)


def test_kind_up_interrupted_deletes_the_half_made_cluster(tmp_path, monkeypatch):
    monkeypatch.setenv("LABKIT_RUN_DIR", str(tmp_path / "run"))
    runner = _InterruptedRunner(responses={
        **HEALTHY, "kind get clusters": (0, "No kind clusters found.\n"),
        "docker network inspect kind": (1, "Error: No such network: kind"),
        "docker network inspect kind --format": (0, "0\n")})
    cluster = KindCluster(runner=runner, facts=HostFacts(dict(ALL_TOOLS)),
                          state_dir=tmp_path / "state", progress=False, image="img", workload_image="wl")
    with pytest.raises(KeyboardInterrupt):
        cluster.up("tiny")
    lines = runner.lines()
    create = lines.index("kind create cluster --name labkit-tiny --config "
                         f"{tmp_path}/state/kind-config.yaml --kubeconfig {tmp_path}/state/kubeconfig --wait 180s")
    assert lines[create + 1:].count("kind delete cluster --name labkit-tiny") == 1
    assert lines[-1] == "docker network rm kind"  # this up made kind's network: it goes too
    assert not (tmp_path / "run" / "kind-tiny").exists()
