"""Selector results shared between devices (labkit.allocator.selectors): an expression's result is
memoised per the values of the parts of ``device`` its text reads. These tests compare that
memo with a fresh conversion and evaluation of every device, so a reference the lexical
analysis misses (or a device that should have raised an error) makes them fail."""

from __future__ import annotations

import random

import pytest

import labkit.allocator.selectors as selectors
from labkit.allocator.selectors import SelectorEngine, SelectorRuntimeError, learn_device
from labkit.cel import compile_selector
from labkit.cel.device import convertible, device_input, projection
from labkit.cel.literals import device_references

DRV = "gpu.example.com"


@pytest.mark.parametrize(("expr", "refs"), [
    ("device.driver == 'x'", (("driver", None, None),)),
    (f"device.attributes['{DRV}'].type == 'gpu'", (("attributes", DRV, "type"),)),
    (f'device.attributes["{DRV}"]["type"] == "gpu"', (("attributes", DRV, "type"),)),
    (f"device.capacity['{DRV}'].memory.compareTo(quantity('1Gi')) >= 0", (("capacity", DRV, "memory"),)),
    (f"'type' in device.attributes['{DRV}']", (("attributes", DRV, None),)),
    (f"device.attributes['{DRV}'].exists(k, k == 'type')", (("attributes", DRV, None),)),
    ("'x' in device.attributes", (("attributes", None, None),)),
    ("device.allowMultipleAllocations", (("multi", None, None),)),
    ("device . driver == 'a' || device.driver == 'b'", (("driver", None, None),)),
    ("cel.bind(d, device, d.driver == 'a')", None),
    ("[1].exists(device, device > 0)", None),
    # an index that is not a plain string literal reads the whole map
    ("device.attributes[device.driver].type == 'gpu'", (("attributes", None, None), ("driver", None, None))),
    ("device.attributes[?'a'].type == 'gpu'", (("attributes", None, None),)),
    (r"device.attributes['a\x62'].type == 'gpu'", None),
    ("device.attributes[r'a'].type == 'gpu'", None),
    ("device.driver == 'a' // comment", None),
    ("device.unknownField", None),
])
def test_device_references(expr, refs):
    assert device_references(expr) == refs


def _device(rng: random.Random, i: int) -> dict:
    attrs: dict = {"uuid": {"string": f"GPU-{i}"}}
    if rng.random() < 0.8:
        attrs["type"] = {"string": rng.choice(["gpu", "mig"])}
    if rng.random() < 0.3:
        attrs[f"{DRV}/type"] = {"string": rng.choice(["gpu", "vfio"])}  # collides with the bare name
    if rng.random() < 0.7:
        attrs["driverVersion"] = {"version": rng.choice(["1.2.3", "2.0.0", "1.2.3+build"])}
    if rng.random() < 0.5:
        attrs["other.example.com/numa"] = {"int": rng.choice([0, 1])}
    if rng.random() < 0.3:
        attrs["flag"] = {"bool": rng.choice([True, False])}
    if rng.random() < 0.05:
        attrs["broken"] = {"version": "not-semver"}  # the device converts with an error
    if rng.random() < 0.05:
        attrs["odd"] = {"int": True}  # a bool where an int belongs: an error too
    dev: dict = {"name": f"d{i}", "attributes": attrs}
    if rng.random() < 0.7:
        dev["capacity"] = {"memory": {"value": rng.choice(["40Gi", "80Gi", "81920Mi"])}}
    if rng.random() < 0.2:
        dev["allowMultipleAllocations"] = True
    return dev


EXPRESSIONS = [
    f"device.driver == '{DRV}' && device.attributes['{DRV}'].type == 'gpu'",
    f"device.attributes['{DRV}'].type == 'gpu'",
    f"has(device.attributes['{DRV}'].type)",
    f"device.attributes['{DRV}'].driverVersion.isGreaterThan(semver('1.5.0'))",
    f"device.capacity['{DRV}'].memory.compareTo(quantity('80Gi')) >= 0",
    "device.attributes['other.example.com'].numa == 1",
    "has(device.attributes['other.example.com'].numa)",
    f"'flag' in device.attributes['{DRV}']",
    f"device.attributes['{DRV}'].exists(k, k == 'flag')",
    "'other.example.com' in device.attributes",
    "device.allowMultipleAllocations",
    f"device.attributes['{DRV}'].uuid.startsWith('GPU-1')",
]


