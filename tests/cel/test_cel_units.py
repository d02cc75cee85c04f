"""Unit tests: device_input, semver, caching, feature flags, errors and hints."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from labkit.api.quantity import parse_quantity
from labkit.cel import (
    CelCompileError,
    CelError,
    CelRuntimeError,
    Semver,
    SemverError,
    compile_selector,
    device_input,
    parse_semver,
)
from labkit.cel.diagnose import relational_hint
from labkit.cel.literals import DRIVER, domain_candidates

ENGINES = ["cel-expr-python", "cel-python"]
D = "gpu.nvidia.com"


# -- device_input ------------------------------------------------------------------------------------
def test_device_input_domains_and_types():
    dev = device_input(D, {
        "name": "gpu-0",
        "attributes": {
            "index": {"int": 3}, "mig": {"bool": True}, "model": {"string": "A100"},
            "driverVersion": {"version": "550.54.15"},
            "resource.kubernetes.io/pcieRoot": {"string": "pci0000:00"},
            "ports": {"ints": [1, 2]}, "tags": {"strings": ["a"]}, "vs": {"versions": ["1.0.0"]},
        },
        "capacity": {"memory": {"value": "80Gi"}, "example.com/bw": {"value": "1k"}},
        "allowMultipleAllocations": True,
    })
    assert dev.error is None
    assert dev.attributes[D]["index"] == 3 and dev.attributes[D]["mig"] is True
    assert dev.attributes[D]["driverVersion"] == Semver(550, 54, 15)
    assert dev.attributes["resource.kubernetes.io"] == {"pcieRoot": "pci0000:00"}
    assert dev.attributes[D]["ports"] == [1, 2] and dev.attributes[D]["vs"] == [Semver(1, 0, 0)]
    assert dev.capacity[D]["memory"] == parse_quantity("80Gi")
    assert dev.capacity["example.com"]["bw"].value == 1000
    assert dev.allow_multiple_allocations is True


@pytest.mark.parametrize("engine", ENGINES)
def test_bad_version_is_runtime_error_for_every_selector(engine):
    dev = device_input(D, {"name": "x", "attributes": {"v": {"version": "01.0.0"}}})
    with pytest.raises(CelRuntimeError) as exc:
        compile_selector("true", engine=engine).evaluate(dev)
    assert exc.value.message == 'attribute v: parse semantic version: Major number must not contain leading zeroes "01"'


def test_bad_attribute_value_kind():
    dev = device_input(D, {"name": "x", "attributes": {"n": {"int": "three"}}})
    assert dev.error and "attribute n" in dev.error


@pytest.mark.parametrize("engine", ENGINES)
def test_device_input_reused_across_selectors_and_engines(engine):
    dev = device_input(D, {"name": "x", "attributes": {"index": {"int": 1}}, "capacity": {"mem": {"value": "1Gi"}}})
    exprs = [f'device.attributes["{D}"].index == 1', f'"x" in device.attributes["{D}"]',
             f'device.capacity["{D}"].mem.compareTo(quantity("1024Mi")) == 0', '"index" in device.attributes["other"]']
    results = [compile_selector(e, engine=engine).evaluate(dev) for e in exprs]
    assert results == [True, False, True, False]
    # second round uses the cached conversions and must agree
    assert [compile_selector(e, engine=engine).evaluate(dev) for e in exprs] == results


@pytest.mark.parametrize("engine", ENGINES)
def test_driver_domain_lookup_via_device_driver(engine):
    dev = device_input(D, {"name": "x"})  # no attributes at all
    prog = compile_selector('"x" in device.attributes[device.driver]', engine=engine)
    assert prog.evaluate(dev) is False


@pytest.mark.parametrize("engine", ENGINES)
def test_presence_guard_on_missing_domain(engine):
    dev = device_input(D, {"name": "x"})
    prog = compile_selector('"other.com" in device.attributes && device.attributes["other.com"].x == 1', engine=engine)
    assert prog.evaluate(dev) is False


# -- feature flags -------------------------------------------------------------------------------------
@pytest.mark.parametrize("engine", ENGINES)
def test_allow_multiple_allocations_needs_consumable_capacity(engine):
    dev = device_input(D, {"name": "x", "allowMultipleAllocations": True})
    assert compile_selector("device.allowMultipleAllocations", engine=engine).evaluate(dev) is True
    with pytest.raises(CelCompileError) as exc:
        compile_selector("device.allowMultipleAllocations", engine=engine, consumable_capacity=False)
    assert "undefined field 'allowMultipleAllocations'" in exc.value.message
    assert "DRAConsumableCapacity" in exc.value.hint


@pytest.mark.parametrize("engine", ENGINES)
def test_includes_needs_list_type_attributes(engine):
    dev = device_input(D, {"name": "x", "attributes": {"ports": {"ints": [1, 2]}, "n": {"int": 2}}})
    expr = f'device.attributes["{D}"].ports.includes(2) && device.attributes["{D}"].n.includes(2)'
    with pytest.raises(CelCompileError) as exc:
        compile_selector(expr, engine=engine)
    assert "includes" in exc.value.message and "DRAListTypeAttributes" in exc.value.hint
    assert compile_selector(expr, engine=engine, list_type_attributes=True).evaluate(dev) is True
    miss = f'device.attributes["{D}"].ports.includes(5)'
    assert compile_selector(miss, engine=engine, list_type_attributes=True).evaluate(dev) is False


# -- caching -----------------------------------------------------------------------------------------------
def test_cache_keyed_by_every_argument():
    a = compile_selector("true")
    assert compile_selector("true", engine=None) is a
    assert compile_selector("true", engine="cel-expr-python", consumable_capacity=True) is a
    others = {id(compile_selector("true", consumable_capacity=False)),
              id(compile_selector("true", list_type_attributes=True)),
              id(compile_selector("true", engine="cel-python"))}
    assert id(a) not in others and len(others) == 3


def test_unknown_engine():
    with pytest.raises(CelCompileError) as exc:
        compile_selector("true", engine="cel-go")
    assert "cel-expr-python" in exc.value.hint


def test_expression_length_limit():
    with pytest.raises(CelCompileError, match="longer than the limit"):
        compile_selector("true && " * 1400 + "true")


# -- errors and hints ------------------------------------------------------------------------------------
def test_error_strings():
    err = CelError("no such key: x", ". consider using CEL optional chaining")
    assert str(err) == "no such key: x. consider using CEL optional chaining"
    assert str(CelCompileError("bad", "fix it")) == "bad (fix it)"
    assert str(CelRuntimeError("bad")) == "bad"
    assert issubclass(CelCompileError, CelError) and issubclass(CelRuntimeError, CelError)


@pytest.mark.parametrize(("expr", "op", "hint"), [
    ('a.memory >= quantity("40Gi")', ">=", 'use a.memory.compareTo(quantity("40Gi")) >= 0'),
    ('x && (q < quantity("1")) || y', "<", 'use q.compareTo(quantity("1")) < 0'),
    ('semver("1.0.0") > v', ">", 'use semver("1.0.0").compareTo(v) > 0'),
])
def test_relational_hint(expr, op, hint):
    col = expr.index(op) + 1
    assert relational_hint(expr, 1, col, op) == hint


@pytest.mark.parametrize("engine", ENGINES)
def test_quantity_hint_generated_from_expression(engine):
    with pytest.raises(CelCompileError) as exc:
        compile_selector(f'device.driver == "{D}" && device.capacity["{D}"].memory < quantity("1Gi")', engine=engine)
    assert exc.value.hint == f'use device.capacity["{D}"].memory.compareTo(quantity("1Gi")) < 0'


@pytest.mark.parametrize("engine", ENGINES)
def test_runtime_error_messages_are_one_line(engine):
    dev = device_input(D, {"name": "x", "attributes": {"s": {"string": "a"}}})
    for expr in [f'device.attributes["{D}"].s', f'device.attributes["{D}"].nope', 'quantity("x") == quantity("1")']:
        with pytest.raises(CelRuntimeError) as exc:
            compile_selector(expr, engine=engine).evaluate(dev)
        assert "\n" not in str(exc.value) and str(exc.value)


def test_domain_candidates():
    expr = ('device.attributes["a.com"].x && device.capacity[?"b.com"].hasValue() && device.attributes.c.y '
            '&& "d.com" in device.attributes && device.attributes["d.com"].z && device.attributes[device.driver].w '
            '&& "e.com" == device.driver')
    assert domain_candidates(expr) == {"a.com", "b.com", "c", DRIVER}


# -- semver --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("text", "normalize", "want"), [
    ("1.2.3", False, "1.2.3"), ("v1.2", True, "1.2.0"), ("1", True, "1.0.0"), ("v01.02.03", True, "1.2.3"),
    ("1.0.0-rc.1+build.5", False, "1.0.0-rc.1+build.5"), ("1.2.3-0a", False, "1.2.3-0a"),
])
def test_semver_parse(text, normalize, want):
    assert str(parse_semver(text, normalize)) == want


@pytest.mark.parametrize(("text", "normalize", "message"), [
    ("", False, "Version string empty"),
    ("1.2", False, "No Major.Minor.Patch elements found"),
    ("a.2.3", False, 'Invalid character(s) found in major number "a"'),
    ("01.2.3", False, 'Major number must not contain leading zeroes "01"'),
    ("1.2.3-01", False, 'Numeric PreRelease version must not contain leading zeroes "01"'),
    ("1.2.3-a..b", False, "Prerelease is empty"),
    ("1.2.3+", False, "Build meta data is empty"),
    ("1.2.3-a_b", False, 'Invalid character(s) found in prerelease "a_b"'),
    ("1.2-rc", True, "short version cannot contain PreRelease/Build meta data"),
])
def test_semver_errors_match_go(text, normalize, message):
    with pytest.raises(SemverError) as exc:
        parse_semver(text, normalize)
    assert str(exc.value) == message


_ident = st.from_regex(r"[0-9A-Za-z-]{1,6}", fullmatch=True).filter(
    lambda s: not (s.isdigit() and len(s) > 1 and s[0] == "0"))
_versions = st.builds(
    lambda a, b, c, pre: f"{a}.{b}.{c}" + ("-" + ".".join(pre) if pre else ""),
    st.integers(0, 999), st.integers(0, 999), st.integers(0, 999), st.lists(_ident, max_size=3))


@given(_versions)
def test_semver_roundtrip(text):
    assert str(parse_semver(text)) == text


@given(_versions, _versions)
def test_semver_compare_is_antisymmetric_and_release_sorts_after_prerelease(a, b):
    va, vb = parse_semver(a), parse_semver(b)
    assert va.compare(vb) == -vb.compare(va)
    release = parse_semver(a.split("-")[0])
    assert release.compare(va) == (0 if va.pre == () else 1)


def test_semver_precedence_chain():
    chain = ["1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-alpha.beta", "1.0.0-beta", "1.0.0-beta.2",
             "1.0.0-beta.11", "1.0.0-rc.1", "1.0.0"]
    parsed = [parse_semver(v) for v in chain]
    assert all(parsed[i] < parsed[i + 1] for i in range(len(parsed) - 1))
    assert parse_semver("1.0.0+a") == parse_semver("1.0.0+b")
