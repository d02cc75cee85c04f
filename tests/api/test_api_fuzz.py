"""Property tests: valid objects round-trip and validate clean; garbage never escapes as a crash."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from labkit.api import LoadError, Problem, dump, load
from labkit.cel.validation import validate  # with CEL, as the API server

pytestmark = pytest.mark.slow  # heavy: `make check` leaves it out, `make test` runs it

V1 = "resource.k8s.io/v1"
FUZZ = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])

label = st.tuples(st.sampled_from("abgxz"), st.text("ab0-9z", max_size=8), st.sampled_from("ac09")).map(
    "".join)
ident = st.tuples(st.sampled_from("aZ_m"), st.text("aZ_09q", max_size=10)).map("".join)
domain = st.lists(label, min_size=1, max_size=3).map(".".join).filter(lambda d: len(d) <= 63)
qname = st.one_of(ident, st.tuples(domain, ident).map("/".join))
quantity = st.one_of(
    st.tuples(st.integers(0, 100000), st.sampled_from(["", "k", "M", "G", "Ki", "Mi", "Gi", "m"])).map(
        lambda t: f"{t[0]}{t[1]}"),
    st.integers(0, 2**31),
)
semver = st.tuples(st.integers(0, 999), st.integers(0, 999), st.integers(0, 999)).map(
    lambda t: f"{t[0]}.{t[1]}.{t[2]}")
attribute = st.one_of(
    st.integers(-2**40, 2**40).map(lambda v: {"int": v}),
    st.booleans().map(lambda v: {"bool": v}),
    st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=16).map(lambda v: {"string": v}),
    semver.map(lambda v: {"version": v}),
)
cel = st.sampled_from([
    "device.driver == 'gpu.nvidia.com'",
    "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0",
    "device.attributes['gpu.nvidia.com'].profile == '1g.10gb'",
    "true",
])


@st.composite
def request_body(draw: Any, sub_name: str | None = None) -> dict:
    body: dict[str, Any] = {}
    if sub_name:
        body["name"] = sub_name
    body["deviceClassName"] = draw(domain)
    if draw(st.booleans()):
        body["selectors"] = [{"cel": {"expression": e}} for e in draw(st.lists(cel, max_size=3))]
    mode = draw(st.sampled_from([None, "ExactCount", "All"]))
    if mode:
        body["allocationMode"] = mode
    if mode != "All" and draw(st.booleans()):
        body["count"] = draw(st.integers(1, 8))
    if draw(st.booleans()):
        body["capacity"] = {"requests": draw(st.dictionaries(qname, quantity, max_size=2))}
    return body


@st.composite
def claims(draw: Any) -> dict:
    names = draw(st.lists(label, min_size=1, max_size=4, unique=True))
    requests = []
    for name in names:
        if draw(st.booleans()):
            requests.append({"name": name, "exactly": draw(request_body())})
        else:
            subs = draw(st.lists(label, min_size=1, max_size=3, unique=True))
            requests.append({"name": name, "firstAvailable": [draw(request_body(s)) for s in subs]})
    devices: dict[str, Any] = {"requests": requests}
    if draw(st.booleans()):
        devices["constraints"] = [{"requests": draw(st.lists(st.sampled_from(names), unique=True)),
                                   "matchAttribute": draw(st.tuples(domain, ident).map("/".join))}]
    if draw(st.booleans()):
        devices["config"] = [{"requests": [names[0]], "opaque": {"driver": draw(domain), "parameters":
                                                               {"apiVersion": "x/v1", "kind": "Cfg"}}}]
    return {"apiVersion": V1, "kind": "ResourceClaim",
            "metadata": {"name": draw(label), "namespace": draw(label)}, "spec": {"devices": devices}}


@st.composite
def slices(draw: Any) -> dict:
    names = draw(st.lists(label, min_size=0, max_size=5, unique=True))
    devices = []
    for name in names:
        dev: dict[str, Any] = {"name": name}
        attrs = draw(st.dictionaries(qname, attribute, max_size=5))
        caps = draw(st.dictionaries(qname, quantity.map(lambda q: {"value": q}), max_size=3))
        if attrs:
            dev["attributes"] = attrs
        if caps:
            dev["capacity"] = caps
        devices.append(dev)
    return {"apiVersion": V1, "kind": "ResourceSlice", "metadata": {"name": draw(label)},
            "spec": {"driver": draw(domain), "pool": {"name": draw(label), "generation": draw(st.integers(0, 9)),
                                                      "resourceSliceCount": draw(st.integers(1, 4))},
                     "nodeName": draw(label), "devices": devices}}


@FUZZ
@given(st.lists(st.one_of(claims(), slices()), min_size=1, max_size=3), st.sampled_from(["yaml", "json"]))
def test_valid_objects_validate_clean_and_round_trip(objs: list[dict], fmt: str) -> None:
    assert [str(p) for p in validate(objs)] == []
    loaded = load(objs)
    again = load(dump(loaded, fmt))
    assert again == loaded
    assert json.dumps(again) == json.dumps(loaded)  # same key order


def _check_no_crash(source: Any) -> None:
    try:
        objs = load(source)
    except LoadError as exc:
        assert exc.problems and all(isinstance(p, str) and "\n" not in p for p in exc.problems)
        return
    problems = validate(objs)
    assert all(isinstance(p, Problem) for p in problems)
    for p in problems:
        assert "\n" not in str(p)


@FUZZ
@given(st.text(max_size=300))
def test_garbage_text(text: str) -> None:
    _check_no_crash(text + "\n")


@FUZZ
@given(st.binary(max_size=200))
def test_garbage_bytes(data: bytes) -> None:
    _check_no_crash(data)


yaml_fragments = st.sampled_from([
    "apiVersion: resource.k8s.io/v1\n", "kind: ResourceClaim\n", "kind: ResourceSlice\n", "kind: List\n",
    "metadata: {name: x}\n", "metadata: 5\n", "spec:\n", "  devices:\n", "    requests:\n",
    "    - name: gpu\n", "      exactly: {deviceClassName: x, count: -1}\n", "      firstAvailable: []\n",
    "items:\n", "- {kind: Pod}\n", "---\n", "  devices: [{name: d, attributes: {a: {int: x}}}]\n",
    "  nodeName: n\n", "  pool: {name: p}\n", "[\n", "{\n", "&a x\n", "*a\n", "? [1]\n: 2\n", "\t\n",
])


@FUZZ
@given(st.lists(yaml_fragments, max_size=14))
def test_partially_valid_yaml(parts: list[str]) -> None:
    _check_no_crash("".join(parts) or "\n")


json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-10, 10**12), st.floats(allow_nan=False), st.text(max_size=8)),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)),
    max_leaves=10,
)


def _paths(obj: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix]
    if isinstance(obj, dict):
        for k, v in obj.items():
            out.extend(_paths(v, (*prefix, k)))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            out.extend(_paths(v, (*prefix, i)))
    return out


@FUZZ
@given(st.one_of(claims(), slices()), st.data())
def test_mutated_valid_objects_give_problems_not_crashes(obj: dict, data: Any) -> None:
    mutated = copy.deepcopy(obj)
    for _ in range(data.draw(st.integers(1, 3))):
        paths = [p for p in _paths(mutated) if p]
        if not paths:
            break
        path = data.draw(st.sampled_from(paths))
        parent = mutated
        for key in path[:-1]:
            parent = parent[key]
        if data.draw(st.booleans()) and isinstance(parent, dict):
            del parent[path[-1]]
        else:
            parent[path[-1]] = data.draw(json_values)
    problems = validate([mutated])
    assert all(isinstance(p, Problem) and "\n" not in str(p) for p in problems)
