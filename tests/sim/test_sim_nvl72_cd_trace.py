"""benchmarks/sim_bench.py's NVL72 ComputeDomain trace (`--kinds cd-trace`), run as its scaling part
runs each row (`--one`, a child process), on two racks: every multi-tray job gets its own
ComputeDomain (as NVIDIA's docs write one: kubernetes-sigs/dra-driver-nvidia-gpu
demo/specs/imex, the channel ResourceClaimTemplate named in spec.channel), all of a job's pods
land on trays of one rack (its clique), each domain is Ready when the job starts, and once every
job ended nothing is left: domains, their daemons and channel templates, claims, node labels."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.paths import REPO

BENCH = REPO / "benchmarks" / "sim_bench.py"


def test_two_racks_every_job_in_one_rack_with_a_ready_domain_and_cleaned_up():
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, str(BENCH), "--one", "cd-trace", "36", "60", "0", "nvl72"],
                          capture_output=True, text=True, env=env, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    assert res["placed"] == 60 and res["jobs_started"] == res["jobs"] > 1
    assert res["jobs_one_rack"] == res["jobs"]
    assert res["domains"] > 1 and res["domains_ready"] == res["domains"]
    assert res["left_over"] == {"ComputeDomain": 0, "DaemonSet": 0, "Pod": 0, "ResourceClaim": 0,
                                "ResourceClaimTemplate": 0, "labelled nodes": 0}
