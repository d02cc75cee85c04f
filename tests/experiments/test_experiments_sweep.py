"""`labkit experiment sweep`: a grid of runs in parallel processes or on a Dask cluster gives the
same figures as running each cell serially; bad grids get one line and exit 2."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys

import distributed  # the dask extra, in the dev extra
import pytest

from labkit.cli import main as labkit_main
from labkit.experiments.alibaba import SHAPE_PODS, generate_alibaba
from labkit.experiments.fleet import alibaba_fleet, build_fleet, fleet_variant
from labkit.experiments.runner import run_policy
from labkit.experiments.sweep import (
    MEASURED_KEYS,
    Cell,
    Options,
    RowLog,
    make_grid,
    parse_seeds,
    run_logged,
    run_sweep,
)
from labkit.experiments.traces import generate
from tests.paths import REPO

pytestmark = pytest.mark.slow  # heavy: `make check` leaves it out, `make test` runs it

BENCH = REPO / "benchmarks" / "experiments_bench.py"
#: 2 policies x 2 traces x 2 seeds x 2 fleets = 16 small cells
GRID = ["--policies", "whole-gpu,frag-aware", "--traces", "synthetic:25,alibaba-shape:40",
        "--seeds", "0-1", "--fleets", "exp-small,alibaba-shape:0.005", "--rate", "20"]


def sweep_json(capsys, *argv: str) -> dict:
    rc = labkit_main(["experiment", "sweep", *GRID, "-o", "json", "--no-progress", *argv])
    out = capsys.readouterr()
    assert rc == 0, out.err
    return json.loads(out.out)


def sim_only(rows: list[dict]) -> list[dict]:
    return [{k: v for k, v in r.items() if k not in MEASURED_KEYS} for r in rows]


@pytest.fixture(scope="module")
def serial_rows() -> list[dict]:
    opts = Options(rate=20)
    cells = make_grid(["whole-gpu", "frag-aware"], ["synthetic:25", "alibaba-shape:40"], [0, 1],
                      ["exp-small", "alibaba-shape:0.005"], opts)
    res = run_sweep(cells, opts, workers=1, progress=False)
    assert res.engine == "serial" and len(res.rows) == 16
    return res.rows


def test_a_sweep_cell_is_the_plain_serial_run(serial_rows):
    row = next(r for r in serial_rows if r["trace"].startswith("synthetic") and r["fleet"] == "exp-small"
               and r["seed"] == 1 and r["policy"] == "frag-aware")
    run = run_policy(generate(25, seed=1, rate_per_min=20), "exp-small", "frag-aware", seed=1)
    assert sim_only([row])[0] == sim_only([{**row, **run.summary}])[0]
    assert row["placed"] == run.summary["placed"] == 25
    # grid order: trace, fleet, seed, policy
    assert [(r["fleet"], r["seed"], r["policy"]) for r in serial_rows[:4]] == [
        ("exp-small", 0, "whole-gpu"), ("exp-small", 0, "frag-aware"),
        ("exp-small", 1, "whole-gpu"), ("exp-small", 1, "frag-aware")]
    # the cells differ: a sweep that ignored its axes would repeat one row
    assert len({json.dumps(r, sort_keys=True) for r in sim_only(serial_rows)}) == 16


def test_local_processes_give_the_serial_figures(capsys, serial_rows):
    doc = sweep_json(capsys, "--workers", "2")
    assert doc["engine"] == "local x2" and doc["workers"] == 2
    assert sim_only(doc["rows"]) == json.loads(json.dumps(sim_only(serial_rows)))


def test_dask_cluster_gives_the_serial_figures(capsys, serial_rows):
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster:
        doc = sweep_json(capsys, "--address", cluster.scheduler_address)
    assert doc["engine"] == f"dask {cluster.scheduler_address}" and doc["workers"] == 2
    assert sim_only(doc["rows"]) == json.loads(json.dumps(sim_only(serial_rows)))


def test_table_and_progress_bar(capsys):
    rc = labkit_main(["experiment", "sweep", "--policies", "whole-gpu,shared", "--traces", "synthetic:10",
                      "--seeds", "3", "--workers", "1", "--progress"])
    out = capsys.readouterr()
    assert rc == 0, out.err
    lines = out.out.splitlines()
    assert lines[0].split()[:5] == ["trace", "fleet", "seed", "policy", "pods"]
    assert [ln.split(")", 1)[1].split()[:5] for ln in lines[1:3]] == [
        ["exp-small", "3", "whole-gpu", "10", "10"], ["exp-small", "3", "shared", "10", "10"]]
    assert lines[3].startswith("2 runs on serial (1 worker): ")
    assert "sweep: cells" in out.err and "2/2" in out.err


@pytest.mark.parametrize(("argv", "message"), [
    (["--policies", "whole-gpu,best-fits"], "policy 'best-fits': unknown; use one of whole-gpu,"),
    (["--policies", ""], "'': an empty value"),
    (["--traces", "synthetic,,alibaba-sample"], "'synthetic,,alibaba-sample': an empty value"),
    (["--seeds", "0,x"], "'x' is not a seed; use whole numbers from 0 to 4294967295"),
    (["--seeds", "-3"], "'-3' is not a seed"),
    (["--seeds", "5-2"], "'5-2' runs backwards; write the range low-high, e.g. 2-5"),
    (["--seeds", "1,1"], "'1' is given twice"),
    (["--fleets", "alibaba-shape:0"], "fleet 'alibaba-shape:0': alibaba-shape fleet scale 0.0: give a number in (0, 10]"),
    (["--traces", "alibaba-shape:many"], "trace 'alibaba-shape:many': 'many' is not a whole number of pods"),
    (["--workers", "0"], "'0' is out of range [1, "),
])
def test_bad_grid_is_argparses_error_naming_the_option_and_exit_2(capsys, argv, message):
    """A bad axis is refused while the options are parsed (before any work), in argparse's form."""
    with pytest.raises(SystemExit) as exit_:
        labkit_main(["experiment", "sweep", "--no-progress", *argv])
    err = capsys.readouterr().err
    assert exit_.value.code == 2
    assert err.startswith("usage: labkit experiment sweep"), err
    assert err.strip().splitlines()[-1].startswith(f"labkit experiment sweep: error: argument {argv[0]}: {message}"), err
    assert "Traceback" not in err


