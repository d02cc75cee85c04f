"""Node selection, the one home for core/v1 NodeSelector matching (sim and allocator alike).

Kubernetes' rules (``k8s.io/component-helpers/scheduling/corev1/nodeaffinity``):

- terms are ORed, the requirements inside a term ANDed; a term without requirements matches
  nothing (so does a selector without terms);
- ``matchExpressions`` test node labels with In / NotIn / Exists / DoesNotExist / Gt / Lt
  (``labels.NewRequirement``: the key must be a label key, In/NotIn need values,
  Exists/DoesNotExist none, Gt/Lt exactly one integer; every value must be a label value);
- ``matchFields`` test node fields with In / NotIn and exactly one value; the only field a node
  has is ``metadata.name`` (another key is not an error: it never equals, so In never
  matches and NotIn always does; API validation is what rejects such keys);
- a requirement that breaks those rules is a parse error. What happens then depends on the
  caller, and both ways live here:

  * strict (``NewNodeSelector``): any bad term makes the whole selector an error. DRA uses this
    for ResourceSlice node selection (``NodeMatches``: "failed to parse node selector") and for
    a claim's ``status.allocation.nodeSelector``. Here: :func:`selector_matches` raises
    :class:`NodeSelectorError`.
  * lazy (``NewLazyErrorNodeSelector``): a bad term just does not match, the others still can.
    kube-scheduler's NodeAffinity filter uses this for a pod's required node affinity. Here:
    :func:`selector_matches_lazy` and :func:`pod_matches_node_affinity`.

API validation rejects bad selectors before any of this runs, so both modes only matter for
input that skipped validation (``--no-validate``, the oracle, a live cluster's older objects).
"""

from __future__ import annotations

import re
from typing import Any

from labkit.api import names
from labkit.errors import InputError

__all__ = ["NodeSelectorError", "node_matches", "selector_matches", "selector_matches_lazy",
           "selector_errors", "term_matches", "node_selector_matches", "pod_matches_node_affinity"]

_INT64 = re.compile(r"[+-]?[0-9]+")
_EXPRESSION_OPS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")
_FIELD_OPS = ("In", "NotIn")


class NodeSelectorError(InputError, ValueError):
    """A node selector Kubernetes cannot parse (the message names the field path)."""


def _labels(node: dict[str, Any] | None) -> dict[str, str]:
    return ((node or {}).get("metadata") or {}).get("labels") or {}


def _node_name(node: dict[str, Any] | None) -> str:
    name: str = ((node or {}).get("metadata") or {}).get("name", "")
    return name


def _int64(value: object) -> int | None:
    if not isinstance(value, str) or not _INT64.fullmatch(value):
        return None
    n = int(value)
    return n if -(2**63) <= n < 2**63 else None


def _expression_errors(req: dict[str, Any], path: str) -> list[str]:
    key, op, values = req.get("key") or "", req.get("operator") or "", req.get("values") or []
    if op not in _EXPRESSION_OPS:
        return [f"{path}.operator: Unsupported value: {op!r}: supported values: "
                + ", ".join(f'"{o}"' for o in _EXPRESSION_OPS)]
    errs = [f"{path}.key: Invalid value: {key!r}: {m}" for m in names.label_key(key)]
    if op in ("In", "NotIn") and not values:
        errs.append(f"{path}.values: Invalid value: []: for 'in', 'notin' operators, values set can't be empty")
    if op in ("Exists", "DoesNotExist") and values:
        errs.append(f"{path}.values: Invalid value: {values}: values set must be empty for exists and does not exist")
    if op in ("Gt", "Lt"):
        if len(values) != 1:
            errs.append(f"{path}.values: Invalid value: {values}: for 'Gt', 'Lt' operators, exactly one value is required")
        errs += [f"{path}.values[{i}]: Invalid value: {v!r}: for 'Gt', 'Lt' operators, the value must be an integer"
                 for i, v in enumerate(values) if _int64(v) is None]
    for i, v in enumerate(values):
        errs += [f"{path}.values[{i}][{key}]: Invalid value: {v!r}: {m}" for m in names.label_value(str(v))]
    return errs


def _field_errors(req: dict[str, Any], path: str) -> list[str]:
    op, values = req.get("operator") or "", req.get("values") or []
    if op not in _FIELD_OPS:
        return [f"{path}.operator: Unsupported value: {op!r}: supported values: \"In\", \"NotIn\""]
    if len(values) != 1:
        return [f"{path}.values: Invalid value: {values}: must have one element"]
    return []


