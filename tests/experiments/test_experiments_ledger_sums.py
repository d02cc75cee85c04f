"""The experiment's per-tick totals, kept incrementally, are the floats a left-to-right `+=` scan
of the busy GPUs gives, bit for bit (the timelines of earlier runs stay comparable), whether or
not the interpreter's sum() rounds each step (3.12 made it compensated)."""

from __future__ import annotations

import random

import pytest

from labkit.experiments import ledger as ledger_mod
from labkit.experiments.fleet import DeviceInfo, GpuInfo, alibaba_fleet, build_fleet, fleet_variant
from labkit.experiments.fragmentation import FragmentationMeter, gpu_states
from labkit.experiments.ledger import GpuUse, Ledger, sequential_sum
from labkit.experiments.traces import WorkItem


def _loop(values):
    total = 0.0
    for v in values:
        total += v
    return total


@pytest.fixture(params=["builtin sum", "reduce"])
def summing(request, monkeypatch):
    """Both ways sequential_sum adds: the builtin sum() where it rounds each step, reduce() elsewhere."""
    if request.param == "reduce":
        monkeypatch.setattr(ledger_mod, "_SUM_IS_SEQUENTIAL", False)
    return request.param


def test_sequential_sum_rounds_each_step_as_a_loop_does(summing):
    # a compensated (or exact) sum gives 1.0 and 1e16 + 2; one rounding per step gives 0.0 and 1e16
    assert sequential_sum([1e100, 1.0, -1e100]) == _loop([1e100, 1.0, -1e100]) == 0.0
    assert sequential_sum([1e16, 1.0, 1.0]) == _loop([1e16, 1.0, 1.0]) == 1e16
    assert sequential_sum([]) == 0.0 and str(sequential_sum([-0.0])) == "0.0"
    rng = random.Random(3)
    for _ in range(200):
        values = [round(rng.uniform(0.5, 40.0), rng.choice((2, 3))) * 10 ** rng.randint(-3, 12) for _ in range(50)]
        assert sequential_sum(values) == _loop(values)


def _item(name, mem, compute=1.0):
    return WorkItem(name, "inference", 0, 1, 0, mem, compute)


def _one_gpu_devices(fleet, node):
    kind = fleet.kind_of[node]
    return [next(d for d, info in kind.devices.items() if info.gpu == g.name and not info.profile) for g in kind.gpus]


