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

__all__ = ["DeviceInput", "convertible", "device_input", "frozen_json", "invalid_attribute_text", "projection",
           "split_qualified_name"]

_SCALARS: dict[str, type] = {"int": int, "bool": bool, "string": str}
_LISTS: dict[str, type | None] = {"ints": int, "bools": bool, "strings": str, "versions": None}


@dataclass
class DeviceInput:
    """The ``device`` variable: driver, attributes/capacity by domain, allowMultipleAllocations.

    ``error`` is set when the device itself cannot be converted (1.37: e.g. a version attribute
    that is not semver); Kubernetes reports that as a runtime error of every selector.

    ``invalid`` (1.38, :func:`device_input` with ``lazy=True``): domain -> id -> the runtime error
    of reading that attribute, for values CEL cannot represent (a version semver cannot parse, an
    empty list, no known value field). Such an attribute is a key of its domain's map (size,
    iteration) that only an expression reading its value fails on; ``"id" in m`` is false.
    """

    driver: str
    attributes: dict[str, dict[str, Any]]
    capacity: dict[str, dict[str, Quantity]]
    allow_multiple_allocations: bool = False
    error: str | None = None
    invalid: dict[str, dict[str, str]] = field(default_factory=dict)
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
            elem = _LISTS[kind]
            if elem is None:
                return [_version(str(v)) for v in raw], None
            if any(not isinstance(v, elem) or (elem is int and isinstance(v, bool)) for v in raw):
                raise TypeError
            return list(raw), None
    except SemverError as exc:
        return None, f"attribute {name}: parse semantic version: {exc}"
    except TypeError:
        return None, f"attribute {name}: value {raw!r} is not a valid {kind!r} value"
    return None, f"attribute {name}: unsupported attribute value"


#: 1.38's order of the value fields (api/conversion.go attrValue): the first one set is the value
_FIELDS_38 = ("int", "bool", "string", "version", "ints", "bools", "strings", "versions")


class _Unrepresentable(Exception):
    """1.38: the attribute has no value CEL can hold (conversion gave none)."""


def _attribute_value_38(name: str, attr: Any) -> Any:
    """The value of one attribute as 1.38 converts it before CEL sees it
    (k8s.io/dynamic-resource-allocation@v0.38.0-beta.0: api/conversion.go attrValue): the first
    field set in Go's order; a version semver cannot parse, an empty list or no field set has no
    value (:class:`_Unrepresentable`). A value of the wrong JSON type stays a device error
    (TypeError; Go cannot decode it at all)."""
    if not isinstance(attr, dict):
        raise TypeError
    for kind in _FIELDS_38:
        raw = attr.get(kind)
        if raw is None or (kind in _LISTS and raw == []):
            continue
        value, err = _attribute_value(name, {kind: raw})
        if err is None:
            return value
        if err.startswith(f"attribute {name}: parse semantic version"):
            raise _Unrepresentable
        raise TypeError(err)
    raise _Unrepresentable


def invalid_attribute_text(ident: str) -> str:
    """1.38's runtime error for reading an attribute whose value CEL cannot represent
    (cel/compile.go nameToAttributes.Find; the id as the expression spelled it)."""
    return f"attribute {ident}: value is invalid or its type is not supported by this version"


def _attributes_38(driver: str, entries: dict[str, Any]) -> tuple[dict[str, dict[str, Any]],
                                                                  dict[str, dict[str, str]], str | None]:
    """(attributes, invalid, device error) as 1.38 converts them: ``<driver>/x`` wins over ``x``
    whatever their values (api/conversion.go Convert_v1_To_api_DeviceAttributes)."""
    winners: dict[tuple[str, str], tuple[str, Any]] = {}
    for name, attr in entries.items():
        if type(name) is not str:
            return {}, {}, f"attribute {name!r}: name is not a string"
        key = split_qualified_name(name, driver)
        if "/" in name or key not in winners:
            winners[key] = (name, attr)
    attributes: dict[str, dict[str, Any]] = {}
    invalid: dict[str, dict[str, str]] = {}
    error: str | None = None
    for (domain, ident), (name, attr) in sorted(winners.items()):
        try:
            attributes.setdefault(domain, {})[ident] = _attribute_value_38(name, attr)
        except _Unrepresentable:
            attributes.setdefault(domain, {})
            invalid.setdefault(domain, {})[ident] = invalid_attribute_text(ident)
        except TypeError as exc:
            error = error or (str(exc) or f"attribute {name}: unsupported attribute value")
    return attributes, invalid, error


