"""Node selection: ``NodeMatches`` and core/v1 NodeSelector matching (nodeaffinity semantics)."""

from __future__ import annotations

from labkit.errors import InputError

__all__ = ["NodeSelectorError", "node_matches", "selector_matches"]


class NodeSelectorError(InputError, ValueError):
    pass


def _labels(node: dict) -> dict[str, str]:
    return ((node or {}).get("metadata") or {}).get("labels") or {}


def _node_name(node: dict) -> str:
    return ((node or {}).get("metadata") or {}).get("name", "")


def _expression_matches(req: dict, labels: dict[str, str]) -> bool:
    key, op, values = req.get("key", ""), req.get("operator", ""), req.get("values") or []
    if op == "In":
        if not values:
            raise NodeSelectorError(f"key {key}: for 'in', 'notin' operators, values set can't be empty")
        return key in labels and labels[key] in values
    if op == "NotIn":
        if not values:
            raise NodeSelectorError(f"key {key}: for 'in', 'notin' operators, values set can't be empty")
        return key not in labels or labels[key] not in values
    if op in ("Exists", "DoesNotExist"):
        if values:
            raise NodeSelectorError(f"key {key}: values set must be empty for exists and does not exist")
        return (key in labels) == (op == "Exists")
    if op in ("Gt", "Lt"):
        if len(values) != 1:
            raise NodeSelectorError(f"key {key}: for 'Gt', 'Lt' operators, exactly one value is required")
        try:
            bound = int(values[0])
        except ValueError as exc:
            raise NodeSelectorError(f"key {key}: for 'Gt', 'Lt' operators, the value must be an integer") from exc
        if key not in labels:
            return False
        try:
            have = int(labels[key])
        except ValueError:
            return False
        return have > bound if op == "Gt" else have < bound
    raise NodeSelectorError(f"key {key}: {op!r} is not a valid label selector operator")


def _field_matches(req: dict, node: dict) -> bool:
    key, op, values = req.get("key", ""), req.get("operator", ""), req.get("values") or []
    if key != "metadata.name":
        raise NodeSelectorError(f"{key!r} is not a valid field selector key")
    if op not in ("In", "NotIn"):
        raise NodeSelectorError(f"{op!r} is not a valid field selector operator")
    if len(values) != 1:
        raise NodeSelectorError("must have one element")
    equal = _node_name(node) == values[0]
    return equal if op == "In" else not equal


def selector_matches(selector: dict, node: dict) -> bool:
    """True if any term matches. An empty term selects nothing. Invalid terms raise."""
    labels = _labels(node)
    matched = False
    for term in selector.get("nodeSelectorTerms") or []:
        exprs = term.get("matchExpressions") or []
        flds = term.get("matchFields") or []
        if not exprs and not flds:
            continue
        # evaluate everything so that invalid requirements always raise, like NewNodeSelector
        results = [_expression_matches(r, labels) for r in exprs] + [_field_matches(r, node) for r in flds]
        if all(results):
            matched = True
    return matched


def node_matches(node: dict, node_name: str, all_nodes: bool, node_selector: dict | None) -> bool:
    """``NodeMatches``: nodeName, then allNodes, then nodeSelector; nothing set -> False."""
    if node_name:
        return node is not None and _node_name(node) == node_name
    if all_nodes:
        return True
    if node_selector is not None:
        return selector_matches(node_selector, node)
    return False
