"""Conversion of a ResourceSlice device entry into the CEL ``device`` variable.

The conversion is done once per device; engines keep their own converted forms in
``DeviceInput.cache`` so that one ``DeviceInput`` can be reused across many selectors.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from labkit.api.quantity import Quantity, QuantityError, parse_quantity
from labkit.cel.semver import SemverError, parse_semver

__all__ = ["DeviceInput", "device_input", "split_qualified_name"]

_SCALARS = {"int": int, "bool": bool, "string": str}
_LISTS = {"ints": int, "bools": bool, "strings": str, "versions": None}


@dataclass
class DeviceInput:
    """The ``device`` variable: driver, attributes/capacity by domain, allowMultipleAllocations.

    ``error`` is set when the device itself cannot be converted (e.g. a version attribute that
    is not semver); Kubernetes reports that as a runtime error of every selector.
    """

    driver: str
    attributes: dict[str, dict[str, Any]]
    capacity: dict[str, dict[str, Quantity]]
    allow_multiple_allocations: bool = False
    error: str | None = None
    cache: dict[Any, Any] = field(default_factory=dict, repr=False, compare=False)


def split_qualified_name(name: str, driver: str) -> tuple[str, str]:
    """``domain/id`` -> (domain, id); a bare id belongs to the driver's domain."""
    domain, sep, ident = name.partition("/")
    return (domain, ident) if sep else (driver, name)


def _attribute_value(name: str, attr: Any) -> tuple[Any, str | None]:
    if not isinstance(attr, dict) or len(attr) != 1:
        return None, f"attribute {name}: unsupported attribute value"
    kind, raw = next(iter(attr.items()))
    try:
        if kind == "version":
            return parse_semver(str(raw)), None
        if kind in _SCALARS:
            typ = _SCALARS[kind]
            if typ is int and isinstance(raw, bool) or not isinstance(raw, typ):
                raise TypeError
            return raw, None
        if kind in _LISTS:
            if not isinstance(raw, list):
                raise TypeError
            typ = _LISTS[kind]
            if typ is None:
                return [parse_semver(str(v)) for v in raw], None
            if any(not isinstance(v, typ) or (typ is int and isinstance(v, bool)) for v in raw):
                raise TypeError
            return list(raw), None
    except SemverError as exc:
        return None, f"attribute {name}: parse semantic version: {exc}"
    except TypeError:
        return None, f"attribute {name}: value {raw!r} is not a valid {kind!r} value"
    return None, f"attribute {name}: unsupported attribute value"


def device_input(driver: str, device: dict[str, Any]) -> DeviceInput:
    """Convert ``spec.devices[i]`` of a ResourceSlice of ``driver`` into a :class:`DeviceInput`."""
    attributes: dict[str, dict[str, Any]] = {}
    capacity: dict[str, dict[str, Quantity]] = {}
    error: str | None = None
    for name, attr in sorted((device.get("attributes") or {}).items()):
        value, err = _attribute_value(name, attr)
        if err:
            error = error or err
            continue
        domain, ident = split_qualified_name(name, driver)
        attributes.setdefault(domain, {})[ident] = value
    for name, cap in sorted((device.get("capacity") or {}).items()):
        raw = cap.get("value") if isinstance(cap, dict) else cap
        try:
            q = raw if isinstance(raw, Quantity) else parse_quantity(str(raw))
        except QuantityError as exc:
            error = error or f"capacity {name}: {exc}"
            continue
        domain, ident = split_qualified_name(name, driver)
        capacity.setdefault(domain, {})[ident] = q
    return DeviceInput(
        driver=driver,
        attributes=attributes,
        capacity=capacity,
        allow_multiple_allocations=bool(device.get("allowMultipleAllocations", False)),
        error=error,
    )
