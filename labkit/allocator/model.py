"""Read-only views of ResourceSlices and devices, kept across Allocator instances.

The allocator never copies slice dicts in its hot path; it works on these small objects, which
keep a reference to the original device dict (handed to CEL and to explanations).

Like kube-scheduler, which keeps converted slices between scheduling cycles (kubernetes PR
131168), a converted slice is reused by later Allocators (:func:`slice_info`). An entry is
found by the slice dict's identity and reused only while it is provably the same slice:

- ``versioned`` input (objects from a store that never changes a stored dict in place, such as
  the sim's): the same ``metadata.uid`` and ``metadata.resourceVersion``;
- anything else (dicts a user wrote or loaded, which may be edited in place): the same content,
  compared with a snapshot taken when the slice was converted.
"""

from __future__ import annotations

import contextlib
import pickle
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING, Any, Generic, Self, TypeVar, overload

from labkit.allocator.quantities import qparse, qvalue
from labkit.api.attributes import lookup_attribute, scalar_value
from labkit.cel.device import convertible, frozen_json

if TYPE_CHECKING:
    from labkit.api.quantity import Quantity

#: a device without the attribute a constraint names (a sentinel compared with `is`; Any, so that
#: DeviceInfo.scalar keeps its real return type)
MISSING: Any = object()

__all__ = ["MISSING", "CapacityInfo", "DeviceInfo", "SliceInfo", "convert_slices", "slice_info", "apply_taint_rules"]


_T = TypeVar("_T")


class lazy(Generic[_T]):  # noqa: N801 - used like functools.cached_property
    """functools.cached_property without its lock (Python 3.11 takes one on every first read,
    a few microseconds; a fleet's first pass reads these for every device)."""

    def __init__(self, fn: Callable[[Any], _T]) -> None:
        self.fn = fn
        self.name = fn.__name__
        self.__doc__ = fn.__doc__

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> Self: ...
    @overload
    def __get__(self, obj: object, owner: type | None = None) -> _T: ...

    def __get__(self, obj: object, owner: type | None = None) -> Self | _T:
        if obj is None:
            return self
        value = obj.__dict__[self.name] = self.fn(obj)
        return value


_NO_TAINTS: tuple[Any, ...] = ()
_NO_CONSUMES: list[Any] = []  # shared: read only


@dataclass(eq=False)
class CapacityInfo:
    name: str
    value: Fraction | int  # an int where it is whole (_num)
    text: str
    policy: dict[str, Any] | None
    #: labkit.allocator.capacity's results for this capacity, by (request text, fractional):
    #: (consumed, violates the policy) - a capacity and its policy never change
    memo: dict[tuple[str | None, bool], tuple[Quantity, bool]] = field(default_factory=dict, repr=False)