def _fresh(expr: str, dev: dict) -> object:
    try:
        return bool(compile_selector(expr).evaluate(device_input(DRV, dev)))
    except Exception as exc:  # noqa: BLE001 - compared by kind
        return type(exc).__name__


def test_shared_results_equal_a_fresh_evaluation_of_every_device():
    rng = random.Random(7)
    devices = [_device(rng, i) for i in range(300)]
    shared = 0
    for expr in EXPRESSIONS:
        engine = SelectorEngine()
        prog = engine.compile(expr)
        for dev in devices:
            want = _fresh(expr, dev)
            try:
                got: object = engine.matches(prog, DRV, dev, {})
            except SelectorRuntimeError:
                got = "error"
            assert (got == "error") == isinstance(want, str), (expr, dev, want)
            if not isinstance(want, str):
                assert got == want, (expr, dev)
            shared += projection(device_references(expr) or (), DRV, dev) is not None
    assert shared > 1000  # the memo was actually used


def test_devices_learned_in_advance_give_the_same_results():
    """The sim learns each device when its slice arrives (learn_device: does it convert to CEL);
    verdicts() through that memo equals a fresh evaluation of every device."""
    rng = random.Random(11)
    devices = [_device(rng, i) for i in range(300)]

    class View:  # what Allocator.candidates hands verdicts(): a device view
        def __init__(self, raw: dict) -> None:
            self.raw, self.cel_memo = raw, {}
            self.slice = type("S", (), {"driver": DRV})()
            learn_device(DRV, raw, self.cel_memo)

    views = [View(d) for d in devices]
    assert any(v.cel_memo["convertible"] for v in views) and not all(v.cel_memo["convertible"] for v in views)
    for expr in EXPRESSIONS:
        got = SelectorEngine().verdicts(expr, views)
        for view, verdict in zip(views, got, strict=True):
            want = _fresh(expr, view.raw)
            if isinstance(want, str):
                assert isinstance(verdict, SelectorRuntimeError), (expr, view.raw, verdict)
            else:
                assert verdict is want, (expr, view.raw)


def test_an_unconvertible_device_never_takes_a_memoised_result():
    good = {"name": "a", "attributes": {"type": {"string": "gpu"}}}
    bad = {"name": "b", "attributes": {"type": {"string": "gpu"}, "v": {"version": "x.y"}}}
    assert convertible(DRV, good) and not convertible(DRV, bad)
    engine = SelectorEngine()
    prog = engine.compile(f"device.attributes['{DRV}'].type == 'gpu'")
    assert engine.matches(prog, DRV, good, {}) is True
    with pytest.raises(SelectorRuntimeError):
        engine.matches(prog, DRV, bad, {})


def test_a_device_edited_in_place_is_seen_through_the_shared_memo():
    dev = {"name": "a", "attributes": {"type": {"string": "gpu"}}}
    engine = SelectorEngine()
    prog = engine.compile(f"device.attributes['{DRV}'].type == 'gpu'")
    assert engine.matches(prog, DRV, dev, {}) is True
    dev["attributes"]["type"]["string"] = "mig"
    assert SelectorEngine().matches(prog, DRV, dev, {}) is False


def test_shared_results_stay_bounded_and_drop_the_oldest(monkeypatch):
    """Full, the memo drops its oldest entry for each new one (every device unique, as 1,024
    devices with an index attribute each): bounded, newest kept, results still right."""
    monkeypatch.setattr(selectors, "_SHARED_RESULTS", type(selectors._SHARED_RESULTS)())
    monkeypatch.setattr(selectors, "_SHARED_RESULTS_MAX", 50)
    engine = SelectorEngine()
    expr = f"device.attributes['{DRV}'].index % 3 == 0"
    prog = engine.compile(expr)
    for i in range(200):
        dev = {"name": f"d{i}", "attributes": {f"{DRV}/index": {"int": i}}}
        assert engine.matches(prog, DRV, dev, {}) == (i % 3 == 0)
    keys = list(selectors._SHARED_RESULTS)
    assert len(keys) == 50

    def key(dev: dict) -> tuple | None:  # the part of a memo key that is the device's
        return projection(selectors._refs(expr), DRV, dev)

    newest = {"name": "d199", "attributes": {f"{DRV}/index": {"int": 199}}}
    assert keys[-1][1] == key(newest)
    oldest = {"name": "d0", "attributes": {f"{DRV}/index": {"int": 0}}}
    assert key(oldest) not in {k[1] for k in keys}
