"""Rules for DeviceClass, ResourceClaim(.spec/.status) and ResourceClaimTemplate (spec.spec)."""

from __future__ import annotations

import json
import re
from typing import Any

from labkit.api import names
from labkit.api.context import Context
from labkit.api.problem import Sink, as_dict, as_list
from labkit.api.quantity import QuantityError, parse_quantity

__all__ = ["check_capacity_map", "check_cel", "check_device_class_spec", "check_claim_spec", "check_claim_status",
           "check_opaque", "check_toleration", "quantity"]

MAX_REQUESTS = 32
MAX_SUBREQUESTS = 8
MAX_SELECTORS = 32
MAX_CONSTRAINTS = 32
MAX_CONFIG = 32
MAX_RESULTS = 32
MAX_ALLOCATION_CONFIG = 64
MAX_RESERVED_FOR = 256
MAX_DEVICE_CONDITIONS = 8
#: resource.MaxCapacityRequirements (1.38): capacity requests / consumed capacity per device
MAX_CAPACITY_REQUIREMENTS = 32
CEL_MAX_LENGTH = 10 * 1024
#: resource.CELSelectorExpressionMaxCost: the largest estimated cost of a new selector
CEL_MAX_COST = 1_000_000
OPAQUE_MAX_BYTES = 10 * 1024
EFFECTS = ["NoExecute", "NoSchedule", "None"]
_FLAT_V1BETA1 = ("deviceClassName", "selectors", "allocationMode", "count", "adminAccess", "tolerations")
_REF_MSG = ("must be the name of a request in the claim or the name of a request and a subrequest "
            "separated by '/'")


def quantity(sink: Sink, path: str, value: Any) -> None:
    """Report a value that does not parse as a Kubernetes quantity."""
    if value is None:
        sink.required(path)
        return
    if isinstance(value, bool):
        sink.invalid(path, value, "must be a quantity such as 40Gi, 500m or 1")
        return
    try:
        parse_quantity(value)
    except QuantityError as exc:
        sink.invalid(path, value, str(exc))


def gate(sink: Sink, ctx: Context, path: str, name: str) -> bool:
    """Report a field that needs feature gate ``name``; True if the gate is on."""
    msg = ctx.gate_message(name)
    if msg:
        sink.add(path, msg)
        return False
    return True


def check_cel(sink: Sink, ctx: Context, path: str, expression: Any, *, selector: bool = True) -> None:
    """Length limit, compile errors and the estimated-cost limit for selectors (``selector=False``:
    length only, e.g. the value expressions of derived attributes, which labkit.cel cannot compile)."""
    if not isinstance(expression, str) or expression == "":
        if expression is None or expression == "":
            sink.required(path)
        return
    if len(expression.encode()) > CEL_MAX_LENGTH:
        sink.too_long(path, CEL_MAX_LENGTH)
        return
    if ctx.cel_compile is None or not selector:
        return
    gates = {"consumable_capacity": ctx.on("DRAConsumableCapacity"),
             "list_type_attributes": ctx.on("DRAListTypeAttributes")}
    try:
        ctx.cel_compile(expression, **gates)
    except Exception as exc:  # noqa: BLE001 - only the CEL package's own errors count
        if not any(c.__name__ == "CelError" for c in type(exc).__mro__):
            return  # a bug in the compiler must not make a manifest invalid
        message = (str(getattr(exc, "message", "") or exc).strip().splitlines() or ["invalid"])[0]
        hint = str(getattr(exc, "hint", "") or "").strip()
        if "cost" in message and "exceed" in message:
            sink.forbidden(path, "too complex, exceeds cost limit")
        else:
            sink.invalid(path, expression, message + (f" (fix: {hint})" if hint else ""))
        return
    if ctx.cel_max_cost is None:
        return
    try:
        cost = ctx.cel_max_cost(expression, **gates)
    except Exception:  # noqa: BLE001 - a bug in the estimator must not make a manifest invalid
        return
    if isinstance(cost, int) and cost > CEL_MAX_COST:
        sink.forbidden(path, "too complex, exceeds cost limit")


def check_selectors(sink: Sink, ctx: Context, path: str, selectors: Any) -> None:
    selectors = as_list(selectors)
    if len(selectors) > MAX_SELECTORS:
        sink.too_many(path, len(selectors), MAX_SELECTORS)
        return
    for i, selector in enumerate(selectors):
        sel = as_dict(selector)
        if "cel" not in sel or sel.get("cel") is None:
            sink.required(f"{path}[{i}].cel", "a selector is `cel: {expression: ...}`")
            continue
        check_cel(sink, ctx, f"{path}[{i}].cel.expression", as_dict(sel["cel"]).get("expression"))


