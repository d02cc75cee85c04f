"""Conversion of a ResourceSlice device entry into the CEL ``device`` variable.

The conversion is done once per device; engines keep their own converted forms in
``DeviceInput.cache`` so that one ``DeviceInput`` can be reused across many selectors.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from labkit.api.quantity import Quantity, QuantityError, parse_quantity
from labkit.cel.literals import DeviceRef
from labkit.cel.semver import Semver, SemverError, parse_semver

__all__ = ["DeviceInput", "convertible", "device_input", "frozen_json", "projection", "split_qualified_name"]

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


@lru_cache(maxsize=4096)
def _version(text: str) -> Semver:
    """parse_semver, memoised: every GPU of a fleet carries the same few driver versions
    (exceptions are not memoised; Semver is immutable)."""
    return parse_semver(text)


def _attribute_value(name: str, attr: Any) -> tuple[Any, str | None]:
    if not isinstance(attr, dict) or len(attr) != 1:
        return None, f"attribute {name}: unsupported attribute value"
    kind, raw = next(iter(attr.items()))
    try:
        if kind == "version":
            return _version(str(raw)), None
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
                return [_version(str(v)) for v in raw], None
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


# -- shared conversions ------------------------------------------------------------------------
# Callers that rebuild their view of the same slices over and over (one Allocator per scheduling
# attempt) convert identical devices again and again. ``shared_device_input`` returns one
# DeviceInput per device *content*, so the conversion, the engines' activations (in ``cache``)
# and memoised selector results are shared. Bounded LRU: the oldest entries are dropped.
_SHARED: dict[tuple, DeviceInput] = {}
_SHARED_MAX = 1 << 17
_PLAIN = (str, int, bool)


def _frozen_attributes(entries: Any) -> tuple | None:
    """``{name: {kind: raw}}`` as a hashable tuple that keeps value types apart (1 vs True vs
    "1"); None when a value is anything but str/int/bool or a list of those (no sharing then)."""
    if entries is None:
        return ()
    if type(entries) is not dict:
        return None
    out = []
    for name, entry in entries.items():
        if type(entry) is not dict or len(entry) != 1:
            return None
        for kind, raw in entry.items():
            t = type(raw)
            if t in _PLAIN:
                out.append((name, kind, t, raw))
            elif t is list:
                if any(type(v) not in _PLAIN for v in raw):
                    return None
                out.append((name, kind, t, tuple((type(v), v) for v in raw)))
            else:
                return None
    return tuple(out)


def _frozen_capacity(entries: Any) -> tuple | None:
    """``{name: {"value": raw, ...}}`` keyed on what device_input reads: each entry's value."""
    if entries is None:
        return ()
    if type(entries) is not dict:
        return None
    out = []
    for name, entry in entries.items():
        raw = entry.get("value") if type(entry) is dict else entry
        t = type(raw)
        if t not in _PLAIN and raw is not None:
            return None
        out.append((name, t, raw))
    return tuple(out)


def shared_device_input(driver: str, device: dict[str, Any]) -> DeviceInput:
    """Like :func:`device_input`, but one shared (do not mutate) DeviceInput per device content."""
    attrs = _frozen_attributes(device.get("attributes"))
    caps = _frozen_capacity(device.get("capacity")) if attrs is not None else None
    if caps is None or type(driver) is not str:
        return device_input(driver, device)
    key = (driver, attrs, caps, bool(device.get("allowMultipleAllocations", False)))
    inp = _SHARED.pop(key, None)
    if inp is None:
        inp = device_input(driver, device)
        if len(_SHARED) >= _SHARED_MAX:
            del _SHARED[next(iter(_SHARED))]
    _SHARED[key] = inp  # (re)insert last: least recently used entries come first
    return inp


