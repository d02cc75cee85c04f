"""labkit.experiments traces: synthetic generator and the Alibaba v2023 loader."""

from __future__ import annotations

import csv
import math
import statistics

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from labkit.cli import main
from labkit.experiments.alibaba import HEADER, SAMPLE, TraceError, load_alibaba, write_sample
from labkit.experiments.traces import MIG_MEMORY_GIB, describe, generate, request_mix


def test_generate_is_deterministic_per_seed():
    assert generate(200, seed=7) == generate(200, seed=7)
    assert generate(200, seed=7) != generate(200, seed=8)


@given(st.integers(0, 10_000), st.integers(1, 60))
@settings(max_examples=30, deadline=None)
def test_generate_invariants(seed, n):
    tr = generate(n, seed=seed)
    assert len(tr) == n
    assert [i.arrival for i in tr] == sorted(i.arrival for i in tr)
    assert len({i.name for i in tr}) == n
    for i in tr:
        assert i.duration > 0
        if i.kind == "inference":
            assert i.gpus == 0 and 2 <= i.gpu_mem_gib <= 20 and 0.05 <= i.compute <= 1
        elif i.kind == "mig":
            prof = i.tags["migProfile"]
            assert i.gpus == 0 and i.gpu_mem_gib <= MIG_MEMORY_GIB[prof] + 1e-9
            assert i.compute == pytest.approx(int(prof[0]) / 7, abs=1e-3)
        else:
            assert i.kind == "finetune" and i.gpus in (1, 2, 4, 8) and i.nvlink == (i.gpus > 1)


def test_generate_distributions():
    tr = generate(4000, seed=1, rate_per_min=6)
    kinds = [i.kind for i in tr]
    assert kinds.count("inference") / len(tr) == pytest.approx(0.55, abs=0.03)
    assert kinds.count("mig") / len(tr) == pytest.approx(0.30, abs=0.03)
    gaps = [b.arrival - a.arrival for a, b in zip(tr, tr[1:], strict=False)]
    assert statistics.mean(gaps) == pytest.approx(10.0, rel=0.06)  # Poisson, 6/min
    inf = [i.duration for i in tr if i.kind == "inference"]
    assert statistics.median(inf) == pytest.approx(600, rel=0.12)  # lognormal median
    assert statistics.mean(math.log(d) for d in inf) == pytest.approx(math.log(600), abs=0.08)


def test_describe_and_mix():
    tr = generate(100, seed=0)
    text = describe(tr)
    assert "Poisson" in text and "inference" in text and "100 items" in text
    mix = request_mix(tr)
    assert sum(w for *_, w in mix) == pytest.approx(1.0)
    assert all(g in (0, 1, 2, 4, 8) for g, _, _ in mix)


def test_generate_rejects_bad_rate():
    with pytest.raises(ValueError, match="rate_per_min"):
        generate(5, rate_per_min=0)


def test_sample_file_has_the_v2023_format():
    with open(SAMPLE, newline="") as fh:
        rows = list(csv.reader(fh))
    assert tuple(rows[0]) == HEADER
    assert 200 <= len(rows) - 1 <= 500
    body = [dict(zip(HEADER, r, strict=True)) for r in rows[1:]]
    assert {r["num_gpu"] for r in body} <= {str(n) for n in range(9)}
    assert any(r["scheduled_time"] == "" for r in body)
    assert any("|" in r["gpu_spec"] for r in body)
    assert {r["pod_phase"] for r in body} <= {"Succeeded", "Running", "Pending", "Failed"}


def test_sample_is_reproducible(tmp_path):
    write_sample(tmp_path / "s.csv")
    assert (tmp_path / "s.csv").read_text() == SAMPLE.read_text()


