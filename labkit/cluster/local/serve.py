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
import os
import shutil
import signal
import tempfile
import threading
from pathlib import Path

from labkit.cluster import runstate
from labkit.cluster.base import ClusterError
from labkit.cluster.local.cluster import LocalCluster
from labkit.cluster.local.served import BACKEND
from labkit.model.profiles import load_profile


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
