"""Type rules Kubernetes' checker applies and cel-cpp's does not (labkit.cel.typecheck), and the
API server's view of NEW selectors (``compile_new_selector`` / ``labkit validate``).

Expected texts are Kubernetes 1.37's (k8s.io/dynamic-resource-allocation/cel v0.37.2, checked
with tools/cel-oracle: new expressions with and without DRAListTypeAttributes)."""

from __future__ import annotations

import pytest

from labkit.cel import CelCompileError, compile_new_selector, compile_selector
from labkit.cel.validation import validate

A = 'device.attributes["gpu.nvidia.com"]'


@pytest.mark.parametrize(("expr", "message"), [
    ("[1, 2.0].size() == 2", "<input>:1:5: expected type 'int' but found 'double'"),
    ("[1, 2, \"a\"].size() == 3", "<input>:1:8: expected type 'int' but found 'string'"),
    ("[1, 1u].size() == 2", "<input>:1:5: expected type 'int' but found 'uint'"),
    ("[1, null].size() == 2", "<input>:1:5: expected type 'int' but found 'null'"),
    ("[dyn(1), 2].size() == 2", "<input>:1:10: expected type 'dyn' but found 'int'"),
    ("[[1], [\"a\"]].size() == 2", "<input>:1:7: expected type 'list(int)' but found 'list(string)'"),
    ('{1: 1, "b": 2}.size() == 2', "<input>:1:8: expected type 'int' but found 'string'"),
    ('[quantity("1"), 1].size() == 2', "<input>:1:17: expected type 'kubernetes.Quantity' but found 'int'"),
    ('[ip("1.2.3.4"), cidr("1.0.0.0/8")].size() == 2', "<input>:1:21: expected type 'net.IP' but found 'net.CIDR'"),
    ('["a"].lastIndexOf(1) == 0', "<input>:1:18: found no matching overload for 'lastIndexOf' applied to 'list(string).(int)'"),
    ("[1, 2].map(x, x).indexOf(1.0) == 0",
     "<input>:1:25: found no matching overload for 'indexOf' applied to 'list(int).(double)'"),
    (f'["a", {A}.productName].size() == 2', "<input>:1:42: expected type 'string' but found 'dyn'"),
])
def test_checker_errors_cel_cpp_misses(expr, message):
    with pytest.raises(CelCompileError) as err:
        compile_selector(expr)
    assert err.value.message == f"compilation failed: ERROR: {message}"


@pytest.mark.parametrize("expr", [
    "[[], [1]].size() == 2",
    "[{}, {\"a\": 1}].size() == 2",
    "[optional.of(1), optional.none()].size() == 2",
    "[?optional.of(1), 2].size() == 2",
    '["a"].indexOf(dyn(1)) == -1',
    "[].indexOf(1) == -1",
    f'[{A}.productName, {A}.productName].size() == 2',
    '"%s has %d GPUs".format(["node", 8]) == "node has 8 GPUs"',
    f'{A}.all(k, k != "")',
])
def test_accepted_like_kubernetes(expr):
    compile_new_selector(expr)


def test_new_selector_without_list_types_cannot_iterate_an_attribute():
    expr = f'{A}.productName.exists(c, c == "a")'
    with pytest.raises(CelCompileError) as err:
        compile_new_selector(expr, list_type_attributes=False)
    assert err.value.message == ("compilation failed: ERROR: <input>:1:36: expression of type 'any' cannot be "
                                 "range of a comprehension (must be list, map, or dynamic)")
    compile_new_selector(expr, list_type_attributes=True)  # gate on: dyn
    compile_selector(expr, list_type_attributes=False)  # the scheduler's stored view: dyn


def test_new_selector_literal_messages_say_any():
    with pytest.raises(CelCompileError) as err:
        compile_new_selector(f'[{A}.productName, "a"].size() == 2')
    assert "expected type 'any' but found 'string'" in err.value.message


def test_validate_uses_the_new_expression_view():
    claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "c", "namespace": "default"},
             "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                 "deviceClassName": "gpu.nvidia.com",
                 "selectors": [{"cel": {"expression": f'{A}.productName.exists(c, c == "a")'}}]}}]}}}
    problems = [str(p) for p in validate([claim])]
    assert len(problems) == 1
    assert problems[0].startswith("ResourceClaim/c: spec.devices.requests[0].exactly.selectors[0].cel.expression: "
                                  "Invalid value:")
    assert "expression of type 'any' cannot be range of a comprehension" in problems[0]
