"""The GPU driver's health check on the sim: an injected event taints the device and turns it Unhealthy.

What NVIDIA's DRA driver does with its `NVMLDeviceHealthCheck` gate on (fake_gpus.health_events
holds the facts: which taint, which effect): on an XID or a lost GPU it re-publishes the device in
its node's ResourceSlice with the event's taint (`gpu.nvidia.com/xid=<code>` NoSchedule, or None
for an application XID), and streams the device's health to the kubelet (DRAResourceHealth):
Unhealthy for a fatal event, the other devices of the node Healthy. The kubelet then writes
`allocatedResourcesStatus` into the pods holding them (labkit.sim.agent.NodeAgent.report_health).

Neither component records a Kubernetes Event for this (the driver logs "Received <type> health
event for device <name>"; the kubelet only updates pod status), so the sim records none either.
The driver never taints NoExecute: running pods keep their GPU until an admin's DeviceTaintRule
(labkit.sim.taintctl) evicts them. A device's health follows its health taints (fake_gpus.health_events.health_of:
NoSchedule Unhealthy, `unmonitored` Unknown), as the fake kubelet plugin on kind reports it; it stays so until
the lab's `repair` (the GPU replaced: the driver restarted on a recovered GPU) takes the taints off.
"""

from __future__ import annotations

from fake_gpus.health_events import (
    GPU_DRIVER,
    REPAIR,
    HealthEvent,
    HealthEventError,
    add_or_update_taint,
    health_of,
    without_health_taints,
)
from labkit.errors import InputError, NotFoundError
from labkit.model.podutil import meta
from labkit.sim.agent import NodeAgent
from labkit.sim.store import Store, copy_of

#: devices listed in an error before "..."
MAX_LISTED = 16


class HealthInjectionError(InputError):
    """An event a lab asked to inject that no device could raise (bad kind or XID)."""


class UnknownHealthTarget(NotFoundError):
    """The node or device named for a health event does not exist."""


class GpuHealthMonitor:
    """The sim's GPU driver health check, one per cluster (every node's plugin)."""

    def __init__(self, store: Store, agent: NodeAgent) -> None:
        self.store = store
        self.agent = agent

    def inject(self, node: str, device: str, xid: int | None = None, kind: str = "xid") -> dict:
        """NVML reports `kind` (xid, gpu-lost, unmonitored; or the lab's `repair`) for `device` on `node`:
        the driver taints it (a repair: untaints it) and streams its node's health. Returns the device as
        now published."""
        event: HealthEvent | None = None
        try:
            if kind == REPAIR:
                if xid is not None:
                    raise HealthEventError(f"a repair carries no xid (got {xid!r})")
            else:
                event = HealthEvent(kind, xid)
        except HealthEventError as exc:
            raise HealthInjectionError(str(exc), obj=f"health event for {node}/{device}",
                                       fix="inject_health_event(node, device, xid=79), kind='gpu-lost' or "
                                           "kind='repair'") from None
        if not isinstance(node, str) or self.store.get("Node", node, None) is None:
            nodes = [meta(n)["name"] for n in self.store.list("Node")]
            raise UnknownHealthTarget(f"node {node!r} not found; nodes: {_listed(nodes)}")
        slices = self._slices(node)
        names = [d.get("name", "") for s in slices for d in s["spec"].get("devices") or []]
        if device not in names:
            raise UnknownHealthTarget(f"node {node} has no {GPU_DRIVER} device {device!r}; "
                                      f"its devices: {_listed(names) or 'none'}")
        published: dict = {}
        for s in slices:
            devs = s["spec"].get("devices") or []
            i = next((i for i, d in enumerate(devs) if d.get("name") == device), None)
            if i is None:
                continue
            old = devs[i].get("taints") or []
            if event is None:
                taints = without_health_taints(old)
                changed = len(taints) != len(old)
            else:
                taints, changed = add_or_update_taint(old, event.taint())
            if changed:
                now = self.store.clock.timestamp()  # the API server stamps a taint without timeAdded
                new = copy_of(s)  # a stored slice shares parts with its node kind's others: copy first
                if taints:
                    new["spec"]["devices"][i]["taints"] = [t if t.get("timeAdded") else {**t, "timeAdded": now}
                                                           for t in taints]
                else:
                    new["spec"]["devices"][i].pop("taints", None)
                s = self.store.update(new)
            published = copy_of(s["spec"]["devices"][i])
        health = {((s["spec"].get("pool") or {}).get("name", ""), d.get("name", "")): health_of(d.get("taints") or [])
                  for s in self._slices(node) for d in s["spec"].get("devices") or []}
        self.agent.report_health(GPU_DRIVER, node, health)
        return published

    def _slices(self, node: str) -> list[dict]:
        return sorted((s for s in self.store.list("ResourceSlice")
                       if (s.get("spec") or {}).get("driver") == GPU_DRIVER
                       and (s.get("spec") or {}).get("nodeName") == node),
                      key=lambda s: meta(s)["name"])


def _listed(names: list[str]) -> str:
    shown = ", ".join(names[:MAX_LISTED])
    return shown + (f", ... ({len(names)} in all)" if len(names) > MAX_LISTED else "")
