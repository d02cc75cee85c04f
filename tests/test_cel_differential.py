"""Generated selectors: both engines must agree (and agree with Kubernetes when the Go oracle
is available: LABKIT_CEL_ORACLE, see labkit/cel/oracle)."""

from __future__ import annotations

import json
import os
import random
import subprocess

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from labkit.cel import CelCompileError, CelRuntimeError, compile_selector, device_input

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


ORACLE = os.environ.get("LABKIT_CEL_ORACLE")


@pytest.mark.oracle
@pytest.mark.skipif(not ORACLE, reason="set LABKIT_CEL_ORACLE to the built labkit/cel/oracle binary")
def test_default_engine_agrees_with_kubernetes(dev):
    rng = random.Random(1337)
    exprs = sorted({random_expression(rng, 6) for _ in range(400)} | set(ATOMS))
    lines = [json.dumps({"expr": e, "driver": D, "attributes": DEVICE["attributes"],
                         "capacity": DEVICE["capacity"], "consumableCapacity": True}) for e in exprs]
    proc = subprocess.run([ORACLE], input="\n".join(lines) + "\n", capture_output=True, text=True, check=True)
    names = {"true": True, "false": False, "compile": "compile", "runtime": "runtime"}
    wrong = []
    for expr, line in zip(exprs, proc.stdout.splitlines()):
        k8s = names[json.loads(line)["result"]]
        ours = outcome(expr, "cel-expr-python", dev)
        if ours != k8s:
            wrong.append(f"{expr}: Kubernetes {k8s}, labkit {ours}")
    assert not wrong, "\n".join(wrong[:20])
