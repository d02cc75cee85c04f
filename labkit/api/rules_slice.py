"""Rules for ResourceSlice and DeviceTaintRule."""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction
from typing import Any

from labkit.api import names
from labkit.api.context import Context
from labkit.api.problem import Sink, as_dict, as_list
from labkit.api.quantity import Quantity, QuantityError, parse_quantity
from labkit.api.rules_claim import EFFECTS, gate, quantity

__all__ = ["check_slice_spec", "check_taint", "check_taint_rule_spec"]

MAX_DEVICES = 128
MAX_DEVICES_ADVANCED = 64
MAX_COUNTER_SETS = 8
MAX_COUNTERS_PER_SET = 32
MAX_COUNTERS_134 = 32
MAX_CONSUMES = 2
MAX_ATTRS_AND_CAPS = 32
MAX_ATTR_VALUES = 48
MAX_VALID_VALUES = 10
MAX_BINDING = 4
_NODE_SEL_MSG = "exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required"
_DEV_SEL_MSG = ("exactly one of `nodeName`, `nodeSelector`, or `allNodes` is required when "
                "`perDeviceNodeSelection` is set to true in the ResourceSlice spec")
_SCALARS = ("bool", "int", "string", "version")
_LISTS = ("bools", "ints", "strings", "versions")
_SKIP_OPS = ["*", "NodePrepareResources", "NodeUnprepareResources"]


def max_taints(ctx: Context) -> int:
    return 4 if ctx.version == "1.34" else 16


def check_taint(sink: Sink, path: str, taint: Any) -> None:
    taint = as_dict(taint)
    key = taint.get("key")
    if isinstance(key, str) or key is None:
        sink.names(f"{path}.key", key or "", names.label_key(key or ""))
    value = taint.get("value")
    if isinstance(value, str) and value:
        sink.names(f"{path}.value", value, names.label_value(value))
    effect = taint.get("effect")
    if not effect:
        sink.required(f"{path}.effect", "one of None, NoSchedule, NoExecute")
    elif effect not in EFFECTS:
        sink.unsupported(f"{path}.effect", effect, EFFECTS)


def _node_selector(sink: Sink, path: str, selector: Any) -> None:
    terms = as_dict(selector).get("nodeSelectorTerms")
    if not isinstance(terms, list) or len(terms) != 1:
        sink.invalid(f"{path}.nodeSelectorTerms", terms, "must have exactly one node selector term")


def _node_selection(sink: Sink, ctx: Context, spec: dict[str, Any]) -> None:
    chosen = []
    node = spec.get("nodeName")
    if node is not None:
        if node:
            chosen.append("`nodeName`")
            if isinstance(node, str):
                sink.names("spec.nodeName", node, names.dns_subdomain(node))
        else:
            sink.invalid("spec.nodeName", node, "must be either unset or set to a non-empty string")
    if spec.get("nodeSelector") is not None:
        chosen.append("`nodeSelector`")
        _node_selector(sink, "spec.nodeSelector", spec["nodeSelector"])
    for fld, needs in (("allNodes", None), ("perDeviceNodeSelection", "DRAPartitionableDevices")):
        value = spec.get(fld)
        if value is None:
            continue
        if needs and not gate(sink, ctx, f"spec.{fld}", needs):
            continue
        if value is True:
            chosen.append(f"`{fld}`")
        else:
            sink.invalid(f"spec.{fld}", value, "must be either unset or set to true")
    if not chosen:
        sink.required("spec", _NODE_SEL_MSG)
    elif len(chosen) > 1:
        sink.invalid("spec", "{" + ", ".join(chosen) + "}", _NODE_SEL_MSG + ", but multiple fields are set")


