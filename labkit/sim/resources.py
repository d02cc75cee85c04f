"""Pod resource requests against node allocatable (cpu, memory, pods, extended resources)."""

from __future__ import annotations

from fractions import Fraction

from labkit.api.quantity import parse_quantity

Requests = dict[str, Fraction | int]


#: quantity text -> _q's value (a trace repeats a few request sizes; the values are immutable)
_PARSED: dict[str, Fraction | int] = {}
_PARSED_MAX = 1 << 14


def _q(value: object) -> Fraction | int:
    """The exact value; an int when whole (int arithmetic is many times faster than Fraction's,
    and a filter adds and compares these for every node it looks at)."""
    text = str(value)
    try:
        return _PARSED[text]
    except KeyError:
        pass
    v = Fraction(parse_quantity(text).value)
    out = v.numerator if v.denominator == 1 else v
    if len(_PARSED) >= _PARSED_MAX:
        _PARSED.clear()
    _PARSED[text] = out
    return out


def container_requests(container: dict) -> Requests:
    """A container's requests; limits stand in for missing requests, as the API server defaults them."""
    res = container.get("resources") or {}
    merged = dict(res.get("limits") or {})
    merged.update(res.get("requests") or {})
    return {k: _q(v) for k, v in merged.items()}


def pod_requests(pod: dict) -> Requests:
    """Effective requests: sum over containers, at least the largest init container."""
    spec = pod.get("spec") or {}
    total: Requests = {}
    for c in spec.get("containers") or []:
        for k, v in container_requests(c).items():
            total[k] = total.get(k, 0) + v
    for c in spec.get("initContainers") or []:
        for k, v in container_requests(c).items():
            total[k] = max(total.get(k, 0), v)
    return total


def node_allocatable(node: dict) -> Requests:
    alloc = (node.get("status") or {}).get("allocatable") or {}
    return {k: _q(v) for k, v in alloc.items()}


def is_extended(name: str) -> bool:
    """Extended resources: domain-qualified names outside kubernetes.io (nvidia.com/gpu, ...), and
    a DeviceClass's implicit name `deviceclass.resource.kubernetes.io/<class>` (KEP-5004)."""
    if "/" not in name:
        return False
    if name.startswith("deviceclass.resource.kubernetes.io/"):
        return True
    domain = name.split("/", 1)[0]
    return not (domain == "kubernetes.io" or domain.endswith(".kubernetes.io"))


def insufficient(req: Requests, used: Requests, alloc: Requests, pods_used: int,
                 names: list[str] | None = None) -> list[str]:
    """kube-scheduler NodeResourcesFit reasons ("Too many pods", "Insufficient cpu", ...).

    Extended resources the node does not advertise are left out here: they may be backed by DRA
    (DeviceClass extendedResourceName); the caller decides. ``names``: ``sorted(req)``, when the
    caller has it already.
    """
    reasons = []
    if pods_used + 1 > int(alloc.get("pods", 110)):
        reasons.append("Too many pods")
    for name in sorted(req) if names is None else names:
        amount = req[name]
        if amount == 0:
            continue
        if name not in alloc and is_extended(name):
            continue
        if used.get(name, 0) + amount > alloc.get(name, 0):
            reasons.append(f"Insufficient {name}")
    return reasons
