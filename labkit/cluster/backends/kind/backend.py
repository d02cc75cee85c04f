"""`KindCluster`: a real kind cluster (Docker or Podman) running the fake_gpus driver.

Every command goes through a `Runner`, and `plan()` lists the commands `up()` runs on a machine
where nothing exists yet, so the whole flow is testable without a container engine
(tests/cluster/test_cluster_kind.py); tests/e2e/test_cluster_kind_e2e.py runs it for real. Object reads and
deletes (`get`, `list`, `wait`, `placements`, `explain`...) go over one kept-alive connection to the
API server (the shared base's verbs over this cluster's kubeconfig, see `_api`); `apply` and `exec` run kubectl.

A cluster stays up until `labkit cluster down` (or `down()` of the connection that created it):
its kubeconfig and state live in the run dir (`labkit.cluster.runstate`), and `up()` of another
process attaches to a running cluster of the same profile instead of creating a second one.

Workload images
---------------
Nodes of a kind cluster have no GPU and, here, often no registry. A container whose image is not
on the nodes (``vllm/vllm-openai``, ``pytorch/pytorch``, ``nvidia/cuda``, ``busybox``...) is run
with the small local workload image instead (``LABKIT_KIND_WORKLOAD_IMAGE``, built from
tools/kind-workload): it prints its environment and sleeps, which is all a DRA lesson needs
(`pod_env`, `kubectl exec ... env`); the original command line is passed to it as arguments. The
swap is logged, and the pod carries the annotation ``labkit.dev/image-swapped`` naming each
swapped container and its original image. ``swap_images=False`` (or ``LABKIT_KIND_SWAP_IMAGES=0``)
turns it off for clusters that can pull and run the real images.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from fake_gpus.catalog import load_node_profile
from fake_gpus.plugin.cdi import visible_devices
from fake_gpus.slices import build_slices
from labkit.cluster import processes, runstate
from labkit.cluster.backends.kind import health
from labkit.cluster.backends.kind.config import kind_config_yaml
from labkit.cluster.backends.kind.driver import compute_domain_workloads, driver_manifests
from labkit.cluster.backends.kind.image import DEFAULT_IMAGE, DOCKERFILE, REPO_ROOT
from labkit.cluster.backends.kind.images import WORKLOAD_DOCKERFILE, WORKLOAD_IMAGE
from labkit.cluster.backends.kind.kubectl import KubectlClient, items, kind_of, one_line, refusals
from labkit.cluster.backends.kind.preflight import (
    HostFacts,
    cdi_check,
    check_host,
    container_engine,
    find_tool,
    readiness,
    run_preflight,
)
from labkit.cluster.backends.kind.runner import CommandError, Runner, SubprocessRunner
from labkit.cluster.backends.kubeapi import KubeCluster
from labkit.cluster.base import (
    ClusterError,
    NotFound,
    RefusedObjects,
    check_gpu_plugin,
)
from labkit.cluster.kube import client
from labkit.fileio import write_text
from labkit.model.profiles import ClusterProfile, load_profile

#: kind runs one container per node; beyond this a profile belongs on `sim`
MAX_KIND_NODES = 8

DRIVER_IMAGE_ENV = "LABKIT_FAKE_GPUS_IMAGE"
WORKLOAD_IMAGE_ENV = "LABKIT_KIND_WORKLOAD_IMAGE"
SWAP_ENV = "LABKIT_KIND_SWAP_IMAGES"
SWAP_ANNOTATION = "labkit.dev/image-swapped"
#: the engine network kind puts every cluster on
KIND_NETWORK = "kind"
#: a kind state file's own fields (runstate.COMMON_FIELDS aside), name -> JSON type
STATE_FIELDS: dict[str, type] = {"cluster": str, "kubeconfig": str}
#: a cluster name kind accepts (kind's pkg/internal/apis/config/validate.go: validNameRE), not one
#: that reads as an option: a recorded one is passed to `kind delete cluster --name`
_CLUSTER_NAME = re.compile(r"(?!-)[a-z0-9.-]+")

#: CoreDNS replicas of a LabKit kind cluster. kubeadm always deploys 2 (kubernetes/kubernetes
#: cmd/kubeadm/app/phases/addons/dns/dns.go coreDNSReplicas) and kind keeps them; on kind both land
#: on the one control-plane node (they tolerate its taint), so the second adds no availability, only
#: its container, probes and API watches (measured: an idle workshop cluster 8.95 -> 8.33 CPU-s a
#: minute with 1). clusters/README.md names it.
COREDNS_REPLICAS = 1

#: environment variables a CDI spec of the fake driver sets (what `pod_env` returns)
DEVICE_ENV_PREFIXES = ("FAKE_", "NVIDIA_")

def default_cluster_name(profile_name: str) -> str:
    """kind cluster name for a profile: ``labkit-<profile>`` (DNS-label safe)."""
    return ("labkit-" + re.sub(r"[^a-z0-9-]+", "-", profile_name.lower())).strip("-")[:40]



def _read_state(profile_name: str) -> dict[str, Any] | None:
    """`runstate.read_state` of kind, with its fields; StaleState also for a cluster name kind would refuse."""
    state = runstate.read_state("kind", profile_name, STATE_FIELDS)
    if state is not None and not _CLUSTER_NAME.fullmatch(state["cluster"]):
        raise runstate.StaleState(runstate.run_dir("kind", profile_name) / runstate.STATE_FILE,
                                  f"cluster: {state['cluster']!r} is not a kind cluster name", runstate.StaleState.BAD)
    return state


def _kubeadm_failed(exc: CommandError) -> bool:
    """Whether `kind create cluster` failed inside kubeadm init/join (a wait that can pass on a retry),
    not before it (a bad config, a missing image, a name in use)."""
    return "with kubeadm" in exc.output


def _network_marker(network_id: str) -> Path:
    """A file that says "labkit made kind's network with this ID". It is shared by every process and
    run dir on the host (clusters of several run dirs share the one network), and keyed on the
    engine's network ID, so a network a user or kind made later is never taken for ours."""
    return Path(tempfile.gettempdir()) / f"labkit-kind-network-{network_id[:16]}"


