"""labkit.sim.engine.fewer_collections: the collector's settings while the sim runs."""

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
    with fewer_collections():
        assert gc.get_threshold()[0] == GC_YOUNG_THRESHOLD
        outer = gc.get_freeze_count()
        assert outer >= len(kept)
        made = [[i] for i in range(100)]
        with fewer_collections():  # a sim run() inside an experiment: what the outer made is frozen too
            assert gc.get_freeze_count() >= outer + len(made)
        assert gc.get_freeze_count() >= outer + len(made)  # the inner block does not unfreeze
    assert gc.get_freeze_count() == 0
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
    gc.freeze()
    mine = gc.get_freeze_count()
    with fewer_collections():
        with fewer_collections():
            pass
        assert gc.get_freeze_count() == mine
    assert gc.get_freeze_count() == mine


def test_disabled_collector_is_left_alone(unfrozen):
    gc.disable()
    try:
        with fewer_collections():
            assert gc.get_freeze_count() == 0
    finally:
        gc.enable()
