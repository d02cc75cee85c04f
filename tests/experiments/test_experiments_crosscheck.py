"""An inflation run checked on another cluster (labkit.experiments.crosscheck, `labkit experiment
inflation --check-on`): here against a second sim cluster, through the Cluster API only; the same
check on the real control plane is tests/local/test_experiments_crosscheck_local.py (local lane)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from labkit.cluster import connect
from labkit.experiments.crosscheck import check_on
from labkit.experiments.inflation import run_inflation
from labkit.experiments.openb import openb_fleet

pytestmark = pytest.mark.slow  # heavy: `make check` leaves it out, `make test` runs it

EVERY = 80  # 23 nodes, 109 GPUs, 162 arriving tasks: a second on the sim


def labkit(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "labkit", *argv], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=600)


def test_the_sim_run_made_again_on_a_sim_cluster_is_the_same():
    run = run_inflation("fgd", every=EVERY, keep_placements=True)
    res = check_on(connect("sim", openb_fleet(every=EVERY), progress=False), "fgd", every=EVERY)
    assert res["equal"] and res["curve_equal"] and res["first_difference"] is None
    assert res["tasks"] == res["equal_tasks"] == len(run["placements"]) > 100
    assert res["alloc_pct"] == run["alloc_pct"]  # rebuilt from the cluster's claims, not copied from the run
    assert [(c["pod"], c["got_node"], c["got_devices"]) for c in res["tasks_checked"]] == [
        (name, node, sorted(f"gpu-{j}" for j in gpus)) for name, _, node, gpus in run["placements"]]
    assert res["sim"]["wall_s"] > 0 and res["cluster"]["wall_s"] > 0 and res["cluster"]["cpu_s"] > 0


def test_a_placement_the_cluster_cannot_make_is_the_first_difference_with_the_schedulers_reason():
    run = run_inflation("best-fit", every=EVERY, keep_placements=True)
    first = run["placements"][0]  # p00000: an 8-GPU task that takes its node's CPU
    name, trace_pod, _, _ = run["placements"][1]
    run["placements"][1] = (name, trace_pod, first[2], [0])  # pinned to that full node, on its first GPU
    cluster = connect("sim", openb_fleet(every=EVERY), progress=False)
    res = check_on(cluster, "best-fit", every=EVERY, run=run)
    assert not res["equal"] and res["different_tasks"] == 1 and not res["curve_equal"]
    d = res["first_difference"]
    assert (d["task"], d["pod"], d["trace_pod"]) == (1, name, trace_pod)
    assert d["expected"] == {"node": first[2], "devices": ["gpu-0"]} and d["got"] == {"node": None, "devices": []}
    assert d["reason"].startswith(f"pod {name}: not bound: PodScheduled False Unschedulable: 0/23 nodes are available")
    assert res["alloc_pct"][-1] < run["alloc_pct"][-1]
    assert not cluster.list("Pod") and not cluster.list("ResourceClaim")  # clean: the next check starts empty


def test_check_on_sim_through_the_cli():
    out = labkit("experiment", "inflation", "--fleet", f"openb:{EVERY}", "--policies", "best-fit,fgd", "--check-on",
                 "sim", "-o", "json")
    assert out.returncode == 0, out.stderr
    res = json.loads(out.stdout)
    assert res["equal"] and res["backend"] == "sim" and [r["policy"] for r in res["runs"]] == ["best-fit", "fgd"]
    table = labkit("experiment", "inflation", "--fleet", f"openb:{EVERY}", "--policies", "best-fit", "--check-on", "sim")
    assert table.returncode == 0, table.stderr
    assert "checked on sim" in table.stdout and table.stdout.rstrip().endswith("the curve: the same")


def test_check_on_local_without_the_control_plane_is_one_line(tmp_path):
    # labkit/cluster/backends/local/binaries.py: the local backend's own message when nothing is built
    out = labkit("experiment", "inflation", "--fleet", "openb:200", "--policies", "fgd", "--check-on", "local",
                 env={"LABKIT_CACHE": str(tmp_path), "LABKIT_RUN_DIR": str(tmp_path / "run")})
    assert out.returncode == 1 and not out.stdout
    assert out.stderr.count("\n") == 1 and "no control-plane binaries for Kubernetes 1.37" in out.stderr
    assert "Traceback" not in out.stderr


def test_check_on_refuses_options_that_do_not_apply():
    out = labkit("experiment", "inflation", "--fleet", f"openb:{EVERY}", "--check-on", "sim", "--no-sim")
    assert out.returncode == 2 and out.stderr.count("\n") == 1
    assert "--check-on sim: leave out --no-sim" in out.stderr
