"""Claim constraints: ``matchAttribute`` and ``distinctAttribute`` (scalar and list mode).

Constraints are monotonic and track only what the search added; ``remove`` undoes the matching
``add``. List mode (experimental variant with ``DRAListTypeAttributes``) treats every attribute
as a set: match = non-empty running intersection, distinct = pairwise disjoint.
"""

from __future__ import annotations

from labkit.api.attributes import LIST_KINDS, lookup_attribute, scalar_value

__all__ = ["Constraint", "MatchAttribute", "DistinctAttribute", "attribute_set"]


def attribute_set(attr: dict | None) -> tuple[str, frozenset] | None:
    if attr is None:
        return None
    for key, kind in LIST_KINDS:
        if attr.get(key):
            return kind, frozenset(attr[key])
    sc = scalar_value(attr)
    if sc is None:
        return None
    return sc[0], frozenset([sc[1]])


def _intersect(a: tuple[str, frozenset], b: tuple[str, frozenset]) -> tuple[str, frozenset] | None:
    if a[0] != b[0]:
        return None
    both = a[1] & b[1]
    return (a[0], both) if both else None


class Constraint:
    kind = ""

    def __init__(self, index: int, requests: list[str], attribute: str, list_mode: bool) -> None:
        self.index = index
        self.requests = frozenset(requests or ())
        self.attribute = attribute
        self.list_mode = list_mode

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

    def __init__(self, *args) -> None:
        super().__init__(*args)
        self.reference: dict | None = None
        self.count = 0
        self.stack: list[tuple[str, frozenset]] = []

    def add(self, name: str, sub: str | None, attributes: dict, driver: str) -> bool:
        if not self.applies(name, sub):
            return True
        attr = lookup_attribute(attributes, driver, self.attribute)
        if attr is None:
            return False
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
            if sc is None or (self.reference or {}).get(sc[0]) is None or self.reference[sc[0]] != sc[1]:
                return False
        self.count += 1
        return True

    def remove(self, name: str, sub: str | None) -> None:
        if not self.applies(name, sub):
            return
        self.count -= 1
        if self.list_mode:
            del self.stack[self.count:]


class DistinctAttribute(Constraint):
    """Up to 1.36 the remembered values were keyed by request name (a request with count > 1
    only compares against its latest device, and removal forgets the request): ``by_request``."""

    kind = "distinctAttribute"

    def __init__(self, *args, by_request: bool = False) -> None:
        super().__init__(*args)
        self.by_request = by_request
        self.seen: list[dict] = []
        self.per_request: dict[str, dict] = {}

    def add(self, name: str, sub: str | None, attributes: dict, driver: str) -> bool:
        if not self.applies(name, sub):
            return True
        attr = lookup_attribute(attributes, driver, self.attribute)
        if attr is None:
            return False
        if self.by_request:
            self.seen = list(self.per_request.values())
        if not self._distinct(attr):
            return False
        if self.by_request:
            self.per_request[name] = attr
        else:
            self.seen.append(attr)
        return True

    def _distinct(self, attr: dict) -> bool:
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
