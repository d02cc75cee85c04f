"""labkit.experiments metrics, fragmentation, plots and CLI (hand-computed mini timelines)."""

from __future__ import annotations

import csv
import io
import json
import math
import random

import pytest

from labkit.cli import main as labkit_main
from labkit.experiments.fleet import DeviceInfo, GpuInfo, alibaba_fleet, build_fleet, fleet_variant
from labkit.experiments.fragmentation import FragmentationMeter, node_fragmentation, states_fragmentation
from labkit.experiments.ledger import GpuUse, Ledger
from labkit.experiments.metrics import (
    SUMMARY_KEYS,
    PodRecord,
    SummaryTable,
    percentile,
    summarize_run,
    time_average,
)
from labkit.experiments.traces import WorkItem


def sample(t, alloc, need, frag=0.0, free=100.0, busy=1.0, pending=0.0):
    return {"t": t, "alloc_mem_gib": alloc, "need_mem_gib": need, "alloc_compute": alloc / 10,
            "need_compute": need / 20, "gpus_busy": busy, "pending": pending, "running": 1.0,
            "frag_gib": frag, "free_gib": free}


def test_summary_on_a_hand_computed_timeline():
    # 0-10 s: 40 GiB held, 10 needed (25%); 10-30 s: 80 held, 60 needed (75%); then nothing held
    tl = [sample(0, 40, 10, frag=10, free=40), sample(10, 80, 60, frag=0, free=0), sample(30, 0, 0, frag=0, free=80),
          sample(40, 0, 0)]
    recs = [PodRecord("a", "inference", 0, start=0), PodRecord("b", "inference", 0, start=10),
            PodRecord("c", "inference", 5, start=35), PodRecord("d", "finetune", 1)]
    s = summarize_run("p", recs, tl, wall_s=2.0)
    assert s["mem_util_pct"] == pytest.approx(100 * (10 * 0.25 + 20 * 0.75) / 30)
    assert s["compute_util_pct"] == pytest.approx(50 * (10 * 0.25 + 20 * 0.75) / 30)
    assert s["placed"] == 3 and s["never_placed"] == 1
    assert s["wait_p50_s"] == 10 and s["wait_p95_s"] == 30  # waits 0, 10, 30 (nearest rank)
    assert s["frag_gib_mean"] == pytest.approx((10 * 10 + 0 * 20 + 0 * 10) / 40)
    assert s["frag_pct_of_free"] == pytest.approx(100 * 2.5 / ((40 * 10 + 0 + 80 * 10) / 40))
    assert s["pods_per_s"] == 1.5 and s["sim_seconds"] == 40


def test_percentile_and_average_edges():
    assert math.isnan(percentile([], 50))
    assert percentile([3, 1, 2], 100) == 3 and percentile([3, 1, 2], 1) == 1
    assert math.isnan(time_average([sample(0, 0, 0), sample(5, 0, 0)], "need_mem_gib", "alloc_mem_gib"))


def test_summary_table_text_and_html():
    t = SummaryTable([{"policy": "a", "pods": 3, "mem_util_pct": 12.345}], keys=("policy", "pods", "mem_util_pct"))
    text = str(t)
    assert text.splitlines()[0].split() == ["policy", "pods", "mem_util_pct"]
    assert "12.3" in text
    html = t._repr_html_()
    assert "<table" in html and "<td>a</td>" in html and "<td>12.3</td>" in html and "mem util pct" in html
    full = SummaryTable([{k: 1.0 for k in SUMMARY_KEYS} | {"policy": "dynamic-mig"}])._repr_html_()
    assert "wall s" not in full and "not shown: wall_s, pods_per_s, setup_s" in full


def test_plot_lines_of_coinciding_policies_stay_visible(tmp_path):
    from types import SimpleNamespace

    from labkit.experiments.plots import plot_results

    timeline = [{"t": 600 * i, **{k: float(i % 3) for k in ("alloc_mem_gib", "need_mem_gib", "alloc_compute",
                                                          "need_compute", "gpus_busy", "pending", "wait_mean_s",
                                                          "frag_gib")}} for i in range(30)]
    runs = [SimpleNamespace(policy=p, timeline=timeline, summary={"mem_util_pct": 50.0, "wait_p95_s": 60.0})
            for p in ("a", "b", "c")]
    fig = plot_results(SimpleNamespace(runs=runs), tmp_path / "p.png")
    lines = fig.axes[0].get_lines()[::2]  # the solid (allocated) line of each policy
    assert len({line.get_marker() for line in lines}) == 3
    assert lines[0].get_linewidth() > lines[1].get_linewidth() > lines[2].get_linewidth()
    assert (tmp_path / "p.png").stat().st_size > 10_000


