"""Claim constraints: ``matchAttribute`` and ``distinctAttribute`` (scalar and list mode).

Constraints are monotonic and track only what the search added; ``remove`` undoes the matching
``add``. List mode (experimental variant with ``DRAListTypeAttributes``) treats every attribute
as a set: match = non-empty running intersection, distinct = pairwise disjoint.

From 1.38 (``v38``; k8s.io/dynamic-resource-allocation@v0.38.0-beta.0:
structured/internal/stable/constraint.go and experimental/constraint.go) versions compare as
semver with build metadata ignored, and an attribute the constraint cannot compare (a list in
scalar mode, a version that does not parse, an empty list) raises :class:`UnsupportedAttribute`
instead of skipping the device.
"""

from __future__ import annotations

from typing import Any

from labkit.api.attributes import LIST_KINDS, SCALAR_KINDS, lookup_attribute, scalar_value
from labkit.cel.semver import Semver, SemverError, parse_semver

__all__ = ["Constraint", "MatchAttribute", "DistinctAttribute", "UnsupportedAttribute", "attribute_set"]


class UnsupportedAttribute(Exception):
    """1.38: the device has the attribute, with a value the constraint cannot compare (fatal)."""


def _version38(text: object) -> Semver:
    try:
        return parse_semver(str(text))
    except SemverError:
        raise UnsupportedAttribute from None


def _value38(attr: dict[str, Any], list_mode: bool) -> tuple[str, frozenset[Any]]:
    """The attribute as 1.38 compares it, as (kind, set of values); versions are parsed (their
    equality ignores build metadata). Scalar mode gives a one-element set and refuses lists."""
    for kind in SCALAR_KINDS:
        if attr.get(kind) is not None:
            value = _version38(attr[kind]) if kind == "version" else attr[kind]
            return kind, frozenset([value])
    if list_mode:
        for key, kind in LIST_KINDS:
            if attr.get(key):
                values = attr[key]
                return kind, frozenset(_version38(v) for v in values) if kind == "version" else frozenset(values)
    raise UnsupportedAttribute


def attribute_set(attr: dict[str, Any] | None) -> tuple[str, frozenset[Any]] | None:
    if attr is None:
        return None
    for key, kind in LIST_KINDS:
        if attr.get(key):
            return kind, frozenset(attr[key])
    sc = scalar_value(attr)
    if sc is None:
        return None
    return sc[0], frozenset([sc[1]])


def _intersect(a: tuple[str, frozenset[Any]], b: tuple[str, frozenset[Any]]) -> tuple[str, frozenset[Any]] | None:
    if a[0] != b[0]:
        return None
    both = a[1] & b[1]
    return (a[0], both) if both else None


class Constraint:
    kind = ""

    def __init__(self, index: int, requests: list[str], attribute: str, list_mode: bool, *,
                 v38: bool = False) -> None:
        self.index = index
        self.requests = frozenset(requests or ())
        self.attribute = attribute
        self.list_mode = list_mode
        self.v38 = v38

    def applies(self, name: str, sub: str | None) -> bool:
        if not self.requests:
            return True
        if sub is None:
            return name in self.requests
        return name in self.requests or f"{name}/{sub}" in self.requests

    def describe(self) -> str:
        return f"constraint #{self.index} ({self.kind} {self.attribute})"


class MatchAttribute(Constraint):
    kind = "matchAttribute"

    def __init__(self, *args: Any, v38: bool = False) -> None:  # Constraint's
        super().__init__(*args, v38=v38)
        self.reference: dict[str, Any] | None = None
        self.count = 0
        self.stack: list[tuple[str, frozenset[Any]]] = []

    def add(self, name: str, sub: str | None, attributes: dict[str, Any], driver: str) -> bool:
        if not self.applies(name, sub):
            return True
        attr = lookup_attribute(attributes, driver, self.attribute)
        if attr is None:
            return False
        if self.v38:
            return self._add38(_value38(attr, self.list_mode))
        if self.count == 0:
            if self.list_mode:
                first = attribute_set(attr)
                if first is None:
                    return False
                self.stack.append(first)
            else:
                self.reference = attr
            self.count = 1
            return True
        if self.list_mode:
            new = attribute_set(attr)
            if new is None:
                return False
            narrowed = _intersect(self.stack[self.count - 1], new)
            if narrowed is None:
                return False
            self.stack.append(narrowed)
        else:
            sc = scalar_value(attr)
            if sc is None or (self.reference or {}).get(sc[0]) is None or self.reference[sc[0]] != sc[1]:  # type: ignore[index]  # not None: .get() found the key
                return False
        self.count += 1
        return True

    def _add38(self, new: tuple[str, frozenset[Any]]) -> bool:
        if self.count:
            narrowed = _intersect(self.stack[self.count - 1], new)
            if narrowed is None:
                return False
            new = narrowed
        self.stack.append(new)
        self.count += 1
        return True

    def remove(self, name: str, sub: str | None) -> None:
        if not self.applies(name, sub):
            return
        self.count -= 1
        if self.list_mode or self.v38:
            del self.stack[self.count:]


class DistinctAttribute(Constraint):
    """Up to 1.36 the remembered values were keyed by request name (a request with count > 1
    only compares against its latest device, and removal forgets the request): ``by_request``."""

    kind = "distinctAttribute"

    def __init__(self, *args: Any, by_request: bool = False, v38: bool = False) -> None:  # Constraint's
        super().__init__(*args, v38=v38)
        self.by_request = by_request
        self.seen: list[Any] = []  # attribute dicts; 1.38: (kind, values) pairs
        self.per_request: dict[str, dict[str, Any]] = {}

    def add(self, name: str, sub: str | None, attributes: dict[str, Any], driver: str) -> bool:
        if not self.applies(name, sub):
            return True
        attr = lookup_attribute(attributes, driver, self.attribute)
        if attr is None:
            return False
        if self.v38:
            new = _value38(attr, self.list_mode)
            if any(_intersect(new, old) is not None for old in self.seen):
                return False
            self.seen.append(new)
            return True
        if self.by_request:
            self.seen = list(self.per_request.values())
        if not self._distinct(attr):
            return False
        if self.by_request:
            self.per_request[name] = attr
        else:
            self.seen.append(attr)
        return True

    def _distinct(self, attr: dict[str, Any]) -> bool:
        if self.list_mode:
            new = attribute_set(attr)
            if new is None:
                return False
            for old in self.seen:
                old_set = attribute_set(old)
                if old_set is not None and _intersect(new, old_set) is not None:
                    return False
            return True
        sc = scalar_value(attr)
        for old in self.seen:
            if sc is None:
                return False
            if old.get(sc[0]) is not None and old[sc[0]] == sc[1]:
                return False
        return True

    def remove(self, name: str, sub: str | None) -> None:
        if not self.applies(name, sub):
            return
        if self.by_request:
            self.per_request.pop(name, None)
        else:
            self.seen.pop()