@dataclass(eq=False)
class DeviceInfo:
    name: str
    id: tuple[str, str, str]
    raw: dict[str, Any]
    slice: SliceInfo
    index: int
    attributes: dict[str, Any]
    uses_compat_groups: bool
    taints: list[dict[str, Any]] | tuple[Any, ...]  # read only
    binding_conditions: list[str] | None
    binding_failure_conditions: list[str] | None
    binds_to_node: bool
    allow_multi: bool
    node_name: str
    all_nodes: bool
    node_selector: dict[str, Any] | None
    _scalars: dict[str, tuple[str, Any] | None] = field(default_factory=dict, repr=False)
    #: facts for labkit.allocator.selectors (valid as long as this view, i.e. the slice version),
    #: keyed by a name or a selector's key tuple
    cel_memo: dict[object, Any] = field(default_factory=dict, repr=False)

    def scalar(self, attribute: str) -> tuple[str, Any] | None:
        """The attribute's (kind, value) as constraints compare it: None when it has no scalar
        value, :data:`MISSING` when the device lacks it (memoised)."""
        try:
            return self._scalars[attribute]
        except KeyError:
            pass
        attr = lookup_attribute(self.attributes, self.slice.driver, attribute)
        sc = MISSING if attr is None else scalar_value(attr)
        self._scalars[attribute] = sc
        return sc

    # parsed on first use (or when the slice arrives, SliceInfo.convert_all): a big cluster has
    # many devices the allocator never looks at
    @lazy
    def capacity(self) -> dict[str, CapacityInfo]:
        raw = self.raw.get("capacity") or {}
        # the GPUs of a fleet share a few capacity maps: one parsed, read-only copy of each (maps
        # of value texts, with or without a request policy; the key is made of strings and the
        # policy as a hashable JSON key), which also shares the capacity checks' memo
        key: tuple[Any, ...] | None = None
        try:
            key = tuple((cname, cap["value"], frozen_json(cap.get("requestPolicy"))) for cname, cap in raw.items()
                        if type(cap) is dict and type(cap.get("value")) is str and len(cap) <= 2
                        and (len(cap) == 1 or "requestPolicy" in cap))
        except TypeError:
            key = None
        if key is not None and len(key) != len(raw):
            key = None
        caps = _CAPACITY_CACHE.get(key) if key is not None else None
        if caps is not None:
            return caps
        caps = {}
        for cname, cap in raw.items():
            text = str((cap or {}).get("value", "0"))
            caps[cname] = CapacityInfo(cname, _num(qparse(text).value), text, (cap or {}).get("requestPolicy"))
        if key is not None and len(_CAPACITY_CACHE) < 100_000:
            _CAPACITY_CACHE[key] = caps
        return caps

    @lazy
    def consumes(self) -> list[tuple[str, dict[str, Fraction | int]]]:
        ccs = self.raw.get("consumesCounters")
        if not ccs:
            return _NO_CONSUMES
        return [(cc.get("counterSet", ""), _counters(cc.get("counters"))) for cc in ccs]

    @lazy
    def plain_capacity(self) -> bool:
        """No request policy and no negative value: an unrequested use always fits."""
        return all(c.policy is None and c.value >= 0 for c in self.capacity.values())


