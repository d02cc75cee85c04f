"""Checks Kubernetes' CEL type checker makes and cel-cpp's does not, run on cel-cpp's checked AST.

* Homogeneous aggregate literals (Kubernetes turns on cel-go's HomogeneousAggregateLiterals):
  every element of a list literal, and every key and every value of a map literal, must have
  the type of the first one. ``[1, 2.0]`` is "expected type 'int' but found 'double'".
* ``list(T).indexOf(T)`` / ``lastIndexOf``: labkit declares them over ``list(dyn)``, so a
  mismatched argument must be caught here.
* New expressions only (API validation), without DRAListTypeAttributes: an attribute value has
  the type ``any``, which cannot be the range of a comprehension (``productName.exists(c, ...)``);
  everywhere else (and in the scheduler's stored-expression environment) it is ``dyn``.

cel-cpp types attribute values and ``dyn(x)`` alike as ``dyn``, so they are told apart by the
expression's shape. Lists anywhere inside a ``format()`` call are exempt, as in cel-go. Where a type is unresolved or comes
from somewhere labkit cannot attribute (a ``cel.bind`` variable, a labkit ``list(dyn)`` function),
the check is skipped: these checks only ever add errors Kubernetes also reports.
"""

from __future__ import annotations

from collections.abc import Iterator

from labkit.cel._checked import AST, Expr, Type

__all__ = ["kubernetes_type_errors"]

_UNSURE = object()


def _is_attribute_value(e: Expr) -> bool:
    """``device.attributes[d].name`` or ``device.attributes[d]["name"]``."""
    if e.kind == "select" and e.operand is not None and not e.test_only:
        return _is_attribute_map(e.operand)
    if e.kind == "call" and e.name == "_[_]" and len(e.args) == 2:
        return _is_attribute_map(e.args[0])
    return False


def _is_attribute_map(e: Expr) -> bool:
    return (e.kind == "call" and e.name == "_[_]" and len(e.args) == 2
            and e.args[0].kind == "ident" and e.args[0].name == "device.attributes")


def _has_unresolved(t: Type) -> bool:
    return t.kind in ("type_param", "error", "function") or any(_has_unresolved(p) for p in t.params)


def _kubernetes_type(ast: AST, e: Expr, attribute: str = "dyn") -> str | object:
    """The type Kubernetes' checker gives ``e`` as it prints it, or _UNSURE."""
    t = ast.types.get(e.id)
    if t is None:
        return _UNSURE
    if t.kind == "dyn":
        if _is_attribute_value(e):
            return attribute
        if e.kind == "call" and e.name == "dyn" and not e.operand:
            return "dyn"
        return _UNSURE
    definite = _kubernetes_type_of(t)
    return _UNSURE if definite is None else definite


def _mismatch(ast: AST, e: Expr, want: object, attribute: str) -> tuple[int, str] | None:
    got = _kubernetes_type(ast, e, attribute)
    if got is _UNSURE or got == want:
        return None
    return ast.positions.get(e.id, 0), f"expected type '{want}' but found '{got}'"


def _literal_error(ast: AST, e: Expr, attribute: str) -> tuple[int, str] | None:
    """cel-go's homogeneous-literal validator: the first element (entry) that differs."""
    if e.kind == "list" and len(e.args) > 1:
        want = _kubernetes_type(ast, e.args[0], attribute)
        if want is _UNSURE:
            return None
        for item in e.args[1:]:
            bad = _mismatch(ast, item, want, attribute)
            if bad:
                return bad
    elif e.kind == "map" and len(e.entries) > 1 and all(k is not None for k, _ in e.entries):
        key0, value0 = e.entries[0]
        want_k = _kubernetes_type(ast, key0, attribute)  # type: ignore[arg-type]  # not None: all() above
        want_v = _kubernetes_type(ast, value0, attribute)
        if want_k is _UNSURE or want_v is _UNSURE:
            return None
        for k, v in e.entries[1:]:
            bad = _mismatch(ast, k, want_k, attribute) or _mismatch(ast, v, want_v, attribute)  # type: ignore[arg-type]  # k: as key0
            if bad:
                return bad
    return None


def _walk(e: Expr | None, in_format: bool = False) -> Iterator[tuple[Expr, bool]]:
    """(expression, inside a format() call) in depth-first order."""
    if e is None:
        return
    yield e, in_format
    inside = in_format or (e.kind == "call" and e.name == "format")
    for c in e.children():
        yield from _walk(c, inside)


def kubernetes_type_errors(ast: AST, *, new_expression_without_list_types: bool = False) -> list[tuple[int, str]]:
    """(source offset, message) for each error Kubernetes' checker reports and cel-cpp's did not.

    ``new_expression_without_list_types``: the API server's environment for a new expression with
    DRAListTypeAttributes off (attribute values are ``any``)."""
    if not ast.checked:
        return []
    attribute = "any" if new_expression_without_list_types else "dyn"
    errors: list[tuple[int, str]] = []
    for e, in_format in _walk(ast.expr):
        if e.kind in ("list", "map"):
            bad = None if in_format else _literal_error(ast, e, attribute)
            if bad:
                errors.append(bad)
        elif e.kind == "call" and e.name in ("indexOf", "lastIndexOf") and e.operand is not None and len(e.args) == 1:
            receiver = ast.types.get(e.operand.id)
            arg = _kubernetes_type(ast, e.args[0], attribute)
            if (receiver is not None and receiver.kind == "list" and receiver.params
                    and arg is not _UNSURE and arg not in ("dyn", "any")):
                elem = _kubernetes_type_of(receiver.params[0])
                if elem is not None and elem != arg:
                    errors.append((ast.positions.get(e.id, 0), f"found no matching overload for '{e.name}' "
                                                               f"applied to 'list({elem}).({arg})'"))
        elif (e.kind == "comprehension" and new_expression_without_list_types and e.iter_range is not None
              and _is_attribute_value(e.iter_range)):
            errors.append((ast.positions.get(e.iter_range.id, 0),
                           "expression of type 'any' cannot be range of a comprehension "
                           "(must be list, map, or dynamic)"))
    return sorted(errors)


def _kubernetes_type_of(t: Type) -> str | None:
    """``str(t)`` when Kubernetes would print the same; None for unresolved, optional and dyn-bearing
    types (``list(dyn)`` comes from labkit's own ``list(dyn)`` declarations)."""
    if _has_unresolved(t) or "dyn" in str(t) or "optional" in str(t):
        return None
    return str(t)
