"""Allocator benchmark: labkit's Python allocator vs the real Kubernetes allocator (Go oracle).

Run by hand (not a test):

    bash tools/build-oracle.sh
    python3 benchmarks/allocator_bench.py                       # all workloads, default sizes
    python3 benchmarks/allocator_bench.py --workload mig --nodes 1000 --claims 5000 --python-scale 0.05

Workloads (each places claims one at a time, in order, on the first node where they fit, the
in-use set growing as it goes - what a scheduler does for one pod per cycle; one allocator is
built per claim and asked node after node):
  mig         N nodes x 8 A100 with dynamic MIG (fake_gpus dgx-a100: counters), claims for MIG
              profiles picked by CEL selectors
  backtrack   matchAttribute over two requests where only the last attribute group is big enough
  all         allocationMode All over large node-local pools, a CEL selector picks 16 of 1024
The Go side runs the identical loop in-process (`oracle --bench`), so process start, file
loading and parsing are not timed on either side. `--python-scale` shrinks nodes and claims for
the Python run (it is much slower); the ratio is always computed at the same size, by running Go
at that size too. Both wall and CPU time are printed (CPU time is fairer on a shared machine).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
V1 = "resource.k8s.io/v1"
MIG_PROFILES = ["1g.10gb", "1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"]


def oracle_path() -> Path:
    cache = Path(os.environ.get("LABKIT_CACHE", str(Path.home() / ".cache" / "dra-labkit")))
    return cache / "oracle" / "oracle-0.37"


def node(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}}}


def claim(name: str, requests: list[dict[str, Any]], constraints: list[dict[str, Any]] | None = None) -> dict:
    devices: dict[str, Any] = {"requests": requests}
    if constraints:
        devices["constraints"] = constraints
    return {"apiVersion": V1, "kind": "ResourceClaim", "metadata": {"name": name, "namespace": "bench"},
            "spec": {"devices": devices}}


def exact(name: str, cls: str, count: int = 1, mode: str = "ExactCount", cel: str | None = None) -> dict:
    ex: dict[str, Any] = {"deviceClassName": cls, "allocationMode": mode}
    if mode == "ExactCount":
        ex["count"] = count
    if cel:
        ex["selectors"] = [{"cel": {"expression": cel}}]
    return {"name": name, "exactly": ex}


# ---- workloads ---------------------------------------------------------------------------------

def mig_workload(nodes: int, claims: int) -> list[dict]:
    from fake_gpus.slices import build_slices, device_classes

    objs: list[dict] = list(device_classes())
    for i in range(nodes):
        objs.append(node(f"node-{i:04d}"))
        objs += build_slices("dgx-a100", f"node-{i:04d}", mig_mode="dynamic")
    for i in range(claims):
        profile = MIG_PROFILES[(i * 7 + i // 3) % len(MIG_PROFILES)]
        cel = f"device.attributes['gpu.nvidia.com'].profile == '{profile}'"
        objs.append(claim(f"c{i:05d}", [exact("mig", "mig.nvidia.com", cel=cel)]))
    return objs


def _plain_class(driver: str) -> dict:
    return {"apiVersion": V1, "kind": "DeviceClass", "metadata": {"name": "dev"},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{driver}"'}}]}}


def backtrack_workload(nodes: int, claims: int) -> list[dict]:
    """Groups 0..5 have 5 devices each, group 6 has 6: two requests of 3 that must share a group
    try every 3-of-5 combination of every small group before landing on the last one."""
    drv = "bt.example.com"
    objs: list[dict] = [_plain_class(drv)]
    for i in range(nodes):
        n = f"node-{i:04d}"
        objs.append(node(n))
        devices = []
        for g in range(7):
            for k in range(6 if g == 6 else 5):
                devices.append({"name": f"d-{g}-{k}", "attributes": {"grp": {"int": g}, "k": {"int": k}}})
        objs.append({"apiVersion": V1, "kind": "ResourceSlice", "metadata": {"name": f"{n}-bt"},
                     "spec": {"driver": drv, "nodeName": n, "pool": {"name": n, "generation": 1,
                                                                        "resourceSliceCount": 1},
                              "devices": devices}})
    for i in range(claims):
        objs.append(claim(f"c{i:05d}", [exact("a", "dev", 3), exact("b", "dev", 3)],
                          [{"matchAttribute": f"{drv}/grp"}, {"distinctAttribute": f"{drv}/k",
                                                               "requests": ["a"]}]))
    return objs


def all_workload(nodes: int, claims: int) -> list[dict]:
    drv = "all.example.com"
    objs: list[dict] = [_plain_class(drv)]
    for i in range(nodes):
        n = f"node-{i:04d}"
        objs.append(node(n))
        for s in range(8):
            devices = [{"name": f"d-{s * 128 + k}", "attributes": {"index": {"int": s * 128 + k}}}
                       for k in range(128)]
            objs.append({"apiVersion": V1, "kind": "ResourceSlice", "metadata": {"name": f"{n}-s{s}"},
                         "spec": {"driver": drv, "nodeName": n, "pool": {"name": n, "generation": 1,
                                                                            "resourceSliceCount": 8},
                                  "devices": devices}})
    for i in range(claims):
        cel = f'device.attributes["{drv}"].index % 64 == {i % 64}'
        objs.append(claim(f"c{i:05d}", [exact("all", "dev", mode="All", cel=cel)]))
    return objs


WORKLOADS = {"mig": mig_workload, "backtrack": backtrack_workload, "all": all_workload}
DEFAULT_SIZES = {"mig": (1000, 5000), "backtrack": (60, 60), "all": (20, 400)}


# ---- runners -------------------------------------------------------------------------------------

def run_go(objs: list[dict]) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "in.json"
        with path.open("w") as f:
            for o in objs:
                f.write(json.dumps(o, separators=(",", ":")))
                f.write("\n---\n")
        proc = subprocess.run([str(oracle_path()), "--bench", "-f", str(path)], capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"oracle --bench failed: {proc.stderr.strip()}")
    return json.loads(proc.stdout)


def run_python(objs: list[dict]) -> dict[str, Any]:
    from labkit.allocator import AllocatedState, Allocator, features_for
    from labkit.api import with_defaults

    objs = [with_defaults(o) for o in objs]
    classes = [o for o in objs if o["kind"] == "DeviceClass"]
    slices = [o for o in objs if o["kind"] == "ResourceSlice"]
    nodes = [o for o in objs if o["kind"] == "Node"]
    claims = [o for o in objs if o["kind"] == "ResourceClaim"]
    features = features_for("1.37")
    state = AllocatedState(consumable_capacity=features.ConsumableCapacity)
    placements: list[str | None] = []
    calls = errors = 0
    start, cpu_start = time.perf_counter(), time.process_time()
    for c in claims:
        alloc = Allocator(features, classes, slices, state)
        where = None
        for n in nodes:
            calls += 1
            out = alloc.allocate(n, [c])
            if out.status == "allocated":
                state.add(out.allocations[0])
                where = n["metadata"]["name"]
                break
            if out.status == "error" and not out.node_scoped:
                errors += 1
                break
        placements.append(where)
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    return {"claims": len(claims), "placed": sum(p is not None for p in placements), "errors": errors,
            "allocateCalls": calls, "seconds": seconds, "cpuSeconds": cpu, "placements": placements}


def summarize(label: str, r: dict[str, Any]) -> str:
    return (f"{label:<7} {r['seconds']:9.3f}s wall {r['cpuSeconds']:9.3f}s cpu  placed {r['placed']}/{r['claims']}  errors {r['errors']}  "
            f"Allocate calls {r['allocateCalls']}  ({1e3 * r['seconds'] / max(r['allocateCalls'], 1):.3f} ms/call)")


def bench(name: str, nodes: int, claims: int, scale: float, go_full: bool) -> dict[str, Any]:
    make = WORKLOADS[name]
    report: dict[str, Any] = {"workload": name}
    if go_full and scale < 1:
        go = run_go(make(nodes, claims))
        report["go_full"] = {"nodes": nodes, "claims": claims, **{k: go[k] for k in
                                                                  ("seconds", "cpuSeconds", "placed",
                                                                   "allocateCalls")}}
        print(f"[{name}] full size {nodes} nodes / {claims} claims")
        print("  " + summarize("go", go))
    pn, pc = max(1, round(nodes * scale)), max(1, round(claims * scale))
    objs = make(pn, pc)
    go = run_go(objs)
    py = run_python(objs)
    same = go["placements"] == py["placements"]
    ratio = py["seconds"] / go["seconds"] if go["seconds"] else float("inf")
    cpu_ratio = py["cpuSeconds"] / go["cpuSeconds"] if go["cpuSeconds"] else float("inf")
    print(f"[{name}] compared size {pn} nodes / {pc} claims")
    print("  " + summarize("go", go))
    print("  " + summarize("python", py))
    print(f"  python/go ratio: wall {ratio:.1f}x, cpu {cpu_ratio:.1f}x   same placements: {same}")
    report["compared"] = {"nodes": pn, "claims": pc, "go_seconds": go["seconds"], "python_seconds": py["seconds"],
                          "ratio": ratio, "cpu_ratio": cpu_ratio,
                          "go_cpu_seconds": go["cpuSeconds"], "python_cpu_seconds": py["cpuSeconds"],
                          "same_placements": same, "allocate_calls": go["allocateCalls"]}
    return report


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workload", choices=[*WORKLOADS, "every"], default="every")
    ap.add_argument("--nodes", type=int, help="node count (default per workload)")
    ap.add_argument("--claims", type=int, help="claim count (default per workload)")
    ap.add_argument("--python-scale", type=float, default=None,
                    help="fraction of nodes and claims for the compared run (default: 0.05 for mig, 1 else)")
    ap.add_argument("--no-go-full", action="store_true", help="skip the Go run at full size")
    ap.add_argument("--json", type=Path, help="also write the figures to this file")
    args = ap.parse_args(argv)
    if not oracle_path().exists():
        print(f"oracle not found at {oracle_path()}: run bash tools/build-oracle.sh", file=sys.stderr)
        return 2
    names = list(WORKLOADS) if args.workload == "every" else [args.workload]
    reports = []
    for name in names:
        n, c = DEFAULT_SIZES[name]
        scale = args.python_scale if args.python_scale is not None else (0.05 if name == "mig" else 1.0)
        reports.append(bench(name, args.nodes or n, args.claims or c, scale, not args.no_go_full))
    if args.json:
        args.json.write_text(json.dumps(reports, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
