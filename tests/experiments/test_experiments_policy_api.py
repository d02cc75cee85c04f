"""One policy protocol for every experiment (issue #45 items 1, 2 and 6): `--policies` takes built-in
names of both worlds, PATH.py and module:Class; `experiment new-policy` copies a built-in; errors in a
user's policy are one line naming the policy and the task, exit 1, on every engine; serial runs free
each finished run's sim."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import weakref
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.slow  # heavy: `make check` leaves it out, `make test` runs it

LABKIT = [sys.executable, "-m", "labkit"]
SMALL = ["--fleet", "openb:40", "--no-sim", "--no-progress", "-o", "json"]


def labkit(*argv: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([*LABKIT, *argv], capture_output=True, text=True, cwd=cwd, timeout=None)


def numbers(doc: dict, name: str) -> tuple:
    r = doc["policies"][name]
    return r["alloc_pct"], r["unallocated_gpus_by_seed"], r["failed_pods"]


def test_new_policy_copy_of_best_fit_gives_best_fits_numbers_on_every_engine(tmp_path):
    out = labkit("experiment", "new-policy", "my-best-fit", "--from", "best-fit", "-o", str(tmp_path / "mine.py"))
    assert out.returncode == 0, out.stderr
    text = (tmp_path / "mine.py").read_text()
    assert "class MyBestFit(ScoringPolicy):" in text and 'name = "my-best-fit"' in text
    again = labkit("experiment", "new-policy", "my-best-fit", "--from", "best-fit", "-o", str(tmp_path / "mine.py"))
    assert again.returncode == 2 and "the file exists" in again.stderr and len(again.stderr.splitlines()) == 1
    # a relative path: workers load the policy again from its absolute path
    serial = labkit("experiment", "inflation", "--policies", "mine.py,best-fit", "--workers", "1", *SMALL, cwd=tmp_path)
    assert serial.returncode == 0, serial.stderr
    doc = json.loads(serial.stdout)
    assert numbers(doc, "my-best-fit") == numbers(doc, "best-fit")
    local = labkit("experiment", "inflation", "--policies", "mine.py", "--workers", "2", "--seeds", "42,43", *SMALL,
                   cwd=tmp_path)
    assert local.returncode == 0, local.stderr
    two = json.loads(local.stdout)
    assert two["engine"] == "local x2"
    assert two["policies"]["my-best-fit"]["unallocated_gpus_by_seed"][0] == doc["policies"]["best-fit"][
        "unallocated_gpus_by_seed"][0]


def test_a_run_policy_runs_in_inflation_with_and_without_the_sim():
    """whole-gpu has no node preference: kube-scheduler's default choice computed on the state
    (NodeResourcesFit LeastAllocated, cpu and memory weight 1: kubernetes/kubernetes
    pkg/scheduler/apis/config/v1/default_plugins.go, pkg/scheduler/framework/plugins/noderesources/
    least_allocated.go), the same placements with and without the sim."""
    from labkit.experiments.inflation import run_inflation

    sim = run_inflation("whole-gpu", every=80, keep_placements=True)
    bare = run_inflation("whole-gpu", every=80, sim=False, keep_placements=True)
    assert sim["policy"] == "whole-gpu" and sim["alloc_pct"] == bare["alloc_pct"]
    assert sim["placements"] == bare["placements"] and sim["unallocated_gpus"] == bare["unallocated_gpus"]


def test_paper_policies_run_in_experiment_run_pinned_to_their_choice():
    from labkit.experiments import generate, run_experiment

    res = run_experiment(generate(40, seed=1), "exp-small", ["best-fit", "fgd", "random-fit"], keep_clusters=True)
    for run in res.runs:
        assert run.summary["placed"] == 40, run.policy
        for rec in run.records:  # every pod bound where the policy pinned it
            pod = run.cluster.sim.get("Pod", rec.name, "default") if rec.end is None else None
            assert rec.node, (run.policy, rec.name)
            if pod is not None:
                assert pod["spec"]["nodeSelector"]["kubernetes.io/hostname"] == rec.node


class Fuller:
    """A policy object of one's own (the protocol needs no base class): the node with the least GPU left."""

    name = "fuller"

    def score(self, task, state, nodes):
        return -state.g[nodes].sum(axis=1)