def _counters(sink: Sink, path: str, counters: Any, limit: int) -> int:
    if not counters:
        sink.required(path)
        return 0
    counters = as_dict(counters)
    if len(counters) > limit:
        sink.too_many(path, len(counters), limit)
        return len(counters)
    for name, counter in counters.items():
        sink.names(f"{path}", name, names.dns_label(str(name)))
        value = as_dict(counter).get("value")
        if value is not None:  # none: the API server stores "0"
            quantity(sink, f"{path}[{name}].value", value)
    return len(counters)


def _q(value: Any) -> Quantity | None:
    try:
        return parse_quantity(value)
    except QuantityError:
        return None


def _request_policy(sink: Sink, ctx: Context, path: str, capacity: Quantity, policy: dict[str, Any]) -> None:
    values, rng, default = policy.get("validValues"), policy.get("validRange"), policy.get("default")
    dflt = _q(default) if default is not None else None
    if default is not None:
        quantity(sink, f"{path}.default", default)
    if values and rng is not None:  # an empty validValues counts as not set (Go: len() > 0)
        sink.forbidden(path, 'exactly one policy can be specified, cannot specify "validValues" and '
                             '"validRange" at the same time')
        return
    if isinstance(values, list) and values:
        vpath = f"{path}.validValues"
        if default is None:
            sink.required(f"{path}.default", "required when validValues is defined")
        parsed = []
        for i, v in enumerate(values):
            quantity(sink, f"{vpath}[{i}]", v)
            parsed.append(_q(v))
        if len(values) > MAX_VALID_VALUES:
            sink.too_many(vpath, len(values), MAX_VALID_VALUES)
            return
        seen: set[Fraction] = set()
        for i, q in enumerate(parsed):
            if q is None:
                continue
            prev = parsed[i - 1] if i else None
            if prev is not None and prev.value > q.value:
                sink.invalid(f"{vpath}[{i}]", q.canonical(), "values must be sorted in ascending order")
            if q.value > capacity.value:
                sink.invalid(f"{vpath}[{i}]", q.canonical(),
                             f"option is larger than capacity value: {capacity.canonical()}")
            key = q.value if ctx.on("DRAFractionalCapacityRange") else Fraction(math.ceil(q.value))
            if key in seen:
                sink.duplicate(f"{vpath}[{i}]", q.canonical())
            seen.add(key)
        if dflt is not None and all(q is None or q.value != dflt.value for q in parsed):
            sink.invalid(vpath, dflt.canonical(), "default value is not valid according to the requestPolicy")
    elif isinstance(rng, dict):
        _request_range(sink, ctx, f"{path}.validRange", capacity, rng, default, dflt, path)


def _request_range(sink: Sink, ctx: Context, rpath: str, capacity: Quantity, rng: dict[str, Any],
                   default: Any, dflt: Quantity | None, ppath: str) -> None:
    if default is None:
        sink.required(f"{ppath}.default", "required when validRange is defined")
    if rng.get("min") is None:
        sink.required(f"{rpath}.min", "required when validRange is defined")
        return
    for fld in ("min", "max", "step"):
        if rng.get(fld) is not None:
            quantity(sink, f"{rpath}.{fld}", rng[fld])
    lo, hi, step = _q(rng["min"]), _q(rng.get("max")) if rng.get("max") is not None else None, \
        _q(rng.get("step")) if rng.get("step") is not None else None
    if lo is None or dflt is None:
        return
    cap = capacity.canonical()
    if lo.value > capacity.value:
        sink.invalid(f"{rpath}.min", lo.canonical(), f"min is larger than capacity value: {cap}")
    if dflt.value < lo.value:
        sink.invalid(f"{rpath}.default", dflt.canonical(), f"default is less than min: {lo.canonical()}")
    if hi is not None:
        if lo.value > hi.value:
            sink.invalid(f"{rpath}.max", lo.canonical(), f"min is larger than max: {hi.canonical()}")
        if hi.value > capacity.value:
            sink.invalid(f"{rpath}.max", hi.canonical(), f"max is larger than capacity value: {cap}")
        if dflt.value > hi.value:
            sink.invalid(f"{rpath}.default", dflt.canonical(), f"default is more than max: {hi.canonical()}")
    if step is None:
        return
    if step.value <= 0:
        sink.invalid(f"{rpath}.step", step.canonical(), "must be greater than zero")
        return
    if lo.value + step.value > capacity.value:
        sink.invalid(f"{rpath}.step", step.canonical(),
                     f"one step {(lo + step).canonical()} is larger than capacity value: {cap}")
    involved = [q for q in (dflt, lo, hi, step) if q is not None]
    fractional = any(q.value.denominator != 1 for q in involved)
    if ctx.on("DRAFractionalCapacityRange") and fractional:
        if any((q.value * 1000).denominator != 1 for q in involved):
            sink.invalid(f"{rpath}.step", step.canonical(), "value cannot be represented as a milli value")
            return

        def scaled(q: Quantity) -> int:
            return int(q.value * 1000)
    else:
        def scaled(q: Quantity) -> int:
            return math.ceil(q.value)  # Quantity.Value() rounds up
    if scaled(step) == 0:
        return
    for value in (dflt, hi):
        if value is not None and (scaled(value) - scaled(lo)) % scaled(step) != 0:
            sink.invalid(f"{rpath}.step", value.canonical(),
                         f"value is not a multiple of a given step ({step.canonical()}) from ({lo.canonical()})")


