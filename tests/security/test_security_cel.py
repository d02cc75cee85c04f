"""CEL bounded as the API server and kube-scheduler bound it (issue #41, point 6).

* Nesting: Kubernetes keeps cel-go's parser defaults (k8s.io/apiserver pkg/cel/environment/base.go
  sets no parser option), so cel-go's parser/parser.go refuses past 250 levels, with
  "expression recursion limit exceeded: 250" (its recursionListener, per grammar rule) or "max
  recursion depth exceeded" (its visitor), as a compile error at no location (<input>:-1:0).
  Chains of && / || / ! do not nest there. Both engines must accept what Go accepts, answer
  like Go (cel-python without a RecursionError), and refuse the rest with Go's words.
* Runtime cost: DRA's per-evaluation limit is resourceapi.CELSelectorExpressionMaxCost =
  1,000,000 (k8s.io/api resource/v1/types.go), enforced by k8s.io/dynamic-resource-allocation
  cel/compile.go (cel.CostLimit) with cel-go's text "operation cancelled: actual cost limit
  exceeded" (interpreter/runtimecost.go); the allocator wraps it as "CEL runtime error"
  (dynamic-resource-allocation structured/internal/stable/allocator_stable.go).
* Integers: cel-go's checked arithmetic and conversions (common/types/overflow.go, err.go:
  "integer overflow", "unsigned integer overflow"); Kubernetes plans with cel.OptOptimize
  (base.go), which converts constants when the program is built (interpreter/decorators.go
  maybeOptimizeConstUnary): a failing one is "program instantiation failed: ..." (compile.go).

Every outcome is asserted directly; with the Go oracle (tools/cel-oracle, Kubernetes' own DRA CEL
code) the same cases are also judged by Kubernetes.
"""

from __future__ import annotations

import random
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from labkit.cel import CelCompileError, CelRuntimeError, compile_selector, device_input
from tests.paths import REPO

pytestmark = pytest.mark.slow  # heavy: `make check` leaves it out, `make test` runs it

ROOT = REPO
ENGINES = ("cel-expr-python", "cel-python")
DRIVER = "gpu.example.com"
MAX64, MIN64 = (1 << 63) - 1, -(1 << 63)
ATTRIBUTES = {"index": {"int": 5}, "big": {"int": MAX64}, "small": {"int": MIN64}, "neg": {"int": -1},
              "name": {"string": "x"}}
A = f'device.attributes["{DRIVER}"]'
COST_LIMIT_TEXT = "operation cancelled: actual cost limit exceeded"
LISTENER = "compilation failed: ERROR: <input>:-1:0: expression recursion limit exceeded: 250"
VISITOR = "compilation failed: ERROR: <input>:-1:0: max recursion depth exceeded"


@pytest.fixture(scope="module")
def dev():
    return device_input(DRIVER, {"name": "gpu-0", "attributes": ATTRIBUTES})


def mismatches(cases: list[tuple[str, object]], engine: str, dev) -> list[str]:
    """The cases whose outcome on ``engine`` is not the expected one (each case is one line)."""
    return [f"{expr[:70]}: want {want}, got {got}" for expr, want in cases
            if (got := outcome(expr, engine, dev)) != want]


#: (expression, engine) -> its outcome on `dev` (one device, the same in every test): a case the table tests
#: evaluated is judged against Kubernetes without being evaluated again (lists.range(999987) costs a second)
_OUTCOMES: dict[tuple[str, str], object] = {}


def outcome(expr: str, engine: str, dev) -> object:
    """True/False, or ("compile"|"runtime", message)."""
    if (expr, engine) not in _OUTCOMES:
        _OUTCOMES[expr, engine] = _evaluate(expr, engine, dev)
    return _OUTCOMES[expr, engine]


