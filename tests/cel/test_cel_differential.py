"""Generated selectors: both engines must agree and agree with Kubernetes (the Go oracle
tools/cel-oracle: LABKIT_CEL_ORACLE, or built here when Go is installed)."""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from labkit.cel import CelCompileError, CelError, CelRuntimeError, compile_selector, device_input

pytestmark = pytest.mark.slow  # heavy: `make check` leaves it out, `make test` runs it

D = "gpu.nvidia.com"
DEVICE = {
    "name": "gpu-0",
    "attributes": {
        "productName": {"string": "NVIDIA H100 80GB HBM3"}, "index": {"int": 3}, "mig": {"bool": True},
        "cc": {"version": "9.0.0"}, "links": {"ints": [4, 2]},
    },
    "capacity": {"memory": {"value": "80Gi"}, "sms": {"value": "132"}},
}
A = f'device.attributes["{D}"]'
C = f'device.capacity["{D}"]'

ATOMS = [
    f"{A}.index == 3", f"{A}.index < 2.5", f"{A}.index > 1", f'{A}.index == "3"', f"{A}.mig",
    f"!{A}.mig", f'{A}.productName.startsWith("NVIDIA")', f'{A}.productName.contains("A100")',
    f'{A}.productName.lowerAscii().matches("h1[0-9]+")', f'{A}.cc.isGreaterThan(semver("8.0.0"))',
    f'{A}.cc.compareTo(semver("9.0.0")) == 0', f"{A}.cc.major() >= 9", f"{A}.links.sum() == 6",
    f"{A}.links.exists(l, l > 3)", f"{A}.links.all(l, l > 3)", f"{A}.missing == 1",
    f'"missing" in {A}', f"has({A}.index)", f'{C}.memory.compareTo(quantity("40Gi")) >= 0',
    f'{C}.memory.isLessThan(quantity("64Gi"))', f"{C}.sms.asInteger() > 100",
    f"{C}.missing.isInteger()", 'device.attributes["other.com"].x == 1', '"x" in device.attributes["other.com"]',
    f'device.driver == "{D}"', 'device.driver == "other"', "1 / 0 == 1", "true", "false",
    f'{A}.productName.split(" ").size() == 4', f"[1, 2, 3].max() == {A}.index",
]


def expressions() -> st.SearchStrategy[str]:
    atom = st.sampled_from(ATOMS)
    return st.recursive(
        atom,
        lambda inner: st.one_of(
            st.tuples(inner, st.sampled_from(["&&", "||"]), inner).map(lambda t: f"({t[0]} {t[1]} {t[2]})"),
            inner.map(lambda e: f"!({e})"),
            st.tuples(inner, inner, inner).map(lambda t: f"({t[0]} ? {t[1]} : {t[2]})"),
        ),
        max_leaves=5,
    )


def outcome(expr: str, engine: str, dev) -> object:
    try:
        program = compile_selector(expr, engine=engine)
    except CelCompileError:
        return "compile"
    try:
        return program.evaluate(dev)
    except CelRuntimeError:
        return "runtime"


@pytest.fixture(scope="module")
def dev():
    compile_selector("true", engine="cel-python")  # celpy raises the recursion limit once, up front
    return device_input(D, DEVICE)


def random_expression(rng: random.Random, leaves: int = 4) -> str:
    if leaves <= 1 or rng.random() < 0.3:
        return rng.choice(ATOMS)
    kind = rng.choice(["&&", "||", "!", "?"])
    if kind == "!":
        return f"!({random_expression(rng, leaves - 1)})"
    if kind == "?":
        return (f"({random_expression(rng, leaves // 3)} ? {random_expression(rng, leaves // 3)} : "
                f"{random_expression(rng, leaves // 3)})")
    return f"({random_expression(rng, leaves // 2)} {kind} {random_expression(rng, leaves // 2)})"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(expressions())
def test_engines_agree(dev, expr):
    assert outcome(expr, "cel-expr-python", dev) == outcome(expr, "cel-python", dev), expr


@pytest.mark.oracle
def test_default_engine_agrees_with_kubernetes(dev, cel_oracle):
    rng = random.Random(1337)
    exprs = sorted({random_expression(rng, 6) for _ in range(400)} | set(ATOMS))
    answers = cel_oracle([{"expr": e, "driver": D, "attributes": DEVICE["attributes"],
                           "capacity": DEVICE["capacity"], "consumableCapacity": True} for e in exprs])
    names = {"true": True, "false": False, "compile": "compile", "runtime": "runtime"}
    wrong = []
    for expr, answer in zip(exprs, answers, strict=True):
        k8s = names[answer["result"]]
        ours = outcome(expr, "cel-expr-python", dev)
        if ours != k8s:
            wrong.append(f"{expr}: Kubernetes {k8s}, labkit {ours}")
    assert not wrong, "\n".join(wrong[:20])


# -- token soup: any input gives a bool or a one-line CelError, never an exception --------------------
TOKENS = [
    "device", ".", "attributes", "capacity", "driver", f'["{D}"]', "[", "]", "(", ")", "index", "cc",
    "links", "memory", "==", "!=", "<", ">=", "&&", "||", "!", "?", ":", "1", "1.5", '"x"', "'y'", "true",
    "null", ",", 'quantity("1")', 'semver("1.0.0")', ".compareTo(", ".exists(x, x", ".size()", "x", "+",
    "-", "*", "/", "%", "{", "}", "in", "has(", ".?", "[?", "cel.bind(", 'b"z"', "1u", "int(", "string(",
    "dyn(", 'r"\\d"', ".matches(", ".find(", '"(("', ".all(", ".map(", "sets.contains(", "lists.range(",
    "ip(", "cidr(", "url(", ".min()", ".sum()", '"%s".format(', "strings.quote(", "9223372036854775807",
    "0x10", "1e400",
]


def token_soup(seed: int, count: int) -> list[str]:
    rng = random.Random(seed)
    return sorted({" ".join(rng.choice(TOKENS) for _ in range(rng.randint(1, 8))) for _ in range(count)})


@pytest.mark.parametrize("engine", ["cel-expr-python", "cel-python"])
def test_token_soup_never_crashes(dev, engine):
    for expr in token_soup(11, 400):
        try:
            result = compile_selector(expr, engine=engine).evaluate(dev)
        except CelError as exc:
            assert str(exc) and "\n" not in str(exc), expr
        else:
            assert result in (True, False), expr


@pytest.mark.oracle
def test_token_soup_agrees_with_kubernetes(dev, cel_oracle):
    exprs = token_soup(7, 3000)
    answers = cel_oracle([{"expr": e, "driver": D, "attributes": DEVICE["attributes"],
                           "capacity": DEVICE["capacity"], "consumableCapacity": True} for e in exprs])
    names = {"true": True, "false": False, "compile": "compile", "runtime": "runtime"}
    wrong = [f"{e}: Kubernetes {names[answer['result']]}, labkit {outcome(e, 'cel-expr-python', dev)}"
             for e, answer in zip(exprs, answers, strict=True)
             if outcome(e, "cel-expr-python", dev) != names[answer["result"]]]
    assert not wrong, "\n".join(wrong[:20])
