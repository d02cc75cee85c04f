"""The `labkit simulate` report, computed from any Cluster (so every backend prints the same).

    {"pods":   [{"namespace", "name", "node", "phase", "reason", "gate",
                 "containers": [{"name", "env"}], "events": [{"type", "reason", "message"}]}],
     "claims": [{"namespace", "name", "allocation", "reservedFor"}]}

`reason` is the pod's `status.reason` when set (e.g. Evicted), else the reason of a False
PodScheduled condition (Unschedulable, SchedulingGated, ...), else the waiting reason of a
container (ContainerCreating while its devices cannot be prepared), else "". `gate` is null, or
for a pod kube-scheduler does not try yet because a claim is missing (DynamicResources PreEnqueue:
no condition, no event) ``{"plugin", "extensionPoint", "message"}`` in the scheduler's words. `containers`
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
from labkit.model.podutil import claim_gate, pod_claims
from labkit.output import Table, first_line
from labkit.sim.resources import container_requests, is_extended


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


def _extended(spec: dict) -> bool:
    """A container asks for an extended resource (a device plugin's devices, e.g. nvidia.com/gpu)."""
    return any(is_extended(r) for c in (spec.get("initContainers") or []) + (spec.get("containers") or [])
               for r in container_requests(c))


def pod_gate(pod: dict, reason: str, claims: dict[tuple[str, str], dict]) -> dict | None:
    """The report's `gate` of one pod (see the module doc); ``reason``: its pod_reason;
    ``claims``: (namespace, name) -> claim."""
    st = pod.get("status") or {}
    if (pod.get("spec") or {}).get("nodeName") or st.get("phase", "Pending") != "Pending" or reason:
        return None
    ns = (pod.get("metadata") or {}).get("namespace", "default")
    message = claim_gate(pod, lambda name: claims.get((ns, name)))
    return {"plugin": "DynamicResources", "extensionPoint": "PreEnqueue", "message": message} if message else None


def simulate_report(cluster: Any) -> dict[str, list[dict]]:
    pods = []
    events = _pod_events(cluster.events())
    claim_objs = {((c.get("metadata") or {}).get("namespace", "default"), (c.get("metadata") or {}).get("name", "")): c
                  for c in cluster.list("ResourceClaim")}
    for p in cluster.list("Pod"):
        m = p.get("metadata") or {}
        ns, name = m.get("namespace", "default"), m.get("name", "")
        spec = p.get("spec") or {}
        running = (p.get("status") or {}).get("phase", "Pending") == "Running"
        reason = pod_reason(p)
        containers = [{"name": c.get("name", ""), "env": _env(cluster, name, ns, c.get("name", ""), init)
                       if running and (pod_claims(p) or _extended(spec)) else {}}  # no devices: no env
                      for init, c in [(True, c) for c in spec.get("initContainers") or []]
                      + [(False, c) for c in spec.get("containers") or []]]
        pods.append({"namespace": ns, "name": name, "node": spec.get("nodeName") or None,
                     "phase": (p.get("status") or {}).get("phase", "Pending"), "reason": reason,
                     "gate": pod_gate(p, reason, claim_objs), "containers": containers, "events": events.get((ns, name), [])})
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


def pod_why(pod: dict) -> tuple[str, str]:
    """(reason, message) of one report row: why it is where it is, in kube-scheduler's (or the
    kubelet's, or the claim controller's) words: the pod's reason, else that of its latest Warning
    event; the latest Warning event's message (a FailedScheduling event carries the same text as the
    PodScheduled condition). Nothing for a pod that is running or done without a warning."""
    warnings = [e for e in pod.get("events") or [] if e.get("type") == "Warning"]
    last = warnings[-1] if warnings else {}
    if pod.get("phase") in ("Running", "Succeeded") and not pod.get("reason"):
        return "", ""
    gate = pod.get("gate")
    if gate and not warnings:  # not tried yet: kube-scheduler writes nothing; say which plugin holds it
        return "", f"{gate['plugin']} {gate['extensionPoint']}: {first_line(gate['message'])}"
    return pod.get("reason") or last.get("reason", ""), first_line(last.get("message", ""))


def claim_users(cluster: Any) -> dict[tuple[str, str], list[str]]:
    """(namespace, claim name) -> the pods that reference the claim (by name or through a template),
    in pod order; the human tables show why a claim is not allocated through these pods."""
    users: dict[tuple[str, str], list[str]] = {}
    for pod in cluster.list("Pod"):
        m = pod.get("metadata") or {}
        ns = m.get("namespace", "default")
        for pc in pod_claims(pod):
            if pc.claim:
                users.setdefault((ns, pc.claim), []).append(m.get("name", ""))
    return users


def _devices(claim: dict) -> list[str]:
    results = ((claim.get("allocation") or {}).get("devices") or {}).get("results") or []
    return [f"{r.get('request')}={r.get('pool')}/{r.get('device')}" for r in results]


_PHASE_STYLE = {"Running": "green", "Succeeded": "green", "Pending": "yellow", "Failed": "red"}


def _style(col: int, value: str) -> str | None:
    return _PHASE_STYLE.get(value) or ("red" if value in ("Unschedulable", "SchedulerError", "Evicted") else None)


def report_tables(report: dict[str, list[dict]], *, wide: bool = False,
                  users: dict[tuple[str, str], list[str]] | None = None) -> tuple[Table, Table]:
    """The pods and claims of a report as two tables: every pod with its node, phase, and, when it
    is not running, the reason and the message's first line; every claim with its devices, or, not
    allocated, why (the reason and message of a pod that waits for it: a claim has no reason of its
    own). ``wide`` adds the namespace and each pod's devices. ``users``: see :func:`claim_users`."""
    users = users or {}
    namespaces = {r["namespace"] for r in report["pods"] + report["claims"]}
    ns_col = wide or len(namespaces) > 1
    pods_by_key = {(p["namespace"], p["name"]): p for p in report["pods"]}
    devs_of_pod: dict[tuple[str, str], list[str]] = {}
    for c in report["claims"]:
        for pod in users.get((c["namespace"], c["name"]), []):
            devs_of_pod.setdefault((c["namespace"], pod), []).extend(_devices(c))
    pod_rows = []
    for p in report["pods"]:
        reason, message = pod_why(p)
        row = [p["name"], p["node"] or "<none>", p["phase"], reason, message]
        if wide:
            row.insert(4, ", ".join(devs_of_pod.get((p["namespace"], p["name"]), [])) or "-")
        pod_rows.append(([p["namespace"]] if ns_col else []) + row)
    claim_rows = []
    for c in report["claims"]:
        devs = ", ".join(_devices(c))
        reserved = ", ".join(r.get("name", "") for r in c["reservedFor"])
        state = ("allocated,reserved" if reserved else "allocated") if devs else "pending"
        why = ""
        if not devs:
            waiting = [pods_by_key[(c["namespace"], n)] for n in users.get((c["namespace"], c["name"]), [])
                       if (c["namespace"], n) in pods_by_key]
            pod = next((p for p in waiting if any(pod_why(p))), None)
            if pod is not None:
                reason, message = pod_why(pod)
                why = f"{reason} (pod {pod['name']})" + (f": {message}" if message else "")
        claim_rows.append(([c["namespace"]] if ns_col else [])
                          + [c["name"], state, devs or "<none>", reserved or "-", why])
    off = 1 if ns_col else 0
    pod_headers = ["NAME", "NODE", "PHASE", "REASON", *(["DEVICES"] if wide else []), "MESSAGE"]
    pods = Table((["NAMESPACE"] if ns_col else []) + pod_headers, pod_rows, detail=off + len(pod_headers) - 1,
                 wrap=[off + 4] if wide else [], shrink=[off, off + 3, off + 1], style=_style)
    claims = Table((["NAMESPACE"] if ns_col else []) + ["CLAIM", "STATE", "DEVICES", "RESERVED FOR", "MESSAGE"],
                   claim_rows, detail=off + 4, wrap=[off + 2], shrink=[off + 3, off], style=_style)
    return pods, claims


def report_table(report: dict[str, list[dict]], *, wide: bool = False, width: int | None = None,
                 color: bool = False, users: dict[tuple[str, str], list[str]] | None = None) -> str:
    """The report's pods and claims as text (``width=None``: nothing wrapped or cut)."""
    pods, claims = report_tables(report, wide=wide, users=users)
    return f"{pods.render(width, color)}\n\n{claims.render(width, color)}"