def _term_errors(term: dict[str, Any], path: str) -> list[str]:
    errs = []
    for i, req in enumerate(term.get("matchExpressions") or []):
        errs += _expression_errors(req or {}, f"{path}.matchExpressions[{i}]")
    for i, req in enumerate(term.get("matchFields") or []):
        errs += _field_errors(req or {}, f"{path}.matchFields[{i}]")
    return errs


def selector_errors(selector: dict[str, Any]) -> list[str]:
    """Every parse error of a NodeSelector, ``field.path: message`` (empty terms are skipped)."""
    errs = []
    for i, term in enumerate((selector or {}).get("nodeSelectorTerms") or []):
        errs += _term_errors(term or {}, f"nodeSelectorTerms[{i}]")
    return errs


def _expression_matches(req: dict[str, Any], labels: dict[str, str]) -> bool:
    key, op, values = req.get("key") or "", req.get("operator"), req.get("values") or []
    if op == "In":
        return key in labels and labels[key] in values
    if op == "NotIn":
        return key not in labels or labels[key] not in values
    if op == "Exists":
        return key in labels
    if op == "DoesNotExist":
        return key not in labels
    have = _int64(labels.get(key))
    bound = _int64(values[0]) if len(values) == 1 else None
    if have is None or bound is None:
        return False
    return have > bound if op == "Gt" else have < bound


def _field_matches(req: dict[str, Any], fields: dict[str, str]) -> bool:
    equal = fields.get(req.get("key") or "", "") == (req.get("values") or [""])[0]
    return equal if req.get("operator") == "In" else not equal


def _valid_term_matches(term: dict[str, Any], node: dict[str, Any] | None) -> bool:
    exprs, flds = term.get("matchExpressions") or [], term.get("matchFields") or []
    if not exprs and not flds:
        return False
    labels = _labels(node)
    if not all(_expression_matches(r, labels) for r in exprs):
        return False
    name = _node_name(node)
    # a node without a name has no fields: Kubernetes then skips matchFields
    return not name or all(_field_matches(r, {"metadata.name": name}) for r in flds)


def term_matches(term: dict[str, Any], node: dict[str, Any] | None) -> bool:
    """One NodeSelectorTerm (also a preferred term's ``preference``); a bad term matches nothing."""
    term = term or {}
    return not _term_errors(term, "") and _valid_term_matches(term, node)


def selector_matches(selector: dict[str, Any], node: dict[str, Any] | None) -> bool:
    """Strict (``NewNodeSelector``): any term matches; a parse error anywhere raises."""
    errs = selector_errors(selector)
    if errs:
        raise NodeSelectorError("failed to parse node selector: " + "; ".join(errs))
    return node is not None and any(_valid_term_matches(t or {}, node)
                                    for t in (selector or {}).get("nodeSelectorTerms") or [])


def selector_matches_lazy(selector: dict[str, Any], node: dict[str, Any] | None) -> bool:
    """Lazy (``NewLazyErrorNodeSelector``): terms with parse errors never match, others still can."""
    return node is not None and any(term_matches(t, node) for t in (selector or {}).get("nodeSelectorTerms") or [])


def node_selector_matches(node: dict[str, Any], selector: dict[str, Any] | None) -> bool:
    """A claim's ``status.allocation.nodeSelector``: None = every node. A selector Kubernetes
    cannot parse fits no node (kube-scheduler's DynamicResources PreFilter fails the pod with the
    parse error, so the pod stays pending either way)."""
    if selector is None:
        return True
    return not selector_errors(selector) and selector_matches(selector, node)


def pod_matches_node_affinity(pod: dict[str, Any], node: dict[str, Any]) -> bool:
    """kube-scheduler's NodeAffinity filter: ``spec.nodeSelector`` (labels equal) and the required
    node affinity (lazy: a bad term does not match)."""
    spec = pod.get("spec") or {}
    labels = _labels(node)
    if any(labels.get(k) != v for k, v in (spec.get("nodeSelector") or {}).items()):
        return False
    required = (((spec.get("affinity") or {}).get("nodeAffinity") or {})
                .get("requiredDuringSchedulingIgnoredDuringExecution"))
    return required is None or selector_matches_lazy(required, node)


def node_matches(node: dict[str, Any], node_name: str, all_nodes: bool, node_selector: dict[str, Any] | None) -> bool:
    """``NodeMatches``: nodeName, then allNodes, then nodeSelector (strict); nothing set -> False."""
    if node_name:
        return node is not None and _node_name(node) == node_name
    if all_nodes:
        return True
    if node_selector is not None:
        return selector_matches(node_selector, node)
    return False