def _attribute(sink: Sink, ctx: Context, path: str, attr: Any) -> int:
    """Check one DeviceAttribute; return how many values it counts for."""
    attr = as_dict(attr)
    present = [k for k in _SCALARS + _LISTS if attr.get(k) is not None]
    # with DRAListTypeAttributes off the API server drops the list fields before it counts values
    for key in [k for k in present if k in _LISTS]:
        if not gate(sink, ctx, f"{path}.{key}", "DRAListTypeAttributes"):
            present.remove(key)
    if len(present) != 1:
        sink.invalid(path, attr if present else "", "exactly one value must be specified"
                     + ("" if present else " (int, bool, string or version)"))
    count = 0
    for key in present:
        value = attr[key]
        if key in _LISTS:
            items = as_list(value)
            if not items:
                sink.invalid(f"{path}.{key}", value, "must not be empty if specified")
            count += len(items)
            for i, item in enumerate(items):
                if isinstance(item, str):
                    _string_value(sink, ctx, f"{path}.{key}[{i}]", key[:-1], item)
        else:
            count += 1
            if isinstance(value, str):
                _string_value(sink, ctx, f"{path}.{key}", key, value)
    return max(count, 1)


def _string_value(sink: Sink, ctx: Context, path: str, kind: str, value: str) -> None:
    if kind == "version":
        sink.names(path, value, names.semver(value, max_18_digits=ctx.at_least("1.38")))
    elif kind == "string" and len(value.encode()) > names.ATTRIBUTE_VALUE_MAX:
        sink.too_long(path, names.ATTRIBUTE_VALUE_MAX)


def _binding(sink: Sink, path: str, device: dict[str, Any]) -> None:
    conds, fails = as_list(device.get("bindingConditions")), as_list(device.get("bindingFailureConditions"))
    for fld, items in (("bindingConditions", conds), ("bindingFailureConditions", fails)):
        if len(items) > MAX_BINDING:
            sink.too_many(f"{path}.{fld}", len(items), MAX_BINDING)
            continue
        seen: set[str] = set()
        for i, item in enumerate(items):
            if isinstance(item, str):
                sink.names(f"{path}.{fld}[{i}]", item, names.label_key(item))
                if item in seen:
                    sink.duplicate(f"{path}.{fld}[{i}]", item)
                seen.add(item)
    for i, item in enumerate(fails):
        if item in conds:
            sink.invalid(f"{path}.bindingFailureConditions[{i}]", item,
                         "bindingFailureConditions must not overlap with bindingConditions")
    if fails and not conds:
        sink.invalid(f"{path}.bindingConditions", conds, "bindingConditions are required to use bindingFailureConditions")
    if conds and not fails:
        sink.invalid(f"{path}.bindingFailureConditions", fails, "bindingFailureConditions are required to use bindingConditions")


