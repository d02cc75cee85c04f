"""Checks before creating a kind cluster, each failure with a plain fix.

Every probe goes through a ``Runner`` and a small ``HostFacts`` object, so the checks can be
tested on a machine without Docker by feeding them the facts of the machine they describe.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from labkit.cluster.kind.config import minor_of
from labkit.cluster.kind.images import KIND_MIN_VERSION, KIND_VERSION, parse_kind_version
from labkit.cluster.kind.runner import Runner


@dataclass
class Check:
    name: str
    ok: bool
    detail: str
    fix: str = ""

    def __str__(self) -> str:
        mark = "ok  " if self.ok else "FAIL"
        text = f"[{mark}] {self.name}: {self.detail}"
        return text + (f"\n       fix: {self.fix}" if not self.ok and self.fix else "")


@dataclass
class HostFacts:
    """What the checks need to know about the host; `probe()` reads the real machine."""

    executables: dict[str, str | None] = field(default_factory=dict)
    cgroup_v2: bool = True

    @classmethod
    def probe(cls) -> HostFacts:
        names = ["docker", "podman", "kind", "kubectl"]
        return cls(
            executables={n: shutil.which(n) for n in names},
            cgroup_v2=Path("/sys/fs/cgroup/cgroup.controllers").exists(),
        )


def container_engine(facts: HostFacts) -> str | None:
    """kind's provider: KIND_EXPERIMENTAL_PROVIDER wins, else docker, else podman."""
    wanted = os.environ.get("KIND_EXPERIMENTAL_PROVIDER")
    if wanted in ("docker", "podman") and facts.executables.get(wanted):
        return wanted
    for name in ("docker", "podman"):
        if facts.executables.get(name):
            return name
    return None


def run_preflight(runner: Runner, facts: HostFacts, kubernetes_version: str = "1.37") -> list[Check]:
    checks: list[Check] = []
    engine = container_engine(facts)
    if engine is None:
        checks.append(Check(
            "container engine", False, "neither docker nor podman is installed",
            "install Docker Engine/Desktop or Podman — or use backend='local' (real control plane, "
            "no containers) or backend='sim'",
        ))
    else:
        info = runner.run([engine, "info", "--format", "{{.ServerVersion}}"], check=False)
        if info.returncode != 0:
            checks.append(Check(
                "container engine", False, f"{engine} is installed but its daemon does not answer "
                f"({(info.stderr or info.stdout).strip().splitlines()[-1:] or ['no output']})",
                f"start the {engine} daemon (e.g. `sudo systemctl start {engine}`) or use backend='local'",
            ))
        else:
            checks.append(Check("container engine", True, f"{engine} {info.stdout.strip()}"))

    if not facts.executables.get("kind"):
        checks.append(Check(
            "kind", False, "kind is not installed",
            f"go install sigs.k8s.io/kind@{KIND_VERSION}  (or conda install -c conda-forge kind)",
        ))
    else:
        out = runner.run(["kind", "version"], check=False)
        found = parse_kind_version(out.stdout)
        if found is None or found < KIND_MIN_VERSION:
            have = "v" + ".".join(map(str, found)) if found else out.stdout.strip() or "unknown"
            checks.append(Check(
                "kind", False, f"kind {have} is older than {KIND_VERSION}, which built the pinned node images",
                f"go install sigs.k8s.io/kind@{KIND_VERSION}",
            ))
        else:
            checks.append(Check("kind", True, "v" + ".".join(map(str, found))))

    if not facts.executables.get("kubectl"):
        checks.append(Check("kubectl", False, "kubectl is not installed",
                            "install kubectl (e.g. conda install -c conda-forge kubernetes-client)"))
    else:
        checks.append(Check("kubectl", True, facts.executables["kubectl"] or ""))

    minor = tuple(int(x) for x in minor_of(kubernetes_version).split("."))
    if not facts.cgroup_v2 and minor >= (1, 35):
        checks.append(Check(
            "cgroup v2", False,
            f"this host uses cgroup v1; kubelet {kubernetes_version} refuses to start on it (failCgroupV1)",
            "use kubernetesVersion 1.34 for this cluster, or pass allow_cgroup_v1=True "
            "(adds `failCgroupV1: false` to the kubelet config)",
        ))
    else:
        checks.append(Check("cgroup v2", True, "cgroup v2" if facts.cgroup_v2 else "cgroup v1 (ok for 1.34)"))
    return checks


def cdi_check(runner: Runner, engine: str, node_container: str) -> Check:
    """After creation: containerd inside the node must have CDI on, else devices vanish silently."""
    out = runner.run([engine, "exec", node_container, "containerd", "config", "dump"], check=False)
    enabled = "enable_cdi = true" in out.stdout
    return Check(
        "CDI in containerd", enabled,
        "enable_cdi = true" if enabled else "containerd reports CDI off; pods would not see their devices",
        "recreate the cluster with the generated config (it sets enable_cdi = true)",
    )
