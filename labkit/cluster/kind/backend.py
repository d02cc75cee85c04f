"""`KindCluster`: a real kind cluster (Docker or Podman) running the fake_gpus driver.

Everything goes through a `Runner`, and `plan()` lists the exact commands `up()` runs, so the
whole flow is testable without a container engine (see tests/test_cluster_kind*.py).
"""

from __future__ import annotations

import json
import os
import shlex
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from labkit.cluster.base import Cluster, ClusterError, NotFound, Source
from labkit.cluster.kind.config import kind_config_yaml
from labkit.cluster.kind.driver import driver_manifests
from labkit.cluster.kind.image import DEFAULT_IMAGE, DOCKERFILE, REPO_ROOT
from labkit.cluster.kind.preflight import HostFacts, cdi_check, container_engine, run_preflight
from labkit.cluster.kind.runner import Runner, SubprocessRunner
from labkit.cluster.placements import PlacementTable, build_placements
from labkit.cluster.profiles import ClusterProfile, load_profile

#: kind runs one container per node; beyond this a profile belongs on `sim`
MAX_KIND_NODES = 8

#: kubectl resource names for the kinds LabKit handles
RESOURCE_NAMES = {
    "Pod": "pods", "Node": "nodes", "Namespace": "namespaces", "Event": "events",
    "DeviceClass": "deviceclasses.resource.k8s.io", "ResourceClaim": "resourceclaims.resource.k8s.io",
    "ResourceClaimTemplate": "resourceclaimtemplates.resource.k8s.io",
    "ResourceSlice": "resourceslices.resource.k8s.io", "DeviceTaintRule": "devicetaintrules.resource.k8s.io",
    "Deployment": "deployments.apps", "Job": "jobs.batch", "DaemonSet": "daemonsets.apps",
}
CLUSTER_SCOPED = {"Node", "Namespace", "DeviceClass", "ResourceSlice", "DeviceTaintRule"}


