"""`explain(pod)` for the local backend: what the real scheduler and node agent said about the pod,
plus labkit's allocator explanation computed over the live objects (when labkit.allocator is
available)."""

from __future__ import annotations

from typing import Any


def _claims_of(pod: dict, claims: list[dict]) -> list[dict]:
    ns = pod["metadata"]["namespace"]
    statuses = {s["name"]: s.get("resourceClaimName") for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []}
    by_name = {c["metadata"]["name"]: c for c in claims if c["metadata"].get("namespace") == ns}
    out = []
    for rc in (pod.get("spec") or {}).get("resourceClaims") or []:
        name = rc.get("resourceClaimName") or statuses.get(rc["name"])
        if name and name in by_name:
            out.append(by_name[name])
    return out


def allocator_lines(cluster: Any, pod: dict, claims: list[dict]) -> list[str]:
    """Per node: labkit's allocator verdict for the pod's unallocated claims."""
    try:
        from labkit.allocator import Allocator, features_for
    except ImportError:
        return ["(labkit.allocator is not available: no allocator explanation)"]
    pending = [c for c in claims if not (c.get("status") or {}).get("allocation")]
    if not pending:
        return []
    all_claims = cluster.list("resourceclaims")
    try:
        alloc = Allocator(features_for(cluster.profile.kubernetes_version, cluster._gates),
                          cluster.list("deviceclasses"), cluster.list("resourceslices"),
                          [c for c in all_claims if (c.get("status") or {}).get("allocation")])
    except Exception as exc:  # noqa: BLE001 - explanation is best effort; the scheduler's word stands
        return [f"(labkit allocator could not run: {exc})"]
    lines = []
    for node in cluster.list("nodes"):
        try:
            out = alloc.allocate(node, pending)
        except Exception as exc:  # noqa: BLE001
            lines.append(f"  {node['metadata']['name']}: allocator error: {exc}")
            continue
        verdict = out.status + (f" ({out.error})" if out.error else "")
        lines.append(f"  {node['metadata']['name']}: {verdict}")
        expl = out.explanation
        if expl is not None and out.status != "allocated":
            lines += ["    " + ln for ln in expl.summary().splitlines()]
    return lines


def explain_pod(cluster: Any, pod: dict) -> str:
    meta, spec, status = pod["metadata"], pod.get("spec") or {}, pod.get("status") or {}
    ns, name = meta["namespace"], meta["name"]
    node = spec.get("nodeName")
    lines = [f"pod {ns}/{name}: phase {status.get('phase', 'Pending')}" + (f" on node {node}" if node else "")]
    for c in status.get("conditions") or []:
        if c.get("status") != "True" and (c.get("reason") or c.get("message")):
            lines.append(f"  condition {c['type']}={c['status']} {c.get('reason', '')}: {c.get('message', '')}")
    claims = _claims_of(pod, cluster.list("resourceclaims", ns))
    for c in claims:
        st = c.get("status") or {}
        res = ((st.get("allocation") or {}).get("devices") or {}).get("results") or []
        devs = ", ".join(f"{r['request']}->{r['pool']}/{r['device']}" for r in res) or "not allocated"
        lines.append(f"  claim {c['metadata']['name']}: {devs}; reserved for "
                     f"{len(st.get('reservedFor') or [])} consumer(s)")
    evs = [e for e in cluster.events() if (e.get("involvedObject") or e.get("regarding") or {}).get("uid") == meta["uid"]]
    for e in evs[-5:]:
        src = (e.get("source") or {}).get("component") or e.get("reportingComponent") or ""
        lines.append(f"  event {e.get('type', '')} {e.get('reason', '')} ({src}): {e.get('message') or e.get('note', '')}")
    for agent in getattr(cluster, "agents", {}).values():
        why = agent.errors.get(meta["uid"])
        if why:
            lines.append(f"  node agent {agent.node}: {why}")
    if not node:
        lines.append("  labkit allocator, per node:")
        lines += allocator_lines(cluster, pod, claims)
    return "\n".join(lines)