def _device(sink: Sink, ctx: Context, path: str, device: Any, per_device: bool) -> None:
    device = as_dict(device)
    name = device.get("name")
    if not name:
        sink.required(f"{path}.name")
    elif isinstance(name, str):
        sink.names(f"{path}.name", name, names.dns_label(name))
    attrs, caps = as_dict(device.get("attributes")), as_dict(device.get("capacity"))
    if len(attrs) + len(caps) > MAX_ATTRS_AND_CAPS:
        sink.invalid(path, len(attrs) + len(caps),
                     f"the total number of attributes and capacities must not exceed {MAX_ATTRS_AND_CAPS}")
    values = 0
    for key, attr in attrs.items():
        sink.names(f"{path}.attributes", key, names.qualified_name(str(key), one_slash=ctx.at_least("1.38")))
        values += _attribute(sink, ctx, f"{path}.attributes[{key}]", attr)
    if values > MAX_ATTR_VALUES:
        sink.invalid(path, values, f"the total number of attribute values must not exceed {MAX_ATTR_VALUES}")
    multi = device.get("allowMultipleAllocations")
    if multi is not None:
        gate(sink, ctx, f"{path}.allowMultipleAllocations", "DRAConsumableCapacity")
    for key, cap in caps.items():
        cpath = f"{path}.capacity[{key}]"
        sink.names(f"{path}.capacity", key, names.qualified_name(str(key), one_slash=ctx.at_least("1.38")))
        cap = as_dict(cap)
        if cap.get("value") is not None:  # none: the API server stores "0"
            quantity(sink, f"{cpath}.value", cap.get("value"))
        policy = cap.get("requestPolicy")
        if policy is None:
            continue
        if multi is not True:
            sink.forbidden(f"{cpath}.requestPolicy", "allowMultipleAllocations must be true")
        elif gate(sink, ctx, f"{cpath}.requestPolicy", "DRAConsumableCapacity"):
            value = _q(cap["value"] if cap.get("value") is not None else "0")
            if value is not None:
                _request_policy(sink, ctx, f"{cpath}.requestPolicy", value, as_dict(policy))
    taints = device.get("taints")
    if taints is not None and gate(sink, ctx, f"{path}.taints", "DRADeviceTaints"):
        taints = as_list(taints)
        if len(taints) > max_taints(ctx):
            sink.too_many(f"{path}.taints", len(taints), max_taints(ctx))
        else:
            for i, taint in enumerate(taints):
                check_taint(sink, f"{path}.taints[{i}]", taint)
    consumes = device.get("consumesCounters")
    if consumes is not None and gate(sink, ctx, f"{path}.consumesCounters", "DRAPartitionableDevices"):
        consumes = as_list(consumes)
        if len(consumes) > MAX_CONSUMES:
            sink.too_many(f"{path}.consumesCounters", len(consumes), MAX_CONSUMES)
        seen: set[str] = set()
        for i, item in enumerate(consumes[:MAX_CONSUMES]):
            ipath = f"{path}.consumesCounters[{i}]"
            item = as_dict(item)
            cset = item.get("counterSet")
            if not cset:
                sink.required(f"{ipath}.counterSet")
            elif isinstance(cset, str):
                sink.names(f"{ipath}.counterSet", cset, names.dns_label(cset))
                if cset in seen:
                    sink.duplicate(f"{ipath}.counterSet", cset)
                seen.add(cset)
            _counters(sink, f"{ipath}.counters", item.get("counters"), MAX_COUNTERS_PER_SET)
            if item.get("compatibilityGroups") is not None:
                gate(sink, ctx, f"{ipath}.compatibilityGroups", "DRADeviceCompatibilityGroups")
    _device_nodes(sink, path, device, per_device, at_138=ctx.at_least("1.38"))
    binding = [f for f in ("bindsToNode", "bindingConditions", "bindingFailureConditions") if device.get(f) is not None]
    if binding:
        ok = gate(sink, ctx, f"{path}.{binding[0]}", "DRADeviceBindingConditions")
        ok = ok and gate(sink, ctx, f"{path}.{binding[0]}", "DRAResourceClaimDeviceStatus")
        if ok:
            _binding(sink, path, device)
    if device.get("nodeAllocatableResources") is not None:
        gate(sink, ctx, f"{path}.nodeAllocatableResources", "DRANodeAllocatableResources")