def _evaluate(expr: str, engine: str, dev) -> object:
    try:
        program = compile_selector(expr, engine=engine)
    except CelCompileError as exc:
        assert "\n" not in str(exc)
        return ("compile", exc.message)
    try:
        return program.evaluate(dev)
    except CelRuntimeError as exc:
        assert "\n" not in str(exc)
        return ("runtime", exc.message)


def go_outcome(answer: dict) -> object:
    if answer["result"] in ("true", "false"):
        return answer["result"] == "true"
    return (answer["result"], answer["message"])


def ask(cel_oracle, exprs: list[str]) -> list[object]:
    rows = [{"expr": e, "driver": DRIVER, "attributes": ATTRIBUTES, "consumableCapacity": True} for e in exprs]
    return [go_outcome(a) for a in cel_oracle(rows)]


def parens(n: int) -> str:
    return "(" * n + f'device.driver == "{DRIVER}"' + ")" * n


def plus_chain(n: int) -> str:
    return " + ".join(["1"] * n) + f" == {n}"


def call_chain(n: int) -> str:
    return '"a"' + ".lowerAscii()" * n + ' == "a"'


# -- nesting ----------------------------------------------------------------------------------------
#: at the limit: Go accepts each (its counts: 250 open `expr`/`relation` rules; 250 nested
#: arithmetic/relation nodes; 250 nested member calls/relations)
AT_LIMIT = [parens(248), plus_chain(250), call_chain(249)]
#: one more level: Go refuses, in the listener's or the visitor's words
PAST_LIMIT = [(parens(249), LISTENER), (plus_chain(251), VISITOR), (call_chain(250), VISITOR)]
#: no nesting in Go at all: 10,000 `!` (an even number: no operator) and 1,200 `&&` terms
UNBOUNDED = ["!" * 10_000 + f'(device.driver == "{DRIVER}")',
             "true && " * 1_199 + f'device.driver == "{DRIVER}"']


@pytest.mark.parametrize("engine", ENGINES)
def test_nesting_kubernetes_accepts_evaluates(engine, dev):
    wrong = mismatches([(e, True) for e in AT_LIMIT + UNBOUNDED], engine, dev)
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("engine", ENGINES)
def test_nesting_past_the_limit_is_refused_in_gos_words(engine, dev):
    wrong = mismatches([(e, ("compile", m)) for e, m in PAST_LIMIT], engine, dev)
    assert not wrong, "\n".join(wrong)


def generated_nestings(count: int) -> list[str]:
    """Mixed nestings around the limit (fixed seed): parentheses, calls, lists, maps, indexes,
    selections, ternaries, arithmetic and comparison chains."""
    wraps = [lambda e: f"({e})", lambda e: f"[{e}][0]", lambda e: f'{{"k": {e}}}["k"]', lambda e: f"dyn({e})",
             lambda e: f"(true ? {e} : false)", lambda e: f"({e}) == true", lambda e: f"true == ({e})",
             lambda e: f"[1].all(x, {e})", lambda e: f"!!({e})", lambda e: f"({e}) && true"]
    rng = random.Random(41)
    out = []
    for _ in range(count):
        kinds = rng.sample(wraps, rng.randint(1, 3))
        expr = f'device.driver == "{DRIVER}"'
        for _ in range(rng.randint(60, 260)):
            expr = rng.choice(kinds)(expr)
        out.append(expr)
    return out


@pytest.mark.oracle
def test_nesting_verdicts_match_kubernetes(cel_oracle, dev):
    cases = [(e, True) for e in AT_LIMIT + UNBOUNDED] + [(e, ("compile", m)) for e, m in PAST_LIMIT]
    wrong = judged_by_kubernetes(cel_oracle, cases, dev)
    # generated mixes: Kubernetes is the only judge
    exprs = generated_nestings(20)
    wrong += [f"{engine} {expr[:60]}...: Kubernetes {go}, labkit {got}"
              for expr, go in zip(exprs, ask(cel_oracle, exprs), strict=True)
              for engine in ENGINES if (got := outcome(expr, engine, dev)) != go]
    assert not wrong, "\n".join(wrong)


