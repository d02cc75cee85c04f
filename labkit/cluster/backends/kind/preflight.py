"""Checks before creating a kind cluster: each says what is missing and the command that fixes it.

Every probe goes through a ``Runner`` and a small ``HostFacts`` object, so the checks can be
tested on a machine without Docker by feeding them the facts of the machine they describe.
`check_host()` runs them against this machine (notebook 00's backend table, `labkit cluster up`).

Tools are looked up on PATH first, then in ``$LABKIT_KIND_BIN_DIR`` (default
``~/.cache/dra-labkit/bin``), where a kubectl built for the pinned version wins over PATH's.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from labkit.cluster.backends.kind.config import minor_of
from labkit.cluster.backends.kind.images import KIND_MIN_VERSION, KIND_VERSION, parse_kind_version
from labkit.cluster.backends.kind.runner import Runner, SubprocessRunner
from labkit.cluster.runstate import cache_dir

#: CAP_SYS_RESOURCE's bit in /proc/<pid>/status CapBnd
CAP_SYS_RESOURCE = 24


@dataclass
class Check:
    name: str
    ok: bool
    detail: str
    fix: str = ""
    #: ok, but the user should know (e.g. cgroup v1: runs, deprecated)
    warning: bool = False

    def __str__(self) -> str:
        mark = "FAIL" if not self.ok else "warn" if self.warning else "ok  "
        text = f"[{mark}] {self.name}: {self.detail}"
        return text + (f"\n       fix: {self.fix}" if (not self.ok or self.warning) and self.fix else "")


@dataclass
class HostFacts:
    """What the checks need to know about the host; `probe()` reads the real machine."""

    executables: dict[str, str | None] = field(default_factory=dict)
    cgroup_v2: bool = True
    #: the host's capability bounding set has CAP_SYS_RESOURCE (false on some CI VMs)
    cap_sys_resource: bool = True
    system: str = "Linux"
    machine: str = "x86_64"

    @classmethod
    def probe(cls) -> HostFacts:
        return cls(
            executables={n: find_tool(n) for n in ("docker", "podman", "kind", "kubectl")},
            cgroup_v2=Path("/sys/fs/cgroup/cgroup.controllers").exists(),
            cap_sys_resource=_has_cap(CAP_SYS_RESOURCE),
            system=platform.system(),
            machine=platform.machine(),
        )


def bin_dirs() -> list[Path]:
    """Where labkit's own kind and kubectl may live: ``$LABKIT_KIND_BIN_DIR``, else
    ``~/.cache/dra-labkit/bin`` (tools/build-kind-node-image.sh puts them there)."""
    override = os.environ.get("LABKIT_KIND_BIN_DIR")
    return [Path(override)] if override else [cache_dir() / "bin"]


def find_tool(name: str) -> str | None:
    """`name` on PATH, else in `bin_dirs()`. For kubectl the cached copy wins when it exists: it
    is built for the pinned Kubernetes version, while PATH's may be outside the skew."""
    cached = next((str(d / name) for d in bin_dirs() if (d / name).is_file() and os.access(d / name, os.X_OK)), None)
    if name == "kubectl" and cached:
        return cached
    return shutil.which(name) or cached


def _has_cap(bit: int) -> bool:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("CapBnd:"):
                return bool(int(line.split()[1], 16) >> bit & 1)
    except (OSError, ValueError, IndexError):
        pass
    return True


def container_engine(facts: HostFacts) -> str | None:
    """kind's provider: KIND_EXPERIMENTAL_PROVIDER wins, else docker, else podman."""
    wanted = os.environ.get("KIND_EXPERIMENTAL_PROVIDER")
    if wanted in ("docker", "podman") and facts.executables.get(wanted):
        return wanted
    for name in ("docker", "podman"):
        if facts.executables.get(name):
            return name
    return None


def _arch(facts: HostFacts) -> str:
    return {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}.get(facts.machine.lower(),
                                                                                        facts.machine)


