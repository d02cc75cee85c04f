"""Converted slices, pools and selector results are reused across Allocator instances, and never
served stale: a slice dict edited in place (a learner in a notebook) or replaced in a store (the
sim) is converted again."""

from __future__ import annotations

from labkit.allocator import Allocator, features_for
from labkit.sim.store import Store, copy_of
from tests import builders as b

DRV = "gpu.example.com"
F = features_for("1.37")


def _class() -> dict:
    return b.device_class("gpu", f'device.driver == "{DRV}"')


def _slice(models: list[str]) -> dict:
    return b.resource_slice("n1", DRV, devices=[b.device(f"gpu-{i}", attributes={"model": m})
                                                for i, m in enumerate(models)], name="n1-gpus")


def _claim(model: str, count: int = 1) -> dict:
    return b.claim("c", requests=[b.request("g", device_class="gpu", allocation_mode="ExactCount", count=count,
                                            selectors=[f'device.attributes["{DRV}"].model == "{model}"'])])


NODE = b.node("n1")


def _devices(out) -> list[str]:
    assert out.status == "allocated", (out.status, out.error)
    return [r["device"] for r in out.allocations[0]["devices"]["results"]]


def test_unchanged_plain_slices_are_converted_once_across_allocators():
    slices = [_slice(["A100", "H100"])]
    first = Allocator(F, [_class()], slices)
    assert _devices(first.allocate(NODE, [_claim("H100")])) == ["gpu-1"]
    second = Allocator(F, [_class()], slices)
    assert _devices(second.allocate(NODE, [_claim("H100")])) == ["gpu-1"]
    assert second.slices[0] is first.slices[0]
    assert second.pools_for(NODE) is first.pools_for(NODE)


def test_an_attribute_edited_in_place_is_seen_by_the_next_allocator():
    slices = [_slice(["A100", "H100", "A100"])]
    assert _devices(Allocator(F, [_class()], slices).allocate(NODE, [_claim("H100")])) == ["gpu-1"]
    # deep, in-place edits: the selector result and the candidate list must not be reused
    slices[0]["spec"]["devices"][1]["attributes"]["model"]["string"] = "A100"
    slices[0]["spec"]["devices"][2]["attributes"]["model"] = {"string": "H100"}
    assert _devices(Allocator(F, [_class()], slices).allocate(NODE, [_claim("H100")])) == ["gpu-2"]
    slices[0]["spec"]["devices"][2]["attributes"]["model"]["string"] = "B200"
    out = Allocator(F, [_class()], slices).allocate(NODE, [_claim("H100")])
    assert out.status == "unsatisfiable"


def test_devices_added_and_removed_in_place_are_seen():
    slices = [_slice(["H100"])]
    assert Allocator(F, [_class()], slices).allocate(NODE, [_claim("H100", 2)]).status == "unsatisfiable"
    slices[0]["spec"]["devices"].append({"name": "gpu-9", "attributes": {"model": {"string": "H100"}}})
    assert _devices(Allocator(F, [_class()], slices).allocate(NODE, [_claim("H100", 2)])) == ["gpu-0", "gpu-9"]
    del slices[0]["spec"]["devices"][0]
    assert Allocator(F, [_class()], slices).allocate(NODE, [_claim("H100", 2)]).status == "unsatisfiable"


def test_a_taint_added_in_place_and_a_device_taint_rule_are_seen():
    slices = [_slice(["H100", "H100"])]
    assert _devices(Allocator(F, [_class()], slices).allocate(NODE, [_claim("H100")])) == ["gpu-0"]
    slices[0]["spec"]["devices"][0]["taints"] = [{"key": "broken", "effect": "NoSchedule"}]
    assert _devices(Allocator(F, [_class()], slices).allocate(NODE, [_claim("H100")])) == ["gpu-1"]
    rule = {"apiVersion": "resource.k8s.io/v1alpha3", "kind": "DeviceTaintRule", "metadata": {"name": "r"},
            "spec": {"deviceSelector": {"device": "gpu-1"}, "taint": {"key": "x", "effect": "NoSchedule"}}}
    out = Allocator(F, [_class()], slices, taint_rules=[rule]).allocate(NODE, [_claim("H100")])
    assert out.status == "unsatisfiable"
    assert _devices(Allocator(F, [_class()], slices).allocate(NODE, [_claim("H100")])) == ["gpu-1"]


def test_versioned_store_objects_are_reused_until_their_resource_version_changes():
    store = Store()
    store.create(_slice(["A100", "H100"]))
    listed = store.list("ResourceSlice")
    a = Allocator(F, [_class()], listed, versioned=True)
    assert _devices(a.allocate(NODE, [_claim("H100")])) == ["gpu-1"]
    b = Allocator(F, [_class()], store.list("ResourceSlice"), versioned=True)
    assert b.slices[0] is a.slices[0]
    new = copy_of(listed[0])
    new["spec"]["devices"][1]["attributes"]["model"]["string"] = "A100"
    new["spec"]["devices"][0]["attributes"]["model"]["string"] = "H100"
    store.update(new)
    c = Allocator(F, [_class()], store.list("ResourceSlice"), versioned=True)
    assert c.slices[0] is not a.slices[0]
    assert _devices(c.allocate(NODE, [_claim("H100")])) == ["gpu-0"]


def test_a_class_selector_edited_in_place_is_seen():
    slices = [_slice(["H100"])]
    cls = _class()
    assert _devices(Allocator(F, [cls], slices).allocate(NODE, [_claim("H100")])) == ["gpu-0"]
    cls["spec"]["selectors"][0]["cel"]["expression"] = 'device.driver == "other.example.com"'
    assert Allocator(F, [cls], slices).allocate(NODE, [_claim("H100")]).status == "unsatisfiable"