class KindCluster(KubeCluster):
    """Options: `cluster_name` (default ``labkit-<profile>``), `image` (the fake driver image),
    `workload_image` and `swap_images` (see the module docstring), `keep` (down() leaves the
    cluster running), `reuse` (attach to a running cluster of the profile; default True),
    `allow_cgroup_v1` (default: when the host is on cgroup v1), `state_dir` (kubeconfig and
    generated files; default: the run dir), `log` (a callable for progress lines)."""

    backend = "kind"
    unserved_kind_is_empty = True  # an alpha DRA kind this cluster does not serve: nothing of it exists

    def __init__(self, *, cluster_name: str | None = None, image: str | None = None,
                 workload_image: str | None = None, swap_images: bool | None = None,
                 runner: Runner | None = None, facts: HostFacts | None = None,
                 state_dir: str | Path | None = None, allow_cgroup_v1: bool | None = None,
                 keep: bool = False, reuse: bool = True, log: Callable[[str], None] | None = None,
                 **kw: Any) -> None:
        super().__init__(**kw)
        self._name_arg = cluster_name
        self.cluster_name = cluster_name or "labkit"
        self.image = image or os.environ.get(DRIVER_IMAGE_ENV) or DEFAULT_IMAGE
        self.workload_image = workload_image or os.environ.get(WORKLOAD_IMAGE_ENV) or WORKLOAD_IMAGE
        if swap_images is None:
            swap_images = os.environ.get(SWAP_ENV, "1").strip().lower() not in ("0", "false", "no", "off")
        self.swap_images = swap_images
        self.log = log or (lambda line: None)
        self.runner = runner or SubprocessRunner(log=self.log)
        self.facts = facts
        self.allow_cgroup_v1 = allow_cgroup_v1
        self.keep = keep
        self.reuse = reuse
        self._state_arg = Path(state_dir) if state_dir else None
        self.state_dir = self._state_arg or Path(".")
        self._created = False
        self._made_network = False
        self.attached = False
        self._node_images: set[str] | None = None
        self._swapped_seen: set[str] = set()
        self.timings: dict[str, float] = {}
        self._api_key: tuple[str, int] | None = None
        self._api_lock = threading.Lock()

    # -- paths and tools -------------------------------------------------------------------
    @property
    def kubeconfig(self) -> Path:
        return self.state_dir / "kubeconfig"

    @property
    def config_path(self) -> Path:
        return self.state_dir / "kind-config.yaml"

    @property
    def manifest_path(self) -> Path:
        return self.state_dir / "fake-gpus.yaml"

    def _facts(self) -> HostFacts:
        if self.facts is None:
            self.facts = HostFacts.probe()
        return self.facts

    def engine(self) -> str:
        return container_engine(self._facts()) or "docker"

    def _tool(self, name: str) -> str:
        return self._facts().executables.get(name) or find_tool(name) or name

    def _kind(self, *args: str, check: bool = True):
        env = {**os.environ, "KIND_EXPERIMENTAL_PROVIDER": "podman"} if self.engine() == "podman" else None
        return self.runner.run([self._tool("kind"), *args], env=env, check=check)

    def select_profile(self, profile: ClusterProfile) -> None:
        """Set the profile, and the cluster name and state dir that go with it: the `cluster_name`
        option, else the name recorded in the run dir, else ``labkit-<profile>``."""
        self.profile = profile
        if self._name_arg is None:
            state = _read_state(profile.name) or {}
            self.cluster_name = state.get("cluster") or default_cluster_name(profile.name)
        self.state_dir = self._state_arg or runstate.run_dir("kind", profile.name)

    # -- plan ------------------------------------------------------------------------------
    def plan(self, profile: Any = "workshop") -> list[list[str]]:
        """The commands `up(profile)` runs after the preflight on a machine where neither the
        cluster nor the images exist yet (when they exist, their step is skipped)."""
        engine = self.engine()
        kubectl = [self._tool("kubectl"), "--kubeconfig", str(self.kubeconfig)]
        kind = self._tool("kind")
        images = [self.image] + ([self.workload_image] if self.swap_images else [])
        cmds = [
            [kind, "create", "cluster", "--name", self.cluster_name, "--config", str(self.config_path),
             "--kubeconfig", str(self.kubeconfig), "--wait", "180s"],
            [engine, "build", "-t", self.image, "-f", str(DOCKERFILE), str(REPO_ROOT)],
        ]
        if self.swap_images:
            cmds.append([engine, "build", "-t", self.workload_image, "-f", str(WORKLOAD_DOCKERFILE),
                         str(WORKLOAD_DOCKERFILE.parent)])
        cmds += [
            [kind, "load", "docker-image", *images, "--name", self.cluster_name,
             "--nodes", ",".join(self.worker_containers())],
            *self._deploy_commands(kubectl),
        ]
        cmds += self._rollout_commands(kubectl)
        return cmds

    def _deploy_commands(self, kubectl: list[str]) -> list[list[str]]:
        """The driver's objects, and CoreDNS scaled to `COREDNS_REPLICAS`."""
        return [[*kubectl, "apply", "-f", str(self.manifest_path)],
                [*kubectl, "-n", "kube-system", "scale", "deployment/coredns", f"--replicas={COREDNS_REPLICAS}"]]

    def _rollout_commands(self, kubectl: list[str]) -> list[list[str]]:
        """Wait for every driver DaemonSet and, with ComputeDomains, for the CRD to be served and the
        controller's Deployment to be available (a ComputeDomain applied before would be refused or
        never get its claim template)."""
        assert self.profile is not None
        cmds = [[*kubectl, "-n", "fake-gpus", "rollout", "status", f"daemonset/{name}", "--timeout", "300s"]
                for name in self._daemonsets()]
        deployments = compute_domain_workloads(self.profile)
        if deployments:
            cmds.append([*kubectl, "wait", "--for=condition=Established", "--timeout=120s",
                         "customresourcedefinition/computedomains.resource.nvidia.com",
                         "customresourcedefinition/computedomaincliques.resource.nvidia.com"])
        cmds += [[*kubectl, "-n", "fake-gpus", "rollout", "status", f"deployment/{name}", "--timeout", "300s"]
                 for name in deployments]
        return cmds

    def _daemonsets(self) -> list[str]:
        assert self.profile is not None
        return [o["metadata"]["name"] for o in driver_manifests(self.profile, self.image) if o["kind"] == "DaemonSet"]

    def write_files(self, profile: ClusterProfile) -> None:
        facts = self._facts()
        allow_v1 = (not facts.cgroup_v2) if self.allow_cgroup_v1 is None else self.allow_cgroup_v1
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(kind_config_yaml(
            profile, cluster_name=self.cluster_name, allow_cgroup_v1=allow_v1,
            restrict_oom_score_adj=not facts.cap_sys_resource))
        self.manifest_path.write_text(yaml.safe_dump_all(driver_manifests(profile, self.image), sort_keys=False))

    @classmethod
    def available(cls, kubernetes_version: str = "1.37") -> tuple[bool, str]:
        """The kind preflight (labkit.cluster.backends.kind.preflight): what is missing and the command that fixes it."""
        return readiness(check_host(kubernetes_version))

    # -- lifecycle -------------------------------------------------------------------------
    def up(self, profile: Any = "workshop") -> KindCluster:
        client(self.backend)  # the kubernetes client, before anything is created (MissingPackage without it)
        prof = load_profile(profile)
        check_gpu_plugin("kind", prof)
        if len(prof.nodes) > MAX_KIND_NODES:
            raise ClusterError(
                f"kind: profile {prof.name} has {len(prof.nodes)} nodes; kind runs one "
                f"container per node (at most {MAX_KIND_NODES} here) — use backend='sim' for fleets")
        self.select_profile(prof)
        facts = self._facts()
        failed = [c for c in run_preflight(self.runner, facts, prof.kubernetes_version) if not c.ok]
        if failed:
            raise ClusterError("kind preflight failed:\n" + "\n".join(str(c) for c in failed))
        if self.reuse and self.cluster_name in self.running_clusters():
            return self._attach(prof)
        try:
            self._create(prof)
        except CommandError as exc:
            self._remove_partial()
            raise ClusterError(f"kind cluster {self.cluster_name}: {exc}") from None
        except BaseException as exc:  # Ctrl-C or a failed step: no half-made cluster stays behind
            if isinstance(exc, KeyboardInterrupt):
                self.log(f"kind cluster {self.cluster_name}: interrupted; deleting what was made")
            with processes.finishing(f"kind cluster {self.cluster_name}: still deleting what was made (one moment)"):
                self._remove_partial()
            raise
        return self

    def _remove_partial(self) -> None:
        """Delete what a failed or interrupted `_create` made (kind's nodes, its network if made here)."""
        if self.cluster_name in self.running_clusters() or self._created:
            self._delete()
        elif self.profile is not None:
            runstate.clear("kind", self.profile.name)

    @classmethod
    def manage(cls, action: str, profile: Any, *, name: str | None = None, swap_images: bool | None = None,
               progress: bool = False) -> int:
        """`labkit cluster up|down|status --backend kind`: the cluster stays up after the command."""
        profile = load_profile(profile)
        c = cls(cluster_name=name, swap_images=swap_images, keep=True, progress=progress,
                log=_stderr if action == "up" else None)
        if action == "up":
            with runstate.exclusive(cls.backend, profile.name, "up"):  # a second `up` refuses, in one line
                checks = check_host(profile.kubernetes_version)
                for check in checks:
                    print(check, file=sys.stderr)
                failed = [ch for ch in checks if not ch.ok]
                if failed:  # the machine cannot do it (yet): an engine error, the fixes are printed above
                    raise ClusterError(f"kind cannot run on this machine yet: {len(failed)} check(s) failed "
                                       "(fixes above)")
                c.up(profile)
            if c.attached:
                print(f"kind cluster {c.cluster_name} (profile {profile.name}) was already running")
            else:
                t = c.timings
                print(f"kind cluster {c.cluster_name} (profile {profile.name}) is up in {t.get('total', 0):.0f}s "
                      f"(create {t.get('create kind cluster', 0):.0f}s, images {t.get('driver images', 0):.0f}s, "
                      f"driver DaemonSets ready {t.get('driver DaemonSets ready', 0):.0f}s, "
                      f"slices {t.get('ResourceSlices published', 0):.0f}s)")
            print("\n".join(runstate.usage_lines("kind", profile.name, str(c.kubeconfig))))
            return 0
        c.profile = profile
        if action == "down":
            with runstate.exclusive(cls.backend, profile.name, "down"):
                try:
                    c.select_profile(profile)
                except runstate.StaleState as exc:  # its cluster name is not to be trusted: no cluster is deleted
                    if not exc.removable:
                        raise
                    done = "removed its run dir" if runstate.remove_run_dir(exc.run_dir) else "could not remove it"
                    print(f"kind cluster of profile {profile.name} was stale: {exc}; {done}; no kind cluster "
                          "was deleted")
                    return 0
                running = c.cluster_name in c.running_clusters()
                c.down()
            print(f"kind cluster {c.cluster_name} (profile {profile.name}) " + ("is down" if running else "was not running"))
            return 0
        try:
            text = c.status()
        except runstate.StaleState as exc:  # said, not acted on
            print(exc.status_line())
            return runstate.EXIT_NOT_RUNNING
        print(text)
        return runstate.EXIT_NOT_RUNNING if "not running" in text else 0

    @classmethod
    def is_running(cls, state: dict[str, Any]) -> bool:
        """Whether the recorded cluster runs; StaleState when its state file cannot be trusted."""
        checked = _read_state(str(state.get("profile")))
        return checked is not None and checked["cluster"] in cls().running_clusters()

    def running_clusters(self) -> list[str]:
        out = self._kind("get", "clusters", check=False)
        return [ln.strip() for ln in out.stdout.splitlines() if ln.strip() and " " not in ln.strip()]

    def _create(self, prof: ClusterProfile) -> None:
        t0 = time.monotonic()
        self.write_files(prof)
        kubectl = [self._tool("kubectl"), "--kubeconfig", str(self.kubeconfig)]
        steps: list[tuple[str, Callable[[], None]]] = [
            ("create kind cluster", lambda: self._run_create()),
            ("driver images", lambda: self._ensure_images()),
            ("deploy fake_gpus", lambda: self._deploy(kubectl)),
            ("driver DaemonSets ready", lambda: self._rollout()),
            ("ResourceSlices published", lambda: self._wait_slices()),
        ]
        for label, step in self.progress(steps, desc=f"kind {prof.name}", total=len(steps)):
            self.log(label)
            t = time.monotonic()
            step()
            self.timings[label] = round(time.monotonic() - t, 1)
        self.timings["total"] = round(time.monotonic() - t0, 1)
        self._record()

    def _run_create(self) -> None:
        net = self.runner.run([self.engine(), "network", "inspect", KIND_NETWORK], check=False)
        self._made_network = net.returncode != 0
        create = ("create", "cluster", "--name", self.cluster_name, "--config", str(self.config_path),
                  "--kubeconfig", str(self.kubeconfig), "--wait", "180s")
        try:
            self._kind(*create)
        except CommandError as exc:
            if not _kubeadm_failed(exc):
                raise
            # kubeadm gave up on a wait (a busy machine): what a person does, once, with the first
            # try's whole output kept (kind deletes its failed nodes itself; the delete is for leftovers)
            kept = self.state_dir / "kind-create-failed.log"
            kept.write_text(exc.output)
            self.log(f"kind create failed in kubeadm: {exc}\nthe whole output: {kept}; trying once more")
            self._kind("delete", "cluster", "--name", self.cluster_name, check=False)
            try:
                self._kind(*create)
            except CommandError as again:
                raise CommandError(again.cmd, again.result, note=f"the second try; the first try's output is in {kept}") from None
        self._created = True
        if self._made_network:
            made = self.runner.run([self.engine(), "network", "inspect", KIND_NETWORK, "--format", "{{.Id}}"],
                                   check=False)
            if made.returncode == 0 and made.stdout.strip():
                _network_marker(made.stdout.strip()).touch()
        worker = f"{self.cluster_name}-worker"
        check = cdi_check(self.runner, self.engine(), worker)
        if not check.ok:
            raise ClusterError(str(check))

    def _build(self, *args: str) -> None:
        # the classic builder: works with every Docker daemon (no buildx needed)
        env = {**os.environ, "DOCKER_BUILDKIT": "0"} if self.engine() == "docker" else None
        self.runner.run([self.engine(), "build", *args], env=env)

    def _image_exists(self, image: str) -> bool:
        return self.runner.run([self.engine(), "image", "inspect", image], check=False).returncode == 0

    def _ensure_images(self) -> None:
        engine = self.engine()
        if not self._image_exists(self.image):
            self._build("-t", self.image, "-f", str(DOCKERFILE), str(REPO_ROOT))
        images = [self.image]
        if self.swap_images:
            if not self._image_exists(self.workload_image):
                if not WORKLOAD_DOCKERFILE.exists():
                    raise ClusterError(
                        f"kind: the workload image {self.workload_image} is not in {engine} and there is no "
                        f"{WORKLOAD_DOCKERFILE} to build it; set {WORKLOAD_IMAGE_ENV} to a local image, or "
                        f"swap_images=False ({SWAP_ENV}=0) if your cluster can pull the real images")
                self._build("-t", self.workload_image, "-f", str(WORKLOAD_DOCKERFILE), str(WORKLOAD_DOCKERFILE.parent))
            images.append(self.workload_image)
        # the workers only: the control plane runs neither the driver nor workloads (its taint),
        # and every node's import costs a minute of a CI run on 2 cores
        self._kind("load", "docker-image", *images, "--name", self.cluster_name,
                   "--nodes", ",".join(self.worker_containers()))

    def worker_containers(self) -> list[str]:
        """The worker nodes' container names, as kind names them: ``<cluster>-worker``,
        ``<cluster>-worker2``, ... one per profile node, in the config's order."""
        assert self.profile is not None
        n = len(self.profile.nodes)
        return [f"{self.cluster_name}-worker{'' if i == 1 else i}" for i in range(1, n + 1)]

    def _deploy(self, kubectl: list[str]) -> None:
        for cmd in self._deploy_commands(kubectl):
            self.runner.run(cmd)

    def _rollout(self) -> None:
        kubectl = [self._tool("kubectl"), "--kubeconfig", str(self.kubeconfig)]
        for cmd in self._rollout_commands(kubectl):
            self.runner.run(cmd)

    def _expected_slices(self) -> dict[str, int]:
        """node -> number of ResourceSlices its driver pod publishes (as `python -m fake_gpus slices`)."""
        assert self.profile is not None
        out = {}
        for n in self.profile.nodes:
            kw: dict[str, Any] = {"kubernetes_version": self.profile.kubernetes_version}
            if n.mig_mode:
                kw["mig_mode"] = n.mig_mode
            out[n.name] = len(build_slices(load_node_profile(n.node_profile), n.name, **kw))
        return out

    def _wait_slices(self, timeout: float = 180.0) -> None:
        want = self._expected_slices()

        def have() -> dict[str, int]:
            counts: dict[str, int] = {}
            for s in self.list("ResourceSlice"):
                node = s["spec"].get("nodeName", "")
                counts[node] = counts.get(node, 0) + 1
            return counts

        def done() -> bool:
            counts = have()
            return all(counts.get(n, 0) >= k for n, k in want.items())

        if not runstate._poll(done, timeout, 1.0):
            raise ClusterError(f"kind cluster {self.cluster_name}: ResourceSlices after {timeout:.0f}s: {have()}, "
                               f"expected {want}; see `kubectl --kubeconfig {self.kubeconfig} -n fake-gpus logs "
                               "-l app.kubernetes.io/name=fake-gpus-kubelet-plugin`")

    def _record(self) -> None:
        assert self.profile is not None
        runstate.write_state("kind", self.profile.name, {
            "backend": "kind", "profile": self.profile.name, "fingerprint": runstate.fingerprint(self.profile),
            "cluster": self.cluster_name, "kubeconfig": str(self.kubeconfig), "stateDir": str(self.state_dir),
            "engine": self.engine(), "image": self.image, "workloadImage": self.workload_image,
            "madeNetwork": self._made_network,
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "timings": self.timings})

    def _attach(self, prof: ClusterProfile) -> KindCluster:
        state = _read_state(prof.name)
        if state and state.get("cluster") == self.cluster_name and state.get("fingerprint") != runstate.fingerprint(prof):
            raise ClusterError(
                f"kind: cluster {self.cluster_name} runs another version of profile {prof.name}; stop it with "
                f"`labkit cluster down --backend kind --profile {prof.name}` first")
        self.state_dir.mkdir(parents=True, exist_ok=True)
        out = self._kind("get", "kubeconfig", "--name", self.cluster_name)
        write_text(self.kubeconfig, out.stdout, mode=0o600)  # a secret: 0600 from its creation, as client-go
        self.attached = True
        self.log(f"attached to the running kind cluster {self.cluster_name}")
        if state is None:  # created by hand or by an older labkit: make it findable
            self._record()
        return self

    def down(self) -> None:
        """Created here: delete the cluster (unless `keep`). Attached: delete what this session
        applied and leave the cluster running. A fresh instance whose `profile` is set (as
        `labkit cluster down` makes it): delete that profile's cluster."""
        if self.attached:
            runstate.remove_applied(self, self._applied)
            self.attached = False
            self._close_api()
            return
        if self._created:
            if not self.keep:
                self._delete()
            self._created = False
            return
        if self.profile is not None and not isinstance(self.profile, str | dict):
            self.select_profile(self.profile)
            if self.cluster_name in self.running_clusters():
                self._delete()
            else:
                runstate.clear("kind", self.profile.name)

    def _delete(self) -> None:
        """Delete the cluster; also kind's network once no cluster uses it, when a labkit cluster made
        it (this one, or another in any run dir: the network's ID is marked, see `_network_marker`).
        kind itself keeps the network, and one a user or kind made is never removed."""
        state = None
        with contextlib.suppress(runstate.StaleState):  # the network marker decides then
            state = _read_state(self.profile.name) if self.profile is not None else None
        self._close_api()
        self._kind("delete", "cluster", "--name", self.cluster_name, check=False)
        fmt = "{{.Id}} {{range .Containers}}{{.Name}} {{end}}"
        seen: list[str] = []

        def settled() -> bool:  # the engine may list the deleted nodes' endpoints for a moment
            out = self.runner.run([self.engine(), "network", "inspect", KIND_NETWORK, "--format", fmt], check=False)
            seen[:] = out.stdout.split() if out.returncode == 0 else []
            return not seen[1:] or any(not n.startswith(f"{self.cluster_name}-") for n in seen[1:])

        runstate._poll(settled, 10.0, 1.0)
        if seen and len(seen) == 1:  # the network is there and nothing uses it
            marker = _network_marker(seen[0])
            if marker.exists() or self._made_network or (state or {}).get("madeNetwork"):
                self.runner.run([self.engine(), "network", "rm", KIND_NETWORK], check=False)
                marker.unlink(missing_ok=True)
        if self.profile is not None:
            runstate.clear("kind", self.profile.name)

    def status(self) -> str:
        name = getattr(self.profile, "name", self.profile)
        if self.profile is not None and not isinstance(self.profile, str | dict):
            self.select_profile(self.profile)
        running = self.cluster_name in self.running_clusters()
        if not running:
            return (f"kind cluster of profile {name}: not running (start it with "
                    f"`labkit cluster up --backend kind --profile {name}`)")
        if not self.kubeconfig.exists():
            self.state_dir.mkdir(parents=True, exist_ok=True)
            write_text(self.kubeconfig, self._kind("get", "kubeconfig", "--name", self.cluster_name).stdout, mode=0o600)
        lines = [f"kind cluster {self.cluster_name}, profile {name}", f"  kubeconfig {self.kubeconfig}"]
        for n in self.list("Node"):
            ready = next((c["status"] for c in n.get("status", {}).get("conditions", []) if c["type"] == "Ready"), "?")
            lines.append(f"  node {n['metadata']['name']:<24} Ready={ready}")
        slices = self.list("ResourceSlice")
        devices = sum(len(s["spec"].get("devices") or []) for s in slices)
        lines.append(f"  {len(slices)} ResourceSlices, {devices} devices")
        return "\n".join(lines)

    # -- objects (the verbs: KubeCluster) --------------------------------------------------
    def _api(self) -> Any:
        """The API server over one kept-alive HTTPS connection (the shared base's, with this cluster's
        kubeconfig): a kubectl process per call cost ~0.1 s of CPU (a Go start, a TLS handshake) and
        ten times the API server's work of a request on an open connection, and `wait()`, the tests
        and the course poll every second. Made again when the kubeconfig file changes. kubectl
        commands instead (`KubectlClient`) when the runner only records commands (the unit tests
        read them) or there is no kubeconfig yet."""
        if not self.runner.live or not self.kubeconfig.exists():
            self._close_api()
            return KubectlClient(self._kubectl)
        key = (str(self.kubeconfig.resolve()), self.kubeconfig.stat().st_mtime_ns)
        with self._api_lock:  # tests and widgets read from several threads
            if self.kube is None or self._api_key != key:
                self._close_api()
                self._connect_kubeconfig(self.kubeconfig, None)
                self._api_key = key
            return self.kube

    def _close_api(self) -> None:
        if self.kube is not None:
            self.kube.close()
        self.kube, self._api_key, self.where = None, None, ""

    def _kubectl(self, *args: str, input: str | None = None, check: bool = True):
        return self.runner.run([self._tool("kubectl"), "--kubeconfig", str(self.kubeconfig), *args],
                               input=input, check=check)

    def _not_found(self, kind: str, name: str, namespace: str | None) -> NotFound:
        return NotFound(f"{kind_of(kind)} {namespace}/{name} not found")

    def _prepare(self, obj: dict) -> None:
        if self.swap_images:
            self._swap(obj)

    def _write(self, objs: list[dict]) -> list[dict]:
        """One `kubectl apply` of the tier: a client-side apply that records the last-applied
        configuration, as a student's own `kubectl apply` of the same file on this cluster does (the
        API client's is a server-side apply), and prints kubectl's own refusals (`refusals`)."""
        result = self._kubectl("apply", "-o", "json", "-f", "-", input=yaml.safe_dump_all(objs, sort_keys=False),
                               check=False)
        if result.returncode != 0:  # the API server refusing the objects is bad input, as on local
            said = result.stderr or result.stdout
            refused = refusals(said)
            if not refused:
                raise ClusterError(one_line(said))
            # kubectl applied the others (it goes on past a refused object) and printed none of them
            # (-o json prints after the last object, when all went): read back what is stored now
            got = self._kubectl("get", "-o", "json", "--ignore-not-found", "-f", "-",
                                input=yaml.safe_dump_all(objs, sort_keys=False), check=False)
            out = items(got.stdout) if got.returncode == 0 else []
            for obj in out:
                self._stored(obj)
            raise RefusedObjects(refused, out)
        out = items(result.stdout)
        for obj in out:
            self._stored(obj)
        return out

    # -- workload images -------------------------------------------------------------------
    def node_images(self) -> set[str]:
        """Images present on the nodes (containerd's k8s.io namespace of the first worker), normalized."""
        if self._node_images is None:
            node = f"{self.cluster_name}-worker"
            out = self.runner.run([self.engine(), "exec", node, "ctr", "-n", "k8s.io", "images", "ls", "-q"],
                                  check=False)
            self._node_images = {normalize_image(x) for x in out.stdout.split() if not x.startswith("sha256:")}
            self._node_images |= {normalize_image(self.image), normalize_image(self.workload_image)}
        return self._node_images

    def _swap(self, obj: dict) -> None:
        spec, meta = _pod_spec(obj)
        if spec is None:
            return
        swapped = []
        present = self.node_images()
        for c in (spec.get("initContainers") or []) + (spec.get("containers") or []):
            image = c.get("image") or ""
            if normalize_image(image) in present:
                continue
            swapped.append(f"{c.get('name')}={image}")
            c["image"] = self.workload_image
            c["imagePullPolicy"] = "IfNotPresent"
            # the stand-in's own entrypoint runs; the original command line becomes its arguments
            original = [*(c.pop("command", None) or []), *(c.pop("args", None) or [])]
            if original:
                c["args"] = [str(a) for a in original]
            if image not in self._swapped_seen:
                self._swapped_seen.add(image)
                print(f"kind: image {image} is not on the kind nodes (no registry / no GPU here): running "
                      f"{self.workload_image} instead, which prints its environment and sleeps "
                      f"(annotation {SWAP_ANNOTATION}; swap_images=False or {SWAP_ENV}=0 keeps real images)",
                      file=sys.stderr)
        if swapped:
            meta.setdefault("annotations", {})[SWAP_ANNOTATION] = ",".join(swapped)

    # -- looking (events, placements, explain: KubeCluster) ---------------------------------
    def pod_env(self, pod: str, namespace: str = "default", container: str | None = None) -> dict[str, str]:
        """The device environment (``FAKE_*``, ``NVIDIA_*``) the container really has, read with
        `kubectl exec ... env`: what the CDI specs of the requests it references gave it. The list
        variables (NVIDIA_VISIBLE_DEVICES, FAKE_GPU_DEVICES/COUNT) are then derived from the
        per-device variables, as NVIDIA's container runtime hook derives them from the devices it
        injected (a CDI env edit can only replace a variable, so the raw value names the last
        device); sim and local apply the same step. `container` defaults to the pod's first
        container; `container_env` returns the raw, whole environment."""
        env = self.container_env(pod, namespace, container)
        return visible_devices({k: v for k, v in env.items() if k.startswith(DEVICE_ENV_PREFIXES)})

    def container_env(self, pod: str, namespace: str = "default", container: str | None = None) -> dict[str, str]:
        """The container's whole environment (`kubectl exec <pod> -c <container> -- env`)."""
        obj = self.get("Pod", pod, namespace)
        self._check_container(obj, container)
        container = container or obj["spec"]["containers"][0]["name"]
        result = self._kubectl("exec", "-n", namespace, pod, "-c", container, "--", "env", check=False)
        if result.returncode != 0:
            raise ClusterError(f"pod {namespace}/{pod} container {container}: cannot read env: "
                               f"{one_line(result.stderr or result.stdout)}")
        return dict(line.split("=", 1) for line in result.stdout.splitlines() if "=" in line)

    def inject_health_event(self, node: str, device: str, xid: int | None = None, *, kind: str = "xid") -> None:
        """The fake driver's plugin on `node` gets the event through its spool (a file in the node
        container: labkit.cluster.backends.kind.health), taints `device` in its ResourceSlice as NVIDIA's driver
        does and reports it on the kubelet's DRAResourceHealth stream; returns once the API server shows
        the taint. Besides the sim's kinds, kind "repair" (the GPU replaced) removes the health taints.
        An unknown node or device, or a refused event: ClusterInputError with the plugin's reason."""
        health.inject(self, node, device, xid, kind)

    def describe_plan(self, profile: Any = "workshop") -> str:
        """A shell transcript of what `up(profile)` would run (for people without Docker)."""
        self.select_profile(load_profile(profile))
        self.write_files(self.profile)
        return "\n".join(shlex.join(c) for c in self.plan(self.profile))


