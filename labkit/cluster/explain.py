"""Plain-text answers to "why is this pod where it is / why is it Pending?"."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

MAX_NODES_LISTED = 12


def _claims_lines(pod: dict, get_claim: Callable[[str], dict | None]) -> list[str]:
    lines = []
    statuses = {s.get("name"): s.get("resourceClaimName") for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []}
    for entry in (pod.get("spec") or {}).get("resourceClaims") or []:
        name = entry.get("resourceClaimName") or statuses.get(entry.get("name"))
        claim = get_claim(name) if name else None
        label = f"claim {entry.get('name')}" + (f" ({name})" if name and name != entry.get("name") else "")
        if claim is None:
            lines.append(f"  {label}: not created yet")
            continue
        alloc = (claim.get("status") or {}).get("allocation")
        if not alloc:
            lines.append(f"  {label}: not allocated")
            continue
        for r in (alloc.get("devices") or {}).get("results") or []:
            share = f" share {r['shareID']}" if r.get("shareID") else ""
            lines.append(f"  {label}: request {r.get('request')} -> {r.get('driver')}/{r.get('pool')}/{r.get('device')}{share}")
    return lines


def _explanation_text(outcome: Any) -> str:
    if isinstance(outcome, str):
        return outcome
    try:
        exp = outcome.explanation
    except Exception as exc:  # an explanation must never break explain()
        return f"(no explanation: {exc})"
    if exp is None:
        return outcome.error or ""
    return exp.summary() if hasattr(exp, "summary") else str(exp)


def explain_pod(pod: dict, attempt: Any, agent_problem: str | None, get_claim: Callable[[str], dict | None]) -> str:
    m = pod.get("metadata") or {}
    who = f"Pod {m.get('namespace', 'default')}/{m.get('name', '')}"
    phase = (pod.get("status") or {}).get("phase", "Pending")
    node = (pod.get("spec") or {}).get("nodeName")
    if node:
        lines = [f"{who} is {phase} on node {node}."]
        if agent_problem:
            lines.append(f"  kubelet: {agent_problem}")
        lines += _claims_lines(pod, get_claim)
        return "\n".join(lines)
    if (pod.get("spec") or {}).get("schedulingGates"):
        return f"{who} is Pending: scheduling is blocked by schedulingGates {[g.get('name') for g in pod['spec']['schedulingGates']]}."
    if attempt is None:
        return f"{who} is Pending and has not been tried by the scheduler yet (run wait())."
    if attempt.prefilter:
        return f"{who} is Pending: {attempt.prefilter}"
    lines = [f"{who} is Pending: {attempt.message}"]
    by_reason: dict[str, list[str]] = {}
    for n, reasons in sorted(attempt.per_node.items()):
        for r in reasons:
            by_reason.setdefault(r, []).append(n)
    for reason, nodes in sorted(by_reason.items()):
        shown = ", ".join(nodes[:MAX_NODES_LISTED]) + (f", ... ({len(nodes)} nodes)" if len(nodes) > MAX_NODES_LISTED else "")
        lines.append(f"  {reason}: {shown}")
    seen: set[str] = set()
    for n, outcome in sorted(attempt.explanations.items()):
        text = _explanation_text(outcome)
        body = text.replace(n, "<node>")
        if not text or body in seen:
            continue
        seen.add(body)
        lines.append(f"  {'node' if isinstance(outcome, str) else 'allocator on'} {n}:")
        lines += [f"    {line}" for line in text.splitlines()]
        if len(seen) >= 3:
            lines.append("    (other nodes fail the same way or similarly)")
            break
    lines += _claims_lines(pod, get_claim)
    return "\n".join(lines)