def check_toleration(sink: Sink, path: str, tol: Any) -> None:
    tol = as_dict(tol)
    key, op, value, effect = tol.get("key", ""), tol.get("operator") or "Equal", tol.get("value", ""), tol.get("effect", "")
    if isinstance(key, str) and key:
        sink.names(f"{path}.key", key, names.label_key(key))
    if op == "Exists":
        if value:
            sink.invalid(f"{path}.value", value, "must be empty for operator `Exists`")
    elif op == "Equal":
        if isinstance(value, str):
            sink.names(f"{path}.value", value, names.label_value(value))
    else:
        sink.unsupported(f"{path}.operator", op, ["Equal", "Exists"])
    if effect and effect not in EFFECTS:
        sink.unsupported(f"{path}.effect", effect, EFFECTS)


def _check_mode_count(sink: Sink, path: str, req: dict[str, Any]) -> None:
    mode = req.get("allocationMode") or "ExactCount"
    count = req.get("count")
    if not isinstance(count, int) or isinstance(count, bool):
        count = 0 if count is None else None
    if mode == "All":
        if count:
            sink.invalid(f"{path}.count", count, "must not be specified when allocationMode is 'All'")
    elif mode == "ExactCount":
        if count is not None and count < 0:  # 0 and unset are defaulted to 1
            sink.invalid(f"{path}.count", count, "must be greater than zero")
    else:
        sink.unsupported(f"{path}.allocationMode", mode, ["All", "ExactCount"])


def _check_request_body(sink: Sink, ctx: Context, path: str, req: dict[str, Any], *, exact: bool,
                        ref: str = "", constrained: dict[str, set[str]] | None = None) -> None:
    """Fields shared by ExactDeviceRequest and DeviceSubRequest."""
    cls = req.get("deviceClassName")
    if not cls:
        sink.required(f"{path}.deviceClassName", "name the DeviceClass to allocate from")
    elif isinstance(cls, str):
        sink.names(f"{path}.deviceClassName", cls, names.dns_subdomain(cls))
    check_selectors(sink, ctx, f"{path}.selectors", req.get("selectors"))
    _check_mode_count(sink, path, req)
    tolerations = req.get("tolerations")
    if tolerations is not None and gate(sink, ctx, f"{path}.tolerations", "DRADeviceTaints"):
        # no count limit: the API types document 16 (DeviceTolerationsMaxLength), but no API
        # server 1.34-1.37 checks it (a claim with 17 is stored as sent)
        for i, tol in enumerate(as_list(tolerations)):
            check_toleration(sink, f"{path}.tolerations[{i}]", tol)
    capacity = req.get("capacity")
    if capacity is not None and gate(sink, ctx, f"{path}.capacity", "DRAConsumableCapacity"):
        check_capacity_map(sink, ctx, f"{path}.capacity.requests", as_dict(capacity).get("requests"))
    if req.get("derivedAttributes") is not None and \
            gate(sink, ctx, f"{path}.derivedAttributes", "DRADerivedAttributes"):
        _check_derived(sink, ctx, f"{path}.derivedAttributes", req["derivedAttributes"], ref, constrained or {})
    if exact and req.get("adminAccess") is not None:
        gate(sink, ctx, f"{path}.adminAccess", "DRAAdminAccess")


def check_capacity_map(sink: Sink, ctx: Context, path: str, capacities: Any) -> None:
    """A request's ``capacity.requests`` or a result's ``consumedCapacity``: quantities by capacity name.

    Up to 1.37 only the quantities are checked (a 1.37.1 kube-apiserver stores ``gpu-memory`` as a
    key). 1.38 adds, in ``kubernetes@v1.38.0-beta.0:pkg/apis/resource/validation/validation.go``
    (validateCapacityNames) and the declarative markers of ``k8s.io/api resource/v1/types.go``
    (``maxProperties=32``, each value ``minimum=0``): at most 32 entries, qualified names, no
    negative quantity."""
    entries = as_dict(capacities)
    v138 = ctx.at_least("1.38")
    if v138 and len(entries) > MAX_CAPACITY_REQUIREMENTS:
        sink.too_many(path, len(entries), MAX_CAPACITY_REQUIREMENTS)
    for key, value in entries.items():
        kpath = f"{path}[{key}]"
        if v138:
            sink.names(path, key, names.qualified_name(str(key), one_slash=True))
        quantity(sink, kpath, value)
        if v138 and value is not None and not isinstance(value, bool):
            try:
                negative = parse_quantity(value).sign() < 0
            except QuantityError:
                continue
            if negative:
                sink.invalid(kpath, value, "must be greater than or equal to 0")


