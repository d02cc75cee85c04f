"""``labkit describe pod|claim``: the whole story of one object, as ``kubectl describe`` tells it.

A pod: where it is (or that it is Pending), its conditions with the scheduler's message, its
claims and the devices they got, the pod explanation (labkit.cluster.explain: every node group's
verdict and the allocator's reasons), then the events about it. A claim: its requests, its
allocation (devices, node selector) and reservations, the pods that use it, why it is not
allocated (the explanation of a pod waiting for it), then its events. Works on any Cluster: a sim
(manifests or a state dump) or a real cluster through a kubeconfig.
"""

from __future__ import annotations

from typing import Any

from labkit.api import LoadError, load_files
from labkit.cluster.base import NotFound
from labkit.cluster.report import claim_users
from labkit.model.podutil import pod_claims
from labkit.output import DEFAULT_WIDTH, Table, escape_terminal, fit_text

__all__ = ["KINDS", "describe", "object_names"]

#: what `labkit describe` takes (kubectl's short names too) -> the Kubernetes kind
KINDS = {"pod": "Pod", "pods": "Pod", "po": "Pod", "claim": "ResourceClaim", "claims": "ResourceClaim",
         "resourceclaim": "ResourceClaim", "resourceclaims": "ResourceClaim"}


def object_names(kind: str, sources: list[str]) -> list[str]:
    """Names of the objects of ``kind`` in manifest files or a state dump (NAMESPACE/NAME outside
    the default namespace), for shell completion: unreadable files give nothing, never an error."""
    names: list[str] = []
    for src in sources:
        try:
            objs = load_files([src])
        except (LoadError, OSError):
            continue
        for o in objs:
            if isinstance(o, dict) and o.get("kind") == kind:
                m = o.get("metadata") or {}
                ns = m.get("namespace") or "default"
                names.append(m.get("name", "") if ns == "default" else f"{ns}/{m.get('name', '')}")
    return sorted(set(names))


def describe(cluster: Any, kind: str, name: str, namespace: str = "default", *,
             width: int | None = DEFAULT_WIDTH) -> str:
    """The text for one object, its data escaped for a terminal as ``kubectl describe`` escapes it
    (labkit.output.escape_terminal); NotFound (exit 3) names what exists when it does not."""
    kind = KINDS.get(kind.lower(), kind)
    try:
        obj = cluster.get(kind, name, namespace)
    except NotFound:
        names = [o["metadata"]["name"] for o in cluster.list(kind, namespace)]
        noun = "pod" if kind == "Pod" else "claim"
        have = f"{', '.join(names[:10])}{' ...' if len(names) > 10 else ''}" if names else "none"
        raise NotFound(f'{kind} "{name}" not found in namespace {namespace}',
                       fix=f"give one of the {noun}s there: {have}") from None
    text = _pod(cluster, obj, width) if kind == "Pod" else _claim(cluster, obj, width)
    return fit_text(escape_terminal(text), width)


def _header(obj: dict) -> list[str]:
    m = obj.get("metadata") or {}
    return [f"Name:         {m.get('name', '')}", f"Namespace:    {m.get('namespace', 'default')}"]


def _events(cluster: Any, kind: str, obj: dict, width: int | None) -> list[str]:
    m = obj.get("metadata") or {}
    rows = []
    for e in cluster.events():
        inv = e.get("involvedObject") or e.get("regarding") or {}
        if (inv.get("kind") == kind and inv.get("name") == m.get("name")
                and inv.get("namespace", "default") == m.get("namespace", "default")):
            source = (e.get("source") or {}).get("component") or e.get("reportingComponent") or ""
            count = e.get("count") or 1
            rows.append([e.get("type", ""), e.get("reason", ""), f"x{count}" if count > 1 else "", source,
                         e.get("message") or e.get("note") or ""])
    if not rows:
        return ["Events:       <none>"]
    if not any(r[2] for r in rows):  # every event happened once: no COUNT column
        rows = [[r[0], r[1], r[3], r[4]] for r in rows]
    headers = ["Type", "Reason", "Count", "From", "Message"] if len(rows[0]) == 5 else ["Type", "Reason", "From", "Message"]
    table = Table(headers, rows, detail=len(headers) - 1)
    return ["Events:", *_indent(table.render(width and width - 2))]


def _indent(text: str, by: str = "  ") -> list[str]:
    return [by + line if line else line for line in text.split("\n")]


