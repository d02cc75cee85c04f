"""Helpers shared by the kind tests that look inside the nodes (faults, leaks, RBAC) and by
tools/reliability.py, which runs the same code at full size.

A cluster comes from `cluster()`: `connect("kind", profile)` attaches to a running cluster of that
profile (the run dir of `$LABKIT_RUN_DIR`, e.g. the e2e session's or a workshop cluster started with
`labkit cluster up --backend kind`) and only starts one when none runs.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from fake_gpus.plugin.cdi import spec_path
from fake_gpus.plugin.paths import DEFAULT_CDI_DIR, DEFAULT_PLUGINS_DIR, checkpoint_path
from labkit.cluster import connect
from labkit.cluster.backends.kind.backend import KindCluster
from labkit.cluster.backends.kind.preflight import find_tool
from labkit.cluster.base import NotFound
from tests.paths import REPO

ROOT = REPO
DRIVER = "gpu.nvidia.com"
DRIVER_NS = "fake-gpus"
PLUGIN_LABEL = "app.kubernetes.io/name=fake-gpus-kubelet-plugin"
#: the profile the kind fault/RBAC tests use (a running cluster of it is reused)
PROFILE = os.environ.get("LABKIT_FAULTS_PROFILE", "workshop")
#: the cluster's name when not labkit-<profile>; make test's fault lane names its own
#: (tools/test-lanes.sh), which tools/with-kind.sh removes when a killed run left it behind
CLUSTER_NAME = os.environ.get("LABKIT_FAULTS_CLUSTER") or None


def cluster(profile: str = PROFILE, name: str | None = CLUSTER_NAME) -> KindCluster:
    kw: dict[str, Any] = {"cluster_name": name} if name else {}
    c = connect("kind", profile, **kw)
    assert isinstance(c, KindCluster)
    return c


def run(*cmd: str, timeout: float = 300, check: bool = False,
        input: str | None = None) -> subprocess.CompletedProcess[str]:
    out = subprocess.run(list(cmd), capture_output=True, text=True, timeout=timeout, input=input)
    if check and out.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} failed ({out.returncode}): {out.stderr.strip() or out.stdout.strip()}")
    return out


def docker() -> str:
    return find_tool("docker") or "docker"


def kubectl(c: KindCluster, *args: str, check: bool = True, timeout: float = 120,
            input: str | None = None) -> str:
    kc = find_tool("kubectl") or "kubectl"
    return run(kc, "--kubeconfig", str(c.kubeconfig), *args, check=check, timeout=timeout, input=input).stdout


def kjson(c: KindCluster, *args: str) -> Any:
    return json.loads(kubectl(c, *args, "-o", "json"))


def obj(c: KindCluster, kind: str, name: str, namespace: str | None = "default") -> dict[str, Any] | None:
    """One object read through the cluster's API connection (the loops poll; a kubectl process per
    read costs a Go start and a TLS handshake), None when it does not exist."""
    try:
        return c.get(kind, name, namespace)
    except NotFound:
        return None


def node_exec(node: str, *cmd: str, check: bool = True, timeout: float = 60) -> str:
    """Run a command inside a kind node container."""
    return run(docker(), "exec", node, *cmd, check=check, timeout=timeout).stdout


def node_containers(c: KindCluster) -> dict[str, str]:
    """node name -> its engine container. LabKit registers kind workers under the profile's node
    names, so the two differ; they share the node's InternalIP."""
    ips = {}
    for n in c.list("Node"):
        for a in n["status"].get("addresses", []):
            if a["type"] == "InternalIP":
                ips[a["address"]] = n["metadata"]["name"]
    ctrs = run(docker(), "ps", "--format", "{{.Names}}", "--filter",
               f"label=io.x-k8s.kind.cluster={c.cluster_name}", check=True).stdout.split()
    out = {}
    for ctr in ctrs:
        ip = run(docker(), "inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}} {{end}}", ctr,
                 check=True).stdout.split()
        for addr in ip:
            if addr in ips:
                out[ips[addr]] = ctr
    return out


def plugin_pods(c: KindCluster) -> dict[str, str]:
    """node -> name of the fake driver pod there."""
    pods = c.list("Pod", DRIVER_NS)
    return {p["spec"]["nodeName"]: p["metadata"]["name"] for p in pods
            if p["metadata"].get("labels", {}).get("app.kubernetes.io/name") == "fake-gpus-kubelet-plugin"
            and p["spec"].get("nodeName")}