def _device_nodes(sink: Sink, path: str, device: dict[str, Any], per_device: bool, *, at_138: bool) -> None:
    fields = [f for f in ("nodeName", "nodeSelector", "allNodes") if device.get(f) is not None]
    if not per_device:
        if fields:
            sink.invalid(path, None, "`nodeName`, `nodeSelector` and `allNodes` can only be set if "
                         "`perDeviceNodeSelection` is set to true in the ResourceSlice spec")
        return
    chosen = []
    if device.get("nodeName") is not None:
        if device["nodeName"]:
            chosen.append("`nodeName`")
            if isinstance(device["nodeName"], str):
                sink.names(f"{path}.nodeName", device["nodeName"], names.dns_subdomain(device["nodeName"]))
        else:
            sink.invalid(f"{path}.nodeName", device["nodeName"], "must not be empty")
    if device.get("nodeSelector") is not None:
        chosen.append("`nodeSelector`")
        if at_138:  # kubernetes#141213: the allocator can only merge single-term selectors
            _node_selector(sink, f"{path}.nodeSelector", device["nodeSelector"])
    if device.get("allNodes") is not None:
        if device["allNodes"] is True:
            chosen.append("`allNodes`")
        else:
            sink.invalid(f"{path}.allNodes", device["allNodes"], "must be either unset or set to true")
    if not chosen:
        sink.required(path, _DEV_SEL_MSG)
    elif len(chosen) > 1:
        sink.invalid(path, "{" + ", ".join(chosen) + "}", _DEV_SEL_MSG)


def _has(devices: list[Any], pred: Callable[[dict[str, Any]], object]) -> bool:
    return any(pred(as_dict(d)) for d in devices)