@dataclass(eq=False)
class SliceInfo:
    name: str
    driver: str
    pool: str
    generation: int
    count: int
    node_name: str
    all_nodes: bool
    node_selector: dict[str, Any] | None
    per_device: bool | None
    shared_counters: list[tuple[str, dict[str, Fraction | int]]]
    skip_node_operations: list[str]
    raw: dict[str, Any]
    taint_rules: list[dict[str, Any]] = field(default_factory=list, repr=False)
    _columns: dict[str, tuple[Any, ...] | None] = field(default_factory=dict, repr=False)  # column()
    #: a converted slice this one differs from only in names and string attribute values (see
    #: _twin_of): its facts and its devices' parsed facts are that slice's, not worked out again
    like: SliceInfo | None = field(default=None, repr=False)
    #: with ``like``: the attributes whose value objects differ from like's on some device (column())
    like_differ: frozenset[str] = field(default_factory=frozenset, repr=False)

    # built on first use: an Allocator is often built per scheduling attempt over a whole
    # fleet's slices, and only the slices of the nodes it is asked about are looked at
    @lazy
    def devices(self) -> list[DeviceInfo]:
        if self.like is not None:
            return self._devices_like(self.like)
        spec = self.raw.get("spec") or {}
        extra = apply_taint_rules(spec, self.taint_rules) if self.taint_rules else {}
        driver, pool = self.driver, self.pool
        devices = []
        for i, dev in enumerate(spec.get("devices") or []):
            get = dev.get
            consumes = get("consumesCounters")
            name = get("name", "")
            taints = get("taints")
            more = extra.get(i) if extra else None
            devices.append(DeviceInfo(  # positional, in field order: a fleet builds many
                name, (driver, pool, name), dev, self, i, get("attributes") or {},
                bool(consumes) and any(cc.get("compatibilityGroups") for cc in consumes),
                (list(taints or ()) + more) if more else (list(taints) if taints else _NO_TAINTS),
                get("bindingConditions"), get("bindingFailureConditions"), bool(get("bindsToNode")),
                bool(get("allowMultipleAllocations")), get("nodeName") or "", bool(get("allNodes")),
                get("nodeSelector"),
            ))
        return devices

    def _devices_like(self, like: SliceInfo) -> list[DeviceInfo]:
        """The device views of a slice that differs from ``like`` only in names and string
        attribute values: ``like``'s views with this slice's names, dicts and attributes; the
        facts parsed from what both share (capacities, counters, whether it converts to CEL) are
        taken as they are; selector results and attribute lookups start empty."""
        driver, pool = self.driver, self.pool
        out = []
        for dev, view in zip(self._raw_devices, like.devices, strict=True):
            copy = object.__new__(DeviceInfo)
            facts = copy.__dict__
            facts.update(view.__dict__)
            facts["id"] = (driver, pool, view.name)
            facts["raw"] = dev
            facts["slice"] = self
            facts["attributes"] = dev.get("attributes") or {}
            facts["_scalars"] = {}
            ok = view.cel_memo.get("convertible")
            facts["cel_memo"] = {} if ok is None else {"convertible": ok}
            out.append(copy)
        return out

    # read from the raw devices, so that gathering pools does not build every device's view
    @lazy
    def uses_compat_groups(self) -> bool:
        if self.like is not None:
            return self.like.uses_compat_groups
        return any(bool(cs := dev.get("consumesCounters")) and any(cc.get("compatibilityGroups") for cc in cs or ())
                   for dev in self._raw_devices)

    @lazy
    def has_binding_conditions(self) -> bool:
        if self.like is not None:
            return self.like.has_binding_conditions
        return any(dev.get("bindingConditions") is not None for dev in self._raw_devices)

    @lazy
    def device_names(self) -> list[str]:
        if self.like is not None:
            return self.like.device_names
        return [dev.get("name", "") for dev in self._raw_devices]

    @lazy
    def device_ids(self) -> list[tuple[str, str, str]]:
        """Each device's ``DeviceInfo.id``, without building the views."""
        driver, pool = self.driver, self.pool
        return [(driver, pool, name) for name in self.device_names]

    @lazy
    def consumes_counters(self) -> bool:
        """Does any device consume counters (DeviceInfo.consumes non-empty)?"""
        if self.like is not None:
            return self.like.consumes_counters
        return any(dev.get("consumesCounters") for dev in self._raw_devices)

    @lazy
    def content_key(self) -> tuple[Any, ...] | None:
        """What a search reads from this slice apart from its names (slice, pool, node) and its
        devices' attributes (see :meth:`column`), as a hashable key; None when more than
        its nodeName ties the slice to one node or its results to one allocation, or when a
        device does not convert to CEL (labkit.allocator.twins)."""
        if self.like is not None:
            return self.like.content_key  # the same but for names and attributes: what it leaves out
        spec = self.raw.get("spec") or {}
        if (not self.node_name or self.all_nodes or self.node_selector is not None or self.per_device
                or self.skip_node_operations or self.has_binding_conditions):
            return None
        devices = []
        try:
            for view in self.devices:
                dev = view.raw
                if type(dev) is not dict or dev.get("allowMultipleAllocations") or dev.get("bindsToNode"):
                    return None  # shareIDs and consumed capacity belong to one allocation
                ok = view.cel_memo.get("convertible")
                if ok is None:
                    ok = convertible(self.driver, dev)
                if not ok:
                    return None  # a selector fails on it, with a message that names it
                devices.append(_content(dev))
            return (self.driver, self.count, frozen_json(spec.get("sharedCounters")), tuple(devices))
        except TypeError:  # something unhashable in hand-written input
            return None

    def column(self, name: str) -> tuple[Any, ...] | None:
        """The attribute ``name`` (as the devices spell it) on each device, in order: ``(kind,
        raw)`` with lists as tuples, None where a device lacks it; None when a value is not like
        that (memoised)."""
        try:
            return self._columns[name]
        except KeyError:
            pass
        like = self.like
        if like is not None and name not in self.like_differ:
            # the same value objects as the slice it is like (a node kind's shared ones: _twin_of)
            column = self._columns[name] = like.column(name)
            return column
        out: list[Any] | None = []
        for dev in self._raw_devices:
            value = ((dev.get("attributes") if type(dev) is dict else None) or {}).get(name)
            if value is None:
                out.append(None)  # type: ignore[union-attr]  # a list here: out is None only right before a break
                continue
            if type(value) is not dict or len(value) != 1:
                out = None
                break
            ((kind, raw),) = value.items()
            if type(raw) is list:
                raw = tuple(raw)
            try:
                out.append(_interned((kind, raw)))  # type: ignore[union-attr]  # as above
            except TypeError:  # unhashable
                out = None
                break
        column = self._columns[name] = tuple(out) if out is not None else None
        return column

    def convert_all(self) -> None:
        """Work out now what the first scheduling cycle to look at this slice would: the device
        views and their parsed capacities and counters, and the slice's own facts. (Go has every
        quantity parsed when the informer decodes the object.) Nothing to do for a slice
        ``like`` another: its facts are that slice's."""
        if self.like is not None:
            return
        self.uses_compat_groups, self.has_binding_conditions, self.device_names, self.consumes_counters  # noqa: B018
        for dev in self.devices:
            # bad input is reported where it is read, as before
            with contextlib.suppress(Exception):
                dev.consumes, dev.plain_capacity  # noqa: B018 - plain_capacity parses capacity

    @property
    def _raw_devices(self) -> list[dict[str, Any]]:
        return (self.raw.get("spec") or {}).get("devices") or []