class KindCluster(Cluster):
    backend = "kind"

    def __init__(self, *, cluster_name: str = "labkit", image: str = DEFAULT_IMAGE,
                 runner: Runner | None = None, facts: HostFacts | None = None,
                 state_dir: str | Path | None = None, allow_cgroup_v1: bool = False,
                 keep: bool = False, log: Callable[[str], None] | None = None, **kw: Any) -> None:
        super().__init__(**kw)
        self.cluster_name = cluster_name
        self.image = image
        self.log = log or (lambda line: None)
        self.runner = runner or SubprocessRunner(log=self.log)
        self.facts = facts
        self.allow_cgroup_v1 = allow_cgroup_v1
        self.keep = keep
        self.state_dir = Path(state_dir or tempfile.mkdtemp(prefix="labkit-kind-"))
        self.kubeconfig = self.state_dir / "kubeconfig"
        self.config_path = self.state_dir / "kind-config.yaml"
        self.manifest_path = self.state_dir / "fake-gpus.yaml"
        self._created = False

    # -- plan ------------------------------------------------------------------------------
    def engine(self) -> str:
        facts = self.facts or HostFacts.probe()
        return container_engine(facts) or "docker"

    def plan(self, profile: Any = "workshop") -> list[list[str]]:
        """The exact commands `up(profile)` runs, in order (after the preflight probes)."""
        engine = self.engine()
        kc = ["--kubeconfig", str(self.kubeconfig)]
        return [
            ["kind", "create", "cluster", "--name", self.cluster_name,
                        "--config", str(self.config_path), "--kubeconfig", str(self.kubeconfig),
                        "--wait", "180s"],
            [engine, "build", "-t", self.image, "-f", str(DOCKERFILE), str(REPO_ROOT)],
            ["kind", "load", "docker-image", self.image, "--name", self.cluster_name],
            ["kubectl", *kc, "apply", "-f", str(self.manifest_path)],
            ["kubectl", *kc, "-n", "fake-gpus", "rollout", "status", "daemonset", "--timeout", "180s"],
            ["kubectl", *kc, "wait", "--for=create", "resourceslices", "--all", "--timeout", "120s"],
        ]

    def write_files(self, profile: ClusterProfile) -> None:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(kind_config_yaml(
            profile, cluster_name=self.cluster_name, allow_cgroup_v1=self.allow_cgroup_v1))
        self.manifest_path.write_text(yaml.safe_dump_all(driver_manifests(profile, self.image), sort_keys=False))

    # -- lifecycle -------------------------------------------------------------------------
    def up(self, profile: Any = "workshop") -> KindCluster:
        self.profile = load_profile(profile)
        if len(self.profile.nodes) > MAX_KIND_NODES:
            raise ClusterError(
                f"kind: profile {self.profile.name} has {len(self.profile.nodes)} nodes; kind runs one "
                f"container per node (at most {MAX_KIND_NODES} here) — use backend='sim' for fleets")
        facts = self.facts or HostFacts.probe()
        failed = [c for c in run_preflight(self.runner, facts, self.profile.kubernetes_version) if not c.ok]
        if failed:
            raise ClusterError("kind preflight failed:\n" + "\n".join(str(c) for c in failed))
        self.write_files(self.profile)
        steps = self.plan(self.profile)
        labels = ["create kind cluster", "build driver image", "load image into kind",
                  "deploy fake_gpus", "wait for driver pods", "wait for ResourceSlices"]
        for label, cmd in self.progress(list(zip(labels, steps, strict=True)), desc="kind up"):
            self.log(label)
            env = None
            if cmd[0] == "kind" and self.engine() == "podman":
                env = {**os.environ, "KIND_EXPERIMENTAL_PROVIDER": "podman"}
            self.runner.run(cmd, env=env)
            if cmd[:3] == ["kind", "create", "cluster"]:
                self._created = True
                check = cdi_check(self.runner, self.engine(), f"{self.cluster_name}-worker")
                if not check.ok:
                    raise ClusterError(str(check))
        return self

    def down(self) -> None:
        if self._created and not self.keep:
            self.runner.run(["kind", "delete", "cluster", "--name", self.cluster_name], check=False)
            self._created = False

    # -- objects ---------------------------------------------------------------------------
    def _kubectl(self, *args: str, input: str | None = None, check: bool = True):
        return self.runner.run(["kubectl", "--kubeconfig", str(self.kubeconfig), *args],
                               input=input, check=check)

    def apply(self, source: Source) -> list[dict]:
        from labkit.api import load

        objs = load(source)
        out = self._kubectl("apply", "-o", "json", "-f", "-", input=yaml.safe_dump_all(objs, sort_keys=False))
        return _items(out.stdout)

    def delete(self, kind: str, name: str, namespace: str | None = "default") -> None:
        args = ["delete", _resource(kind), name, "--wait=false"]
        if kind not in CLUSTER_SCOPED and namespace:
            args += ["-n", namespace]
        result = self._kubectl(*args, check=False)
        if result.returncode != 0:
            if "NotFound" in (result.stderr or result.stdout):
                raise NotFound(f"{kind} {namespace}/{name} not found")
            raise ClusterError((result.stderr or result.stdout).strip())

    def get(self, kind: str, name: str, namespace: str | None = "default") -> dict:
        args = ["get", _resource(kind), name, "-o", "json"]
        if kind not in CLUSTER_SCOPED and namespace:
            args += ["-n", namespace]
        result = self._kubectl(*args, check=False)
        if result.returncode != 0:
            raise NotFound(f"{kind} {namespace}/{name} not found")
        return json.loads(result.stdout)

    def list(self, kind: str, namespace: str | None = None) -> list[dict]:
        args = ["get", _resource(kind), "-o", "json"]
        if kind not in CLUSTER_SCOPED:
            args += ["-n", namespace] if namespace else ["-A"]
        items = _items(self._kubectl(*args).stdout)
        return sorted(items, key=lambda o: (o["metadata"].get("namespace", ""), o["metadata"]["name"]))

    # -- running ---------------------------------------------------------------------------
    def wait(self, until: Callable[[Cluster], bool] | None = None, timeout: float = 60.0) -> bool:
        """Poll until `until` holds, or until every pod is settled (running/done, or unschedulable)."""
        deadline = time.monotonic() + timeout
        previous = None
        while time.monotonic() < deadline:
            if until is not None:
                if until(self):
                    return True
            else:
                pods = self.list("Pod")
                snapshot = [(p["metadata"]["name"], p.get("status", {}).get("phase")) for p in pods]
                settled = all(p.get("status", {}).get("phase") != "Pending" or _unschedulable(p) for p in pods)
                if settled and snapshot == previous:
                    return True
                previous = snapshot
            time.sleep(1.0)
        return False

    def events(self) -> list[dict]:
        items = _items(self._kubectl("get", "events", "-A", "-o", "json").stdout)
        return sorted(items, key=lambda e: e.get("lastTimestamp") or e.get("eventTime") or "")

    # -- looking ---------------------------------------------------------------------------
    def placements(self) -> PlacementTable:
        return build_placements(self.list("Pod"), self.list("ResourceClaim"), self.list("ResourceSlice"))

    def explain(self, pod: str, namespace: str = "default") -> str:
        from labkit.cluster.explain_live import explain_pod

        return explain_pod(self, pod, namespace)

    def pod_env(self, pod: str, namespace: str = "default", container: str | None = None) -> dict[str, str]:
        """The container's real environment (`kubectl exec ... env`), as the CDI spec shaped it."""
        where = ["-c", container] if container else []
        result = self._kubectl("exec", "-n", namespace, pod, *where, "--", "env", check=False)
        if result.returncode != 0:
            raise ClusterError(f"pod {namespace}/{pod}: cannot read env: {result.stderr.strip()}")
        return dict(line.split("=", 1) for line in result.stdout.splitlines() if "=" in line)

    def describe_plan(self, profile: Any = "workshop") -> str:
        """A shell transcript of what `up(profile)` would run (for people without Docker)."""
        self.profile = load_profile(profile)
        self.write_files(self.profile)
        return "\n".join(shlex.join(c) for c in self.plan(self.profile))


def _resource(kind: str) -> str:
    return RESOURCE_NAMES.get(kind, kind.lower() + "s")


def _items(text: str) -> list[dict]:
    if not text.strip():
        return []
    doc = json.loads(text)
    return doc.get("items", [doc]) if doc.get("kind", "").endswith("List") or "items" in doc else [doc]


def _unschedulable(pod: dict) -> bool:
    return any(c.get("type") == "PodScheduled" and c.get("reason") == "Unschedulable"
               for c in pod.get("status", {}).get("conditions", []))