def checkpoint(ctr: str, driver: str = DRIVER) -> dict[str, Any]:
    """The plugin's checkpoint on a node: claim uid -> prepared claim ({} when there is no file)."""
    path = checkpoint_path(DEFAULT_PLUGINS_DIR, driver)
    text = node_exec(ctr, "sh", "-c", f"cat {path} 2>/dev/null || true")
    return json.loads(text).get("claims", {}) if text.strip() else {}


def cdi_specs(ctr: str) -> list[str]:
    """File names in the node's CDI dir."""
    return sorted(node_exec(ctr, "sh", "-c", f"ls -1 {DEFAULT_CDI_DIR} 2>/dev/null || true").split())


def claim_spec_name(uid: str, driver: str = DRIVER) -> str:
    return spec_path(DEFAULT_CDI_DIR, driver, uid).name


def poll(cond: Callable[[], Any], timeout: float, interval: float = 1.0) -> Any:
    """cond()'s first truthy value, or None after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        got = cond()
        if got or time.monotonic() > deadline:
            return got
        time.sleep(interval)


# -- the kind lane's clusters ----------------------------------------------------------------------
# One cluster per profile for the whole kind lane (tests/conftest.py `kind_clusters`, `kind_workshop`):
# the e2e (tests/e2e/test_cluster_kind_e2e.py) and the kind column of tests/cluster/test_backend_cases.py share them.
ARTIFACTS = ROOT / "test-artifacts" / "kind-e2e.json"
#: what the lane measured (cluster start times, notebook times, ...): written to ARTIFACTS at the end
MEASURED: dict[str, Any] = {}
#: developers only: a run dir whose clusters are reused and kept (e.g. /tmp/kind-dev); a profile
#: switch still replaces the cluster, and the last test still checks `down`
KEEP = os.environ.get("LABKIT_KIND_E2E_KEEP", "")


def _inotify_instances() -> int:
    try:
        return int(Path("/proc/sys/fs/inotify/max_user_instances").read_text())
    except (OSError, ValueError):
        return 0


#: several clusters at once need more inotify instances than Linux's default 128 (tools/with-kind.sh
#: raises them when it can); otherwise one cluster at a time. The next profile's cluster is started at
#: its predecessor's last test(s), not earlier: a cluster that is up but not used yet idles at ~9 CPU-s a
#: minute (4 nodes), and the 2-core machine is CPU-bound for the whole of make test. Started at the
#: workshop's generated scenarios, mig-lab waited ~3-4 min for its tests (~30-35 CPU-s for nothing);
#: started at the tests that take about as long as a `labkit cluster up` (~60-90 s), the lane still
#: waits ~0 s for it ("idle before use s" and "tests waited for it s" in test-artifacts/kind-e2e.json).
PREFETCH = os.environ.get("LABKIT_KIND_PREFETCH", "1") != "0" and _inotify_instances() >= 512


def run_in_root(*cmd: str, env: dict[str, str] | None = None,
                timeout: float = 900) -> subprocess.CompletedProcess[str]:
    """A command run in the repository root, its output captured (never raises on its exit status)."""
    return subprocess.run(list(cmd), capture_output=True, text=True, env=env, cwd=ROOT, timeout=timeout)


def host_snapshot() -> dict[str, set[str]]:
    """The engine's containers and networks and the host's labkit-e2e processes (the last e2e test
    compares with the snapshot taken before the first cluster)."""
    ps = run_in_root("ps", "-eo", "pid=,args=").stdout.splitlines()
    return {
        "containers": set(run_in_root(docker(), "ps", "-a", "--format", "{{.Names}}").stdout.split()),
        "networks": set(run_in_root(docker(), "network", "ls", "--format", "{{.Name}}").stdout.split()),
        "processes": {ln.strip() for ln in ps if "labkit-e2e-" in ln},
    }


class Clusters:
    """`labkit cluster up` / `down` as typed, one profile's tests at a time. The next profile's cluster
    may be started early (`prefetch`), so its creation overlaps tests that mostly wait for kubelets
    instead of adding to the lane's time."""

    def __init__(self, env: dict[str, str], logs: Path) -> None:
        self.env = env
        self.logs = logs
        self.profile: str | None = None
        self.conn: KindCluster | None = None
        self.container_ids: dict[str, list[str]] = {}
        self.final = False
        self.pending: dict[str, tuple[subprocess.Popen[str], float]] = {}

    def _up_argv(self, profile: str) -> list[str]:
        return [sys.executable, "-m", "labkit", "cluster", "up", "--backend", "kind", "--profile", profile,
                "--name", f"labkit-e2e-{profile}"]

    def prefetch(self, profile: str) -> None:
        """Start `labkit cluster up` for `profile` in the background; `get(profile)` takes it over."""
        if KEEP or not PREFETCH or profile == self.profile or profile in self.pending:
            return
        with (self.logs / f"up-{profile}.log").open("w") as out:  # the child keeps its own descriptor
            proc = subprocess.Popen(self._up_argv(profile), stdout=out, stderr=subprocess.STDOUT, text=True,
                                    env=self.env, cwd=ROOT)
        self.pending[profile] = (proc, time.monotonic())

    def get(self, profile: str) -> KindCluster:
        if self.profile == profile and self.conn is not None:
            return self.conn
        self.down()
        t0 = time.monotonic()
        idle = 0.0
        if profile in self.pending:
            proc, started = self.pending.pop(profile)
            log = self.logs / f"up-{profile}.log"
            if proc.poll() is not None:  # up before its tests: how long it idled (its log's last write)
                idle = max(0.0, time.time() - log.stat().st_mtime)
            rc = proc.wait(timeout=900)
            up = subprocess.CompletedProcess(proc.args, rc, log.read_text(), "")
            waited, wall = time.monotonic() - t0, time.monotonic() - started
        else:
            up = run_in_root(*self._up_argv(profile), env=self.env)
            waited = wall = time.monotonic() - t0
        assert up.returncode == 0, f"labkit cluster up failed:\n{up.stdout}\n{up.stderr}"
        if KEEP and "was already running" in up.stdout:  # a developer's kept cluster
            return self._connect(profile)
        assert "was already running" not in up.stdout, (
            f"labkit-e2e-{profile} existed before this run created it (left by a killed run? tools/with-kind.sh "
            f"removes such clusters before the lanes start):\n{up.stdout}")
        assert "export KUBECONFIG=" in up.stdout and "kubectl get resourceslices" in up.stdout, up.stdout
        m = re.search(r"is up in (\d+)s \(create (\d+)s, images (\d+)s, driver DaemonSets ready (\d+)s, "
                      r"slices (\d+)s\)", up.stdout)
        assert m, up.stdout
        MEASURED[profile] = {"labkit cluster up (wall s)": round(wall, 1), "create s": int(m[2]),
                             "images s": int(m[3]), "DaemonSets ready s": int(m[4]), "slices s": int(m[5]),
                             "tests waited for it s": round(waited, 1), "idle before use s": round(idle, 1)}
        return self._connect(profile)

    def _connect(self, profile: str) -> KindCluster:
        self.profile = profile
        conn = connect("kind", profile, progress=False)
        assert isinstance(conn, KindCluster)
        assert conn.attached and conn.cluster_name == f"labkit-e2e-{profile}"
        self.conn = conn
        ids = run_in_root(docker(), "ps", "-q", "--no-trunc", "--filter",
                          f"label=io.x-k8s.kind.cluster=labkit-e2e-{profile}")
        self.container_ids[profile] = ids.stdout.split()
        return conn

    def down(self) -> None:
        if self.profile is None or (KEEP and not self.final):
            return
        if self.conn is not None:
            self.conn.down()
        self._cli_down(self.profile)
        self.profile, self.conn = None, None

    def _cli_down(self, profile: str) -> None:
        out = run_in_root(sys.executable, "-m", "labkit", "cluster", "down", "--backend", "kind", "--profile",
                          profile, env=self.env)
        assert out.returncode == 0, out.stderr
        assert f"kind cluster labkit-e2e-{profile} (profile {profile}) is down" in out.stdout, out.stdout

    def down_all(self) -> None:
        """The current cluster and any started early that no test took over (a failed run)."""
        self.final = True
        try:
            self.down()
        finally:
            for profile, (proc, _) in list(self.pending.items()):
                proc.wait(timeout=900)
                self.pending.pop(profile)
                self._cli_down(profile)


@contextlib.contextmanager
def lane_clusters(run_dir: Path) -> Iterator[Clusters]:
    """The kind lane's cluster manager on `run_dir` (LABKIT_RUN_DIR, set for this process too, so
    `connect()` finds what the CLI started); at the end every cluster is down and MEASURED written."""
    run_dir = Path(KEEP) if KEEP else run_dir
    os.environ["LABKIT_RUN_DIR"] = str(run_dir)
    cl = Clusters({**os.environ, "LABKIT_RUN_DIR": str(run_dir)}, run_dir)
    t0 = time.monotonic()
    try:
        yield cl
    finally:
        cl.down_all()
        MEASURED["kind e2e tests total s"] = round(time.monotonic() - t0, 1)
        ARTIFACTS.parent.mkdir(parents=True, exist_ok=True)
        ARTIFACTS.write_text(json.dumps(MEASURED, indent=2, sort_keys=True))