def normalize_image(ref: str) -> str:
    """``busybox`` -> ``docker.io/library/busybox:latest`` (containerd's names)."""
    ref = ref.strip()
    if not ref:
        return ref
    name, _, digest = ref.partition("@")
    last = name.rsplit("/", 1)[-1]
    if ":" not in last and not digest:
        name += ":latest"
    first = name.split("/", 1)[0]
    if "/" not in name:
        name = "docker.io/library/" + name
    elif "." not in first and ":" not in first and first != "localhost":
        name = "docker.io/" + name
    return name + (f"@{digest}" if digest else "")


def _pod_spec(obj: dict) -> tuple[dict | None, dict]:
    """(pod spec, the metadata that annotates the pods) of a Pod or a workload's template."""
    kind = obj.get("kind")
    if kind == "Pod":
        return obj.setdefault("spec", {}), obj.setdefault("metadata", {})
    spec = obj.get("spec") or {}
    if kind == "CronJob":
        spec = ((spec.get("jobTemplate") or {}).get("spec")) or {}
    template = spec.get("template") if kind in ("Deployment", "Job", "DaemonSet", "StatefulSet", "ReplicaSet",
                                                "CronJob") else None
    if not isinstance(template, dict):
        return None, {}
    return template.setdefault("spec", {}), template.setdefault("metadata", {})


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)