def _num(value: Fraction) -> Fraction | int:
    """ints where possible: much faster arithmetic, same exact results."""
    return int(value) if value.denominator == 1 else value


def _content(dev: dict[str, Any]) -> tuple[Any, ...]:
    """A device entry without its attributes, as a hashable key (TypeError: not hashable)."""
    capacity = dev.get("capacity")
    if len(dev) == 3 and "name" in dev and "attributes" in dev and type(capacity) is dict:
        # the usual device: a name and plain capacities
        plain = tuple([(name, c["value"]) for name, c in capacity.items()
                       if type(c) is dict and len(c) == 1 and type(c.get("value")) is str])
        if len(plain) == len(capacity) and type(dev["name"]) is str:
            return (dev["name"], plain)
    return frozen_json({k: v for k, v in dev.items() if k != "attributes"})


#: attribute values as SliceInfo.column holds them, one object per value (a fleet repeats most)
_VALUES: dict[tuple[Any, ...], tuple[Any, ...]] = {}


def _interned(value: tuple[Any, ...]) -> tuple[Any, ...]:
    hit = _VALUES.get(value)
    if hit is None:
        if len(_VALUES) >= 1 << 18:
            _VALUES.clear()
        hit = _VALUES[value] = value
    return hit


_COUNTER_CACHE: dict[tuple[Any, ...], dict[str, Fraction | int]] = {}
#: ((name, value text), ...) -> parsed capacity map, for maps without request policies (read only)
_CAPACITY_CACHE: dict[tuple[Any, ...], dict[str, CapacityInfo]] = {}


def _counters(counters: dict[str, Any] | None) -> dict[str, Fraction | int]:
    """Parsed counter values; identical consumption maps (every GPU of a node) are parsed once."""
    if not counters:
        return {}
    key: tuple[tuple[str, Any], ...] | None
    key = tuple((name, (c or {}).get("value", "0")) for name, c in counters.items())
    try:
        hit = _COUNTER_CACHE.get(key)
    except TypeError:  # unhashable value in hand-written input
        hit, key = None, None
    if hit is None:
        hit = {name: _num(qvalue(value)) for name, value in (key or
               tuple((n, (c or {}).get("value", "0")) for n, c in counters.items()))}
        if key is not None and len(_COUNTER_CACHE) < 100_000:
            _COUNTER_CACHE[key] = hit
    return hit


def apply_taint_rules(slice_spec: dict[str, Any], rules: list[dict[str, Any]]) -> dict[int, list[dict[str, Any]]]:
    """Extra taints per device index from DeviceTaintRules (driver/pool/device selector)."""
    extra: dict[int, list[dict[str, Any]]] = {}
    for rule in rules:
        spec = rule.get("spec") or {}
        sel = spec.get("deviceSelector")
        if sel is None:
            continue
        if sel.get("driver") is not None and sel["driver"] != slice_spec.get("driver"):
            continue
        if sel.get("pool") is not None and sel["pool"] != (slice_spec.get("pool") or {}).get("name"):
            continue
        for i, dev in enumerate(slice_spec.get("devices") or []):
            if sel.get("device") is not None and sel["device"] != dev.get("name"):
                continue
            extra.setdefault(i, []).append(spec.get("taint") or {})
    return extra


