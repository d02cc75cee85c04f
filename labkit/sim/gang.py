"""Gang scheduling (all-or-nothing pod groups): a PodGroup with `spec.schedulingPolicy.gang.minCount`
(pods join with `spec.schedulingGroup.podGroupName`), or the label `labkit.dev/pod-group: <g>` plus
the annotation `labkit.dev/min-member: "<n>"`.

The group's pending pods are tried together: each is reserved on its node as it fits, and when
fewer than minCount (counting members already running) fit, every reservation is taken back and
all of them stay Pending with one message. Gang pods are parked one by one (labkit.sim.queue):
they are tried again on any change.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from labkit.model.podutil import GROUP_LABEL, MIN_MEMBER_ANNOTATION, is_deleting, is_finished, meta
from labkit.sim.attempt import Attempt

if TYPE_CHECKING:
    from labkit.sim.binding import Binder
    from labkit.sim.handle import GangHandle


class Gangs:
    def __init__(self, handle: GangHandle, binder: Binder) -> None:
        self.s = handle
        self.binder = binder

    def group_of(self, pod: dict) -> tuple[str, str, int] | None:
        """(namespace, group name, minCount) when the pod belongs to a gang."""
        ns = meta(pod)["namespace"]
        pg_name = ((pod.get("spec") or {}).get("schedulingGroup") or {}).get("podGroupName")
        if pg_name:
            pg = self.s.store.get("PodGroup", pg_name, ns)
            if pg is None:
                return ns, f"podgroup/{pg_name}", -1
            gang = ((pg.get("spec") or {}).get("schedulingPolicy") or {}).get("gang")
            if gang is None:
                return None  # basic policy: ordinary pod-by-pod scheduling
            return ns, f"podgroup/{pg_name}", int(gang.get("minCount", 1))
        label = (meta(pod).get("labels") or {}).get(GROUP_LABEL)
        if label:
            mins = [int((meta(p).get("annotations") or {}).get(MIN_MEMBER_ANNOTATION, 0) or 0)
                    for p in self.members(ns, f"label/{label}")]
            return ns, f"label/{label}", max([m for m in mins if m > 0] or [1])
        return None

    def members(self, ns: str, group: str) -> list[dict]:
        kind, name = group.split("/", 1)
        out = []
        for p in self.s.store.list("Pod", ns):
            if is_deleting(p):
                continue
            if kind == "podgroup":
                value = ((p.get("spec") or {}).get("schedulingGroup") or {}).get("podGroupName")
            else:
                value = (meta(p).get("labels") or {}).get(GROUP_LABEL)
            if value == name:
                out.append(p)
        seq = self.s.queue.seq
        out.sort(key=lambda p: seq.get(meta(p)["uid"], 0))
        return out

    def schedule(self, group: tuple[str, str, int]) -> None:
        s = self.s
        failed_epoch = s.queue.failed_epoch
        ns, gname, min_count = group
        shown = gname.split("/", 1)[1]
        members = self.members(ns, gname)
        pending = [p for p in members if not (p.get("spec") or {}).get("nodeName") and not is_finished(p)]
        placed_before = sum(1 for p in members if (p.get("spec") or {}).get("nodeName") and not is_finished(p))
        key = (s.epoch, ",".join(meta(p)["uid"] for p in pending))
        if all(failed_epoch.get(meta(p)["uid"]) == (s.epoch, key[1]) for p in pending):
            return
        if min_count < 0:
            for p in pending:
                s.attempts[meta(p)["uid"]] = Attempt(prefilter=f'waiting for PodGroup "{shown}" to be created',
                                                           gated=True)
                s.queue.park_single(meta(p)["uid"], s.epoch, key[1])
            return
        if placed_before + len(pending) < min_count:
            msg = f'waiting for pod group "{shown}": {placed_before + len(pending)} of minCount {min_count} pods exist'
            for p in pending:
                s.attempts[meta(p)["uid"]] = Attempt(prefilter=msg, gated=True)
                s.queue.park_single(meta(p)["uid"], s.epoch, key[1])
            return
        reserved: list[tuple[dict, Attempt, dict]] = []
        failed: list[tuple[dict, Attempt]] = []
        for p in pending:
            att = s.attempt(p)
            s.attempts[meta(p)["uid"]] = att
            if att.node:
                reserved.append((p, att, self.binder.reserve(p, att)))
            else:
                failed.append((p, att))
        if placed_before + len(reserved) >= min_count:
            for p, att, fixed in reserved:
                self.binder.commit(p, att, fixed)
            for p, att in failed:
                self.binder.fail(p, att)
            rest = ",".join(meta(p)["uid"] for p, _ in failed)
            for p, _ in failed:
                s.queue.park_single(meta(p)["uid"], s.epoch, rest)
            return
        for p, att, fixed in reversed(reserved):
            self.binder.unreserve(p, att, fixed)
        s.bump()
        reason = failed[0][1].message if failed else ""
        msg = (f'pod group "{shown}": only {placed_before + len(reserved)} of minCount {min_count} pods fit; '
               f"none were bound (all-or-nothing). {reason}").strip()
        for p in pending:
            att = s.attempts[meta(p)["uid"]]
            att.node = None
            att.message = msg
            self.binder.fail(p, att)
        for p in pending:
            s.queue.park_single(meta(p)["uid"], s.epoch, key[1])
