"""Differential test: `labkit allocate` against the real Kubernetes allocator (the Go oracle).

Scenario volume: LABKIT_DIFF_EXAMPLES (default 2000 when CI=true, else 200) seeded scenarios in one
`oracle --batch` call, plus LABKIT_DIFF_HYPOTHESIS (default 20) hypothesis examples. New
disagreements are shrunk and saved under tests/differential/regressions-open/ (reported, not
failing once committed); tests/differential/regressions/ must always agree.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings

from tests.differential import harness
from tests.differential.coverage import Coverage
from tests.differential.draw import RandomDraw, ReplayDraw
from tests.differential.generator import Scenario, generate, scenarios

pytestmark = pytest.mark.slow  # heavy: `make check` leaves it out, `make test` runs it

KNOWN_SEEDS = harness.REGRESSIONS_OPEN / "known-seeds.json"


def _examples() -> int:
    default = "2000" if os.environ.get("CI", "").lower() == "true" else "200"
    return int(os.environ.get("LABKIT_DIFF_EXAMPLES", default))


class _Summary:
    """Prints the coverage table at the end of the session."""

    def __init__(self, cov: Coverage) -> None:
        self.cov = cov

    def pytest_terminal_summary(self, terminalreporter) -> None:  # noqa: ANN001 - pytest hook
        if self.cov.scenarios:
            terminalreporter.write_sep("-", "differential coverage")
            terminalreporter.write_line(self.cov.table())
            terminalreporter.write_line(f"  written to {self.cov.write()}")


@pytest.fixture(scope="session")
def coverage(request) -> Coverage:
    cov = Coverage()
    request.config.pluginmanager.register(_Summary(cov), "labkit-differential-summary")
    return cov


def _run_oracle(oracle: Path, input_yaml: Path, *args: str) -> tuple[int, dict]:
    proc = subprocess.run([str(oracle), "-f", str(input_yaml), *args, "-o", "json"], capture_output=True,
                          text=True, env={**os.environ, "LABKIT_DETERMINISTIC_SHAREID": "1"})
    return proc.returncode, json.loads(proc.stdout)


def _diff_or_crash(oracle_row: dict, labkit_row: dict) -> harness.Diff:
    return harness.compare(oracle_row, labkit_row)


# ---- the oracle itself -------------------------------------------------------------------

SMOKE = """
apiVersion: v1
kind: Node
metadata: {name: node-a, labels: {zone: a}}
---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu}
spec:
  selectors: [{cel: {expression: 'device.driver == "gpu.example.com"'}}]
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: s1}
spec:
  driver: gpu.example.com
  nodeName: node-a
  pool: {name: node-a, generation: 1, resourceSliceCount: 1}
  devices:
  - {name: gpu-0, attributes: {index: {int: 0}}}
  - {name: gpu-1, attributes: {index: {int: 1}}}
  - name: shared-0
    attributes: {index: {int: 9}}
    allowMultipleAllocations: true
    capacity:
      memory: {value: 40Gi, requestPolicy: {default: 10Gi, validRange: {min: 5Gi, step: 5Gi}}}
---
apiVersion: resource.k8s.io/v1
kind: DeviceTaintRule
metadata: {name: r1}
spec:
  deviceSelector: {driver: gpu.example.com, device: gpu-1}
  taint: {key: broken, effect: NoSchedule}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: used}
spec: {devices: {requests: [{name: r, exactly: {deviceClassName: gpu}}]}}
status: {allocation: {devices: {results: [{request: r, driver: gpu.example.com, pool: node-a, device: gpu-0}]}}}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: c1}
spec:
  devices:
    requests:
    - {name: r, exactly: {deviceClassName: gpu, selectors: [{cel: {expression: 'device.attributes["gpu.example.com"].index == 1'}}]}}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: c2}
spec:
  devices:
    requests:
    - {name: a, exactly: {deviceClassName: gpu, capacity: {requests: {memory: 7Gi}}}}