# -- what a selector reads ---------------------------------------------------------------------
def convertible(driver: str, device: dict[str, Any]) -> bool:
    """Would :func:`device_input` convert ``device`` without an error? (Cheap for the usual
    string/int/bool attributes and versions seen before; anything else goes through the
    conversion of that attribute itself.)"""
    attrs = device.get("attributes") or {}
    caps = device.get("capacity") or {}
    if type(attrs) is not dict or type(caps) is not dict:
        return False
    plain, good = _PLAIN_KINDS, _GOOD_VERSIONS
    for name, attr in attrs.items():
        if type(attr) is dict and len(attr) == 1 and type(name) is str:
            for kind, raw in attr.items():
                if plain.get(kind) is type(raw) or (kind == "version" and type(raw) is str and raw in good):
                    break
            else:
                if _attribute_value(name, attr)[1] is not None:
                    return False
                if kind == "version" and type(raw) is str and len(good) < 4096:
                    good.add(raw)
            continue
        if type(name) is not str or _attribute_value(name, attr)[1] is not None:
            return False
    for name, cap in caps.items():
        if type(name) is not str:
            return False
        raw = cap.get("value") if isinstance(cap, dict) else cap
        if not isinstance(raw, Quantity) and not (type(raw) is str and raw in _GOOD_QUANTITIES):
            try:
                parse_quantity(str(raw))
            except QuantityError:
                return False
            if type(raw) is str and len(_GOOD_QUANTITIES) < 4096:
                _GOOD_QUANTITIES.add(raw)
    return True


#: attribute kinds whose value is valid when it has exactly this type (bool is not an int here)
_PLAIN_KINDS: dict[str, type] = {"string": str, "int": int, "bool": bool}
#: version texts that parsed as semver (parse_semver is a pure function of the text)
_GOOD_VERSIONS: set[str] = set()
#: quantity texts that parsed (parse_quantity is a pure function of the text)
_GOOD_QUANTITIES: set[str] = set()


def _frozen(value: Any) -> tuple:
    """A raw JSON value as a hashable key that keeps 1, True and "1" apart."""
    if type(value) is dict:
        if len(value) == 1:  # an attribute ({"string": "gpu"}): most keys are made of these
            for k, v in value.items():
                t = type(v)
                if t is str or t is int or t is bool:
                    return (dict, ((k, (t, v)),))
        return (dict, tuple([(k, _frozen(v)) for k, v in value.items()]))
    if type(value) is list:
        return (list, tuple([_frozen(v) for v in value]))
    hash(value)  # TypeError for anything else unhashable
    return (type(value), value)


def frozen_json(value: Any) -> tuple:
    """A JSON value (dicts, lists, scalars) as a hashable key that keeps 1, True and "1" apart;
    TypeError for anything else unhashable."""
    return _frozen(value)


def projection(refs: tuple[DeviceRef, ...], driver: str, device: dict[str, Any]) -> tuple | None:
    """The values of ``device`` (a ResourceSlice device entry of ``driver``) that the references
    ``refs`` (labkit.cel.literals.device_references) read, as a hashable key: two convertible
    devices with equal keys give every selector with those references the same result. None when
    a value cannot be keyed."""
    out: list[Any] = []
    try:
        for what, domain, ident in refs:
            if what == "driver":
                out.append(driver)
                continue
            if what == "multi":
                out.append(bool(device.get("allowMultipleAllocations", False)))
                continue
            entries = device.get(what) or {}
            if domain is None:
                out.append(_frozen(entries))
            elif ident is None:
                out.append(tuple((name, _frozen(v)) for name, v in entries.items()
                                 if split_qualified_name(name, driver)[0] == domain))
            else:
                # a bare name is in the driver's domain; the qualified one may be there as well
                bare = entries.get(ident, _ABSENT) if domain == driver and "/" not in ident else _ABSENT
                full = entries.get(f"{domain}/{ident}", _ABSENT)
                out.append((_frozen(bare) if bare is not _ABSENT else None,
                            _frozen(full) if full is not _ABSENT else None))
    except TypeError:
        return None
    return tuple(out)


_ABSENT = object()