def _install_engine_fix(facts: HostFacts) -> str:
    if facts.system == "Darwin":
        return "install Docker Desktop (https://docs.docker.com/desktop/) or `brew install podman && podman machine init`"
    return ("sudo apt-get install -y docker.io  (Debian/Ubuntu; or Docker Engine: https://docs.docker.com/engine/install/, "
            "or Podman) — or use backend='local' (real control plane, no containers) or backend='sim'")


def _start_engine_fix(engine: str, facts: HostFacts, output: str) -> str:
    if "permission denied" in output.lower():
        return f"sudo usermod -aG {engine} $USER  then log out and in (or run `newgrp {engine}`)"
    if facts.system == "Darwin":
        return "open -a Docker" if engine == "docker" else "podman machine start"
    return f"sudo systemctl start {engine}" + ("" if engine == "podman" else "  (or: sudo service docker start)")


def _kind_fix(facts: HostFacts) -> str:
    if shutil.which("go"):
        return f"go install sigs.k8s.io/kind@{KIND_VERSION}  (puts kind in $(go env GOPATH)/bin)"
    os_name = "darwin" if facts.system == "Darwin" else "linux"
    return (f"curl -Lo kind https://kind.sigs.k8s.io/dl/{KIND_VERSION}/kind-{os_name}-{_arch(facts)} && "
            "chmod +x kind && sudo mv kind /usr/local/bin/kind")


def _kubectl_fix(facts: HostFacts, minor: str) -> str:
    os_name = "darwin" if facts.system == "Darwin" else "linux"
    return (f'curl -LO "https://dl.k8s.io/release/$(curl -Ls https://dl.k8s.io/release/stable-{minor}.txt)'
            f'/bin/{os_name}/{_arch(facts)}/kubectl" && sudo install -m 0755 kubectl /usr/local/bin/kubectl')


def _kubectl_minor(runner: Runner, path: str) -> tuple[int, int] | None:
    out = runner.run([path, "version", "--client", "-o", "json"], check=False)
    try:
        v = json.loads(out.stdout)["clientVersion"]
        return int(v["major"]), int("".join(ch for ch in v["minor"] if ch.isdigit()))
    except (ValueError, KeyError, TypeError):
        return None