def test_policy_objects_in_notebooks_and_in_workers():
    from labkit.experiments.inflation import run_all

    res = run_all("default", [Fuller(), "best-fit"], every=80, sim=False)
    assert set(res["policies"]) == {"fuller", "best-fit"}

    class Local(Fuller):
        name = "local"

    with pytest.raises(Exception, match="policy 'local': cannot go to worker processes: its class "):
        run_all("default", [Local(), "best-fit"], every=80, sim=False, workers=2)


BROKEN = {
    "raises": ("def score(self, task, state, nodes):\n        raise KeyError('no such thing')\n",
               "score() failed on task openb-pod-"),
    "short": ("def score(self, task, state, nodes):\n        return [1] * (len(nodes) + 1)\n",
              "score() on task openb-pod-"),
    "words": ("def score(self, task, state, nodes):\n        return ['a'] * len(nodes)\n", "values, not numbers"),
    "nan": ("def score(self, task, state, nodes):\n        return [float('nan')] * len(nodes)\n", "returned nan"),
    "bad-gpu": ("def gpus(self, task, state, node):\n        return [7] if task.share else None\n", "returned GPU "),
    "gpu-range": ("def gpus(self, task, state, node):\n        return list(range(20, 20 + task.gpus)) or None\n",
                  "out of range, the node has"),
}


@pytest.mark.parametrize(("kind", "workers"), [(k, "2") for k in sorted(BROKEN)] + [("raises", "1"), ("nan", "1")])
def test_a_broken_policy_is_one_line_naming_it_and_the_task_exit_1(tmp_path, kind, workers):
    body, says = BROKEN[kind]
    (tmp_path / "broken.py").write_text(
        "from labkit.experiments.policies import ScoringPolicy\n\n\nclass Broken(ScoringPolicy):\n"
        f"    name = 'broken-{kind}'\n\n    " + body)
    out = labkit("experiment", "inflation", "--policies", "broken.py,best-fit", "--workers", workers, "--seeds", "42",
                 *SMALL, cwd=tmp_path)
    assert out.returncode == 1, out.stderr
    assert len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert f"policy broken-{kind}: " in out.stderr and says in out.stderr and "Traceback" not in out.stderr


