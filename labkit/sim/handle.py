"""What the scheduler hands its plugins: a narrow handle, as kube-scheduler hands its plugins a
``framework.Handle``, instead of the whole `Scheduler` to write into.

`SchedulerHandle` is what binding (`labkit.sim.binding.Binder`) may use: the store, the queue, the
DRA state, the node resources, the event recorder and the in-flight allocations. `GangHandle` adds
what gang scheduling (`labkit.sim.gang.Gangs`) needs to run the members' attempts as one. The
`Scheduler` implements both; the plugins import these protocols, not the scheduler, so there is no
import circle.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:  # types only: the plugins never call into these modules through the handle's types
    from labkit.sim.attempt import Attempt
    from labkit.sim.dra import DraState
    from labkit.sim.events import EventRecorder
    from labkit.sim.queue import SchedulingQueue
    from labkit.sim.resources import NodeResources
    from labkit.sim.store import Store


class SchedulerHandle(Protocol):
    """The cluster state a scheduling plugin reads and writes."""

    store: Store
    queue: SchedulingQueue
    dra: DraState
    resources: NodeResources
    events: EventRecorder
    #: claim uid (or ``ext:<pod uid>``) -> (allocation, owner), reserved and not yet written
    claim_allocs: dict[str, tuple[dict, str]]

    def allocated_devices(self) -> None:
        """Devices were reserved: cached filter results that other nodes share are stale."""


class GangHandle(SchedulerHandle, Protocol):
    """What gang scheduling adds: run one member's attempt and record it (binding and rolling
    back go through the Binder it is given)."""

    epoch: int
    attempts: dict[str, Attempt]

    def attempt(self, pod: dict) -> Attempt:
        """Find a node for one pod (nothing written)."""

    def bump(self) -> None:
        """Something changed beyond one node: every pod retries."""
