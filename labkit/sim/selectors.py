"""Matching nodes and labels the way kube-scheduler's filters do.

NodeSelector (pod required node affinity and claim `allocation.nodeSelector`): terms are ORed,
expressions inside a term ANDed; `matchFields` supports `metadata.name`. Label selectors use
`matchLabels` + `matchExpressions`. Taints/tolerations follow core/v1 ToleratesTaint.
"""

from __future__ import annotations


def _match_expr(values: dict[str, str], expr: dict) -> bool:
    key, op = expr.get("key", ""), expr.get("operator", "")
    vals = expr.get("values") or []
    present = key in values
    if op == "In":
        return present and values[key] in vals
    if op == "NotIn":
        return not present or values[key] not in vals
    if op == "Exists":
        return present
    if op == "DoesNotExist":
        return not present
    if op in ("Gt", "Lt"):
        if not present or len(vals) != 1:
            return False
        try:
            a, b = int(values[key]), int(vals[0])
        except ValueError:
            return False
        return a > b if op == "Gt" else a < b
    return False


def node_selector_term_matches(node: dict, term: dict) -> bool:
    exprs = term.get("matchExpressions") or []
    fields = term.get("matchFields") or []
    if not exprs and not fields:
        return False  # an empty term matches nothing
    labels = (node.get("metadata") or {}).get("labels") or {}
    if not all(_match_expr(labels, e) for e in exprs):
        return False
    fvals = {"metadata.name": (node.get("metadata") or {}).get("name", "")}
    return all(_match_expr(fvals, e) for e in fields)


def node_selector_matches(node: dict, selector: dict | None) -> bool:
    """core/v1 NodeSelector; None matches every node."""
    if not selector:
        return True
    return any(node_selector_term_matches(node, t) for t in selector.get("nodeSelectorTerms") or [])


def label_selector_matches(labels: dict[str, str], selector: dict | None) -> bool:
    """metav1.LabelSelector; None/empty matches everything."""
    if not selector:
        return True
    for k, v in (selector.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    return all(_match_expr(labels, e) for e in selector.get("matchExpressions") or [])


def pod_matches_node_affinity(pod: dict, node: dict) -> bool:
    """spec.nodeSelector and requiredDuringSchedulingIgnoredDuringExecution node affinity."""
    spec = pod.get("spec") or {}
    labels = (node.get("metadata") or {}).get("labels") or {}
    for k, v in (spec.get("nodeSelector") or {}).items():
        if labels.get(k) != v:
            return False
    required = (((spec.get("affinity") or {}).get("nodeAffinity") or {})
                .get("requiredDuringSchedulingIgnoredDuringExecution"))
    return node_selector_matches(node, required)


def tolerates(toleration: dict, taint: dict) -> bool:
    if toleration.get("effect") and toleration["effect"] != taint.get("effect"):
        return False
    if toleration.get("key") and toleration["key"] != taint.get("key"):
        return False
    op = toleration.get("operator") or "Equal"
    if op == "Exists":
        return True  # an empty key with Exists tolerates everything
    if not toleration.get("key"):
        return False
    return (toleration.get("value") or "") == (taint.get("value") or "")


def untolerated_taint(pod: dict, node: dict) -> dict | None:
    """First NoSchedule/NoExecute taint of the node that the pod does not tolerate."""
    tols = (pod.get("spec") or {}).get("tolerations") or []
    for taint in (node.get("spec") or {}).get("taints") or []:
        if taint.get("effect") not in ("NoSchedule", "NoExecute"):
            continue
        if not any(tolerates(t, taint) for t in tols):
            return taint
    return None