"""


def test_oracle_contract(oracle: Path, tmp_path: Path) -> None:
    f = tmp_path / "in.yaml"
    f.write_text(SMOKE)
    # gpu-0 is in use; gpu-1 is tainted by the DeviceTaintRule (on by default in 1.37)
    code, out = _run_oracle(oracle, f, "--node", "node-a")
    assert (code, out["status"], out["allocations"], out["explanation"]) == (3, "unsatisfiable", {}, None)
    # without DeviceTaintRules c1 gets gpu-1, c2 a 10Gi share of shared-0 (7Gi rounded up to the step)
    code, out = _run_oracle(oracle, f, "--node", "node-a", "--feature-gates", "DRADeviceTaintRules=false")
    assert code == 0 and out["status"] == "allocated" and out["error"] is None
    assert list(out["allocations"]) == ["default/c1", "default/c2"]
    assert out["allocations"]["default/c1"]["devices"]["results"] == [
        {"request": "r", "driver": "gpu.example.com", "pool": "node-a", "device": "gpu-1"}]
    share = out["allocations"]["default/c2"]["devices"]["results"]
    assert share == [{"request": "a", "driver": "gpu.example.com", "pool": "node-a", "device": "shared-0",
                      "shareID": "00000000-0000-0000-0000-000000000001", "consumedCapacity": {"memory": "10Gi"}}]
    assert out["allocations"]["default/c1"]["nodeSelector"]["nodeSelectorTerms"] == [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-a"]}]}]
    # capacity requests need DRAConsumableCapacity: a fatal allocator error, exit 2
    code, out = _run_oracle(oracle, f, "--node", "node-a", "--feature-gates",
                            "DRADeviceTaintRules=false,DRAConsumableCapacity=false")
    assert code == 2 and out["status"] == "error"
    assert "has capacity requests, but the DRAConsumableCapacity feature is disabled" in out["error"]


def test_oracle_bad_input(oracle: Path, tmp_path: Path) -> None:
    f = tmp_path / "in.yaml"
    f.write_text(SMOKE.replace("deviceClassName: gpu, capacity", "deviceClassName: nope, capacity"))
    code, out = _run_oracle(oracle, f, "--node", "node-a", "--feature-gates", "DRADeviceTaintRules=false")
    assert code == 2 and "could not retrieve device class nope" in out["error"]
    code, out = _run_oracle(oracle, f, "--node", "node-a", "--feature-gates", "NoSuchGate=true")
    assert code == 2 and "feature gate \"NoSuchGate\" does not exist in Kubernetes 1.37" in out["error"]
    code, out = _run_oracle(oracle, tmp_path / "missing.yaml", "--node", "node-a")
    assert code == 2 and "cannot read" in out["error"]


def test_oracle_batch_matches_single_runs(oracle: Path, tmp_path: Path) -> None:
    for seed in range(5):
        generate(RandomDraw(seed)).write(tmp_path / f"{seed:05d}")
    batch = harness.run_oracle_batch(oracle, tmp_path)
    assert sorted(batch) == [f"{s:05d}" for s in range(5)]
    for name, row in batch.items():
        case = harness.read_case(tmp_path / name)
        args = ["--node", case["node"]] + (["--feature-gates", case["gates"]] if case["gates"] else [])
        code, out = _run_oracle(oracle, tmp_path / name / "input.yaml", *args)
        assert (code, out) == (row["exit"], row["output"])


# ---- generator ---------------------------------------------------------------------------

def test_generator_is_a_function_of_its_choices() -> None:
    for seed in range(30):
        d = RandomDraw(seed)
        sc = generate(d)
        assert generate(RandomDraw(seed)).objects == sc.objects
        assert generate(ReplayDraw(d.choices)).objects == sc.objects


def test_shrinker_keeps_the_property_and_gets_smaller() -> None:
    def has_counters(sc: Scenario) -> bool:
        return any("sharedCounters" in o.get("spec", {}) for o in sc.objects)

    seed = next(s for s in range(100) if has_counters(generate(RandomDraw(s))))
    d = RandomDraw(seed)
    big = generate(d)
    small = harness.shrink(d.choices, has_counters, budget=150)
    assert has_counters(small)
    assert len(json.dumps(small.objects)) < len(json.dumps(big.objects))


# ---- differential ----------------------------------------------------------------------------

def _known_seeds() -> dict[str, str]:
    return json.loads(KNOWN_SEEDS.read_text()) if KNOWN_SEEDS.exists() else {}


def _shrink_and_save(oracle: Path, workdir: Path, choices: list[int], kind: str, detail: str, label: str,
                     version: str = "1.37") -> Path:
    """Shrink a disagreeing scenario (same diff kind) and save it under regressions-open/."""
    def fails(sc: Scenario) -> bool:
        case_root = workdir / "shrink"
        shutil.rmtree(case_root, ignore_errors=True)
        d = sc.write(case_root / "case")
        diff = _diff_or_crash(harness.run_oracle_one(oracle, d), harness.run_labkit(d))
        return diff.kind == kind

    small = harness.shrink(choices, fails, version=version)
    final = small.write(workdir / "final" / "case")
    oracle_row = harness.run_oracle_one(oracle, final)
    diff = harness.compare(oracle_row, harness.run_labkit(final))
    return harness.save_regression(final, oracle_row, harness.REGRESSIONS_OPEN,
                                   f"{label}: {diff.kind}: {diff.detail}\n(original: {kind}: {detail})")


#: the releases the generated differential runs at full volume: the default and the newest
GENERATED_VERSIONS = ["1.37", "1.38"]


@pytest.mark.parametrize("version", GENERATED_VERSIONS)
def test_differential_generated(version: str, oracle: Path, oracle_of, coverage: Coverage, tmp_path: Path) -> None:
    """`-k 'generated and 1.38'` runs one release only. Known open disagreements are keyed by seed
    (1.37) or by "<version>:<seed>"."""
    if version != "1.37":
        oracle = oracle_of(version)
    n = _examples()
    root = tmp_path / "batch"
    scen: dict[str, tuple[Scenario, list[int]]] = {}
    for seed in range(n):
        d = RandomDraw(seed)
        sc = generate(d, version)
        sc.write(root / f"{seed:05d}")
        scen[f"{seed:05d}"] = (sc, d.choices)
    rows = harness.run_oracle_batch(oracle, root)
    assert sorted(rows) == sorted(scen), "the oracle must answer every scenario"
    known = _known_seeds()
    new, known_hits, error_text = [], [], []
    for name, row in sorted(rows.items()):
        status = row["output"]["status"]
        assert status in ("allocated", "unsatisfiable", "error") and row["exit"] in (0, 2, 3)
        kind = None
        diff = harness.compare(row, harness.run_labkit(root / name))
        kind = diff.kind
        if diff.kind == "error-text":
            error_text.append((name, diff.detail))
        elif not diff.agrees:
            seed = str(int(name)) if version == "1.37" else f"{version}:{int(name)}"
            if seed in known and (harness.REGRESSIONS_OPEN / known[seed]).is_dir():
                known_hits.append((name, known[seed]))
            else:
                new.append((name, diff))
        if version == "1.37":
            coverage.record(scen[name][0].tags, status, kind)
    saved = []
    budget = int(os.environ.get("LABKIT_DIFF_SHRINK", "3"))
    for name, diff in new[:budget]:
        dest = _shrink_and_save(oracle, tmp_path, scen[name][1], diff.kind, diff.detail,
                                f"{version} seed {int(name)}", version)
        known[str(int(name)) if version == "1.37" else f"{version}:{int(name)}"] = dest.name
        saved.append(f"{dest.relative_to(harness.REPO)}  (seed {int(name)}: {diff.kind}: {diff.detail})")
    if saved:
        ordered = sorted(known.items(), key=lambda kv: (":" in kv[0], kv[0].split(":")[0], int(kv[0].split(":")[-1])))
        KNOWN_SEEDS.write_text(json.dumps(dict(ordered), indent=1) + "\n")
    for name, detail in error_text[:10]:
        print(f"error text differs, scenario {name}: {detail}")
    if known_hits:
        print(f"{len(known_hits)} known open disagreements: " + ", ".join(sorted({h for _, h in known_hits})))
    assert not new, (f"{len(new)} new disagreements of {n} scenarios; saved (shrunk) to regressions-open:\n"
                     + "\n".join(saved) + "\nfirst: " + f"{new[0][0]}: {new[0][1].kind}: {new[0][1].detail}")


OLDER = ["1.34", "1.35", "1.36"]


def _pools(case: Path) -> set[tuple[str, str]]:
    docs = yaml.safe_load_all((case / "input.yaml").read_text())
    return {(d["spec"]["driver"], d["spec"]["pool"]["name"]) for d in docs if d and d.get("kind") == "ResourceSlice"}


@pytest.mark.oracle
@pytest.mark.slow
@pytest.mark.parametrize("version", OLDER)
def test_differential_older_versions(version: str, tmp_path: Path, oracle_of) -> None:
    """Version profiles against the allocator of that release (oracle-0.3x, built here when
    missing: ~1.5 min each cold). Before 1.36 Go's map order picks which pool the allocator tries
    first (random from run to run: another pool's devices, or an invalid pool met first), so there
    only the scenarios with one pool are compared."""
    path = oracle_of(version)
    n = int(os.environ.get("LABKIT_DIFF_VERSION_EXAMPLES", "60"))
    for seed in range(n):
        generate(RandomDraw(seed), version).write(tmp_path / f"{seed:05d}")
    rows = harness.run_oracle_batch(path, tmp_path)
    bad, compared = [], 0
    for name, row in sorted(rows.items()):
        if version in ("1.34", "1.35") and len(_pools(tmp_path / name)) > 1:
            continue
        compared += 1
        diff = harness.compare(row, harness.run_labkit(tmp_path / name))
        if not diff.agrees:
            bad.append(f"seed {int(name)}: {diff.kind}: {diff.detail}")
    assert compared >= n // 4, f"only {compared} of {n} scenarios have one pool"
    assert not bad, f"{len(bad)}/{n} disagree with the {version} allocator; first: {bad[0]}"


def test_differential_hypothesis(oracle: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    failures: list[tuple[int, Scenario, str]] = []
    work = tmp_path_factory.mktemp("hyp")

    @settings(max_examples=int(os.environ.get("LABKIT_DIFF_HYPOTHESIS", "20")), derandomize=True,
              database=None, deadline=None, suppress_health_check=list(HealthCheck))
    @given(scenarios())
    def check(sc: Scenario) -> None:
        d = sc.write(work / "one" / "case")
        diff = harness.compare(harness.run_oracle_one(oracle, d), harness.run_labkit(d))
        if not diff.agrees:
            failures.append((len(json.dumps(sc.objects)), sc, f"{diff.kind}: {diff.detail}"))
            raise AssertionError(diff.detail)

    try:
        check()
    except AssertionError:
        _size, sc, detail = min(failures, key=lambda f: f[0])
        final = sc.write(work / "final" / "case")
        known_before = harness.known_regressions()
        dest = harness.save_regression(final, harness.run_oracle_one(oracle, final), harness.REGRESSIONS_OPEN,
                                       f"hypothesis: {detail}")
        if dest.name in known_before:
            pytest.xfail(f"known open disagreement {dest.name}: {detail}")
        raise AssertionError(f"new disagreement saved to {dest.relative_to(harness.REPO)}: {detail}") from None


# ---- committed regressions and the hand-written allocator cases ------------------------------------

def _case_dirs(root: Path) -> list[Path]:
    return sorted(p for p in root.iterdir() if (p / "input.yaml").exists()) if root.is_dir() else []


def _cases_or_none(root: Path) -> list[Any]:
    """The case dirs under `root`, or one skipped parameter that says there are none (instead of
    pytest's bare "got empty parameter set")."""
    return _case_dirs(root) or [pytest.param(None, marks=pytest.mark.skip(
        reason=f"no cases committed under {root.relative_to(harness.REPO)} (the differential found none to keep)"))]


@pytest.mark.parametrize("case", _cases_or_none(harness.REGRESSIONS), ids=lambda p: p.name if p else "none")
def test_regression(case: Path) -> None:
    expected = {"exit": None, "output": json.loads((case / "oracle.json").read_text())}
    got = harness.run_labkit(case)
    expected["exit"] = got["exit"]  # exit follows status, which compare() checks
    diff = harness.compare(expected, got)
    assert diff.agrees, f"{case.relative_to(harness.REPO)}: {diff.kind}: {diff.detail}"


@pytest.mark.parametrize("case", _cases_or_none(harness.REGRESSIONS_OPEN), ids=lambda p: p.name if p else "none")
def test_open_regression(case: Path) -> None:
    expected = {"exit": None, "output": json.loads((case / "oracle.json").read_text())}
    got = harness.run_labkit(case)
    expected["exit"] = got["exit"]
    diff = harness.compare(expected, got)
    if not diff.agrees:
        pytest.xfail(f"open: {case.relative_to(harness.REPO)}: {diff.kind}: {diff.detail}")


def test_regressions_still_match_the_oracle(oracle: Path, oracle_of, tmp_path: Path) -> None:
    """The stored oracle.json files are what the current oracle prints."""
    cases = _case_dirs(harness.REGRESSIONS) + _case_dirs(harness.REGRESSIONS_OPEN)
    if not cases:
        pytest.skip("no committed regressions yet")
    by_minor: dict[str, list[Path]] = {}
    for c in cases:
        by_minor.setdefault("0." + harness.read_case(c)["version"].split(".")[1], []).append(c)
    rows: dict[str, dict] = {}
    for minor, group in sorted(by_minor.items()):
        path = oracle if minor == "0.37" else oracle_of("1." + minor.split(".")[1])
        batch = tmp_path / minor
        for c in group:
            shutil.copytree(c, batch / f"{c.parent.name}-{c.name}")
        rows.update(harness.run_oracle_batch(path, batch))
    for c in cases:
        got = rows[f"{c.parent.name}-{c.name}"]["output"]
        want = json.loads((c / "oracle.json").read_text())
        assert (got["status"], got["allocations"]) == (want["status"], want["allocations"]), c.name


HAND = _case_dirs(harness.HAND_CASES)


@pytest.fixture(scope="module")
def hand_rows(oracle: Path, oracle_of, tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    """Oracle rows per hand-written case, each from its case.yaml version's oracle (1.37's runs on
    the directory in place)."""
    if not HAND:
        return {}
    older = [c for c in HAND if harness.read_case(c)["version"] != "1.37"]
    rows = harness.run_oracle_batch(oracle, harness.HAND_CASES)
    for c in older:
        rows.pop(c.name, None)
    by_minor: dict[str, list[Path]] = {}
    for c in older:
        by_minor.setdefault("0." + harness.read_case(c)["version"].split(".")[1], []).append(c)
    for minor, group in sorted(by_minor.items()):
        path = oracle_of("1." + minor.split(".")[1])
        batch = tmp_path_factory.mktemp(f"hand-{minor}")
        for c in group:
            shutil.copytree(c, batch / c.name)
        rows.update(harness.run_oracle_batch(path, batch))
    return rows


@pytest.mark.parametrize("case", HAND, ids=lambda p: p.name)
def test_hand_written_case_matches_oracle(case: Path, hand_rows: dict[str, dict]) -> None:
    """tests/data/allocator/*/expected.json (written by hand) is what Kubernetes computes."""
    assert case.name in hand_rows, f"{case.name}: the oracle printed no row for it"
    expected = json.loads((case / "expected.json").read_text())
    got = hand_rows[case.name]["output"]
    assert got["status"] == expected["status"], f"{case.name}: oracle {got['status']}: {got['error']}"
    assert got["allocations"] == expected.get("allocations", {}), case.name
    if "error" in expected and expected["error"] != got["error"]:
        # error texts are compared too: the hand-written ones claim to be Kubernetes' words
        assert expected["error"] == got["error"], case.name
