"""The `labkit simulate` report, computed from any Cluster (so every backend prints the same).

    {"pods":   [{"namespace", "name", "node", "phase", "reason"}],
     "claims": [{"namespace", "name", "allocation", "reservedFor"}]}

`reason` is the pod's `status.reason` when set (e.g. Evicted), else the reason of a False
PodScheduled condition (Unschedulable, SchedulingGated, ...), else "". Lists are sorted by
namespace, then name. `normalize_report` removes what legitimately differs between backends
(random claim-name suffixes, uids, shareIDs, the order in which consumers were added to
reservedFor) for sim-vs-local comparisons.
"""

from __future__ import annotations

import copy
import re
from typing import Any

POD_CLAIM_ANNOTATION = "resource.kubernetes.io/pod-claim-name"


def pod_reason(pod: dict) -> str:
    st = pod.get("status") or {}
    if st.get("reason"):
        return str(st["reason"])
    for c in st.get("conditions") or []:
        if c.get("type") == "PodScheduled" and c.get("status") == "False":
            return str(c.get("reason", ""))
    return ""


def simulate_report(cluster: Any) -> dict[str, list[dict]]:
    pods = []
    for p in cluster.list("Pod"):
        m = p.get("metadata") or {}
        pods.append({"namespace": m.get("namespace", "default"), "name": m.get("name", ""),
                     "node": (p.get("spec") or {}).get("nodeName") or None,
                     "phase": (p.get("status") or {}).get("phase", "Pending"), "reason": pod_reason(p)})
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


def normalize_report(report: dict[str, list[dict]]) -> dict[str, list[dict]]:
    """A copy without backend-specific randomness: generated-name suffixes become `-xxxxx`,
    reservedFor keeps only resource/name, shareIDs become `<shareID>`, allocationTimestamp goes."""
    out = copy.deepcopy(report)

    def norm_name(name: str) -> str:
        return _SUFFIX.sub("-xxxxx", name)

    for p in out["pods"]:
        p["name"] = norm_name(p["name"])
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