def _convert(raw: dict[str, Any], rules: list[dict[str, Any]]) -> SliceInfo:
    spec = raw.get("spec") or {}
    pool = spec.get("pool") or {}
    return SliceInfo(
        name=(raw.get("metadata") or {}).get("name", ""),
        driver=spec.get("driver", ""),
        pool=pool.get("name", ""),
        generation=int(pool.get("generation") or 0),
        count=int(pool.get("resourceSliceCount") or 0),
        node_name=spec.get("nodeName") or "",
        all_nodes=bool(spec.get("allNodes")),
        node_selector=spec.get("nodeSelector"),
        per_device=spec.get("perDeviceNodeSelection"),
        shared_counters=[(cs.get("name", ""), _counters(cs.get("counters")))
                         for cs in spec.get("sharedCounters") or []],
        skip_node_operations=list(spec.get("skipNodeOperations") or []),
        raw=raw,
        taint_rules=rules,
    )


def convert_slices(slices: list[dict[str, Any]], taint_rules: Iterable[dict[str, Any]] = ()) -> list[SliceInfo]:
    """API ResourceSlices -> the allocator's :class:`SliceInfo` views, freshly converted (no reuse),
    for callers that want a private copy. (Not to be confused with ``fake_gpus.slices.build_slices``,
    which makes ResourceSlices from node hardware.)"""
    rules = list(taint_rules)
    return [_convert(raw, rules) for raw in slices]


class _Entry:
    __slots__ = ("raw", "stamp", "snapshot", "rules_key", "info")

    def __init__(self, raw: dict[str, Any], stamp: tuple[Any, ...] | None, snapshot: object, rules_key: object, info: SliceInfo):
        self.raw = raw  # keeps the dict alive, so its id() stays unique while the entry exists
        self.stamp = stamp
        self.snapshot = snapshot
        self.rules_key = rules_key
        self.info = info


#: id(slice dict) -> entry; least recently used first
_SLICES: dict[int, _Entry] = {}
_SLICES_MAX = 1 << 16


def _stamp(raw: dict[str, Any]) -> tuple[Any, ...] | None:
    meta = raw.get("metadata")
    if type(meta) is not dict:
        return None
    rv = meta.get("resourceVersion")
    return (meta.get("uid"), rv) if rv else None


def _snapshot(raw: dict[str, Any]) -> object:
    """A deep copy to compare against later; None when the dict holds something unpicklable."""
    try:
        return pickle.loads(pickle.dumps(raw, protocol=pickle.HIGHEST_PROTOCOL))
    except Exception:  # noqa: BLE001 - then the slice is converted every time
        return None


#: a versioned slice's shape (_shape) -> the first converted slice of that shape
_LIKE: dict[tuple[Any, ...], SliceInfo] = {}
_LIKE_MAX = 1 << 12


#: _twin_of's answers: the empty one, and each distinct set of names once
_NO_DIFFER: frozenset[str] = frozenset()
_DIFFER: dict[frozenset[str], frozenset[str]] = {}


def _shape(raw: dict[str, Any]) -> tuple[Any, ...] | None:
    """The driver and which capacity maps (by identity) the devices have: slices built from one
    template (the sim's nodes of one kind) share their capacity maps."""
    spec: Any = raw.get("spec")  # Any: mypy does not narrow on `type(spec) is dict`
    devices = spec.get("devices") if type(spec) is dict else None
    if type(devices) is not list or not devices:
        return None
    return (spec.get("driver"), tuple([id(d.get("capacity")) if type(d) is dict else None for d in devices]))