def test_load_sample_mapping():
    tr = load_alibaba(SAMPLE, gpu_mem_gib=80)
    with open(SAMPLE, newline="") as fh:
        rows = list(csv.DictReader(fh))
    gpu_rows = [r for r in rows if r["num_gpu"] != "0"]
    assert len(tr) == len(gpu_rows)  # CPU-only rows skipped
    assert len(load_alibaba(SAMPLE, keep_cpu=True)) == len(rows)
    by_name = {i.name: i for i in tr}
    r = next(r for r in gpu_rows if r["num_gpu"] == "1" and r["gpu_milli"] != "1000")
    it = by_name[r["name"]]
    assert it.gpus == 0 and it.gpu_mem_gib == pytest.approx(int(r["gpu_milli"]) / 1000 * 80)
    r8 = next(r for r in gpu_rows if r["num_gpu"] == "8")
    assert by_name[r8["name"]].gpus == 8 and by_name[r8["name"]].nvlink
    assert min(i.arrival for i in tr) == 0
    assert all(i.duration >= 1 for i in tr)


def _write(tmp_path, lines: list[str]):
    p = tmp_path / "t.csv"
    p.write_text("\n".join([",".join(HEADER), *lines]) + "\n")
    return p


@pytest.mark.parametrize("row, where", [
    ("p1,1000,2048,one,1000,,LS,Succeeded,0,10,0", ":2: column num_gpu: 'one' is not a number"),
    ("p1,1000,2048,9,1000,,LS,Succeeded,0,10,0", ":2: column num_gpu: '9' is out of range"),
    ("p1,1000,2048,1,1500,,LS,Succeeded,0,10,0", ":2: column gpu_milli"),
    ("p1,1000,2048,2,500,,LS,Succeeded,0,10,0", "multi-GPU pods take whole GPUs"),
    ("p1,1000,2048,1,500,,LS,Sleeping,0,10,0", ":2: column pod_phase: 'Sleeping'"),
    ("p1,1000,2048,1,500,,LS,Succeeded,50,10,50", ":2: column deletion_time"),
    ("p1,1000,2048,1,500,,LS,Succeeded,,10,0", ":2: column creation_time: empty"),
    ("p1,1000,2048,1,500,,LS", ":2: 7 columns, expected 11"),
])
def test_bad_rows_name_line_and_column(tmp_path, row, where):
    p = _write(tmp_path, ["ok,1000,2048,1,500,,LS,Succeeded,0,10,0", row])
    p.write_text(p.read_text().replace("ok,", "ok0,", 1))
    lines = p.read_text().splitlines()
    p.write_text("\n".join([lines[0], lines[2], lines[1]]) + "\n")  # the bad row on line 2
    with pytest.raises(TraceError) as exc:
        load_alibaba(p)
    msg = str(exc.value)
    assert where in msg and str(p) in msg and "\n" not in msg


def test_bad_header_and_missing_file(tmp_path):
    p = tmp_path / "h.csv"
    p.write_text("name,cpu,memory\n")
    with pytest.raises(TraceError, match=r"h.csv:1: header: missing"):
        load_alibaba(p)
    with pytest.raises(TraceError, match="no such file"):
        load_alibaba(tmp_path / "none.csv")


def test_unscheduled_and_running_rows(tmp_path):
    p = _write(tmp_path, ["a,1000,2048,1,250,V100M16|V100M32,BE,Pending,5,,",
                          "b,1000,2048,1,1000,,LS,Running,10,,12",
                          "c,1000,2048,0,0,,LS,Succeeded,0,100,0"])
    tr = load_alibaba(p, gpu_mem_gib=32)
    assert [i.name for i in tr] == ["a", "b"]
    a, b = tr
    assert a.arrival == 0 and b.arrival == 5 and a.gpu_spec == "V100M16|V100M32"
    assert a.gpu_mem_gib == pytest.approx(8.0)
    assert b.duration == 1.0  # runs until the last timestamp in the file (12) - started 12 -> 1 s floor


def test_missing_trace_file_is_not_found_exit_3(capsys, tmp_path):
    assert main(["experiment", "run", "--trace", str(tmp_path / "nope.csv")]) == 3
    err = capsys.readouterr().err.strip()
    assert err == (f"labkit experiment: trace '{tmp_path / 'nope.csv'}': no such file; "
                   "use synthetic, alibaba-sample, alibaba-shape or a CSV path")