def _request_names(requests: list[Any]) -> dict[str, set[str] | None]:
    out: dict[str, set[str] | None] = {}
    for req in requests:
        req = as_dict(req)
        name = req.get("name")
        if not isinstance(name, str):
            continue
        subs = as_list(req.get("firstAvailable"))
        out[name] = {s["name"] for s in subs if isinstance(s, dict) and isinstance(s.get("name"), str)} \
            if subs else None
    return out


def _check_refs(sink: Sink, path: str, refs: Any, known: dict[str, set[str] | None],
                *, single: bool = False) -> None:
    refs = as_list(refs)
    if len(refs) > MAX_REQUESTS:
        sink.too_many(path, len(refs), MAX_REQUESTS)
        return
    seen: set[str] = set()
    for i, ref in enumerate(refs):
        rpath = path if single else f"{path}[{i}]"
        if not isinstance(ref, str):
            continue
        parts = ref.split("/")
        if len(parts) > 2:
            sink.invalid(rpath, ref, _REF_MSG)
            continue
        for part in parts:
            sink.names(rpath, part, names.dns_label(part))
        req, sub = parts[0], (parts[1] if len(parts) == 2 else None)
        ok = req in known and (sub is None or sub in (known[req] or set()))
        if not ok:
            hint = ""
            if known:
                choices = ", ".join(sorted(known))
                hint = f" (requests: {choices})"
            sink.invalid(rpath, ref, _REF_MSG + hint)
        if ref in seen:
            sink.duplicate(rpath, ref)
        seen.add(ref)


def check_opaque(sink: Sink, path: str, config: Any) -> None:
    """DeviceConfiguration: ``opaque: {driver, parameters}``."""
    config = as_dict(config)
    if config.get("opaque") is None:
        sink.required(f"{path}.opaque", "the only configuration type is `opaque: {driver, parameters}`")
        return
    opaque = as_dict(config["opaque"])
    driver = opaque.get("driver")
    if isinstance(driver, str) or driver is None:
        sink.names(f"{path}.opaque.driver", driver or "", names.driver_name(driver or ""))
    params = opaque.get("parameters")
    ppath = f"{path}.opaque.parameters"
    if params is None:
        sink.required(ppath, "a JSON object for the driver (e.g. apiVersion/kind of its config type)")
    elif not isinstance(params, dict):
        sink.invalid(ppath, "<value omitted>", "must be a valid JSON object")
    elif len(json.dumps(params, separators=(",", ":"))) > OPAQUE_MAX_BYTES:
        sink.too_long(ppath, OPAQUE_MAX_BYTES)


def _check_derived(sink: Sink, ctx: Context, path: str, attrs: Any, ref: str,
                   constrained: dict[str, set[str]]) -> None:
    """Derived attributes exist only for constraints: each must be used by one on this request."""
    parent = ref.split("/", 1)[0]
    usable = constrained.get("", set()) | constrained.get(ref, set()) | constrained.get(parent, set())
    seen: set[str] = set()
    for i, attr in enumerate(as_list(attrs)):
        attr = as_dict(attr)
        name = attr.get("name")
        if isinstance(name, str) and name:
            if name in seen:
                sink.duplicate(f"{path}[{i}].name", name)
            seen.add(name)
            if name not in usable:
                sink.invalid(f"{path}[{i}].name", name, "must be referenced by at least one matchAttribute "
                             "or distinctAttribute constraint targeting this request")
        elif not name:
            sink.required(f"{path}[{i}].name")
        check_cel(sink, ctx, f"{path}[{i}].expression", attr.get("expression"), selector=False)


def _constraint_attrs(constraints: list[Any]) -> dict[str, set[str]]:
    """Request reference ("" = all requests) -> attribute names its constraints use."""
    out: dict[str, set[str]] = {}
    for con in constraints:
        con = as_dict(con)
        attr = con.get("matchAttribute") or con.get("distinctAttribute")
        if not isinstance(attr, str):
            continue
        refs = [r for r in as_list(con.get("requests")) if isinstance(r, str)] or [""]
        for ref in refs:
            out.setdefault(ref, set()).add(attr)
    return out