def _results(claim: dict) -> list[str]:
    alloc = (claim.get("status") or {}).get("allocation") or {}
    out = []
    for r in (alloc.get("devices") or {}).get("results") or []:
        extra = [f"share {r['shareID']}"] if r.get("shareID") else []
        extra += ["admin access"] if r.get("adminAccess") else []
        extra += [",".join(f"{k}={v}" for k, v in r["consumedCapacity"].items())] if r.get("consumedCapacity") else []
        out.append(f"request {r.get('request')}: {r.get('driver')}/{r.get('pool')}/{r.get('device')}"
                   + (f" ({'; '.join(extra)})" if extra else ""))
    return out


def _pod(cluster: Any, pod: dict, width: int | None) -> str:
    m = pod.get("metadata") or {}
    ns = m.get("namespace", "default")
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    lines = _header(pod) + [f"Node:         {spec.get('nodeName') or '<none>'}",
                            f"Status:       {status.get('phase', 'Pending')}"]
    if status.get("reason"):
        lines.append(f"Reason:       {status['reason']}")
    if status.get("message"):
        lines.append(f"Message:      {status['message']}")
    conds = status.get("conditions") or []
    if conds:
        table = Table(["Type", "Status", "Reason", "Message"],
                      [[c.get("type", ""), c.get("status", ""), c.get("reason", ""), c.get("message", "")]
                       for c in conds], detail=3)
        lines += ["Conditions:", *_indent(table.render(width and width - 2))]
    claims = pod_claims(pod)
    if claims:
        lines.append("Resource Claims:")
        for pc in claims:
            name, label = pc.claim, pc.entry
            if name is None:
                lines.append(f"  {label}: not created yet")
                continue
            try:
                claim = cluster.get("ResourceClaim", name, ns)
            except NotFound:
                lines.append(f"  {label} (claim {name}): not found")
                continue
            results = _results(claim)
            lines.append(f"  {label} (claim {name}): " + ("allocated" if results else "not allocated"))
            lines += [f"    {r}" for r in results]
    lines.append("Explanation:")
    lines += _indent(cluster.explain(m.get("name", ""), ns))
    lines += _events(cluster, "Pod", pod, width)
    return "\n".join(lines)


def _request_line(req: dict) -> str:
    if req.get("exactly") is not None:
        ex = req["exactly"]
        mode = ex.get("allocationMode", "ExactCount")
        what = "all" if mode == "All" else str(ex.get("count", 1))
        text = f"{req.get('name')}: {what} of class {ex.get('deviceClassName')}"
        sels = [s.get("cel", {}).get("expression", "") for s in ex.get("selectors") or []]
        return text + "".join(f"; selector `{s}`" for s in sels) + ("; admin access" if ex.get("adminAccess") else "")
    subs = [s.get("name") for s in req.get("firstAvailable") or []]
    return f"{req.get('name')}: first available of {', '.join(str(s) for s in subs)}"


def _claim(cluster: Any, claim: dict, width: int | None) -> str:
    m = claim.get("metadata") or {}
    ns = m.get("namespace", "default")
    devices = (claim.get("spec") or {}).get("devices") or {}
    status = claim.get("status") or {}
    alloc = status.get("allocation")
    reserved = status.get("reservedFor") or []
    state = ("allocated,reserved" if reserved else "allocated") if alloc else "pending"
    lines = _header(claim) + [f"State:        {state}", "Requests:"]
    lines += [f"  {_request_line(r)}" for r in devices.get("requests") or []] or ["  <none>"]
    for c in devices.get("constraints") or []:
        lines.append(f"  constraint: matchAttribute {c.get('matchAttribute')} over "
                     f"{', '.join(c.get('requests') or []) or 'all requests'}")
    if alloc:
        lines.append("Allocation:")
        lines += [f"  {r}" for r in _results(claim)]
        terms = ((alloc.get("nodeSelector") or {}).get("nodeSelectorTerms")) or []
        for t in terms:
            exprs = [f"{f.get('key')} {f.get('operator')} {','.join(f.get('values') or [])}"
                     for f in (t.get("matchFields") or []) + (t.get("matchExpressions") or [])]
            lines.append(f"  node selector: {'; '.join(exprs)}")
    else:
        lines.append("Allocation:   <none>")
    lines.append("Reserved For: " + (", ".join(f"{r.get('resource', 'pods')}/{r.get('name')}" for r in reserved)
                                     if reserved else "<none>"))
    users = claim_users(cluster).get((ns, m.get("name", "")), [])
    lines.append("Used By:      " + (", ".join(f"pod/{u}" for u in users) if users else "<none>"))
    if not alloc and users:
        lines.append(f"Why not allocated (pod {users[0]}):")
        lines += _indent(cluster.explain(users[0], ns))
    lines += _events(cluster, "ResourceClaim", claim, width)
    return "\n".join(lines)