def run_preflight(runner: Runner, facts: HostFacts, kubernetes_version: str = "1.37") -> list[Check]:
    """Every check, in the order a user fixes them. A failed check carries the command that fixes it."""
    checks: list[Check] = []
    minor = minor_of(kubernetes_version)
    want = tuple(int(x) for x in minor.split("."))
    engine = container_engine(facts)
    if engine is None:
        checks.append(Check("container engine", False, "neither docker nor podman is installed",
                            _install_engine_fix(facts)))
    else:
        info = runner.run([engine, "info", "--format", "{{.ServerVersion}}"], check=False)
        output = (info.stderr or info.stdout or "").strip()
        if info.returncode != 0 or not info.stdout.strip():
            last = output.splitlines()[-1] if output else "no output"
            checks.append(Check("container engine", False,
                                f"{engine} is installed but its daemon does not answer ({last})",
                                _start_engine_fix(engine, facts, output)))
        else:
            checks.append(Check("container engine", True, f"{engine} {info.stdout.strip()}"))

    kind = facts.executables.get("kind")
    if not kind:
        checks.append(Check("kind", False, "kind is not installed", _kind_fix(facts)))
    else:
        out = runner.run([kind, "version"], check=False)
        found = parse_kind_version(out.stdout)
        if found is None or found < KIND_MIN_VERSION:
            have = "v" + ".".join(map(str, found)) if found else out.stdout.strip() or "unknown"
            checks.append(Check("kind", False,
                                f"kind {have} is older than {KIND_VERSION}, which built the pinned node images",
                                _kind_fix(facts)))
        else:
            checks.append(Check("kind", True, "v" + ".".join(map(str, found)) + f" ({kind})"))

    kubectl = facts.executables.get("kubectl")
    if not kubectl:
        checks.append(Check("kubectl", False, "kubectl is not installed", _kubectl_fix(facts, minor)))
    else:
        have = _kubectl_minor(runner, kubectl)
        if have is None:
            checks.append(Check("kubectl", False, f"{kubectl} does not report its version",
                                _kubectl_fix(facts, minor)))
        elif abs(have[1] - want[1]) > 1 or have[0] != want[0]:
            checks.append(Check(
                "kubectl", False,
                f"kubectl {have[0]}.{have[1]} ({kubectl}) is too far from Kubernetes {minor} "
                "(kubectl supports one minor version of skew)", _kubectl_fix(facts, minor)))
        else:
            checks.append(Check("kubectl", True, f"{have[0]}.{have[1]} ({kubectl})"))

    if facts.cgroup_v2:
        checks.append(Check("cgroups", True, "cgroup v2"))
    elif want >= (1, 35):
        checks.append(Check(
            "cgroups", True,
            f"cgroup v1 host: kubelet {minor} refuses it by default, so labkit sets failCgroupV1: false "
            "in every kubelet's config (deprecated, works; expect deprecation warnings)",
            "move the host to cgroup v2: add systemd.unified_cgroup_hierarchy=1 to the kernel command line "
            "(GRUB_CMDLINE_LINUX in /etc/default/grub), then sudo update-grub && sudo reboot",
            warning=True))
    else:
        checks.append(Check("cgroups", True, f"cgroup v1 (kubelet {minor} accepts it)"))

    if not facts.cap_sys_resource:
        checks.append(Check(
            "capabilities", True,
            "CAP_SYS_RESOURCE is not in this host's capability bounding set: labkit tells containerd in the "
            "nodes not to lower oom_score_adj; the engine itself needs a runtime that drops the cap for "
            "privileged containers (tools/container-engine.sh sets one up)",
            "run on a host (or VM) whose bounding set has CAP_SYS_RESOURCE", warning=True))
    return checks


def check_host(kubernetes_version: str = "1.37", runner: Runner | None = None,
               facts: HostFacts | None = None) -> list[Check]:
    """The kind preflight against this machine (no cluster is created)."""
    return run_preflight(runner or SubprocessRunner(timeout=30), facts or HostFacts.probe(), kubernetes_version)


def readiness(checks: list[Check]) -> tuple[bool, str]:
    """(runs here, why) for a one-row summary such as notebook 00's backend table."""
    failed = [c for c in checks if not c.ok]
    if failed:
        return False, "; ".join(f"{c.detail} — fix: {c.fix}" if c.fix else c.detail for c in failed)
    warned = [c.detail for c in checks if c.warning]
    engine = next((c.detail for c in checks if c.name == "container engine"), "")
    return True, f"container engine {engine}" + (f" ({'; '.join(warned)})" if warned else "")


def preflight_rows(kubernetes_version: str = "1.37") -> list[tuple[str, str, str, str]]:
    """(check, status, detail, fix) rows for a notebook table."""
    return [(c.name, "FAIL" if not c.ok else "warn" if c.warning else "ok", c.detail,
             c.fix if (not c.ok or c.warning) else "") for c in check_host(kubernetes_version)]


def cdi_check(runner: Runner, engine: str, node_container: str) -> Check:
    """After creation: containerd inside the node must have CDI on, else devices vanish silently."""
    out = runner.run([engine, "exec", node_container, "containerd", "config", "dump"], check=False)
    # containerd 1.7 has an enable_cdi switch (off by default); containerd 2 always has CDI on and
    # only lists cdi_spec_dirs
    enabled = "enable_cdi = true" in out.stdout or ("enable_cdi" not in out.stdout and "cdi_spec_dirs" in out.stdout)
    return Check(
        "CDI in containerd", enabled,
        "CDI on" if enabled else "containerd reports CDI off; pods would not see their devices",
        "recreate the cluster with the generated config (it sets enable_cdi = true)",
    )
