"""The pod explanation's text: "why is this pod where it is / why is it Pending?".

"explain" in LabKit means one of three layers, each with one home:

- claim explanation (``labkit.allocator.explain``): why claims did (not) fit on ONE node, as data
  (``Explanation``: rejected devices per rule) — ``Outcome.explanation``, ``labkit allocate --explain``;
- pod explanation text (this module): a sim scheduling attempt (every node's filter verdict and
  claim explanation) plus the pod's claims, as the text of ``Cluster.explain(pod)``;
- live pod explanation (``labkit.cluster.explain_live``): a real cluster restored into a sim,
  that sim's pod explanation text, then what kube-scheduler said — ``labkit explain pod``.

The same verdict as data (``labkit explain pod -o json|yaml``), :func:`pod_explanation_doc`::

    {"pod": {"namespace", "name"}, "phase", "node",
     "verdict": {"status", "plugin", "plugins", "extensionPoint", "message"},
     "nodeGroups": [{"nodes", "plugin", "reasons", "detail", "allocator": {"verdict", "error", "details"} | null}],
     "claims": [{"name", "claim", "state", "devices": [{"request", "driver", "pool", "device", "shareID"}]}]}

``verdict.status``: ``Scheduled`` (bound; ``node``), ``Schedulable`` (Pending, but the scheduler
would place it now on ``verdict.node``), ``SchedulingGated``, ``NotTried``, ``Unschedulable``
(with the plugin and extension point as kube-scheduler names them: ``PreEnqueue``, ``PreFilter``
or ``Filter``) or ``Error``. ``plugin``: the one plugin that rejected the pod (null when several
did, each node group then names its own; ``plugins`` lists them all). ``message``: kube-scheduler's
words (the FitError message) or labkit's one line. ``nodeGroups``: the nodes that failed alike, the
Filter reasons, a plugin's detail (e.g. the untolerated taint) and the allocator's verdict with
its detail lines (for DynamicResources; in a group of several nodes, ``<node>`` stands for each).
``claims``: the pod's entries in spec order (one that needs no claim too, with state ``not needed``), then
the scheduler's claim for DRA-backed extended resources once it exists (name ``<extended-resources>``).
``claims.state``: ``not needed``, ``not created``, ``pending`` or ``allocated``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from labkit.model.podutil import pod_claims
from labkit.output import escape_terminal
from labkit.sim.filters import plugin_of

MAX_NODES_LISTED = 12


def _claims_lines(pod: dict, get_claim: Callable[[str], dict | None]) -> list[str]:
    lines = []
    for pc in pod_claims(pod, not_needed=True):
        claim = get_claim(pc.claim) if pc.claim else None
        label = f"claim {pc.entry}" + (f" ({pc.claim})" if pc.claim and pc.claim != pc.entry else "")
        state = pc.state(claim)
        if state == "not needed":
            lines.append(f"  {label}: no claim needed (pod.status.resourceClaimStatuses names none)")
        elif state == "not created":
            lines.append(f"  {label}: not created yet")
        elif state == "pending":
            lines.append(f"  {label}: not allocated")
        else:
            for r in _results(claim):
                share = f" share {r['shareID']}" if r.get("shareID") else ""
                lines.append(f"  {label}: request {r.get('request')} -> {r.get('driver')}/{r.get('pool')}/{r.get('device')}{share}")
    return lines


def _results(claim: dict | None) -> list[dict]:
    return ((((claim or {}).get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results") or []


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


MAX_EXPLANATIONS = 3


def _body(node: str, outcome: Any) -> tuple[str, list[str]]:
    """(headline after "node: ", detail lines) of one node's explanation."""
    text = _explanation_text(outcome)
    lines = [line for line in text.splitlines() if line.strip()]
    if lines and lines[0].startswith(f"node {node}: "):
        return lines[0].removeprefix(f"node {node}: "), lines[1:]
    return "", lines


def _per_node_lines(explanations: dict[str, Any], said: str) -> list[str]:
    """Each node's explanation once: nodes that fail the same way share one entry, nothing already in
    the headline (`said`) is repeated, and every node is named (none dropped when the list is cut)."""
    groups: dict[tuple[str, tuple[str, ...]], list[str]] = {}
    kinds: dict[tuple[str, tuple[str, ...]], str] = {}
    for n, outcome in sorted(explanations.items()):
        head, detail = _body(n, outcome)
        key = (head.replace(n, "<node>"), tuple(d.replace(n, "<node>") for d in detail))
        if not head and not detail:
            continue
        groups.setdefault(key, []).append(n)
        kinds[key] = "node" if isinstance(outcome, str) else "allocator on"
    out: list[str] = []
    printed: set[str] = set()
    for i, ((head, detail), nodes) in enumerate(groups.items()):
        if i == MAX_EXPLANATIONS:
            rest = [n for ns in list(groups.values())[i:] for n in ns]
            out.append(f"  (not shown: {', '.join(rest)}, which fail in other ways; cluster.placements() "
                       "and the allocator CLI show each)")
            break
        status, _, error = head.partition(" — ")
        error = error.replace("<node>", nodes[0]) if len(nodes) == 1 else error
        if error and error in said:
            error = ""
        who = ", ".join(nodes)
        out.append(f"  {kinds[(head, detail)]} {who}:" + (f" {status}" if status else "")
                   + (f" — {error}" if error else ""))
        for line in detail:
            shown = line.replace("<node>", nodes[0]) if len(nodes) == 1 else line
            if shown in said or shown in printed:
                continue  # already said in the headline or by an earlier node
            printed.add(shown)
            out.append(f"    {shown}")
    return out


