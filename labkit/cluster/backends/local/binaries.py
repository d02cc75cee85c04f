"""Where the control-plane binaries live, which Kubernetes version they are, and building them."""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from labkit.api.features import minor_key
from labkit.cluster.runstate import cache_dir
from labkit.errors import EngineError

DEFAULT_MINOR = "1.37"  # what tools/build-controlplane.sh builds without arguments
#: oldest minor the DEFAULT_MINOR binaries can emulate (kube-apiserver --emulated-version range)
OLDEST_EMULATED = "1.34"
COMPONENTS = ("etcd", "kube-apiserver", "kube-scheduler", "kube-controller-manager")
BUILD_SCRIPT = Path(__file__).resolve().parents[4] / "tools" / "build-controlplane.sh"


class BinariesMissing(EngineError, RuntimeError):
    """The control-plane binaries for a version are not built (message says how to get them)."""


@dataclass(frozen=True)
class Binaries:
    bin_dir: Path
    kubernetes_version: str  # exact, e.g. "v1.37.1" (what was actually built or downloaded)
    etcd_version: str

    def path(self, component: str) -> str:
        return str(self.bin_dir / component)

    @property
    def minor(self) -> str:
        return ".".join(self.kubernetes_version.lstrip("v").split(".")[:2])


def version_dir(minor: str) -> Path:
    return cache_dir() / "controlplane" / minor


def find(minor: str) -> Binaries | None:
    """The cached binaries for `minor` ("1.37"), or None. LABKIT_CONTROLPLANE_BIN overrides the dir."""
    override = os.environ.get("LABKIT_CONTROLPLANE_BIN")
    root = Path(override).parent if override else version_dir(minor)
    bin_dir = Path(override) if override else root / "bin"
    if not all((bin_dir / c).is_file() and os.access(bin_dir / c, os.X_OK) for c in COMPONENTS):
        return None
    kv = _read(root / "VERSION") or _ask_version(bin_dir)
    return Binaries(bin_dir, kv, _read(root / "ETCD_VERSION") or "unknown")


def _read(p: Path) -> str:
    try:
        return p.read_text().strip()
    except OSError:
        return ""


def _ask_version(bin_dir: Path) -> str:
    out = subprocess.run([str(bin_dir / "kube-apiserver"), "--version"], capture_output=True, text=True,
                         check=False).stdout  # "Kubernetes v1.37.1"
    return out.split()[-1] if out.strip() else "unknown"


def can_build() -> bool:
    return BUILD_SCRIPT.is_file() and shutil.which("go") is not None


def ensure(minor: str, *, build: bool = True) -> Binaries:
    """Cached binaries for `minor`, building them first (slow: tens of minutes cold) if allowed."""
    found = find(minor)
    if found:
        return found
    if not build or not can_build():
        raise BinariesMissing(
            f"local backend: no control-plane binaries for Kubernetes {minor} in {version_dir(minor)}/bin; "
            f"run `bash tools/build-controlplane.sh {minor}` (needs Go >= 1.26 and the Go module proxy) "
            "or set LABKIT_DOWNLOAD_BINARIES=1 when online")
    proc = subprocess.run(["bash", str(BUILD_SCRIPT), minor], check=False)
    found = find(minor)
    if proc.returncode != 0 or not found:
        raise BinariesMissing(f"local backend: tools/build-controlplane.sh {minor} failed (exit {proc.returncode}); "
                              "see its output above")
    return found


def for_profile(minor: str, *, build: bool = True, exact: bool = False) -> tuple[Binaries, str | None]:
    """Binaries for a profile's minor and the version they must emulate (None: run natively).

    Exact binaries are used when cached. Otherwise, unless `exact`, newer cached binaries run
    with ``--emulated-version`` (seconds, instead of a build taking tens of minutes)."""
    found = find(minor)
    if found:
        return found, None
    newest = find(DEFAULT_MINOR)
    if (not exact and newest is not None
            and minor_key(OLDEST_EMULATED) <= minor_key(minor) < minor_key(newest.minor)):
        return newest, minor
    return ensure(minor, build=build), None