def _check_request(sink: Sink, ctx: Context, path: str, req: Any,
                   constrained: dict[str, set[str]] | None = None) -> None:
    req = as_dict(req)
    name = req.get("name")
    if not name:
        sink.required(f"{path}.name")
    elif isinstance(name, str):
        sink.names(f"{path}.name", name, names.dns_label(name))
    subs = req.get("firstAvailable")
    has_first = isinstance(subs, list) and len(subs) > 0
    has_exact = req.get("exactly") is not None
    if has_first and has_exact:
        sink.invalid(path, None, "exactly one of `exactly` or `firstAvailable` is required, but multiple fields are set")
        return
    if not has_first and not has_exact:
        if any(k in req for k in _FLAT_V1BETA1):
            return  # reported by the legacy check with the fix
        sink.required(path, "exactly one of `exactly` or `firstAvailable` is required")
        return
    if has_exact:
        _check_request_body(sink, ctx, f"{path}.exactly", as_dict(req["exactly"]), exact=True,
                            ref=str(name), constrained=constrained)
        return
    fpath = f"{path}.firstAvailable"
    if not gate(sink, ctx, fpath, "DRAPrioritizedList"):
        return
    if len(subs) > MAX_SUBREQUESTS:
        sink.too_many(fpath, len(subs), MAX_SUBREQUESTS)
        return
    seen: set[str] = set()
    for i, sub in enumerate(subs):
        sub = as_dict(sub)
        spath = f"{fpath}[{i}]"
        sname = sub.get("name")
        if not sname:
            sink.required(f"{spath}.name")
        elif isinstance(sname, str):
            sink.names(f"{spath}.name", sname, names.dns_label(sname))
            if sname in seen:
                sink.duplicate(f"{spath}.name", sname)
            seen.add(sname)
        _check_request_body(sink, ctx, spath, sub, exact=False, ref=f"{name}/{sname}", constrained=constrained)


def _check_constraint(sink: Sink, ctx: Context, path: str, con: Any,
                      known: dict[str, set[str] | None]) -> None:
    con = as_dict(con)
    _check_refs(sink, f"{path}.requests", con.get("requests"), known)
    match, distinct = con.get("matchAttribute"), con.get("distinctAttribute")
    # 1.37's declarative validation of both (beta, on by default) also wants the domain lowercase,
    # where the older rule lowercased it first ("GPU.example.com/x": refused from 1.37 on)
    lower = ctx.minor() >= 37
    one_slash = ctx.at_least("1.38")  # "a/b/c" refused from 1.38 on (kubernetes#141644)
    if match is not None:
        # Both set is stored by every API server 1.34-1.37 (its rule checks matchAttribute and
        # ignores distinctAttribute, and kube-scheduler then applies matchAttribute only); from 1.37
        # the declarative check of distinctAttribute's format runs anyway.
        if isinstance(match, str):
            sink.names(f"{path}.matchAttribute", match, names.fully_qualified_name(match, lowercase_domain=lower, one_slash=one_slash))
        if distinct is not None and lower and isinstance(distinct, str) and ctx.on("DRAConsumableCapacity"):
            sink.names(f"{path}.distinctAttribute", distinct,
                       names.fully_qualified_name(distinct, lowercase_domain=True, one_slash=one_slash))
    elif distinct is not None:
        if gate(sink, ctx, f"{path}.distinctAttribute", "DRAConsumableCapacity") and isinstance(distinct, str):
            sink.names(f"{path}.distinctAttribute", distinct,
                       names.fully_qualified_name(distinct, lowercase_domain=lower, one_slash=one_slash))
    elif ctx.on("DRAConsumableCapacity"):
        sink.required(path, "exactly one of `matchAttribute` or `distinctAttribute` is required")
    else:
        sink.required(f"{path}.matchAttribute")