def gpu(name="gpu-0", mem=40.0, nvlink="nv0", whole=True, static=()):
    return GpuUse(GpuInfo(name, mem, nvlink, whole, tuple(static)))


def test_fragmentation_for_shares():
    a, b = gpu("gpu-0"), gpu("gpu-1")
    dev = DeviceInfo("gpu-0", "gpu-0", 40.0, 1.0)
    a.devices["gpu-0"] = dev
    a.need_mem["gpu-0"] = 36.0  # 4 GiB headroom on a shared GPU
    mix = [(0, 10.0, 1.0)]
    assert node_fragmentation([a, b], mix, sharing=True) == pytest.approx(4.0)
    assert node_fragmentation([a, b], mix, sharing=False) == 0.0  # no sharing: no headroom pieces
    static = [DeviceInfo(f"m{i}", "gpu-0", 4.75, 1 / 7, "1g.5gb") for i in range(2)] + [
        DeviceInfo("m3", "gpu-0", 19.5, 3 / 7, "3g.20gb")]
    s = gpu(whole=False, static=static)
    assert node_fragmentation([s], mix, sharing=False) == pytest.approx(9.5)  # two 1g devices too small


def test_fragmentation_for_whole_gpu_jobs():
    states = (((80.0,), True, "nv0", 80.0), ((30.0,), False, "nv0", 80.0), ((80.0,), True, "nv0", 80.0))
    assert states_fragmentation(states, [(2, 0.0, 1.0)]) == pytest.approx(30.0)  # 2 idle: only the scrap
    assert states_fragmentation(states, [(4, 0.0, 1.0)]) == pytest.approx(190.0)  # cannot fit: all free
    assert states_fragmentation(states, [(2, 0.0, 0.5), (0, 40.0, 0.5)]) == pytest.approx(15.0 + 15.0)


def test_ledger_and_meter_follow_pods():
    prof = {"name": "t", "kubernetesVersion": "1.37", "nodes": [{"name": "n", "nodeProfile": "mig-a100",
                                                                 "migMode": "none"}]}
    fleet = build_fleet(fleet_variant(prof, "none"))
    led = Ledger(fleet)
    meter = FragmentationMeter(led, [(0, 10.0, 1.0)], sharing=True)
    assert meter.fleet() == (0.0, 160.0)
    led.add_pod("a", WorkItem("a", "inference", 0, 1, 0, 32.0, 0.5), "n", ["gpu-0"])
    led.add_pod("b", WorkItem("b", "inference", 0, 1, 0, 4.0, 0.2), "n", ["gpu-0"])  # shares the GPU
    tot = led.totals()
    assert tot["alloc_mem_gib"] == 40.0 and tot["need_mem_gib"] == 36.0 and tot["gpus_busy"] == 1
    assert tot["need_compute"] == pytest.approx(0.7)
    assert meter.fleet() == (pytest.approx(4.0), pytest.approx(124.0))
    led.remove_pod("a")
    assert led.totals()["need_mem_gib"] == pytest.approx(4.0)
    led.remove_pod("b")
    assert led.totals()["gpus_busy"] == 0 and meter.fleet() == (0.0, 160.0)


def run_cli(capsys, *argv):
    rc = labkit_main(["experiment", "run", *argv])
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_cli_json_csv_and_plot(capsys, tmp_path):
    png = tmp_path / "x.png"
    rc, out, _ = run_cli(capsys, "--trace", "synthetic", "--pods", "12", "--fleet", "exp-small",
                         "--policy", "whole-gpu,shared", "-o", "json", "--plot", str(png), "--timeline")
    assert rc == 0
    doc = json.loads(out)
    assert [r["policy"] for r in doc["summary"]] == ["whole-gpu", "shared"]
    assert set(doc["timelines"]) == {"whole-gpu", "shared"}
    assert {"mem_util_pct", "wait_p95_s", "never_placed", "frag_gib_mean"} <= set(doc["summary"][0])
    assert png.stat().st_size > 10_000 and png.read_bytes()[:4] == b"\x89PNG"
    rc, out, _ = run_cli(capsys, "--trace", "alibaba-sample", "--limit", "10", "--policy", "shared", "-o", "csv")
    assert rc == 0
    rows = list(csv.DictReader(io.StringIO(out)))
    assert len(rows) == 1 and rows[0]["policy"] == "shared" and rows[0]["pods"] == "10"