def test_totals_keep_the_fleet_order_of_the_sums_as_nodes_change(summing):
    """Busy GPUs added and removed in any order: totals() adds them up in fleet order, as the scan
    does, so a huge need before two small ones swallows them, and after it is gone they count."""
    fleet = build_fleet(fleet_variant(alibaba_fleet(0.02), "none"))
    led = Ledger(fleet)
    first, mid, last = fleet.nodes[0], fleet.nodes[len(fleet.nodes) // 2], fleet.nodes[-1]
    led.add_pod("small-1", _item("small-1", 1.0), last, _one_gpu_devices(fleet, last)[:1])
    led.add_pod("small-2", _item("small-2", 1.0), mid, _one_gpu_devices(fleet, mid)[1:2])
    assert led.totals()["need_mem_gib"] == 2.0
    led.add_pod("huge", _item("huge", 1e16), first, _one_gpu_devices(fleet, first)[:1])
    tot = led.totals()
    assert tot == led.totals_scan() and tot["need_mem_gib"] == 1e16 and tot["gpus_busy"] == 3.0
    led.remove_pod("huge")
    led.add_pod("huge-2", _item("huge-2", 1e16), last, _one_gpu_devices(fleet, last)[1:2])  # now after them
    tot = led.totals()
    assert tot == led.totals_scan() and tot["need_mem_gib"] == 1e16 + 2.0
    for name in ("small-1", "small-2", "huge-2"):
        led.remove_pod(name)
    assert led.totals() == led.totals_scan() == {"alloc_mem_gib": 0.0, "need_mem_gib": 0.0, "alloc_compute": 0.0,
                                                 "need_compute": 0.0, "gpus_busy": 0.0}


@pytest.mark.parametrize("mig", ["none", "static", "dynamic"])
def test_totals_and_meter_equal_scans_under_random_changes(mig, summing):
    from tests.experiments.test_experiments_metrics import _random_ledger_ops

    fleet = build_fleet(fleet_variant(alibaba_fleet(0.02), mig))
    led = Ledger(fleet)
    meter = FragmentationMeter(led, [(0, 10.0, 0.5), (1, 0.0, 0.3), (2, 0.0, 0.2)], sharing=mig == "none")
    rng = random.Random(11)
    for op, name, item, node, devs in _random_ledger_ops(fleet, rng, 400):
        if op == "add":
            led.add_pod(name, item, node, devs)
        else:
            led.remove_pod(name)
        if rng.random() < 0.5:
            assert led.totals() == led.totals_scan()
            assert meter.fleet() == meter.fleet_scan()


def test_an_idle_gpus_state_is_what_its_free_pieces_give():
    """gpu_states() answers idle GPUs from their GpuInfo alone: the same state as reading the GPU,
    for whole, static-MIG and dynamic-MIG GPUs, and again after a GPU was busy and freed."""
    mig = (DeviceInfo("gpu-0-mig-a", "gpu-0", 20.0, 3 / 7, "3g.20gb"), DeviceInfo("gpu-0-mig-b", "gpu-0", 10.0, 2 / 7, "2g.10gb"))
    infos = [GpuInfo("gpu-0", 40.0, "nv0", True), GpuInfo("gpu-1", 80.0, "", False, mig),
             GpuInfo("gpu-2", 80.0, "", False, (), True), GpuInfo("gpu-3", 80.0, "", True)]

    def by_reading(uses, sharing):
        return tuple((tuple(u.chunks(sharing)), u.idle and (u.info.whole or u.info.dynamic_mig),
                      u.info.nvlink or u.info.name, u.info.mem_gib) for u in uses)

    uses = [GpuUse(i) for i in infos]
    for sharing in (False, True):
        assert gpu_states(uses, sharing) == by_reading(uses, sharing)
    uses[1].devices["gpu-0-mig-a"] = mig[0]
    uses[3].devices["gpu-3"] = DeviceInfo("gpu-3", "gpu-3", 80.0, 1.0)
    assert gpu_states(uses, True) == by_reading(uses, True)
    uses[1].devices.clear()
    uses[3].devices.clear()
    assert gpu_states(uses, True) == by_reading(uses, True)


def test_the_ledgers_gpus_read_as_every_node_of_the_fleet_in_order():
    """ledger.gpus makes a node's GpuUse list when first asked for; read through it, the ledger
    still holds every node of the fleet in fleet order, each GPU idle until a pod comes, and the
    meter's figure of a node nobody touched is what its idle GPUs give."""
    from labkit.experiments.fragmentation import node_fragmentation

    fleet = build_fleet(fleet_variant(alibaba_fleet(0.02), "static"))
    led = Ledger(fleet)
    mix = [(0, 10.0, 0.5), (1, 0.0, 0.3), (2, 0.0, 0.2)]
    meter = FragmentationMeter(led, mix, sharing=False)
    untouched = [meter.node(n) for n in fleet.nodes]
    assert list(led.gpus) == fleet.nodes and len(led.gpus) == len(fleet.nodes)
    assert fleet.nodes[0] in led.gpus and "no-such-node" not in led.gpus
    with pytest.raises(KeyError):
        led.gpus["no-such-node"]
    for n, uses in led.gpus.items():
        assert [u.info for u in uses] == list(fleet.kind_of[n].gpus) and all(u.idle for u in uses)
    assert untouched == [(node_fragmentation(led.gpus[n], mix, False), sum(sum(u.chunks(False)) for u in led.gpus[n]))
                         for n in fleet.nodes]
    node = fleet.nodes[1]
    dev = sorted(fleet.kind_of[node].devices)[0]
    led.add_pod("p", _item("p", 5.0), node, [dev])
    assert led.gpus[node] is led.gpus[node] and not all(u.idle for u in led.gpus[node])
    assert meter.fleet() == meter.fleet_scan() and led.totals() == led.totals_scan()
    led.remove_pod("p")
    assert meter.fleet() == meter.fleet_scan() and led.totals() == led.totals_scan()
    assert meter.node(node) == untouched[1]