def check_claim_spec(sink: Sink, ctx: Context, path: str, spec: Any, namespace: str | None) -> None:
    """``ResourceClaimSpec`` at ``path`` (``spec`` or ``spec.spec``)."""
    spec = as_dict(spec)
    devices = as_dict(spec.get("devices"))
    dpath = f"{path}.devices"
    requests = as_list(devices.get("requests"))
    if len(requests) > MAX_REQUESTS:
        sink.too_many(f"{dpath}.requests", len(requests), MAX_REQUESTS)
    else:
        seen: set[str] = set()
        constrained = _constraint_attrs(as_list(devices.get("constraints")))
        for i, req in enumerate(requests):
            _check_request(sink, ctx, f"{dpath}.requests[{i}]", req, constrained)
            name = as_dict(req).get("name")
            if isinstance(name, str) and name:
                if name in seen:
                    sink.duplicate(f"{dpath}.requests[{i}].name", name)
                seen.add(name)
    known = _request_names(requests)
    constraints = as_list(devices.get("constraints"))
    if len(constraints) > MAX_CONSTRAINTS:
        sink.too_many(f"{dpath}.constraints", len(constraints), MAX_CONSTRAINTS)
    else:
        for i, con in enumerate(constraints):
            _check_constraint(sink, ctx, f"{dpath}.constraints[{i}]", con, known)
    configs = as_list(devices.get("config"))
    if len(configs) > MAX_CONFIG:
        sink.too_many(f"{dpath}.config", len(configs), MAX_CONFIG)
    else:
        for i, cfg in enumerate(configs):
            _check_refs(sink, f"{dpath}.config[{i}].requests", as_dict(cfg).get("requests"), known)
            check_opaque(sink, f"{dpath}.config[{i}]", cfg)
    _check_admin_access(sink, ctx, dpath, requests, namespace)


def _check_admin_access(sink: Sink, ctx: Context, dpath: str, requests: list[Any], namespace: str | None) -> None:
    """Admin access needs a labelled namespace; checkable only when the Namespace is in the input."""
    if not isinstance(namespace, str) or namespace not in ctx.namespaces:
        return
    labels = ctx.namespaces[namespace]
    if str(labels.get("resource.kubernetes.io/admin-access", "")).lower() == "true":
        return
    for i, req in enumerate(requests):
        if as_dict(as_dict(req).get("exactly")).get("adminAccess") is True:
            sink.forbidden(f"{dpath}.requests[{i}].exactly.adminAccess",
                           "admin access to devices requires the `resource.kubernetes.io/admin-access: "
                           f"true` label on the containing namespace (namespace {namespace!r})")


def check_claim_status(sink: Sink, ctx: Context, status: Any, spec: Any) -> None:
    status = as_dict(status)
    known = _request_names(as_list(as_dict(as_dict(spec).get("devices")).get("requests")))
    allocation = status.get("allocation")
    if allocation is not None:
        devices = as_dict(as_dict(allocation).get("devices"))
        results = as_list(devices.get("results"))
        rpath = "status.allocation.devices.results"
        if len(results) > MAX_RESULTS:
            sink.too_many(rpath, len(results), MAX_RESULTS)
        else:
            for i, res in enumerate(results):
                res = as_dict(res)
                p = f"{rpath}[{i}]"
                if isinstance(res.get("request"), str):
                    _check_refs(sink, f"{p}.request", [res["request"]], known, single=True)
                else:
                    sink.required(f"{p}.request")
                sink.names(f"{p}.driver", str(res.get("driver") or ""), names.driver_name(str(res.get("driver") or "")))
                sink.names(f"{p}.pool", str(res.get("pool") or ""), names.pool_name(str(res.get("pool") or "")))
                dev = str(res.get("device") or "")
                sink.names(f"{p}.device", dev, names.dns_label(dev) if dev else ["Required value"])
                for j, tol in enumerate(as_list(res.get("tolerations"))):
                    check_toleration(sink, f"{p}.tolerations[{j}]", tol)
                _check_result_extras(sink, ctx, p, res)
        configs = as_list(devices.get("config"))
        if len(configs) > MAX_ALLOCATION_CONFIG:
            sink.too_many("status.allocation.devices.config", len(configs), MAX_ALLOCATION_CONFIG)
        for i, cfg in enumerate(configs):
            source = as_dict(cfg).get("source")
            if source not in ("FromClass", "FromClaim"):
                p = f"status.allocation.devices.config[{i}].source"
                if source:
                    sink.unsupported(p, source, ["FromClaim", "FromClass"])
                else:
                    sink.required(p)
    reserved = as_list(status.get("reservedFor"))
    if len(reserved) > MAX_RESERVED_FOR:
        sink.too_many("status.reservedFor", len(reserved), MAX_RESERVED_FOR)
    elif reserved and allocation is None:
        sink.forbidden("status.reservedFor", "may not be specified when `allocated` is not set")
    for i, ref in enumerate(reserved):
        for fld in ("resource", "name", "uid"):
            if not as_dict(ref).get(fld):
                sink.required(f"status.reservedFor[{i}].{fld}")
    if status.get("devices") is not None and gate(sink, ctx, "status.devices", "DRAResourceClaimDeviceStatus"):
        allocated: set[tuple[str | None, ...]] = {
            (r.get("driver"), r.get("pool"), r.get("device"), r.get("shareID"))
            for r in (as_dict(x) for x in as_list(as_dict(as_dict(allocation).get("devices")).get("results")))
            if all(isinstance(r.get(k), str | None) for k in ("driver", "pool", "device", "shareID"))}
        for i, dev in enumerate(as_list(status["devices"])):
            _check_device_status(sink, f"status.devices[{i}]", as_dict(dev), allocated)