def test_a_broken_policy_in_experiment_run_and_sweep(tmp_path):
    (tmp_path / "boom.py").write_text(
        "from labkit.experiments.policies import ScoringPolicy\n\n\nclass Boom(ScoringPolicy):\n"
        "    name = 'boom'\n\n    def score(self, task, state, nodes):\n        raise ValueError('bad day')\n")
    run = labkit("experiment", "run", "--policies", "boom.py", "--pods", "5", "--fleet", "tiny", cwd=tmp_path)
    assert run.returncode == 1, run.stderr
    assert "policy boom: score() failed on task " in run.stderr and "ValueError: bad day" in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1
    sweep = labkit("experiment", "sweep", "--policies", "boom.py,whole-gpu", "--traces", "synthetic:5", "--fleets",
                   "tiny", "--workers", "2", "--no-progress", cwd=tmp_path)
    assert sweep.returncode == 1 and "policy boom: score() failed on task " in sweep.stderr
    assert len(sweep.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(("spec", "says"), [
    ("nope.py", "policy 'nope.py': no file 'nope.py'"),
    ("two.py", "the file has 2 policy classes (A, B): name one, e.g. two.py:A"),
    ("two.py:C", "no class 'C'"),
    ("no.such.module:X", "cannot import module 'no.such.module'"),
    ("tetris", "policy 'tetris': unknown; use one of whole-gpu"),
])
def test_a_bad_policy_spec_is_argparses_error(tmp_path, spec, says):
    (tmp_path / "two.py").write_text("class A:\n    name = 'a'\n    def score(self, t, s, n):\n        return None\n\n\n"
                                     "class B(A):\n    name = 'b'\n")
    out = labkit("experiment", "inflation", "--policies", spec, *SMALL, cwd=tmp_path)
    assert out.returncode == 2 and "argument --policies: " in out.stderr and says in out.stderr, out.stderr


def test_module_class_specs_and_the_two_named_classes(tmp_path):
    (tmp_path / "two.py").write_text("from labkit.experiments.inflation import BestFit\n\n\n"
                                     "class A(BestFit):\n    name = 'a'\n\n\nclass B(BestFit):\n    name = 'b'\n")
    out = subprocess.run([*LABKIT, "experiment", "inflation", "--policies", "two:A,two.py:B,best-fit", "--workers",
                          "1", *SMALL], capture_output=True, text=True, cwd=tmp_path, env=_env())
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert numbers(doc, "a") == numbers(doc, "b") == numbers(doc, "best-fit")


def _env() -> dict:
    """This environment with the current directory first on PYTHONPATH (module:Class specs)."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (".", os.environ.get("PYTHONPATH")) if p)}


def test_policies_lists_both_worlds():
    out = labkit("experiment", "policies", "-o", "json")
    rows = {r["name"]: r for r in json.loads(out.stdout)["policies"]}
    assert {"fgd", "best-fit", "random-fit", "whole-gpu", "frag-aware"} <= set(rows)
    assert rows["fgd"]["world"] == "paper" and rows["shared"]["world"] == "run"
    assert all(r["experiments"] == ["run", "sweep", "inflation"] for r in rows.values())


def test_serial_runs_free_each_finished_runs_sim(monkeypatch):
    """Six policies at --workers 1 peaked at 4.7x one policy: each run's sim stayed alive (its
    garbage cycles frozen again by the next run's labkit.sim.engine.fewer_collections block)."""
    from labkit.experiments import inflation

    sims: list[weakref.ref] = []
    alive_at_start: list[int] = []
    real = inflation.connect

    def spy(*args, **kwargs):
        alive_at_start.append(sum(r() is not None for r in sims))
        cluster = real(*args, **kwargs)
        sims.append(weakref.ref(cluster.sim.store))  # the sim's objects (the Sim itself is freed by refcount)
        return cluster

    monkeypatch.setattr(inflation, "connect", spy)
    inflation.run_all("default", ("best-fit", "dot-product", "gpu-packing"), every=80, sim=True, workers=1)
    assert alive_at_start == [0, 0, 0]


def test_fleet_state_and_default_scores_follow_kube_scheduler():
    from labkit.experiments.policies import FleetState, Task, default_scores
    from labkit.sim.scoring import least_allocated

    st = FleetState(["a", "b"], ["m", "m"], np.array([1, 1]), np.array([1000, 3000]), np.array([1024, 512]),
                    np.zeros((2, 8), dtype=np.int64), cpu_total=np.array([4000, 4000]),
                    mem_total=np.array([2048, 2048]))
    task = Task("t", 500, 256)
    got = default_scores(task, st, np.array([0, 1]))
    want = [least_allocated((4000 - f + 500, (2048 - m + 256) << 20), (4000, 2048 << 20))
            for f, m in ((1000, 1024), (3000, 512))]
    assert got.tolist() == want


def test_a_policy_file_runs_on_a_dask_cluster_and_in_a_sweep(tmp_path):
    """A user's file reaches Dask workers as its spec (an absolute path) and is loaded there: the
    copy of best-fit gives best-fit's numbers on Dask as serially; `sweep` takes the same file."""
    import distributed  # the dask extra, in the dev extra

    assert labkit("experiment", "new-policy", "mine", "--from", "best-fit", "-o", str(tmp_path / "mine.py")).returncode == 0
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster:
        out = labkit("experiment", "inflation", "--policies", "mine.py,best-fit", "--address",
                     cluster.scheduler_address, *SMALL, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["engine"] == f"dask {cluster.scheduler_address}"
    assert numbers(doc, "mine") == numbers(doc, "best-fit")
    sweep = labkit("experiment", "sweep", "--policies", "mine.py", "--traces", "synthetic:12", "--seeds", "1",
                   "--workers", "1", "--no-progress", "-o", "json", cwd=tmp_path)
    assert sweep.returncode == 0, sweep.stderr
    rows = json.loads(sweep.stdout)["rows"]
    assert [(r["policy"], r["placed"]) for r in rows] == [("mine", 12)]