def check_slice_spec(sink: Sink, ctx: Context, spec: Any) -> None:
    spec = as_dict(spec)
    driver = spec.get("driver")
    if isinstance(driver, str) or driver is None:
        sink.names("spec.driver", driver or "", names.driver_name(driver or ""))
    pool = spec.get("pool")
    if pool is None:
        sink.required("spec.pool", "pool: {name, generation, resourceSliceCount}")
    else:
        pool = as_dict(pool)
        pname = pool.get("name")
        if isinstance(pname, str) or pname is None:
            sink.names("spec.pool.name", pname or "", names.pool_name(pname or ""))
        count = pool.get("resourceSliceCount")
        if isinstance(count, int) and count <= 0 or count is None:
            sink.invalid("spec.pool.resourceSliceCount", count or 0, "must be greater than zero")
        gen = pool.get("generation")
        if isinstance(gen, int) and gen < 0:
            sink.invalid("spec.pool.generation", gen, "must be greater than or equal to zero")
    _node_selection(sink, ctx, spec)
    devices_raw, counters_raw = spec.get("devices"), spec.get("sharedCounters")
    devices = as_list(devices_raw)
    if counters_raw is not None and devices_raw is not None and ctx.minor() >= 35:
        sink.invalid("spec", "", "only one of `sharedCounters` or `devices` is allowed")
    advanced = _has(devices, lambda d: d.get("taints")) or _has(devices, lambda d: d.get("consumesCounters")) \
        or _has(devices, lambda d: any(isinstance(a, dict) and any(a.get(k) is not None for k in _LISTS)
                                       for a in as_dict(d.get("attributes")).values()))
    limit = MAX_DEVICES_ADVANCED if advanced else MAX_DEVICES
    if len(devices) > limit:
        sink.too_many("spec.devices", len(devices), limit)
    else:
        per_device = spec.get("perDeviceNodeSelection") is True
        seen: set[str] = set()
        for i, device in enumerate(devices):
            _device(sink, ctx, f"spec.devices[{i}]", device, per_device)
            name = as_dict(device).get("name")
            if isinstance(name, str) and name:
                if name in seen:
                    sink.duplicate(f"spec.devices[{i}].name", name)
                seen.add(name)
    if counters_raw is not None and gate(sink, ctx, "spec.sharedCounters", "DRAPartitionableDevices"):
        _shared_counters(sink, ctx, as_list(counters_raw))
    if spec.get("partitionTypeAttribute") is not None and \
            gate(sink, ctx, "spec.partitionTypeAttribute", "DRAPartitionableDevicesType"):
        attr = spec["partitionTypeAttribute"]
        if isinstance(attr, str):
            sink.names("spec.partitionTypeAttribute", attr,
                       names.fully_qualified_name(attr, one_slash=ctx.at_least("1.38")))
            if not _has(devices, lambda d: d.get("consumesCounters")):
                sink.invalid("spec.partitionTypeAttribute", attr,
                             "may only be set on a slice which declares devices that consume counters")
    if spec.get("skipNodeOperations") is not None and \
            gate(sink, ctx, "spec.skipNodeOperations", "DRAOptionalNodeOperations"):
        ops = as_list(spec["skipNodeOperations"])
        for i, op in enumerate(ops):
            if op not in _SKIP_OPS:
                sink.unsupported(f"spec.skipNodeOperations[{i}]", op, _SKIP_OPS)
        if "NodePrepareResources" in ops and "NodeUnprepareResources" not in ops and "*" not in ops:
            sink.invalid("spec.skipNodeOperations", ops,
                         "NodePrepareResources cannot be skipped unless NodeUnprepareResources is also skipped")


def _shared_counters(sink: Sink, ctx: Context, sets: list[Any]) -> None:
    if len(sets) > MAX_COUNTER_SETS:
        sink.too_many("spec.sharedCounters", len(sets), MAX_COUNTER_SETS)
        return
    seen: set[str] = set()
    total = 0
    for i, cset in enumerate(sets):
        cset = as_dict(cset)
        path = f"spec.sharedCounters[{i}]"
        name = cset.get("name")
        if not name:
            sink.required(f"{path}.name")
        elif isinstance(name, str):
            sink.names(f"{path}.name", name, names.dns_label(name))
            if name in seen:
                sink.duplicate(f"{path}.name", name)
            seen.add(name)
        total += _counters(sink, f"{path}.counters", cset.get("counters"), MAX_COUNTERS_PER_SET)
    if ctx.version == "1.34" and total > MAX_COUNTERS_134:
        sink.too_many("spec.sharedCounters", total, MAX_COUNTERS_134)


def check_taint_rule_spec(sink: Sink, ctx: Context, spec: Any) -> None:
    spec = as_dict(spec)
    sel = spec.get("deviceSelector")
    if sel is not None:
        sel = as_dict(sel)
        for fld, rule in (("driver", names.driver_name), ("pool", names.pool_name), ("device", names.dns_label)):
            value = sel.get(fld)
            if isinstance(value, str):
                sink.names(f"spec.deviceSelector.{fld}", value, rule(value) if value else ["Required value"])
    if spec.get("taint") is None:
        sink.required("spec.taint", "taint: {key, value, effect}")
    else:
        check_taint(sink, "spec.taint", spec["taint"])