def test_a_missing_trace_file_is_not_found_exit_3(capsys):
    rc = labkit_main(["experiment", "sweep", "--no-progress", "--traces", "no-such.csv"])
    err = capsys.readouterr().err
    assert rc == 3
    assert err.startswith("labkit experiment: trace 'no-such.csv': no such file; use synthetic, alibaba-sample, "
                          "alibaba-shape"), err
    assert len(err.strip().splitlines()) == 1


def test_address_without_the_dask_extra_names_the_extra(capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)  # `import distributed` now fails
    rc = labkit_main(["experiment", "sweep", "--policies", "whole-gpu", "--traces", "synthetic:5",
                      "--address", "tcp://127.0.0.1:8786", "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 2
    assert err.strip() == ("labkit experiment: --address tcp://127.0.0.1:8786: running on a Dask cluster needs the 'dask' "
                           "extra; fix: pip install 'dra-labkit[dask]'")


def test_parse_seeds():
    assert parse_seeds("0-2,7,1") == [0, 1, 2, 7]
    assert parse_seeds(" 4 ") == [4]


def test_alibaba_shape_has_the_published_size():
    fleet = build_fleet(fleet_variant(alibaba_fleet(), "none"))
    assert (len(fleet.nodes), fleet.gpu_count) == (1213, 6212)
    assert fleet.common_gpu_mem_gib() == 80.0
    small = build_fleet(fleet_variant(alibaba_fleet(0.1), "none"))
    assert (len(small.nodes), small.gpu_count) == (121, 620)
    items = generate_alibaba(SHAPE_PODS, seed=0)
    assert SHAPE_PODS == 8152
    assert 7400 < len(items) < 7900  # ~6% CPU-only rows are dropped, as load_alibaba drops them
    assert max(i.arrival for i in items) < 7200
    kinds = {k: sum(1 for i in items if i.kind == k) for k in ("inference", "finetune")}
    assert kinds["inference"] > 2 * kinds["finetune"] > 0  # most pods share one GPU
    assert generate_alibaba(100, seed=3) == generate_alibaba(100, seed=3) != generate_alibaba(100, seed=4)


def test_cells_are_small_to_ship():
    assert len(pickle.dumps((Cell("whole-gpu", "alibaba-shape", 0, "alibaba-shape"), Options()))) < 400


class _Interrupt(Exception):
    pass


def test_an_interrupted_logged_sweep_keeps_its_finished_rows(tmp_path, serial_rows):
    """Rows reach the log as each cell finishes; a rerun runs only the missing cells and the
    assembled rows equal an uninterrupted sweep's."""
    opts = Options(rate=20)
    cells = make_grid(["whole-gpu", "frag-aware"], ["synthetic:25"], [0, 1], ["exp-small"], opts)
    path = tmp_path / "rows.jsonl"
    seen: list[str] = []

    def stop_after_two(cell, row):
        seen.append(cell.policy)
        if len(seen) == 2:
            raise _Interrupt

    with pytest.raises(_Interrupt):
        run_logged(cells, opts, RowLog(path), on_row=stop_after_two, workers=1, progress=False)
    assert len(path.read_text().splitlines()) == 2
    with path.open("a") as fh:
        fh.write('{"key": "torn')  # a kill mid-write
    log = RowLog(path)
    assert len(log.done) == 2
    ran: list[Cell] = []
    res, kept = run_logged(cells, opts, log, on_row=lambda c, r: ran.append(c), workers=1, progress=False)
    assert kept == 2 and ran == cells[2:]
    expected = [r for r in serial_rows if r["trace"].startswith("synthetic") and r["fleet"] == "exp-small"]
    assert sim_only(res.rows) == sim_only(expected)
    assert sim_only(RowLog(path).done.values()) == sim_only(expected)
    res2, kept2 = run_logged(cells, opts, RowLog(path), workers=1, progress=False)  # nothing left to run
    assert kept2 == 4 and sim_only(res2.rows) == sim_only(expected)


def test_full_part_saves_each_row_and_resumes(tmp_path):
    """`experiments_bench.py --part full`: a row per policy in --out; a rerun keeps them."""
    out = tmp_path / "full.jsonl"
    cmd = [sys.executable, str(BENCH), "--part", "full", "--scale", "0.005", "--workers", "1",
           "--sweep-policies", "whole-gpu,shared", "--out", str(out)]
    env = {**os.environ, "PYTHONPATH": str(BENCH.parent.parent)}
    first = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300, check=True).stdout
    assert [ln.split()[1] for ln in first.splitlines() if ln.startswith("done ")] == ["whole-gpu", "shared"]
    lines = out.read_text().splitlines()
    assert [json.loads(ln)["cell"]["policy"] for ln in lines] == ["whole-gpu", "shared"]
    out.write_text(lines[0] + "\n")  # as if killed while shared ran
    again = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300, check=True).stdout
    assert "(an earlier run; --fresh reruns them): whole-gpu" in again
    assert [ln.split()[1] for ln in again.splitlines() if ln.startswith("done ")] == ["shared"]
    table = again[again.index("trace_items"):].splitlines()
    assert [ln.split()[1] for ln in table[1:3]] == ["whole-gpu", "shared"]
    assert "2 policies (1 from the log)" in again
