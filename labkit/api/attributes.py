"""Device attribute values as ResourceSlices carry them: one of ``{"string": ..}``, ``{"int": ..}``,
``{"bool": ..}``, ``{"version": ..}`` (and, with DRAListTypeAttributes, ``strings`` / ``ints`` /
``bools`` / ``versions``). The one place in labkit that unwraps them and looks them up by name.

CEL gets typed values (semver objects, type errors) from ``labkit.cel.device`` instead; fake_gpus
reads its own slices with ``fake_gpus.plugin.devices.attribute_value`` (fake_gpus imports nothing
from labkit).
"""

from __future__ import annotations

from typing import Any

__all__ = ["SCALAR_KINDS", "LIST_KINDS", "lookup_attribute", "scalar_value", "plain_value", "device_attribute",
           "plain_attributes"]

SCALAR_KINDS = ("string", "int", "bool", "version")
#: (list field, kind of its elements)
LIST_KINDS = (("ints", "int"), ("bools", "bool"), ("strings", "string"), ("versions", "version"))


def lookup_attribute(attributes: dict[str, Any] | None, driver: str, name: str) -> dict[str, Any] | None:
    """The raw attribute ``name``: the exact key first; else, when the name's domain is the
    device's driver, the bare identifier (``gpu.nvidia.com/index`` finds ``index``)."""
    attributes = attributes or {}
    attr: dict[str, Any] | None = attributes.get(name)  # as written: scalar_value checks that it is one
    if attr is not None:
        return attr
    domain, sep, ident = name.partition("/")
    if not sep or domain != driver:
        return None
    return attributes.get(ident)


def scalar_value(attr: dict[str, Any] | None) -> tuple[str, Any] | None:
    """``(kind, value)`` of a scalar attribute (``{"int": 3}`` -> ``("int", 3)``); None otherwise."""
    if not isinstance(attr, dict):
        return None
    for kind in SCALAR_KINDS:
        if attr.get(kind) is not None:
            return kind, attr[kind]
    return None


def plain_value(attr: dict[str, Any] | None) -> Any:
    """The value without its type wrapper: a scalar, a list for list attributes, else None."""
    scalar = scalar_value(attr)
    if scalar is not None:
        return scalar[1]
    if isinstance(attr, dict):
        for key, _ in LIST_KINDS:
            if attr.get(key) is not None:
                return list(attr[key])
    return None


def device_attribute(device: dict[str, Any], name: str, driver: str = "") -> Any:
    """The plain value of one attribute of a ResourceSlice device entry (None when absent)."""
    return plain_value(lookup_attribute(device.get("attributes"), driver, name))


def plain_attributes(device: dict[str, Any]) -> dict[str, Any]:
    """Every attribute of a device entry without its wrapper; a value labkit cannot read stays as is."""
    out: dict[str, Any] = {}
    for name, attr in (device.get("attributes") or {}).items():
        value = plain_value(attr)
        out[name] = attr if value is None else value
    return out
