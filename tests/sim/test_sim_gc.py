"""What the sim does to stay fast on a big fleet: the collector's settings while it runs
(labkit.sim.engine.fewer_collections) and slices converted as they arrive (labkit.sim.dra)."""

from __future__ import annotations

import gc

import pytest

from labkit.sim.engine import GC_YOUNG_THRESHOLD, fewer_collections


@pytest.fixture()
def unfrozen():
    gc.unfreeze()
    yield
    gc.unfreeze()


def test_blocks_freeze_what_exists_and_the_outermost_unfreezes(unfrozen):
    before = gc.get_threshold()
    kept = [{"i": i} for i in range(100)]
    # (checked on objects of the test's own: frozen ones are out of gc.get_objects(); counts also drop when a
    # frozen object is freed, e.g. by another thread)
    with fewer_collections():
        assert gc.get_threshold()[0] == GC_YOUNG_THRESHOLD
        assert not any(o is kept for o in gc.get_objects())
        made = [[i] for i in range(100)]
        assert any(o is made for o in gc.get_objects())
        with fewer_collections():  # a sim run() inside an experiment: what the outer made is frozen too
            assert not any(o is made for o in gc.get_objects())
        assert not any(o is made for o in gc.get_objects())  # the inner block does not unfreeze
    assert gc.get_freeze_count() == 0
    assert any(o is kept for o in gc.get_objects()) and any(o is made for o in gc.get_objects())
    assert gc.get_threshold() == before


def test_a_cycle_made_inside_is_collected_after_the_block(unfrozen):
    class Node:
        pass

    with fewer_collections():
        a, b = Node(), Node()
        a.other, b.other = b, a
        with fewer_collections():  # freezes the cycle
            pass
        del a, b
        assert not any(type(o) is Node for o in gc.get_objects())  # frozen: out of sight
    gc.collect()
    assert not any(type(o) is Node for o in gc.get_objects())


def test_a_callers_own_freeze_is_left_alone(unfrozen):
    """Checked on objects of its own: the frozen count also drops when any frozen object is freed (another
    thread's, say), so comparing counts failed now and then (CI, 1550107 -> 1550105)."""
    mine = [[i] for i in range(100)]
    gc.freeze()
    made = []
    with fewer_collections():
        with fewer_collections():
            made.append([[i] for i in range(100)])
            gc.collect(0)  # a block that froze would freeze what survives this
        assert not any(o is mine for o in gc.get_objects())  # still frozen: out of the collector's sight
    assert not any(o is mine for o in gc.get_objects())  # the outermost block did not unfreeze it
    assert any(o is made[0] for o in gc.get_objects())  # and the blocks froze nothing of their own


def test_disabled_collector_is_left_alone(unfrozen):
    gc.disable()
    try:
        with fewer_collections():
            assert gc.get_freeze_count() == 0
    finally:
        gc.enable()


def test_survivors_of_a_collection_are_frozen_until_the_block_ends(unfrozen):
    """An object that lives through one collection inside a block is not walked by later ones."""
    with fewer_collections():
        kept = [[i] for i in range(1000)]
        gc.collect(0)  # kept survives: frozen after this collection
        assert not any(o is kept for o in gc.get_objects())
    assert gc.get_freeze_count() == 0
    assert all(getattr(c, "__name__", "") != "_freeze_survivors" for c in gc.callbacks)
    before = gc.get_freeze_count()
    gc.collect(0)  # outside a block, collections freeze nothing
    assert gc.get_freeze_count() == before == 0


def test_the_sim_converts_a_slice_when_it_arrives():
    """Like kube-scheduler's informer: slices and their devices are converted as they are stored,
    not in the first scheduling cycle that looks at them; an updated slice is converted anew."""
    from labkit.allocator.model import _SLICES
    from labkit.cluster import connect

    c = connect("sim", "tiny", progress=False)
    stored = c.sim.store.list("ResourceSlice")
    assert stored
    for raw in stored:
        entry = _SLICES.get(id(raw))
        assert entry is not None and entry.raw is raw
        devices = entry.info.__dict__.get("devices")  # already built, not lazily on first read
        assert devices is not None and all("convertible" in d.cel_memo for d in devices)
        # capacities and counters parsed, and the slice's own facts worked out
        assert all("capacity" in d.__dict__ and "consumes" in d.__dict__ for d in devices)
        assert {"device_names", "consumes_counters", "uses_compat_groups"} <= entry.info.__dict__.keys()
    gpu = next(s for s in stored if s["spec"]["devices"])
    edited = {**gpu, "spec": {**gpu["spec"], "devices": gpu["spec"]["devices"][:1]}}
    c.apply([edited])
    now = c.sim.store.get("ResourceSlice", gpu["metadata"]["name"], None)
    assert len(_SLICES[id(now)].info.__dict__["devices"]) == 1


def test_devices_with_the_same_capacities_share_one_parsed_map():
    """The GPUs of a fleet share their parsed capacity map; other values, or a request policy,
    get their own, and a slice edited in place is read anew (its values, not the shared map's)."""
    from labkit.allocator.model import convert_slices

    def dev(name: str, memory: dict) -> dict:
        return {"name": name, "capacity": {"memory": memory}}

    raw = {"metadata": {"name": "s"}, "spec": {"driver": "d", "pool": {"name": "p", "resourceSliceCount": 1},
                                                "nodeName": "n", "devices": [
        dev("a", {"value": "80Gi"}), dev("b", {"value": "80Gi"}), dev("c", {"value": "40Gi"}),
        dev("d", {"value": "80Gi", "requestPolicy": {"default": "1Gi"}})]}}
    a, b, c, d = convert_slices([raw])[0].devices
    assert a.capacity is b.capacity and a.capacity["memory"].value == 80 * 2**30
    assert c.capacity["memory"].value == 40 * 2**30 and c.capacity is not a.capacity
    assert d.capacity is not a.capacity and d.capacity["memory"].policy == {"default": "1Gi"}
    assert a.plain_capacity and not d.plain_capacity
    raw["spec"]["devices"][0]["capacity"]["memory"]["value"] = "20Gi"
    again = convert_slices([raw])[0].devices
    assert again[0].capacity["memory"].value == 20 * 2**30 and again[1].capacity["memory"].value == 80 * 2**30