def format_pod_explanation(pod: dict, attempt: Any, agent_problem: str | None,
                           get_claim: Callable[[str], dict | None]) -> str:
    """The text of ``Cluster.explain(pod)``, what it quotes (messages, names, attribute values)
    escaped for a terminal (labkit.output.escape_terminal)."""
    return escape_terminal(_pod_explanation_text(pod, attempt, agent_problem, get_claim))


def _pod_explanation_text(pod: dict, attempt: Any, agent_problem: str | None,
                          get_claim: Callable[[str], dict | None]) -> str:
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
        stage = getattr(attempt, "stage", "")
        return f"{who} is Pending: {attempt.prefilter}" + (f" ({stage})" if stage else "")
    lines = [f"{who} is Pending: {attempt.message}"]
    by_reason: dict[str, list[str]] = {}
    for n, reasons in sorted(attempt.per_node.items()):
        for r in reasons:
            by_reason.setdefault(r, []).append(n)
    for reason, nodes in sorted(by_reason.items()):
        shown = ", ".join(nodes[:MAX_NODES_LISTED]) + (f", ... ({len(nodes)} nodes)" if len(nodes) > MAX_NODES_LISTED else "")
        lines.append(f"  {reason}: {shown}")
    lines += _per_node_lines(attempt.explanations, said=lines[0])
    lines += _claims_lines(pod, get_claim)
    return "\n".join(lines)


def _claims_doc(pod: dict, get_claim: Callable[[str], dict | None]) -> list[dict]:
    out = []
    for pc in pod_claims(pod, not_needed=True):
        claim = get_claim(pc.claim) if pc.claim else None
        devices = [{"request": r.get("request"), "driver": r.get("driver"), "pool": r.get("pool"),
                    "device": r.get("device"), "shareID": r.get("shareID")} for r in _results(claim)]
        out.append({"name": pc.entry, "claim": pc.claim, "state": pc.state(claim), "devices": devices})
    return out


def _node_groups(attempt: Any) -> list[dict]:
    """The nodes that failed alike (same reasons, same allocator verdict), each named."""
    groups: dict[tuple, dict] = {}
    for n, reasons in sorted(attempt.per_node.items()):
        outcome = attempt.explanations.get(n)
        allocator, detail = None, outcome if isinstance(outcome, str) else None
        if outcome is not None and detail is None:
            head, lines = _body(n, outcome)
            status, _, error = head.partition(" — ")
            allocator = {"verdict": status or None, "error": error or None, "details": lines}
        key = (tuple(reasons), detail, repr(allocator).replace(n, "<node>"))
        group = groups.setdefault(key, {"nodes": [], "plugin": plugin_of(reasons[0]) if reasons else "",
                                        "reasons": list(reasons), "detail": detail, "allocator": allocator})
        group["nodes"].append(n)
    out = list(groups.values())
    for g in out:  # a group of several nodes: its lines say <node> where each says its own name
        if len(g["nodes"]) > 1 and g["allocator"] is not None:
            first = g["nodes"][0]
            a = g["allocator"]
            g["allocator"] = {"verdict": a["verdict"], "error": a["error"] and a["error"].replace(first, "<node>"),
                              "details": [d.replace(first, "<node>") for d in a["details"]]}
    return out


def pod_explanation_doc(pod: dict, attempt: Any, get_claim: Callable[[str], dict | None],
                        fits_on: str | None = None) -> dict:
    """The verdict of format_pod_explanation as data (see the module doc); ``fits_on``: the node a
    fresh attempt would bind a Pending pod to (the live explanation's "fits now")."""
    m = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    node = spec.get("nodeName")
    verdict: dict[str, Any] = {"status": "", "plugin": None, "plugins": [], "extensionPoint": None, "message": ""}
    groups: list[dict] = []
    if node:
        verdict.update(status="Scheduled", message=f"bound to node {node}")
    elif fits_on:
        verdict.update(status="Schedulable", message=f"fits node {fits_on} now; the scheduler has not retried it yet")
        verdict["node"] = fits_on
    elif spec.get("schedulingGates"):
        gates = [g.get("name") for g in spec["schedulingGates"]]
        verdict.update(status="SchedulingGated", plugins=["SchedulingGates"], extensionPoint="PreEnqueue",
                       message=f"waiting for scheduling gate(s): {', '.join(str(g) for g in gates)}")
    elif attempt is None:
        verdict.update(status="NotTried", message="not tried by the scheduler yet")
    elif attempt.prefilter:
        plugin, _, rest = (getattr(attempt, "stage", "") or "DynamicResources PreFilter, Unschedulable").partition(" ")
        point, _, status = rest.partition(", ")
        verdict.update(status=status or "Unschedulable", plugins=[plugin], extensionPoint=point or None,
                       message=attempt.message or attempt.prefilter)
    elif attempt.error:
        verdict.update(status="Error", plugins=["DynamicResources"], extensionPoint="Filter", message=attempt.message)
    else:
        groups = _node_groups(attempt)
        verdict.update(status="Unschedulable", extensionPoint="Filter", message=attempt.message,
                       plugins=sorted({g["plugin"] for g in groups if g["plugin"]}))
    if len(verdict["plugins"]) == 1:
        verdict["plugin"] = verdict["plugins"][0]
    return {"pod": {"namespace": m.get("namespace", "default"), "name": m.get("name", "")},
            "phase": (pod.get("status") or {}).get("phase", "Pending"), "node": node or None,
            "verdict": verdict, "nodeGroups": groups, "claims": _claims_doc(pod, get_claim)}