def _twin_of(raw: dict[str, Any], other: dict[str, Any]) -> frozenset[str] | None:
    """Does ``raw`` differ from ``other`` only in the slice's name, a non-empty ``nodeName``,
    the pool's name and string attribute values? Everything else must be the same object
    (versioned input: never edited in place) or equal, keys in the same order. Then everything
    the allocator works out from a slice apart from its names and attributes is the same.
    Returns the names of the attributes whose value is not the same object on some device
    (see SliceInfo.column), or None when the slices are not twins."""
    spec, theirs = raw.get("spec"), other.get("spec")
    if type(spec) is not dict or type(theirs) is not dict or list(spec) != list(theirs):
        return None
    differ: set[str] = set()
    for key, value in spec.items():
        them = theirs[key]
        if value is them:
            continue
        if key == "nodeName":
            if not (type(value) is str and value and type(them) is str and them):
                return None
        elif key == "pool":
            if (type(value) is not dict or type(them) is not dict or list(value) != list(them)
                    or type(value.get("name")) is not str
                    or any(v != them[k] for k, v in value.items() if k != "name")):
                return None
        elif key == "devices":
            if type(value) is not list or type(them) is not list or len(value) != len(them):
                return None
            for dev, twin in zip(value, them, strict=True):
                if dev is not twin and not _twin_device(dev, twin, differ):
                    return None
        elif value != them:
            return None
    if not differ:
        return _NO_DIFFER
    found = frozenset(differ)
    known = _DIFFER.get(found)
    if known is None:  # one object per distinct set: a fleet's slices share a few
        if len(_DIFFER) >= _LIKE_MAX:
            _DIFFER.clear()
        known = _DIFFER[found] = found
    return known


def _twin_device(dev: Any, other: Any, differ: set[str]) -> bool:
    """Twin devices (see _twin_of); adds the names of the attributes whose values are not the same object to ``differ``."""
    if type(dev) is not dict or type(other) is not dict or list(dev) != list(other):
        return False
    for key, value in dev.items():
        them = other[key]
        if value is them:
            continue
        if key != "attributes" or type(value) is not dict or type(them) is not dict or list(value) != list(them):
            return False
        for name, attr in value.items():
            twin = them[name]
            if attr is not twin:
                if not (type(attr) is dict and len(attr) == 1 and type(attr.get("string")) is str
                        and type(twin) is dict and len(twin) == 1 and type(twin.get("string")) is str):
                    return False  # only string values may differ
                differ.add(name)
    return True


def _find_like(info: SliceInfo) -> None:
    """Set ``info.like`` to a converted slice of the same shape it is a twin of (versioned input
    without DeviceTaintRules only), or make ``info`` the one its shape's later slices are compared
    with."""
    try:
        shape = _shape(info.raw)
    except (AttributeError, TypeError):
        return
    if shape is None:
        return
    first = _LIKE.get(shape)
    if first is None:
        if len(_LIKE) >= _LIKE_MAX:
            del _LIKE[next(iter(_LIKE))]
        _LIKE[shape] = info
    elif first.raw is not info.raw:
        differ = _twin_of(info.raw, first.raw)
        if differ is not None:
            info.like, info.like_differ = first, differ


def slice_info(raw: dict[str, Any], rules: list[dict[str, Any]], rules_key: object, versioned: bool) -> SliceInfo:
    """The converted view of ``raw``, reused when ``raw`` is unchanged (see the module text).

    ``rules_key`` identifies the content of the DeviceTaintRules ``rules`` (they add taints to
    devices, so a view made under other rules is not reused).
    """
    key = id(raw)
    entry = _SLICES.get(key)
    if entry is not None and entry.rules_key == rules_key:
        if versioned and entry.stamp is not None:
            if entry.stamp == _stamp(raw):
                return entry.info
        elif entry.snapshot is not None and raw == entry.snapshot:
            return entry.info
    info = _convert(raw, rules)
    if versioned and not rules:
        _find_like(info)
    stamp = _stamp(raw) if versioned else None
    snapshot = None if stamp is not None else _snapshot(raw)
    if stamp is None and snapshot is None:
        return info
    _SLICES.pop(key, None)
    if len(_SLICES) >= _SLICES_MAX:
        del _SLICES[next(iter(_SLICES))]
    _SLICES[key] = _Entry(raw, stamp, snapshot, rules_key, info)
    return info
