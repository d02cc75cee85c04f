"""`LocalCluster`: the real control plane as local processes, fake nodes, the fake GPU driver's
real gRPC plugin per node, and a node agent per node playing the kubelet's DRA part."""

from __future__ import annotations

import atexit
import json
import os
import shutil
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

import fake_gpus
from fake_gpus import cdcontroller
from fake_gpus.catalog import load_node_profile
from fake_gpus.slices import build_slices, device_classes_for
from labkit.api.features import FeatureGateError, resolve_gates
from labkit.cluster import runstate
from labkit.cluster.annotations import CONTAINER_ENV_ANNOTATION, ENV_ANNOTATION
from labkit.cluster.backends.kubeapi import KubeCluster
from labkit.cluster.backends.local import binaries, controlplane, nodes, pki, served
from labkit.cluster.backends.local.agent import NodeAgent
from labkit.cluster.backends.local.binaries import Binaries, BinariesMissing
from labkit.cluster.backends.local.procs import Component, ProcessError, Supervisor, pid_alive, port_open
from labkit.cluster.backends.local.served import running_state
from labkit.cluster.base import (
    ClusterError,
    ClusterInputError,
    check_gpu_plugin,
    cluster_error,
)
from labkit.cluster.explain_live import explain_pod
from labkit.cluster.kube import ApiError, Kube
from labkit.cluster.runstate import StaleState
from labkit.fileio import write_text
from labkit.model.profiles import DEFAULT_ALLOCATABLE, load_profile

_NOT_READY_TAINTS = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")


