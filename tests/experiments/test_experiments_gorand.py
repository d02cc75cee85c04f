"""`labkit experiment inflation --rng go`: Go's math/rand (labkit.experiments.gorand) against the real Go, and
the FGD authors' published per-seed cells reproduced through the CLI as typed.

Upstream facts checked here:
- Go's math/rand (src/math/rand/rng.go: the 607/273 additive lagged Fibonacci source, Seed via seedrand and
  rngCooked; src/math/rand/gen_cooked.go: how rngCooked is made; src/math/rand/rand.go: Int63, Uint32, Int31,
  Int31n, Intn, Int63n, Float64, Shuffle with the multiply-shift int31n, Perm) - compared value by value with
  the Go toolchain on PATH.
- hkust-adsl/kubernetes-scheduler-simulator@8f3d641: the draw order (pkg/simulator/core.go:102-103,
  pkg/simulator/simulator.go:481, :843-851, :1105-1140, vendor/k8s.io/client-go/tools/cache/reflector.go:400),
  the FGD typical pods and score (pkg/utils/frag.go, pkg/type/resource.go, pkg/simulator/plugin/fgd_score.go),
  the published metric (experiments/analysis/merge_alloc_discrete.py:97-119) and its cells
  (experiments/analysis/expected_results/analysis_allo_discrete.csv -> tests/data/fgd_paper_per_seed.json).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from labkit.experiments.gorand import GoRand
from tests.paths import TEST_DATA

pytestmark = pytest.mark.slow  # heavy: `make check` leaves it out, `make test` runs it

PUBLISHED = json.loads((TEST_DATA / "fgd_paper_per_seed.json").read_text())["cells"]
#: `labkit experiment inflation --no-sim --seeds 42 --policies best-fit,gpu-packing` at 465041b
BEFORE = {"best-fit": [442.97], "gpu-packing": [489.33]}
SEEDS = [0, 1, 42, 43, -7, -(1 << 40), 2147483647, 2147483646, 89482311, 1 << 62]

GO_PROGRAM = r"""
package main

import (
	"encoding/json"
	"math/rand"
	"os"
)