_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_RESULT_GATES = (("shareID", "DRAConsumableCapacity"), ("consumedCapacity", "DRAConsumableCapacity"),
                 ("bindingConditions", "DRADeviceBindingConditions"),
                 ("bindingFailureConditions", "DRADeviceBindingConditions"),
                 ("skipNodeOperations", "DRAOptionalNodeOperations"))


def _check_result_extras(sink: Sink, ctx: Context, path: str, res: dict[str, Any]) -> None:
    """Allocation result fields that belong to newer features."""
    for fld, needs in _RESULT_GATES:
        if res.get(fld) is not None and not gate(sink, ctx, f"{path}.{fld}", needs):
            return
    share = res.get("shareID")
    if isinstance(share, str) and not _UUID.fullmatch(share):
        sink.invalid(f"{path}.shareID", share, "must be a lowercase RFC 4122 UUID "
                     "(xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx)")
    check_capacity_map(sink, ctx, f"{path}.consumedCapacity", res.get("consumedCapacity"))


def _check_device_status(sink: Sink, path: str, dev: dict[str, Any],
                         allocated: set[tuple[str | None, ...]]) -> None:
    key = tuple(dev.get(k) for k in ("driver", "pool", "device", "shareID"))
    if all(isinstance(k, str | None) for k in key) and key not in allocated:
        sink.invalid(path, "/".join(str(k) for k in key[:3] if k), "must be an allocated device in the claim")
    conditions = as_list(dev.get("conditions"))
    if len(conditions) > MAX_DEVICE_CONDITIONS:
        sink.too_many(f"{path}.conditions", len(conditions), MAX_DEVICE_CONDITIONS)
    data = dev.get("data")
    if data is not None:
        if not isinstance(data, dict):
            sink.invalid(f"{path}.data", "<value omitted>", "must be a valid JSON object")
        elif len(json.dumps(data, separators=(",", ":"))) > OPAQUE_MAX_BYTES:
            sink.too_long(f"{path}.data", OPAQUE_MAX_BYTES)
    net = as_dict(dev.get("networkData"))
    if isinstance(net.get("interfaceName"), str) and len(net["interfaceName"].encode()) > 256:
        sink.too_long(f"{path}.networkData.interfaceName", 256)
    if isinstance(net.get("hardwareAddress"), str) and len(net["hardwareAddress"].encode()) > 128:
        sink.too_long(f"{path}.networkData.hardwareAddress", 128)
    ips = as_list(net.get("ips"))
    if len(ips) > 16:
        sink.too_many(f"{path}.networkData.ips", len(ips), 16)


def _is_extended_resource_name(name: str) -> bool:
    if "/" not in name or "kubernetes.io/" in name or name.startswith("requests."):
        return False
    return not names.label_key("requests." + name)


def check_device_class_spec(sink: Sink, ctx: Context, spec: Any) -> None:
    spec = as_dict(spec)
    check_selectors(sink, ctx, "spec.selectors", spec.get("selectors"))
    configs = as_list(spec.get("config"))
    if len(configs) > MAX_CONFIG:
        sink.too_many("spec.config", len(configs), MAX_CONFIG)
    else:
        for i, cfg in enumerate(configs):
            check_opaque(sink, f"spec.config[{i}]", cfg)
    ext = spec.get("extendedResourceName")
    if ext is not None and gate(sink, ctx, "spec.extendedResourceName", "DRAExtendedResource") \
            and isinstance(ext, str) and not _is_extended_resource_name(ext):
        sink.invalid("spec.extendedResourceName", ext,
                     "must be a valid extended resource name: 'domain/name' outside kubernetes.io "
                     "(e.g. 'example.com/gpu')")
