"""Core facade behaviour on the default engine (fast smoke tests for the allocator's needs)."""

from __future__ import annotations

import pytest

from labkit.cel import CelCompileError, CelRuntimeError, compile_selector, device_input

A100 = {
    "name": "gpu-0",
    "attributes": {
        "productName": {"string": "NVIDIA A100-SXM4-80GB"},
        "driverVersion": {"version": "550.54.15"},
        "index": {"int": 0},
        "resource.kubernetes.io/pcieRoot": {"string": "pci0000:00"},
    },
    "capacity": {"memory": {"value": "80Gi"}},
}


@pytest.fixture(scope="module")
def dev():
    return device_input("gpu.nvidia.com", A100)


def test_driver_and_capacity(dev):
    assert compile_selector('device.driver == "gpu.nvidia.com"').evaluate(dev) is True
    expr = 'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("40Gi")) >= 0'
    assert compile_selector(expr).evaluate(dev) is True
    expr = 'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("81Gi")) >= 0'
    assert compile_selector(expr).evaluate(dev) is False


def test_quantity_relational_is_compile_error_with_hint():
    with pytest.raises(CelCompileError) as exc:
        compile_selector('device.capacity["gpu.nvidia.com"].memory >= quantity("40Gi")')
    assert exc.value.hint == 'use device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("40Gi")) >= 0'


def test_missing_domain_is_empty_map(dev):
    assert compile_selector('"x" in device.attributes["other.example.com"]').evaluate(dev) is False


def test_missing_key_is_runtime_error(dev):
    prog = compile_selector('device.attributes["gpu.nvidia.com"].missing == "x"')
    with pytest.raises(CelRuntimeError) as exc:
        prog.evaluate(dev)
    assert exc.value.message == "no such key: missing"
    assert "optional chaining" in exc.value.hint


def test_qualified_attribute_goes_to_its_domain(dev):
    expr = 'device.attributes["resource.kubernetes.io"].pcieRoot == "pci0000:00"'
    assert compile_selector(expr).evaluate(dev) is True


def test_semver(dev):
    expr = 'device.attributes["gpu.nvidia.com"].driverVersion.isGreaterThan(semver("550.0.0"))'
    assert compile_selector(expr).evaluate(dev) is True


def test_cache_returns_same_program():
    a = compile_selector("true")
    assert compile_selector("true") is a
    assert compile_selector("true", consumable_capacity=False) is not a
