"""A GPU's health events and the device taints NVIDIA's GPU driver publishes for them.

With its `NVMLDeviceHealthCheck` gate on, NVIDIA's DRA driver watches NVML for XID errors and
lost GPUs and re-publishes the device in its ResourceSlice with a taint, one key per kind of
event under the driver's domain: `gpu.nvidia.com/xid=<code>` (effect NoSchedule, or None for
the application-error XIDs it ignores by default), `gpu.nvidia.com/gpu-lost` (NoSchedule) and
`gpu.nvidia.com/unmonitored` (None). A newer event of the same kind overwrites the taint's value
and effect and clears `timeAdded` so the API server stamps it again. The driver never uses
NoExecute: pods already running keep their GPU until an admin (a DeviceTaintRule) or a
remediation tool evicts them.
Source: kubernetes-sigs/dra-driver-nvidia-gpu cmd/gpu-kubelet-plugin/device_health.go
(healthEventToTaint, xidsToSkip) and allocatable.go (AddOrUpdateTaint), commit 95932046.

Both the sim's driver and the fake kubelet plugin on kind use this module, so a lab's injected
event taints a device the same way everywhere.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

GPU_DRIVER = "gpu.nvidia.com"
TAINT_XID = f"{GPU_DRIVER}/xid"
TAINT_GPU_LOST = f"{GPU_DRIVER}/gpu-lost"
TAINT_UNMONITORED = f"{GPU_DRIVER}/unmonitored"

#: XIDs NVIDIA's driver treats as application errors (the GPU stays healthy): effect None.
APPLICATION_XIDS: dict[int, str] = {
    13: "Graphics Engine Exception",
    31: "GPU memory page fault",
    43: "GPU stopped processing",
    45: "Preemptive cleanup, due to previous errors",
    68: "Video processor exception",
    109: "Context Switch Timeout Error",
}

#: a few XIDs a lab injects, with NVIDIA's XID catalogue names (docs.nvidia.com/deploy/xid-errors)
KNOWN_XIDS: dict[int, str] = {
    **APPLICATION_XIDS,
    48: "Double Bit ECC Error",
    63: "ECC page retirement or row remapping recording event",
    64: "ECC page retirement or row remapper recording failure",
    74: "NVLINK Error",
    79: "GPU has fallen off the bus",
    92: "High single-bit ECC error rate",
    94: "Contained ECC error",
    95: "Uncontained ECC error",
    119: "GSP RPC Timeout",
}

EVENT_KINDS = ("xid", "gpu-lost", "unmonitored")
#: the lab's "GPU replaced" (not an NVML event): the health taints come off and the device is Healthy again,
#: as after NVIDIA's driver restarts on a recovered GPU (NVML does not replay past XIDs)
REPAIR = "repair"

#: what the driver's DRAResourceHealth stream reports for a device
HEALTHY, UNHEALTHY, UNKNOWN = "Healthy", "Unhealthy", "Unknown"
#: the taint keys health events set (a repair removes them)
HEALTH_TAINT_KEYS = (TAINT_XID, TAINT_GPU_LOST, TAINT_UNMONITORED)


class HealthEventError(ValueError):
    """A health event a lab asked for that no GPU could raise (unknown kind, bad XID)."""


@dataclass(frozen=True)
class HealthEvent:
    """One event NVML would report for a device: `kind` is xid, gpu-lost or unmonitored."""

    kind: str
    xid: int | None = None

    def __post_init__(self) -> None:
        if self.kind not in EVENT_KINDS:
            raise HealthEventError(f"health event kind {self.kind!r}: use one of {', '.join(EVENT_KINDS)}")
        if self.kind == "xid":
            if isinstance(self.xid, bool) or not isinstance(self.xid, int) or not 0 < self.xid < 1 << 32:
                raise HealthEventError(f"xid {self.xid!r}: an XID is a positive integer (for example 79 or 48)")
        elif self.xid is not None:
            raise HealthEventError(f"a {self.kind} event carries no xid (got {self.xid!r})")

    @property
    def fatal(self) -> bool:
        """True where NVIDIA's driver keeps new pods off the device (NoSchedule)."""
        return self.kind == "gpu-lost" or (self.kind == "xid" and self.xid not in APPLICATION_XIDS)

    @property
    def unhealthy(self) -> bool:
        """What the kubelet's DRAResourceHealth stream reports: a fatal event makes it Unhealthy."""
        return self.fatal

    def describe(self) -> str:
        if self.kind == "xid":
            name = KNOWN_XIDS.get(self.xid or 0)
            return f"XID {self.xid}" + (f" ({name})" if name else "")
        return "GPU lost" if self.kind == "gpu-lost" else "health monitoring unavailable"

    def taint(self) -> dict[str, Any]:
        """The DeviceTaint NVIDIA's driver publishes for this event (no timeAdded: the API server sets it)."""
        if self.kind == "xid":
            return {"key": TAINT_XID, "value": str(self.xid), "effect": "NoSchedule" if self.fatal else "None"}
        if self.kind == "gpu-lost":
            return {"key": TAINT_GPU_LOST, "effect": "NoSchedule"}
        return {"key": TAINT_UNMONITORED, "effect": "None"}


def add_or_update_taint(taints: list[dict[str, Any]], taint: dict[str, Any]) -> tuple[list[dict[str, Any]], bool]:
    """A device's taints with `taint` added, or its key's value and effect replaced (timeAdded cleared);
    returns the new list and whether anything changed, as NVIDIA's driver does."""
    out = [dict(t) for t in taints]
    for t in out:
        if t.get("key") == taint["key"]:
            if t.get("value") == taint.get("value") and t.get("effect") == taint.get("effect"):
                return out, False
            t.pop("timeAdded", None)
            t.pop("value", None)
            t.update(taint)
            return out, True
    out.append(dict(taint))
    return out, True


def health_of(taints: list[dict[str, Any]]) -> str:
    """A device's health from its health taints, the one rule the sim and the fake plugin share: a NoSchedule
    one (a fatal XID, a lost GPU) Unhealthy; else `unmonitored` Unknown; else Healthy."""
    ours = [t for t in taints if t.get("key") in HEALTH_TAINT_KEYS]
    if any(t.get("effect") == "NoSchedule" for t in ours):
        return UNHEALTHY
    return UNKNOWN if any(t.get("key") == TAINT_UNMONITORED for t in ours) else HEALTHY


def without_health_taints(taints: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A repaired device's taints: the health events' taints removed, an admin's or another driver's kept."""
    return [dict(t) for t in taints if t.get("key") not in HEALTH_TAINT_KEYS]