def labkit(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The CLI as typed."""
    return subprocess.run([sys.executable, "-m", "labkit", *args], cwd=cwd, capture_output=True, text=True,
                          check=False)


SLICES = f"""apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata:
  name: node-1-gpu
spec:
  driver: {DRIVER}
  nodeName: node-1
  pool: {{name: node-1, generation: 1, resourceSliceCount: 1}}
  devices:
  - name: gpu-0
    attributes:
      index: {{int: {MAX64}}}
"""


def device_class(expr: str) -> str:
    return ("apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata:\n  name: deep\nspec:\n  selectors:\n"
            f"  - cel:\n      expression: '{expr}'\n")


def test_validate_accepts_the_limit_and_refuses_past_it_on_one_line(tmp_path):
    (tmp_path / "at.yaml").write_text(device_class(parens(248)))
    (tmp_path / "past.yaml").write_text(device_class(parens(249)))
    ok = labkit("validate", "-f", "at.yaml", cwd=tmp_path)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    bad = labkit("validate", "-f", "past.yaml", cwd=tmp_path)
    assert bad.returncode == 1
    lines = (bad.stdout + bad.stderr).strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("DeviceClass/deep: spec.selectors[0].cel.expression: Invalid value: ")
    assert "compilation failed: ERROR: <input>:-1:0: expression recursion limit exceeded: 250" in lines[0]


@pytest.mark.parametrize("engine", ENGINES)
def test_labkit_cel_deep_selector(tmp_path, engine):
    (tmp_path / "slices.yaml").write_text(SLICES)
    ok = labkit("cel", parens(248), "-f", "slices.yaml", "--engine", engine, "-o", "name", cwd=tmp_path)
    assert (ok.returncode, ok.stdout.strip()) == (0, f"device/{DRIVER}/node-1/gpu-0"), ok.stderr
    bad = labkit("cel", parens(249), "-f", "slices.yaml", "--engine", engine, cwd=tmp_path)
    assert bad.returncode == 2 and bad.stdout == ""
    assert bad.stderr.startswith(f"labkit cel: {LISTENER} (")
    assert len(bad.stderr.strip().splitlines()) == 1 and "Traceback" not in bad.stderr


# -- integers -----------------------------------------------------------------------------------------
INT, UINT = "integer overflow", "unsigned integer overflow"
#: at run time (the operands are not constants): Go's runtime error, or its result
RUNTIME = [
    (f"{A}.big + 1 > 0", ("runtime", INT)),
    (f"{A}.small - 1 < 0", ("runtime", INT)),
    (f"{A}.big * 2 > 0", ("runtime", INT)),
    (f"{A}.small / -1 > 0", ("runtime", INT)),
    (f"{A}.small % -1 == 0", ("runtime", INT)),
    (f"-{A}.small > 0", ("runtime", INT)),
    (f"{A}.big - 1 + 1 == {A}.big", True),
    (f"{A}.small % 7 == -1", True),
    (f"{A}.index / 0 == 0", ("runtime", "division by zero")),
    (f"{A}.index % 0 == 0", ("runtime", "modulus by zero")),
    (f"uint({A}.index) - 6u > 0u", ("runtime", UINT)),
    (f"uint({A}.big) * 2u + 2u > 0u", ("runtime", UINT)),
    (f"uint({A}.neg) > 0u", ("runtime", UINT)),
    (f"int(uint({A}.big) + 1u) > 0", ("runtime", INT)),
    (f"int(double({A}.big)) > 0", ("runtime", INT)),
    (f"int(double({A}.small)) < 0", ("runtime", INT)),
    (f"int(double({A}.index) / 0.0) > 0", ("runtime", INT)),
    (f"uint(double({A}.index) - 5.5) == 0u", ("runtime", UINT)),
    (f"uint(double({A}.index) - 5.0) == 0u", True),
    (f"int({A}.name + '9223372036854775808') > 0", ("runtime", "type conversion error from 'string' to 'int'")),
]
#: constants: converted when Kubernetes builds the program, so a failure is a compile error
#: wherever it sits (even where it is never reached)
CONSTANT = [
    ("int(1e19) > 0", ("compile", f"program instantiation failed: {INT}")),
    ("uint(-1) > 0u", ("compile", f"program instantiation failed: {UINT}")),
    ("int(-9223372036854775808.0) < 0", ("compile", f"program instantiation failed: {INT}")),
    ("int(9223372036854775808u) > 0", ("compile", f"program instantiation failed: {INT}")),
    ("false && int(double(\"inf\")) > 0", ("compile", f"program instantiation failed: {INT}")),
    ('int("9223372036854775808") > 0',
     ("compile", "program instantiation failed: type conversion error from 'string' to 'int'")),
    ("9223372036854775807 + 1 > 0", ("runtime", INT)),
    ("int(1e18) > 0", True),
    ("uint(-0.0) == 0u", True),
]


@pytest.mark.parametrize("engine", ENGINES)
def test_integers_are_64_bit_as_in_go(engine, dev):
    wrong = mismatches(RUNTIME + CONSTANT, engine, dev)
    assert not wrong, "\n".join(wrong)


def judged_by_kubernetes(cel_oracle, cases: list[tuple[str, object]], dev) -> list[str]:
    """Kubernetes' outcome of each case against the table's, and against each engine's."""
    wrong = []
    for (expr, want), go in zip(cases, ask(cel_oracle, [e for e, _ in cases]), strict=True):
        if go != want:
            wrong.append(f"{expr[:70]}: table {want}, Kubernetes {go}")
        wrong += [f"{engine} {expr[:70]}: Kubernetes {go}, labkit {got}" for engine in ENGINES
                  if (got := outcome(expr, engine, dev)) != go]
    return wrong


@pytest.mark.oracle
def test_integer_cases_match_kubernetes(cel_oracle, dev):
    wrong = judged_by_kubernetes(cel_oracle, RUNTIME + CONSTANT, dev)
    assert not wrong, "\n".join(wrong)


def test_labkit_cel_overflow_is_one_line(tmp_path):
    (tmp_path / "slices.yaml").write_text(SLICES)
    run = labkit("cel", f"{A}.index + 1 > 0", "-f", "slices.yaml", "-o", "json", cwd=tmp_path)
    assert run.returncode == 2
    assert '"message": "integer overflow"' in run.stdout
    assert run.stderr.strip() == ("labkit cel: the selector fails on every device (1), first: integer overflow; "
                                  "kube-scheduler would fail every allocation that uses it; fix: guard the lookup "
                                  "with has(...) or optional chaining (.?name.orValue(...))")
    const = labkit("cel", "int(1e19) > 0", "-f", "slices.yaml", cwd=tmp_path)
    assert const.returncode == 2 and const.stdout == ""
    assert const.stderr.startswith("labkit cel: program instantiation failed: integer overflow (")
    assert len(const.stderr.strip().splitlines()) == 1


# -- runtime cost -------------------------------------------------------------------------------------
def doubling(levels: int) -> str:
    """A string that doubles at each cel.bind: 10 * 2**(levels - 1) characters at the end."""
    binds = "".join(f"cel.bind(v{i}, v{i - 1} + v{i - 1}, " for i in range(1, levels))
    return f"cel.bind(v0, 'xxxxxxxxxx', {binds}size(v{levels - 1}) > 0" + ")" * levels


COST = [
    # lists.range(n) costs n + 11 (cel-go ext/lists.go), size() and > 1 each: 1,000,000 exactly is allowed
    ("lists.range(999987).size() > 0", True),
    ("lists.range(999989).size() > 0", ("runtime", COST_LIMIT_TEXT)),
    # a runaway comprehension: Go stops after about 250,000 steps
    ("lists.range(1000).all(x, lists.range(1000).all(y, true))", ("runtime", COST_LIMIT_TEXT)),
    # a string that doubles 21 times: stopped before it is 10 MB, not built to the end
    (doubling(22), ("runtime", COST_LIMIT_TEXT)),
    (doubling(15), True),
]


@pytest.mark.parametrize("engine", ENGINES)
def test_actual_cost_limit_as_kubernetes(engine, dev):
    wrong = mismatches(COST, engine, dev)
    assert not wrong, "\n".join(wrong)


@pytest.mark.oracle
def test_cost_cases_match_kubernetes(cel_oracle, dev):
    wrong = judged_by_kubernetes(cel_oracle, COST, dev)
    assert not wrong, "\n".join(wrong)


ALLOCATE = f"""apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata:
  name: gpu
spec:
  selectors:
  - cel:
      expression: device.driver == "{DRIVER}" && lists.range(999989).size() > 0
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata:
  name: claim
  namespace: default
spec:
  devices:
    requests:
    - name: gpu
      exactly:
        deviceClassName: gpu
---
{SLICES}"""


def test_allocator_reports_the_cost_limit_like_kube_scheduler(tmp_path):
    # a stored class (no validation: the API server would refuse it new, its estimate is too high)
    (tmp_path / "alloc.yaml").write_text(ALLOCATE)
    run = labkit("allocate", "-f", "alloc.yaml", "--node", "node-1", "--no-validate", cwd=tmp_path)
    assert run.returncode == 2
    assert run.stderr.strip() == (f"labkit allocate: class gpu: selector #0 on device {DRIVER}/node-1/gpu-0: "
                                  f"CEL runtime error: {COST_LIMIT_TEXT}")


def python_calls(fn: Callable[[], object]) -> int:
    """How many Python and built-in functions ``fn()`` calls (sys.setprofile): the work it does, counted
    the same on a loaded machine as on an idle one."""
    count = 0

    def hook(_frame: object, event: str, _arg: object) -> None:
        nonlocal count
        if event in ("call", "c_call"):
            count += 1

    sys.setprofile(hook)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return count


def test_a_deep_selector_compiles_in_work_linear_in_its_depth():
    """cel-python's program works out once per node the node that does its work (labkit.cel.engine_celpy._plan):
    twice the nesting is twice the work, not four times (a DeviceClass with 248 nested parentheses cost
    `labkit validate` 3.3 CPU-s, 0.8 now). An expression of its own: compile_selector caches programs."""
    def nested(depth: int) -> str:
        return "(" * depth + 'device.driver == "linear.example.com"' + ")" * depth

    compile_selector("device.driver == 'warm-up'", engine="cel-python")  # the parser, built once per process
    half = python_calls(lambda: compile_selector(nested(124), engine="cel-python"))
    full = python_calls(lambda: compile_selector(nested(248), engine="cel-python"))
    assert full < 2.5 * half, (half, full)
    assert compile_selector(nested(248), engine="cel-python").evaluate(
        device_input("linear.example.com", {"name": "gpu-0"})) is True


def test_nested_list_literals_evaluate_in_work_linear_in_their_depth(dev):
    """Whether a list literal is all constants (cel-go builds those once, at no cost: interpreter/decorators.go
    maybeBuildListLiteral, under OptOptimize) is worked out once per program for every node, not by walking each literal's whole
    subtree at each level on every evaluation: twice the nesting is twice the work, not four times."""
    def nested(depth: int) -> str:
        return "[" * depth + "device.driver" + "]" * depth + " != []"

    half, full = (compile_selector(nested(d), engine="cel-python") for d in (60, 120))
    assert half.evaluate(dev) is True and full.evaluate(dev) is True
    assert python_calls(lambda: full.evaluate(dev)) < 2.5 * python_calls(lambda: half.evaluate(dev))