class LocalCluster(KubeCluster):
    """Real kube-apiserver/etcd/kube-scheduler/kube-controller-manager on 127.0.0.1.

    Options: `state_dir` (default: a fresh temp dir, short enough for unix sockets), `keep`
    (leave the state dir after `down()`), `build` (build missing binaries with Go; slow),
    `exact` (never emulate: a 1.36 profile needs 1.36 binaries), `start_timeout` seconds per
    component, `reuse` (default True: attach to a cluster of the same profile that
    `labkit cluster up --backend local` left running; see `labkit.cluster.backends.local.serve`). Without
    exact binaries for the profile's minor, the 1.37 binaries run with ``--emulated-version``
    (see `emulated_version`).

    An attached cluster's `down()` deletes what this connection applied and leaves the cluster
    running; `labkit cluster down --backend local --profile P` stops it.
    """

    backend = "local"

    def __init__(self, *, progress: bool = True, state_dir: str | Path | None = None, keep: bool = False,
                 build: bool = True, exact: bool = False, start_timeout: float = 120.0, reuse: bool = True,
                 **kw: Any) -> None:
        super().__init__(progress=progress, **kw)
        self._state_arg = Path(state_dir) if state_dir else None
        self.keep = keep
        self.build = build
        self.exact = exact
        #: set when newer binaries emulate the profile's minor (`--emulated-version`), e.g. "1.36"
        self.emulated_version = None
        self.start_timeout = start_timeout
        self.state_dir: Path | None = None
        self.binaries: Binaries | None = None
        self.server_version = ""  # exact version of the running binaries, e.g. "v1.37.1" (its /version)
        self.sup: Supervisor | None = None
        self.agents: dict[str, NodeAgent] = {}
        self.heartbeats: nodes.Heartbeats | None = None
        self.timings: dict[str, float] = {}
        self._gates: dict[str, bool] = {}
        self.reuse = reuse
        #: the run state of the server process this connection attached to (None: we own the cluster)
        self.attached: dict[str, Any] | None = None

    # -- lifecycle -----------------------------------------------------------------------------
    @classmethod
    def available(cls, kubernetes_version: str = "1.37") -> tuple[bool, str]:
        """The control-plane binaries of that minor are built (or Go is here to build them)."""
        found = binaries.find(kubernetes_version)
        if found:
            return True, f"control-plane binaries in {found.bin_dir}"
        hint = "Go found: `bash tools/build-controlplane.sh` builds them" if binaries.can_build() else "no Go to build them"
        return False, (f"no control-plane binaries for {kubernetes_version} in "
                       f"{binaries.version_dir(kubernetes_version)} ({hint})")

    def feature_gates(self) -> dict[str, bool]:
        """The gates the control plane was started with (the profile's, resolved for its version)."""
        return dict(self._gates) if self._gates else super().feature_gates()

    @property
    def kubeconfig(self) -> Path:
        if self.state_dir is None:
            raise ClusterError("local cluster: not up; call up() first")
        return self.state_dir / "kubeconfig"

    def up(self, profile: Any = "workshop") -> LocalCluster:
        if self.sup is not None or self.attached is not None:
            raise ClusterError("local cluster: already up; call down() before up() again")
        prof = load_profile(profile)
        if self.reuse:
            try:
                state = running_state(prof.name)
            except StaleState as exc:  # its server is gone: start one here; a state not to trust: say why
                if exc.kind != StaleState.GONE:
                    raise
                warnings.warn(f"local cluster of profile {prof.name}: stale: {exc}; {served.tidy(exc)}", stacklevel=2)
                state = None
            if state is not None:
                return self._attach(prof, state)
        check_gpu_plugin("local", prof)
        limit = int(os.environ.get("LABKIT_LOCAL_MAX_NODES", "32"))
        if len(prof.nodes) > limit:
            raise ClusterError(
                f"cluster profile {prof.name}: nodes: {len(prof.nodes)} nodes, but the local backend runs one "
                f"driver plugin process per node and allows at most {limit}; use the sim backend for fleets, "
                "or raise LABKIT_LOCAL_MAX_NODES")
        try:
            gates, _warnings = resolve_gates(prof.kubernetes_version, prof.feature_gates)
        except FeatureGateError as exc:
            raise ClusterInputError(f"cluster profile {prof.name}: featureGates: {exc}") from None
        try:
            self.binaries, self.emulated_version = binaries.for_profile(
                prof.kubernetes_version, build=self.build, exact=self.exact)
        except BinariesMissing as exc:
            raise cluster_error(exc) from None
        self.profile, self._gates = prof, gates
        self.server_version = self.binaries.kubernetes_version
        if self.binaries.minor != prof.kubernetes_version and self.emulated_version is None:
            warnings.warn(f"local cluster: profile {prof.name} asks for Kubernetes {prof.kubernetes_version} but "
                          f"the binaries are {self.server_version}", stacklevel=2)
        self.state_dir = self._state_arg or Path(tempfile.mkdtemp(prefix="lk-", dir="/tmp"))
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self.sup = Supervisor(self.state_dir / "logs")
        if not self.keep and self._state_arg is None:  # our temp dir: gone even if this process is killed
            self.sup.remove_on_death(self.state_dir)
        atexit.register(self.down)
        t0 = time.monotonic()
        steps: list[tuple[str, Callable[[], None]]] = [
            ("control plane and nodes", self._start_control_plane),
            ("device classes", self._apply_device_classes),
            ("driver plugins", self._start_plugins),
            ("ready", self._wait_ready),
        ]
        try:
            for name, step in self.progress(steps, desc=f"local cluster {prof.name}", total=len(steps)):
                t = time.monotonic()
                step()
                self.timings[name] = round(time.monotonic() - t, 2)
        except (ProcessError, ApiError) as exc:
            self.down()
            raise ClusterError(f"local cluster: start-up failed: {exc}") from None
        except BaseException:
            self.down()
            raise
        self.timings["total"] = round(time.monotonic() - t0, 2)
        return self

    def _attach(self, prof: Any, state: dict[str, Any]) -> LocalCluster:
        """Use the cluster a `labkit.cluster.backends.local.serve` process keeps running."""
        import yaml

        if state.get("fingerprint") != runstate.fingerprint(prof):
            raise ClusterError(f"local: the running cluster of profile {prof.name} was made from another version of "
                               f"the profile; `labkit cluster down --backend local --profile {prof.name}` first")
        kc = yaml.safe_load(Path(state["kubeconfig"]).read_text())
        cluster, user = kc["clusters"][0]["cluster"], kc["users"][0]["user"]
        self.kube = Kube(cluster["server"], user["token"], cluster["certificate-authority"])
        self.kube.discover()
        self.profile, self._gates = prof, dict(state.get("gates") or {})
        self.server = state["server"]
        self.state_dir = Path(state["stateDir"])
        self.server_version = state.get("kubernetesVersion", "")
        self.emulated_version = state.get("emulatedVersion")
        self.attached = state
        return self

    def _start_control_plane(self) -> None:
        assert self.sup and self.state_dir and self.binaries and self.profile
        keys = pki.generate(self.state_dir / "pki")
        t0 = time.monotonic()

        def step(name: str) -> None:
            self.timings[f"{name} ready"] = round(time.monotonic() - t0, 2)

        def prepare(server: str) -> None:
            self.server = server
            self.kube = Kube(server, keys.tokens["admin"], str(keys.ca_cert))
            self.kube.discover()
            # Pods need their namespace's "default" ServiceAccount. kube-controller-manager makes
            # it once its informers have synced (~6 s); creating it here saves that wait.
            self._default_service_account("default")
            self._create_nodes()
            step("nodes")

        controlplane.start(self.sup, self.binaries, keys, self.state_dir,
                           version=self.profile.kubernetes_version, gates=self._gates,
                           timeout=self.start_timeout, on_step=step, before_controllers=prepare,
                           emulated_version=self.emulated_version)

    def _default_service_account(self, namespace: str) -> None:
        try:
            self._api().request("POST", f"/api/v1/namespaces/{namespace}/serviceaccounts", body={
                "apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}})
        except ApiError as exc:
            if exc.status != 409:
                raise

    def _create_nodes(self) -> None:
        assert self.kube and self.profile
        objs = [nodes.node_object(n, self.server_version, DEFAULT_ALLOCATABLE) for n in self.profile.nodes]
        nodes.create_nodes(self.kube, objs)
        self.heartbeats = nodes.Heartbeats(self.kube, [n.name for n in self.profile.nodes])
        self.heartbeats.start()

    def _apply_device_classes(self) -> None:
        assert self.kube
        names = dict.fromkeys(n.node_profile for n in self.profile.nodes)
        profiles = [load_node_profile(n) for n in names]
        for dc in device_classes_for(profiles):
            self.kube.apply(dc)
        if any(p.compute_domains for p in profiles):
            self._start_compute_domains()

    def _start_compute_domains(self) -> None:
        """NVIDIA's ComputeDomain CRD and (fake_gpus') controller, for nodes that run the
        compute-domain plugin: the controller is a process like the plugins, and runs as kind and
        the Helm chart run it, in namespace fake-gpus under its own ServiceAccount with exactly the
        RBAC of fake_gpus/deploy/compute-domains (a token of that account, not the admin's)."""
        assert self.kube and self.sup and self.state_dir
        objs = cdcontroller.manifests()
        for crd in (o for o in objs if o["kind"] == "CustomResourceDefinition"):
            self._create_ignoring_conflict(crd)
            deadline = time.monotonic() + self.start_timeout
            while True:  # until the API server serves the new kind
                got = self.kube.request("GET", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/"
                                        + crd["metadata"]["name"])
                if any(c.get("type") == "Established" and c.get("status") == "True"
                       for c in (got.get("status") or {}).get("conditions") or []):
                    break
                if time.monotonic() > deadline:
                    raise ProcessError(f"timed out waiting for the CRD {crd['metadata']['name']} to be established")
                time.sleep(0.2)
        self.kube.discover()
        ns = cdcontroller.DEPLOY_NAMESPACE
        self._create_ignoring_conflict({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        for obj in objs:  # the DeviceClasses came with the node profiles'; no Deployment: a process here
            if obj["kind"] in ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"):
                self._create_ignoring_conflict(obj)
        token = self.kube.request(
            "POST", f"/api/v1/namespaces/{ns}/serviceaccounts/{cdcontroller.SERVICE_ACCOUNT}/token",
            body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                  "spec": {"expirationSeconds": 7 * 24 * 3600}})["status"]["token"]
        kc = yaml.safe_load(self.kubeconfig.read_text())
        kc["users"] = [{"name": cdcontroller.SERVICE_ACCOUNT, "user": {"token": token}}]
        for ctx in kc["contexts"]:
            ctx["context"]["user"] = cdcontroller.SERVICE_ACCOUNT
        controller_kc = self.state_dir / "compute-domain-controller.kubeconfig"
        write_text(controller_kc, yaml.safe_dump(kc), mode=0o600)  # a token: 0600 from its creation
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self.sup.start("compute-domain-controller", [sys.executable, "-m", "fake_gpus", "compute-domain-controller",
                                                     "--kubeconfig", str(controller_kc), "--namespace", ns],
                       env=env, group="plugins")

    def _create_ignoring_conflict(self, obj: dict[str, Any]) -> None:
        assert self.kube
        try:
            self.kube.create(obj)
        except ApiError as exc:
            if exc.status != 409:
                raise

    def _plugin_cmd(self) -> list[str]:
        top = Path(fake_gpus.__file__).parent / "__main__.py"
        return [sys.executable, "-m", "fake_gpus", "plugin"] if top.exists() else [sys.executable, "-m",
                                                                                   "fake_gpus.plugin"]

    def node_dirs(self, node: str) -> dict[str, Path]:
        assert self.state_dir
        base = self.state_dir / "nodes" / node
        return {"registry": base / "reg", "plugins": base / "plugins", "cdi": base / "cdi"}

    def _start_plugins(self) -> None:
        assert self.sup and self.kube and self.profile and self.state_dir
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        for n in self.profile.nodes:
            dirs = self.node_dirs(n.name)
            for d in dirs.values():
                d.mkdir(parents=True, exist_ok=True)
            argv = [*self._plugin_cmd(), "--profile", n.node_profile, "--node", n.name,
                    "--kubeconfig", str(self.kubeconfig), "--registry-dir", str(dirs["registry"]),
                    "--plugins-dir", str(dirs["plugins"]), "--cdi-dir", str(dirs["cdi"]),
                    "--kubernetes-version", self.profile.kubernetes_version]
            if n.mig_mode:
                argv += ["--mig", n.mig_mode]
            if self.profile.topology_attributes:
                argv.append("--topology-attributes")
            self.sup.start(f"plugin-{n.name}", argv, env=env, group="plugins")
            agent = NodeAgent(self.kube, n.name, dirs["registry"], dirs["cdi"])
            agent.start()
            self.agents[n.name] = agent

    def _wait_ready(self) -> None:
        assert self.kube and self.sup and self.profile
        want = self._expected_drivers()

        def ready() -> bool:
            dead = [c for c in self.sup.dead() if c.name.startswith("plugin-")]
            if dead:
                c = dead[0]
                raise ProcessError(f"{c.name} exited with code {c.returncode}; see {c.log}: {c.tail(3)}")
            have: dict[str, set[str]] = {}
            for s in self.kube.list("resourceslices"):
                spec = s.get("spec") or {}
                have.setdefault((spec.get("pool") or {}).get("name", ""), set()).add(spec.get("driver", ""))
            if not all(d <= have.get(n, set()) and d <= set(self.agents[n].plugins) for n, d in want.items()):
                return False
            # the node lifecycle controller may have tainted a node not-ready in the moment between
            # its creation and its first status; the taint goes once it sees Ready=True
            return not any(t.get("key") in _NOT_READY_TAINTS for n in self.kube.list("nodes")
                           for t in (n.get("spec") or {}).get("taints") or [])

        deadline = time.monotonic() + self.start_timeout
        while not ready():
            if time.monotonic() > deadline:
                raise ProcessError(f"timed out after {self.start_timeout:.0f}s waiting for every node's "
                                   f"ResourceSlices and plugin registration; see {self.sup.log_dir}")
            time.sleep(0.2)

    def _expected_drivers(self) -> dict[str, set[str]]:
        """node -> drivers whose slices its plugin publishes (computed like the plugin does)."""
        assert self.profile
        out = {}
        for n in self.profile.nodes:
            kw: dict[str, Any] = {"kubernetes_version": self.profile.kubernetes_version}
            if n.mig_mode:
                kw["mig_mode"] = n.mig_mode
            out[n.name] = {s["spec"]["driver"] for s in build_slices(load_node_profile(n.node_profile), n.name, **kw)}
        return out

    def down(self) -> None:
        """Stop everything (agents, plugins, scheduler, controller-manager, apiserver, etcd, in that
        order), kill what does not stop in time, remove the state dir unless `keep`. Attached to a
        cluster that `labkit cluster up` left running: delete what this connection applied, detach."""
        atexit.unregister(self.down)
        if self.attached is not None:
            try:
                if self.kube is not None and served.alive(self.attached):
                    runstate.remove_applied(self, self._applied)
            finally:
                if self.kube is not None:
                    self.kube.close()
                self.kube, self.attached, self.state_dir = None, None, None
            return
        try:
            if self.heartbeats is not None:
                self.heartbeats.stop()
            for a in self.agents.values():
                a.stop()
            for a in self.agents.values():
                a.join(timeout=5)
            if self.heartbeats is not None:
                self.heartbeats.join(timeout=5)
        finally:
            self.agents, self.heartbeats = {}, None
            if self.sup is not None:
                self.sup.stop_all(timeout=10)
                self.sup = None
            if self.kube is not None:
                self.kube.close()
                self.kube = None
            if self.state_dir is not None and not self.keep and self._state_arg is None:
                shutil.rmtree(self.state_dir, ignore_errors=True)

    def components(self) -> list[Component]:
        """Running (or crashed) processes, in start order."""
        return list(self.sup.components) if self.sup else []

    # -- objects (the verbs: KubeCluster) --------------------------------------------------------
    def _apply_said(self, obj: dict) -> str:
        """The local backend's words for a refused object: "ResourceClaim/bad: <the server's reason>"."""
        meta = obj.get("metadata") or {}
        return f"{obj.get('kind')}/{meta.get('name') or meta.get('generateName')}"

    def _stored(self, obj: dict) -> None:
        """A new Namespace gets its "default" ServiceAccount now: pods may follow right away."""
        super()._stored(obj)
        meta = obj.get("metadata") or {}
        if obj.get("kind") == "Namespace" and meta.get("name"):
            self._default_service_account(meta["name"])

    # -- running -------------------------------------------------------------------------------
    def _starting(self, pod: dict) -> bool:
        """Bound and not started, and labkit's node agent for that node has not given up on it."""
        if not super()._starting(pod):
            return False
        agent = self.agents.get(pod["spec"]["nodeName"])
        return agent is not None and pod["metadata"]["uid"] not in agent.errors

    def _check_alive(self) -> None:
        if self.attached is not None and not served.alive(self.attached):
            raise ClusterError(f"local cluster: its server (pid {self.attached.get('pid')}) is gone; see "
                               f"{self.attached.get('log')}; start it again with "
                               f"`labkit cluster up --backend local --profile {self.profile.name}`")
        dead = [c for c in (self.sup.dead() if self.sup else [])]
        if dead:
            c = dead[0]
            raise ClusterError(f"local cluster: {c.name} (pid {c.pid}) exited with code {c.returncode}; "
                               f"see {c.log}; call down() and up() again")

    # -- looking (events, placements: KubeCluster) ----------------------------------------------
    def pod_env(self, pod: str, namespace: str = "default", container: str | None = None) -> dict[str, str]:
        """One container's env (CDI devices of the requests it references), or with no name the
        union over the pod's containers."""
        obj = self.get("pods", pod, namespace)
        ann = obj["metadata"].get("annotations") or {}
        if container is None:
            raw = ann.get(ENV_ANNOTATION)
            return json.loads(raw) if raw else {}
        per = json.loads(ann.get(CONTAINER_ENV_ANNOTATION) or "{}")
        names = [c["name"] for c in (obj.get("spec") or {}).get("initContainers", []) + obj["spec"]["containers"]]
        if container not in names:
            raise ClusterError(f"pod {namespace}/{pod}: no container {container!r} (containers: {', '.join(names)})")
        return dict(per.get(container, {}))

    def explain(self, pod: str, namespace: str = "default") -> str:
        uid = self.get("pods", pod, namespace)["metadata"]["uid"]
        extra = [f"  node agent {a.node}: {a.errors[uid]}" for a in self.agents.values() if a.errors.get(uid)]
        return explain_pod(self, pod, namespace, kubernetes_version=self.profile.kubernetes_version, extra=extra)

    @classmethod
    def manage(cls, action: str, profile: Any, **_: Any) -> int:
        """`labkit cluster up|down|status --backend local`: the cluster runs in a server process
        (labkit.cluster.backends.local.serve) that outlives the command."""
        name = load_profile(profile).name
        if action == "up":
            with runstate.exclusive(cls.backend, name, "up"):  # a second `up` refuses, in one line
                try:
                    already = running_state(name) is not None
                except StaleState as exc:
                    if exc.kind != StaleState.GONE:  # not to be trusted: `down` removes it
                        raise
                    already = False  # start() tidies it
                state = served.start(profile)
            if already:
                print(f"local cluster of profile {name} was already running (server pid {state['pid']})")
            else:
                total = (state.get("timings") or {}).get("total")
                print(f"local cluster of profile {name} is up" + (f" in {total:.1f}s" if total else "")
                      + f" (server pid {state['pid']}, log {state['log']})")
            print("\n".join(runstate.usage_lines("local", name, state["kubeconfig"])))
            return 0
        if action == "down":
            with runstate.exclusive(cls.backend, name, "down"):
                said = served.stop(name)
            print(f"local cluster of profile {name} {said}")
            return 0
        c = cls()
        c.profile = load_profile(profile)
        print(c.status())
        try:
            return 0 if running_state(name) else runstate.EXIT_NOT_RUNNING
        except StaleState:
            return runstate.EXIT_NOT_RUNNING

    @classmethod
    def is_running(cls, state: dict[str, Any]) -> bool:
        return running_state(state["profile"]) is not None

    def status(self) -> str:
        """A short human summary (the `Cluster.status()` contract); `status_info()` has the data."""
        info = self.status_info()
        name = getattr(self.profile, "name", self.profile)
        if not info["server"]:
            try:
                state = running_state(str(name))
            except StaleState as exc:  # said, not acted on: nothing is signalled or removed here
                return exc.status_line()
            if state is None:
                return (f"local cluster, profile {name}: not running "
                        f"(start one with `labkit cluster up --backend local --profile {name}`)")
            version = state["kubernetesVersion"] + (f" (emulating {state['emulatedVersion']})"
                                                    if state.get("emulatedVersion") else "")
            return "\n".join([f"local cluster, profile {name}, Kubernetes {version}", f"  server {state['server']}",
                              f"  kubeconfig {state['kubeconfig']}",
                              f"  server process pid {state['pid']} (log {state.get('log')})"])
        version = info["kubernetesVersion"] + (f" (emulating {info['emulatedVersion']})"
                                                if info.get("emulatedVersion") else "")
        lines = [f"local cluster, profile {name}, Kubernetes {version}", f"  server {info['server']}",
                 f"  kubeconfig {info['kubeconfig']}"]
        for c in info["components"]:
            state = "running" if c["running"] else "stopped"
            ports = ",".join(str(p) for p in c["ports"])
            lines.append(f"  {c['name']:<28} pid {c['pid'] or '-':<8} {state}" + (f" ports {ports}" if ports else ""))
        return "\n".join(lines)

    def status_info(self) -> dict[str, Any]:
        """Versions, ports, pids and state dir: what is running where."""
        return {
            "kubernetesVersion": self.server_version,
            "emulatedVersion": self.emulated_version,
            "server": self.server,
            "kubeconfig": str(self.kubeconfig) if self.state_dir else "",
            "components": [{"name": c.name, "pid": c.pid, "running": c.running() and pid_alive(c.pid),
                            "ports": list(c.ports), "portsOpen": [port_open(p) for p in c.ports],
                            "log": str(c.log)} for c in self.components()],
            "timings": dict(self.timings),
        }
