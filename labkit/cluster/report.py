"""The `labkit simulate` report, computed from any Cluster (so every backend prints the same).

    {"pods":   [{"namespace", "name", "node", "phase", "reason",
                 "containers": [{"name", "env"}], "events": [{"type", "reason", "message"}]}],
     "claims": [{"namespace", "name", "allocation", "reservedFor"}]}

`reason` is the pod's `status.reason` when set (e.g. Evicted), else the reason of a False
PodScheduled condition (Unschedulable, SchedulingGated, ...), else the waiting reason of a
container (ContainerCreating while its devices cannot be prepared), else "". `containers`
lists init containers first; `env` is what `pod_env(pod, container=...)` returns. Lists are sorted by
namespace, then name. `normalize_report` removes what legitimately differs between backends
(random claim-name suffixes, uids, shareIDs, the order in which consumers were added to
reservedFor) for sim-vs-local comparisons.
"""

from __future__ import annotations

import copy
import re
from typing import Any

from labkit.cluster.base import ClusterError
from labkit.sim.podutil import claim_entries

POD_CLAIM_ANNOTATION = "resource.kubernetes.io/pod-claim-name"


def pod_reason(pod: dict) -> str:
    st = pod.get("status") or {}
    if st.get("reason"):
        return str(st["reason"])
    for c in st.get("conditions") or []:
        if c.get("type") == "PodScheduled" and c.get("status") == "False":
            return str(c.get("reason", ""))
    for cs in st.get("containerStatuses") or []:
        waiting = (cs.get("state") or {}).get("waiting") or {}
        if waiting.get("reason"):
            return str(waiting["reason"])
    return ""


def _pod_events(events: list[dict]) -> dict[tuple[str, str], list[dict]]:
    out: dict[tuple[str, str], list[dict]] = {}
    for e in events:
        obj = e.get("involvedObject") or e.get("regarding") or {}
        if obj.get("kind", "Pod") != "Pod":
            continue
        out.setdefault((obj.get("namespace", "default"), obj.get("name", "")), []).append(
            {"type": e.get("type", ""), "reason": e.get("reason", ""), "message": e.get("message") or e.get("note", "")})
    return out


def _env(cluster: Any, pod: str, ns: str, container: str, init: bool) -> dict[str, str]:
    """Only a running pod has an environment to read; on kind a finished init container cannot be
    exec'ed into, so its env reads as {} there."""
    try:
        return cluster.pod_env(pod, ns, container=container)
    except ClusterError:
        if init:
            return {}
        raise


def simulate_report(cluster: Any) -> dict[str, list[dict]]:
    pods = []
    events = _pod_events(cluster.events())
    for p in cluster.list("Pod"):
        m = p.get("metadata") or {}
        ns, name = m.get("namespace", "default"), m.get("name", "")
        spec = p.get("spec") or {}
        running = (p.get("status") or {}).get("phase", "Pending") == "Running"
        containers = [{"name": c.get("name", ""), "env": _env(cluster, name, ns, c.get("name", ""), init)
                       if running and claim_entries(p) else {}}  # no claim: no devices
                      for init, c in [(True, c) for c in spec.get("initContainers") or []]
                      + [(False, c) for c in spec.get("containers") or []]]
        pods.append({"namespace": ns, "name": name, "node": spec.get("nodeName") or None,
                     "phase": (p.get("status") or {}).get("phase", "Pending"), "reason": pod_reason(p),
                     "containers": containers, "events": events.get((ns, name), [])})
    claims = []
    for c in cluster.list("ResourceClaim"):
        m = c.get("metadata") or {}
        st = c.get("status") or {}
        claims.append({"namespace": m.get("namespace", "default"), "name": m.get("name", ""),
                       "allocation": st.get("allocation"), "reservedFor": list(st.get("reservedFor") or [])})
    pods.sort(key=lambda r: (r["namespace"], r["name"]))
    claims.sort(key=lambda r: (r["namespace"], r["name"]))
    return {"pods": pods, "claims": claims}


_SUFFIX = re.compile(r"-[bcdfghjklmnpqrstvwxz2456789]{5}$")
_SUFFIX_IN = re.compile(r"-[bcdfghjklmnpqrstvwxz2456789]{5}\b")
_UID = re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b")


def normalize_report(report: dict[str, list[dict]]) -> dict[str, list[dict]]:
    """A copy without backend-specific randomness: generated-name suffixes become `-xxxxx`,
    reservedFor keeps only resource/name, shareIDs become `<shareID>`, allocationTimestamp goes."""
    out = copy.deepcopy(report)

    def norm_name(name: str) -> str:
        return _SUFFIX.sub("-xxxxx", name)

    for p in out["pods"]:
        p["name"] = norm_name(p["name"])
        p.pop("events", None)  # who reports what (scheduler, kubelet) differs between backends
        for c in p.get("containers") or []:
            c["env"] = {k: _UID.sub("<uid>", _SUFFIX_IN.sub("-xxxxx", v)) for k, v in c["env"].items()}
    for c in out["claims"]:
        c["name"] = norm_name(c["name"])
        c["reservedFor"] = sorted(({"resource": r.get("resource", "pods"), "name": norm_name(r.get("name", ""))}
                                   for r in c["reservedFor"]), key=lambda r: (r["resource"], r["name"]))
        alloc = c.get("allocation") or {}
        alloc.pop("allocationTimestamp", None)
        for r in (alloc.get("devices") or {}).get("results") or []:
            if r.get("shareID"):
                r["shareID"] = "<shareID>"
    out["pods"].sort(key=lambda r: (r["namespace"], r["name"], r["node"] or ""))
    out["claims"].sort(key=lambda r: (r["namespace"], r["name"], [x["name"] for x in r["reservedFor"]]))
    return out


def report_table(report: dict[str, list[dict]]) -> str:
    def table(rows: list[list[str]], header: list[str]) -> list[str]:
        widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]
        fmt = lambda r: "  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip()  # noqa: E731
        return [fmt(header), *(fmt(r) for r in rows)]

    pods = [[p["namespace"], p["name"], p["node"] or "<none>", p["phase"], p["reason"]] for p in report["pods"]]
    claims = []
    for c in report["claims"]:
        results = ((c.get("allocation") or {}).get("devices") or {}).get("results") or []
        devs = ", ".join(f"{r.get('request')}={r.get('pool')}/{r.get('device')}" for r in results) or "<unallocated>"
        users = ", ".join(r.get("name", "") for r in c["reservedFor"]) or "-"
        claims.append([c["namespace"], c["name"], devs, users])
    lines = table(pods, ["NAMESPACE", "POD", "NODE", "PHASE", "REASON"])
    lines.append("")
    lines += table(claims, ["NAMESPACE", "CLAIM", "DEVICES", "RESERVED FOR"])
    return "\n".join(lines)
