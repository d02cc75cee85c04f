"""The full-size reliability runs of issue 17 (points 2 and 3); counts go to test-artifacts/reliability.json.

    tools/reliability.sh                      # everything, inside tools/with-kind.sh
    python tools/reliability.py --only faults --claims 200 --kills 30

The CI tests (tests/e2e/test_kind_faults.py, tests/e2e/test_lifecycle_leaks.py) run the same code, small.
Each part writes its counts as soon as it is done, so an interrupted run keeps what it measured.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests import faultrun, kindutil, leaks  # noqa: E402  (tests/ is not an installed package)

OUT = ROOT / "test-artifacts" / "reliability.json"
PARTS = ("faults", "node-restart", "local-cycles", "local-sigint", "kernel-kills", "kind-cycles", "kind-sigint")


def _save(results: dict[str, Any]) -> None:
    """Merge this run's parts into the file (another run may have written other parts)."""
    OUT.parent.mkdir(parents=True, exist_ok=True)
    merged = json.loads(OUT.read_text()) if OUT.exists() else {}
    merged.update(results)
    tmp = OUT.with_suffix(".tmp")
    tmp.write_text(json.dumps(merged, indent=2, sort_keys=True) + "\n")
    tmp.replace(OUT)


def _cycles(backend: str, n: int, run_dir: Path, name: str | None, results: dict[str, Any], key: str) -> None:
    """n up/down cycles; the counts are saved after each cycle."""
    rows: list[dict[str, Any]] = []
    for _ in range(n):
        rows.append(leaks.cycle(backend, "tiny", run_dir, name=name))
        leaked = [r["leaked"] for r in rows if r["leaked"]]
        results[key] = {
            "cycles": len(rows), "failedUps": sum(r["upExit"] != 0 for r in rows),
            "failedDowns": sum(r["downExit"] != 0 for r in rows), "cyclesWithLeaks": len(leaked),
            "leaked": leaked, "upSecondsMax": max(r["upSeconds"] for r in rows),
            "downSecondsMax": max(r["downSeconds"] for r in rows),
            "processesWhileUpMin": min(r["processesWhileUp"] for r in rows),
            "errors": [r["upError"] for r in rows if r["upError"]]}
        _save(results)


def _sigints(backend: str, n: int, run_dir: Path, name: str | None, latest: float) -> dict[str, Any]:
    rows = [leaks.interrupted_up(backend, "tiny", run_dir, name=name, seed=i, latest=latest) for i in range(n)]
    return {"interrupts": n, "upFinishedFirst": sum(r["upFinishedFirst"] for r in rows),
            "withLeaks": sum(bool(r["leaked"]) for r in rows), "runs": rows}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", action="append", choices=PARTS, help="run only these parts (repeatable)")
    ap.add_argument("--profile", default=os.environ.get("LABKIT_FAULTS_PROFILE", "workshop"),
                    help="kind profile of the fault run (a running cluster of it is reused)")
    ap.add_argument("--claims", type=int, default=200)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--kills", type=int, default=30)
    ap.add_argument("--delay", type=float, default=1.0, help="the plugin's fault window, seconds")
    ap.add_argument("--cycles", type=int, default=20)
    ap.add_argument("--sigints", type=int, default=5)
    args = ap.parse_args(argv)
    parts = args.only or list(PARTS)
    results: dict[str, Any] = {}
    work = Path(tempfile.mkdtemp(prefix="labkit-reliability-"))
    t0 = time.monotonic()
    try:
        _run(args, parts, results, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    results["seconds:" + ",".join(parts)] = round(time.monotonic() - t0, 1)
    _save(results)
    print(json.dumps({k: {kk: vv for kk, vv in v.items() if not isinstance(vv, list | dict)} if isinstance(v, dict)
                      else v for k, v in results.items()}, indent=2))
    return 0


def _run(args: argparse.Namespace, parts: list[str], results: dict[str, Any], work: Path) -> None:
    if {"faults", "node-restart"} & set(parts):
        c = kindutil.cluster(args.profile)
        try:
            if "faults" in parts:
                results["faults"] = faultrun.run_faults(c, claims=args.claims, concurrency=args.concurrency,
                                                        kills=args.kills, delay=args.delay, seed=200)
                results["faults"]["profile"] = args.profile
                _save(results)
            if "node-restart" in parts:
                results["nodeRestart"] = faultrun.node_restart(c, pods=4)
                _save(results)
        finally:
            if not c.attached:
                c.down()
    if "local-cycles" in parts:
        _cycles("local", args.cycles, work / "local", None, results, "localCycles")
    if "local-sigint" in parts:
        results["localSigint"] = _sigints("local", args.sigints, work / "local-int", None, 10.0)
        _save(results)
    if "kernel-kills" in parts:  # a notebook kernel holding a local cluster, SIGKILLed, --cycles times
        runs = [leaks.kernel_killed(work / f"kernel-{i}") for i in range(args.cycles)]
        results["kernelKills"] = {"cycles": len(runs), "connected": sum(r["connected"] for r in runs),
                                  "cyclesWithLeaks": sum(bool(r["leaked"]) for r in runs),
                                  "leaked": [r["leaked"] for r in runs if r["leaked"]]}
        _save(results)
    if "kind-cycles" in parts:
        _cycles("kind", args.cycles, work / "kind", "labkit-rel-cycle", results, "kindCycles")
    if "kind-sigint" in parts:
        results["kindSigint"] = _sigints("kind", args.sigints, work / "kind-int", "labkit-rel-int", 60.0)
        _save(results)


if __name__ == "__main__":
    raise SystemExit(main())