func main() {
	seeds := []int64{0, 1, 42, 43, -7, -(1 << 40), 2147483647, 2147483646, 89482311, 1 << 62}
	out := []map[string]any{}
	for _, s := range seeds {
		r := rand.New(rand.NewSource(s))
		m := map[string]any{}
		var i63 []int64
		for k := 0; k < 700; k++ { // past one turn of the 607-word register
			i63 = append(i63, r.Int63())
		}
		m["int63"] = i63
		var intn []int
		for _, n := range []int{1, 2, 3, 7, 10, 100, 1000, 6212, 1 << 20, 1<<31 - 1, 1 << 31, 3000000000, 1<<62 + 5} {
			intn = append(intn, r.Intn(n))
		}
		m["intn"] = intn
		var i31n []int32
		for _, n := range []int32{1, 3, 5, 16, 1000, 1<<30 + 1, 1<<31 - 1} {
			i31n = append(i31n, r.Int31n(n))
		}
		m["int31n"] = i31n
		var i63n []int64
		for _, n := range []int64{1, 3, 1 << 40, 1<<62 + 1, 1<<63 - 1} {
			i63n = append(i63n, r.Int63n(n))
		}
		m["int63n"] = i63n
		var f []float64
		for k := 0; k < 20; k++ {
			f = append(f, r.Float64())
		}
		m["float64"] = f
		m["uint32"] = []uint32{r.Uint32(), r.Uint32()}
		m["int31"] = []int32{r.Int31(), r.Int31()}
		m["int"] = []int{r.Int(), r.Int()}
		m["perm"] = r.Perm(50)
		x := make([]int, 1213)
		for i := range x {
			x[i] = i
		}
		r.Shuffle(len(x), func(i, j int) { x[i], x[j] = x[j], x[i] })
		m["shuffle"] = x
		m["after"] = r.Int63()
		out = append(out, m)
	}
	json.NewEncoder(os.Stdout).Encode(out)
}
"""


def _python_draws(seed: int) -> dict:
    r = GoRand(seed)
    m: dict = {"int63": [r.int63() for _ in range(700)]}
    m["intn"] = [r.intn(n) for n in (1, 2, 3, 7, 10, 100, 1000, 6212, 1 << 20, (1 << 31) - 1, 1 << 31, 3000000000,
                                     (1 << 62) + 5)]
    m["int31n"] = [r.int31n(n) for n in (1, 3, 5, 16, 1000, (1 << 30) + 1, (1 << 31) - 1)]
    m["int63n"] = [r.int63n(n) for n in (1, 3, 1 << 40, (1 << 62) + 1, (1 << 63) - 1)]
    m["float64"] = [r.float64() for _ in range(20)]
    m["uint32"] = [r.uint32(), r.uint32()]
    m["int31"] = [r.int31(), r.int31()]
    m["int"] = [r.int_(), r.int_()]
    m["perm"] = r.perm(50)
    x = list(range(1213))
    r.shuffle(x)
    m["shuffle"] = x
    m["after"] = r.int63()
    return m


@pytest.mark.skipif(shutil.which("go") is None, reason="the Go toolchain (`go`) is not on PATH: nothing to compare with")
def test_gorand_draws_equal_go_math_rand(tmp_path: Path) -> None:
    """Every value of rand.New(rand.NewSource(seed)) for ten seeds (0 and a negative one included) equals GoRand's:
    the cooked seeding table computed from gen_cooked.go's definition is Go's."""
    (tmp_path / "main.go").write_text(GO_PROGRAM)
    env = {**os.environ, "GOFLAGS": "-mod=mod", "GOTOOLCHAIN": "local", "GO111MODULE": "off"}
    got = subprocess.run(["go", "run", "main.go"], cwd=tmp_path, env=env, capture_output=True, text=True, check=False)
    assert got.returncode == 0, got.stderr
    go = json.loads(got.stdout)
    assert len(go) == len(SEEDS)
    for seed, want in zip(SEEDS, go, strict=True):
        mine = _python_draws(seed)
        for key, values in want.items():
            assert mine[key] == values, f"seed {seed}: {key} differs"


def _labkit(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "labkit", "experiment", "inflation", "--no-sim", "--workers", "1",
                           "--no-progress", *args], capture_output=True, text=True, check=False)


def test_rng_go_prints_the_published_seed_42_cells() -> None:
    """The five deterministic policies at the paper's seed 42 on the full fleet: the printed per-seed table
    holds the authors' analysis_allo_discrete.csv cells exactly as that file prints them."""
    pols = ["fgd", "best-fit", "dot-product", "gpu-packing", "gpu-clustering"]
    got = _labkit("--rng", "go", "--seeds", "42", "--policies", ",".join(pols))
    assert got.returncode == 0, got.stderr
    lines = got.stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("the paper's metric"))
    assert "130 % arrived" in lines[start]
    rows = {line.split()[0]: line.split()[1:] for line in lines[start + 2:start + 2 + len(pols)]}
    for p in pols:
        want = PUBLISHED["default"][p]["42"]
        assert rows[p][0] == repr(want), p
        assert float(rows[p][1]) == pytest.approx(6212 * (100 - want) / 100, abs=0.06)  # unallocated GPUs


def test_rng_go_fgd_seeds_43_44_json() -> None:
    """FGD at seeds 43 and 44 (-o json): the published cells, and the unallocated GPUs they mean."""
    got = _labkit("--rng", "go", "--seeds", "43-44", "--policies", "fgd", "-o", "json")
    assert got.returncode == 0, got.stderr
    res = json.loads(got.stdout)
    assert res["rng"] == "go"
    fgd = res["policies"]["fgd"]
    want = [PUBLISHED["default"]["fgd"][s] for s in ("43", "44")]
    assert fgd["alloc_pct_published_metric_by_seed"] == want
    assert fgd["unallocated_gpus_published_metric_by_seed"] == [round(6212 * (100 - a) / 100, 2) for a in want]


def test_rng_python_is_the_default_and_unchanged() -> None:
    """--rng python (the default) gives the numbers the kit gave before --rng existed (measured at 465041b)."""
    default = _labkit("--seeds", "42", "--policies", "best-fit,gpu-packing", "-o", "json")
    explicit = _labkit("--rng", "python", "--seeds", "42", "--policies", "best-fit,gpu-packing", "-o", "json")
    assert default.returncode == 0 and explicit.returncode == 0, default.stderr + explicit.stderr
    a, b = json.loads(default.stdout), json.loads(explicit.stdout)
    assert a["rng"] == b["rng"] == "python"
    for res in (a, b):
        assert {p: r["unallocated_gpus_by_seed"] for p, r in res["policies"].items()} == BEFORE
        assert "alloc_pct_published_metric_by_seed" not in res["policies"]["best-fit"]


def test_rng_unknown_is_one_line() -> None:
    got = _labkit("--rng", "c", "--seeds", "42", "--policies", "best-fit")
    assert got.returncode == 2
    assert "--rng" in got.stderr and "python" in got.stderr and "Traceback" not in got.stderr