def device_input(driver: str, device: dict[str, Any], *, lazy: bool = False) -> DeviceInput:
    """Convert ``spec.devices[i]`` of a ResourceSlice of ``driver`` into a :class:`DeviceInput`.

    ``lazy``: as Kubernetes 1.38 converts attribute values (only a selector that reads a value CEL
    cannot represent fails: :attr:`DeviceInput.invalid`); otherwise as 1.37, where any such value
    fails every selector on the device (:attr:`DeviceInput.error`)."""
    attributes: dict[str, dict[str, Any]] = {}
    invalid: dict[str, dict[str, str]] = {}
    capacity: dict[str, dict[str, Quantity]] = {}
    error: str | None = None
    if lazy:
        attributes, invalid, error = _attributes_38(driver, device.get("attributes") or {})
    else:
        for name, attr in sorted((device.get("attributes") or {}).items()):
            value, err = _attribute_value(name, attr)
            if err:
                error = error or err
                continue
            domain, ident = split_qualified_name(name, driver)
            bucket = attributes.setdefault(domain, {})
            if "/" in name or ident not in bucket:  # `<driver>/x` wins over its twin `x` (1.38; 1.37: random)
                bucket[ident] = value
    for name, cap in sorted((device.get("capacity") or {}).items()):
        raw = cap.get("value") if isinstance(cap, dict) else cap
        try:
            q = raw if isinstance(raw, Quantity) else parse_quantity(str(raw))
        except QuantityError as exc:
            error = error or f"capacity {name}: {exc}"
            continue
        domain, ident = split_qualified_name(name, driver)
        caps = capacity.setdefault(domain, {})
        if "/" in name or ident not in caps:
            caps[ident] = q
    return DeviceInput(
        driver=driver,
        attributes=attributes,
        capacity=capacity,
        allow_multiple_allocations=bool(device.get("allowMultipleAllocations", False)),
        error=error,
        invalid=invalid,
    )


# -- shared conversions ------------------------------------------------------------------------
# Callers that rebuild their view of the same slices over and over (one Allocator per scheduling
# attempt) convert identical devices again and again. ``shared_device_input`` returns one
# DeviceInput per device *content*, so the conversion, the engines' activations (in ``cache``)
# and memoised selector results are shared. Bounded LRU: the oldest entries are dropped.
_SHARED: dict[tuple[Any, ...], DeviceInput] = {}
_SHARED_MAX = 1 << 17
_PLAIN = (str, int, bool)


def _frozen_attributes(entries: Any) -> tuple[Any, ...] | None:
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


def _frozen_capacity(entries: Any) -> tuple[Any, ...] | None:
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


def shared_device_input(driver: str, device: dict[str, Any], *, lazy: bool = False) -> DeviceInput:
    """Like :func:`device_input`, but one shared (do not mutate) DeviceInput per device content."""
    attrs = _frozen_attributes(device.get("attributes"))
    caps = _frozen_capacity(device.get("capacity")) if attrs is not None else None
    if caps is None or type(driver) is not str:
        return device_input(driver, device, lazy=lazy)
    key = (driver, attrs, caps, bool(device.get("allowMultipleAllocations", False)), lazy)
    inp = _SHARED.pop(key, None)
    if inp is None:
        inp = device_input(driver, device, lazy=lazy)
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


def _frozen(value: Any) -> tuple[Any, ...]:
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


def frozen_json(value: Any) -> tuple[Any, ...]:
    """A JSON value (dicts, lists, scalars) as a hashable key that keeps 1, True and "1" apart;
    TypeError for anything else unhashable."""
    return _frozen(value)


def projection(refs: tuple[DeviceRef, ...], driver: str, device: dict[str, Any]) -> tuple[Any, ...] | None:
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