@pytest.mark.parametrize("argv, msg, code", [
    (["--trace", "nope.csv"], "trace 'nope.csv': no such file", 3),  # not found
    (["--policy", "bogus"], "policy 'bogus': unknown", 2),
    (["--fleet", "no-such-fleet"], "no-such-fleet", 3),  # not found
    (["--policy", ","], "--policy: give at least one policy name", 2),  # --limit -1: test_security_cli_numbers.py
])
def test_cli_bad_input_is_one_line(capsys, argv, msg, code):
    rc, out, err = run_cli(capsys, *argv)
    assert rc == code and out == ""
    assert msg in err and err.count("\n") == 1 and "Traceback" not in err


def test_cli_bad_trace_row(capsys, tmp_path):
    from labkit.experiments.alibaba import HEADER

    p = tmp_path / "bad.csv"
    p.write_text(",".join(HEADER) + "\np,1000,2048,1,500,,LS,Succeeded,x,10,0\n")
    rc, _, err = run_cli(capsys, "--trace", str(p))
    assert rc == 2 and f"{p}:2: column creation_time" in err


def test_compute_utilisation_never_exceeds_what_was_allocated():
    from labkit.experiments import run_experiment
    from labkit.experiments.traces import generate

    results = run_experiment(generate(120, seed=0), "exp-small", ["dynamic-mig", "static-mig", "shared"])
    for row in results.summary().rows:
        assert row["compute_util_pct"] <= 100.0, row


def _random_ledger_ops(fleet, rng, steps):
    """Random add/remove of pods on random devices (shared devices included) of a mixed fleet."""
    live: list[str] = []
    for k in range(steps):
        if live and rng.random() < 0.4:
            yield "remove", live.pop(rng.randrange(len(live))), None, None, None
            continue
        node = rng.choice(fleet.nodes)
        names = sorted(fleet.kind_of[node].devices)
        devs = rng.sample(names, rng.choice([1, 1, 2]))
        item = WorkItem(f"p{k}", "inference", 0, 1, 0, round(rng.uniform(0.5, 40.0), 2), round(rng.uniform(0.05, 1.0), 3))
        live.append(item.name)
        yield "add", item.name, item, node, devs


@pytest.mark.parametrize("mig", ["none", "static", "dynamic"])
def test_ledger_cached_totals_equal_a_full_scan_bit_for_bit(mig):
    """totals() and the meter re-read only touched nodes; they must give exactly what a scan of
    every GPU / node gives."""
    fleet = build_fleet(fleet_variant(alibaba_fleet(0.02), mig))
    led = Ledger(fleet)
    meter = FragmentationMeter(led, [(0, 10.0, 0.5), (1, 0.0, 0.3), (2, 0.0, 0.2)], sharing=mig == "none")
    rng = random.Random(7)
    checked = 0
    for op, name, item, node, devs in _random_ledger_ops(fleet, rng, 600):
        if op == "add":
            led.add_pod(name, item, node, devs)
        else:
            led.remove_pod(name)
        if rng.random() < 0.3:  # several changes between reads, as between ticks
            assert led.totals() == led.totals_scan()
            assert meter.fleet() == meter.fleet_scan()
            checked += 1
    assert checked > 100 and led.totals() == led.totals_scan() and meter.fleet() == meter.fleet_scan()
    # the meter works a state out once for all nodes in it: each node's figure is still its own
    mix = meter.mix
    for n in fleet.nodes:
        uses = led.gpus[n]
        assert meter.node(n) == (node_fragmentation(uses, mix, meter.sharing),
                                 sum(sum(u.chunks(meter.sharing)) for u in uses))
    assert led.totals_scan()["gpus_busy"] > 0
