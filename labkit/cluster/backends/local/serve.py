"""A local cluster that outlives `labkit cluster up`: a detached server process owns it.

The local backend's node agents and heartbeats are threads of the Python process that started
the cluster, so a cluster that stays up needs a process that stays up: `start()` launches
``python -m labkit.cluster.backends.local.serve --profile P`` in its own session (stdin closed, output to
``<run dir>/serve.log``); that process brings the cluster up, records it in the run dir
(`labkit.cluster.runstate`: with who it is and who its components are, `labkit.cluster.processes`)
and keeps it running until SIGTERM, when it calls `down()` and removes the run dir. A SIGTERM or
SIGINT during the start-up stops what was started and exits 130. `stop()` sends that signal;
`connect("local", P)` attaches to the recorded cluster.
"""

from __future__ import annotations

import argparse
import os
import signal
import threading

from labkit.cluster import processes, runstate
from labkit.cluster.backends.local.cluster import LocalCluster
from labkit.cluster.backends.local.served import BACKEND
from labkit.cluster.base import ClusterError
from labkit.model.profiles import load_profile


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m labkit.cluster.backends.local.serve")
    ap.add_argument("--profile", required=True)
    args = ap.parse_args(argv)
    prof = load_profile(args.profile)
    rd = runstate.run_dir(BACKEND, prof.name)
    stopping = threading.Event()
    serving = False

    def on_signal(*_: object) -> None:
        if serving:  # up: an orderly down() below
            stopping.set()
            return
        # during start-up: up() stops what it started and re-raises; one signal is enough
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, signal.SIG_IGN)
        raise KeyboardInterrupt

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, on_signal)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    # a temp dir of its own (short: the plugins' unix sockets live below it, 108-byte path limit),
    # removed by down(), or by the Supervisor's watchdog if this server is killed
    cluster = LocalCluster(keep=False, progress=False, reuse=False)
    try:
        try:
            cluster.up(prof)
        except ClusterError as exc:
            (rd / "error").write_text(str(exc))
            return 1
        assert cluster.state_dir is not None and cluster.sup is not None
        server = processes.identify(os.getpid())
        if server is None:
            (rd / "error").write_text("local: no /proc here: the server cannot record who it is")
            return 1
        runstate.write_state(BACKEND, prof.name, {
            "backend": BACKEND, "profile": prof.name, "fingerprint": runstate.fingerprint(prof),
            "runDir": str(rd), "pid": server.pid, "process": server.to_json(),
            "server": cluster.server, "kubeconfig": str(cluster.kubeconfig), "stateDir": str(cluster.state_dir),
            "kubernetesVersion": cluster.server_version, "emulatedVersion": cluster.emulated_version,
            "gates": cluster._gates,
            "componentGroups": [c.identity.to_json() for c in cluster.components() if c.identity is not None],
            "log": str(rd / "serve.log"), "timings": cluster.timings})
        serving = True
        print(f"local cluster {prof.name} up: {cluster.server} (pid {os.getpid()})", flush=True)
        while not stopping.wait(1.0):
            dead = cluster.sup.dead() if cluster.sup else []
            if dead:
                print(f"component {dead[0].name} exited; see {dead[0].log}", flush=True)
    except KeyboardInterrupt:
        return 130
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):  # stopping now; a second signal must not cut it short
            signal.signal(sig, signal.SIG_IGN)
        cluster.down()  # stops what it started and removes its state dir (a no-op after a failed up)
        _forget(prof.name)
    return 0


def _forget(profile_name: str) -> None:
    """Remove the run dir if its state names this server (a failed start leaves it, with its
    ``error`` file, to the `labkit cluster up` waiting for it)."""
    try:
        state = runstate.read_state(BACKEND, profile_name)
    except runstate.StaleState:
        return
    if state is not None and state.get("pid") == os.getpid():
        runstate.clear(BACKEND, profile_name)


if __name__ == "__main__":
    raise SystemExit(main())
