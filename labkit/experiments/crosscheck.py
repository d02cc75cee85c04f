"""An inflation run checked on another cluster: the sim's decisions applied to `local` (the real
kube-scheduler, kube-controller-manager and API server with the kit's nodes) or any `Cluster`.

`check_on(cluster, policy, ...)` runs the FGD paper's experiment on the sim (`run_inflation`,
keeping every placement), then applies the same objects to `cluster` in arrival order: each
ResourceClaimTemplate once, each Pod pinned to its node by node affinity as the sim run pins it
(`inflation.claim_template`, `inflation.pinned_pod`). It waits until the cluster has decided on
each pod (bound, its claim allocated; or unschedulable), reads node and devices back through the
`Cluster` API only, and compares task by task. The allocation curve is rebuilt from the cluster's
own answers (each claim's consumed `shares`), so it equals the sim run's `alloc_pct` only when the
cluster gave every task what the sim gave it. The first difference comes with the pod's and the
claim's status as the cluster reports them (the scheduler's PodScheduled reason and message, the
allocation), and the time of each side: the sim run's wall and CPU seconds; the cluster side's
wall seconds, the CPU seconds of this process and every process it started (a `local` cluster's
control plane, driver plugins and node agents included) and of the whole machine (/proc/stat).

Pods are applied `batch` at a time before waiting (each batch in arrival order). Every pod is
pinned and what a placed task takes (CPU, memory, GPU shares) only adds up, so a prefix of the
arrivals fits wherever the whole run fits: batching changes the time, not the outcome; `batch=1`
waits for each pod before the next, as the sim run does.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from labkit.api.quantity import parse_quantity
from labkit.cluster import Cluster, NotFound, RefusedObjects, connect
from labkit.experiments.inflation import (
    MILLI,
    NODES_PATH,
    POLICIES,
    SHARES,
    X_STEP,
    InflationError,
    _arrivals,  # part of the run's definition: the same arrival list as run_inflation draws
    claim_template,
    gpu_product_names,
    pinned_pod,
    run_inflation,
)
from labkit.experiments.openb import OpenbPod, openb_fleet, openb_pods
from labkit.experiments.policies import gpu_bus_ids
from labkit.model.podutil import claim_name_for

NAMESPACE = "default"
#: pods applied before the check waits for the cluster's decisions (see the module text)
BATCH = 50
#: seconds the check waits for the cluster to decide on one batch (a guard against a hang; a
#: busy 2-core machine running a 126-node local cluster decides 50 pods in seconds)
WAIT_S = 600.0


class CrosscheckError(InflationError):
    """A check that cannot be made as asked (gpu mode, a run of other arguments, a cluster without the fleet)."""


def check_on(cluster: Cluster, policy: str, trace: str = "default", *, every: int = 1, ratio: float = 1.3,
             seed: int = 42, gpu_mode: str = "shares", nodes: str | Path = NODES_PATH, run: dict | None = None,
             batch: int = BATCH, timeout: float = WAIT_S, clean: bool = True, rng: str = "python") -> dict:
    """The inflation run (policy, trace, every, ratio, seed) made again on `cluster`, task by task.

    `cluster` must have the run's fleet (`openb_fleet(nodes, every)`: connect(backend, that
    profile)) and no other pods on its nodes. `run`: the sim run's result (run_inflation with these
    arguments and keep_placements=True; None: run here; `rng`: its generator, run_inflation's).
    `clean`: delete what the check applied afterwards and wait until the pods and their claims are
    gone, so that the next check starts on an empty fleet.

    Returns: policy, trace, seed, ratio, sample_every, backend, nodes, gpus, pods (arrived), tasks
    (placed by the policy, so applied), equal (every task and the curve), equal_tasks,
    different_tasks, curve_equal, first_difference (None, or task, pod, trace_pod, expected
    {node, devices}, got {node, devices}, reason: the cluster's word), alloc_pct (from the
    cluster's answers), sim_alloc_pct, alloc_pct_at_saturation, sim (wall_s, cpu_s), cluster
    (wall_s, cpu_s: this process and its descendants, machine_cpu_s; clean_wall_s: the clean-up,
    not in wall_s), tasks_checked (per task: task, pod, trace_pod, node, devices, got_node,
    got_devices, equal)."""
    if gpu_mode != "shares":
        raise CrosscheckError(f"gpu mode {gpu_mode!r}: the check on a cluster runs the paper's GPU sharing only; "
                              "use gpu_mode 'shares' (--gpus shares)")
    if batch < 1:
        raise CrosscheckError(f"batch {batch}: give at least 1 (1 = wait for each pod before the next)")
    fleet = openb_fleet(nodes, every=every)
    names = [n["name"] for n in fleet["nodes"]]
    _check_nodes(cluster, names, fleet["name"])
    if run is None:
        run = run_inflation(policy, trace, every=every, ratio=ratio, seed=seed, nodes=nodes, keep_placements=True,
                            rng=rng)
    elif "placements" not in run or (run.get("seed"), run.get("ratio")) != (seed, ratio):
        raise CrosscheckError(f"run of seed {run.get('seed')} ratio {run.get('ratio')}: not the run checked (seed "
                              f"{seed} ratio {ratio}) or made without keep_placements=True; pass run=None to make "
                              "it here")
    bus = {n["name"]: gpu_bus_ids(n["nodeProfile"]) for n in fleet["nodes"]}
    cap = MILLI * sum(len(b) for b in bus.values())
    arrivals, _ = _arrivals(tuple(openb_pods(trace)), cap, ratio, seed, tuple(names), rng)
    tasks = [_task(arrivals, bus, p) for p in run["placements"]]

    wall0, cpu0, machine0 = time.perf_counter(), tree_cpu_s(), machine_cpu_s()
    product = gpu_product_names()
    applied: set[str] = set()
    refused: dict[str, str] = {}  # pod or template name -> the API server's refusal (`Kind/name: why`)
    seen: dict[str, tuple[dict, dict | None]] = {}  # pod name -> (pod, its claim) as the cluster reported them
    chunks = list(_chunks(tasks, batch))
    for chunk in cluster.progress(chunks, f"{policy} seed {seed} on {cluster.backend}", total=len(chunks)):
        objs, uses = [], {}
        for t in chunk:
            template = None
            if t["pod_spec"].num_gpu:
                obj = claim_template(t["pod_spec"], [bus[t["node"]][j] for j in t["gpus"]], product)
                template = uses[t["pod"]] = obj["metadata"]["name"]
                if template not in applied:
                    applied.add(template)
                    objs.append(obj)
            objs.append(pinned_pod(t["pod"], t["pod_spec"], t["node"], template))
        try:
            cluster.apply(objs)
        except RefusedObjects as exc:  # the others are stored; each refusal names its object
            for problem in exc.problems:
                kind_name = problem.split(":", 1)[0]
                refused.setdefault(kind_name.rpartition("/")[2], problem)
        for t in chunk:  # a pod whose template was refused (now or before) would wait for it forever
            why = refused.get(t["pod"]) or refused.get(uses.get(t["pod"], ""))
            if why:
                refused[t["pod"]] = why
        wanted = {t["pod"] for t in chunk if t["pod"] not in refused}
        cluster.wait(until=lambda c, w=wanted: _decided(c, w, seen), timeout=timeout)
        if not wanted <= seen.keys():  # not all decided in time: what the cluster says now
            _decided(cluster, wanted, seen)
    wall, cpu, machine = time.perf_counter() - wall0, tree_cpu_s() - cpu0, machine_cpu_s() - machine0

    checked, took_by_pod, first = [], {}, None
    for t in tasks:
        want = [f"gpu-{j}" for j in t["gpus"]]
        pod, claim = seen.get(t["pod"], (None, None))
        got_node = ((pod or {}).get("spec") or {}).get("nodeName")
        results = _results(claim)
        got = sorted(r["device"] if r.get("pool") == got_node else f"{r.get('pool')}/{r['device']}" for r in results)
        took_by_pod[t["pod"]] = _took(results) if got_node else 0
        equal = got_node == t["node"] and got == sorted(want)
        checked.append({"task": t["k"], "pod": t["pod"], "trace_pod": t["trace_pod"], "node": t["node"],
                        "devices": want, "got_node": got_node, "got_devices": got, "equal": equal})
        if not equal and first is None:
            first = {"task": t["k"], "pod": t["pod"], "trace_pod": t["trace_pod"],
                     "expected": {"node": t["node"], "devices": want}, "got": {"node": got_node, "devices": got},
                     "reason": refused.get(t["pod"]) or _reason(pod, claim, t["pod"])}
    placed = {t["k"]: t["pod"] for t in tasks}
    took = [took_by_pod[placed[k]] if k in placed else 0 for k in range(len(arrivals))]
    curve = alloc_curve([p.milli_total for p in arrivals], took, cap, ratio)
    clean0 = time.perf_counter()
    if clean:
        _clean(cluster, [t["pod"] for t in tasks], sorted(applied), timeout)
    differ = sum(not c["equal"] for c in checked)
    return {"policy": run["policy"], "trace": trace, "seed": seed, "ratio": ratio, "sample_every": every,
            "backend": cluster.backend, "nodes": len(names), "gpus": cap // MILLI, "pods": len(arrivals),
            "tasks": len(tasks), "equal": differ == 0 and curve == run["alloc_pct"],
            "equal_tasks": len(checked) - differ, "different_tasks": differ,
            "curve_equal": curve == run["alloc_pct"], "first_difference": first,
            "alloc_pct": curve, "sim_alloc_pct": run["alloc_pct"],
            "alloc_pct_at_saturation": curve[-1] if curve else 0.0,
            "sim": {"wall_s": run["wall_s"], "cpu_s": run["cpu_s"]},
            "cluster": {"wall_s": round(wall, 2), "cpu_s": round(cpu, 2), "machine_cpu_s": round(machine, 2),
                        "clean_wall_s": round(time.perf_counter() - clean0, 2)},
            "tasks_checked": checked}


def alloc_curve(asked: list[int], took: list[float], cap: int, ratio: float) -> list[float]:
    """The inflation curve from per-arrival milli-GPU asked and allocated (0 for a task not placed):
    allocated % of `cap` at x = 0, X_STEP, ... % arrived, up to `ratio` (run_inflation's points)."""
    out: list[float] = []
    arrived = allocated = 0.0
    for a, t in zip(asked, took, strict=True):
        arrived += a
        allocated += t
        while len(out) * X_STEP * cap <= arrived * 100 and len(out) * X_STEP <= ratio * 100 + 1e-9:
            out.append(round(100 * allocated / cap, 3))
    while len(out) * X_STEP <= ratio * 100 + 1e-9:
        out.append(round(100 * allocated / cap, 3))
    return out


def _check_nodes(cluster: Cluster, names: list[str], fleet: str) -> None:
    have = {n["metadata"]["name"] for n in cluster.list("Node")}
    missing = [n for n in names if n not in have]
    if missing:
        raise CrosscheckError(f"{cluster.backend} cluster of profile {getattr(cluster.profile, 'name', '?')}: no node "
                              f"{missing[0]} ({len(missing)} of the {len(names)} nodes of fleet {fleet} missing); "
                              "connect with the run's fleet: connect(backend, openb_fleet(every=N))")


def _task(arrivals: tuple[OpenbPod, ...], bus: dict[str, tuple[str, ...]], placement: tuple | list) -> dict[str, Any]:
    name, trace_pod, node, gpus = placement
    k = int(name[1:]) if name[1:].isdigit() else len(arrivals)
    if k >= len(arrivals) or arrivals[k].name != trace_pod:
        raise CrosscheckError(f"placement {name} ({trace_pod}): not arrival {k} of this run's trace; pass the "
                              "run_inflation result of the same trace, fleet, ratio and seed")
    if node not in bus or any(not 0 <= j < len(bus[node]) for j in gpus):
        raise CrosscheckError(f"placement {name} ({trace_pod}): node {node} GPUs {list(gpus)}: not in the fleet "
                              f"({len(bus)} nodes); a node's GPUs are numbered from 0")
    return {"k": k, "pod": name, "trace_pod": trace_pod, "node": node, "gpus": list(gpus), "pod_spec": arrivals[k]}


def _chunks(items: list[dict], n: int) -> Iterator[list[dict]]:
    for i in range(0, len(items), n):
        yield items[i:i + n]


def _decided(cluster: Cluster, wanted: set[str], seen: dict[str, tuple]) -> bool:
    """Whether the cluster has decided on every pod of `wanted`: bound with its claim allocated, or
    marked unschedulable (PodScheduled False); records each decided pod and its claim in `seen`."""
    pods = {p["metadata"]["name"]: p for p in cluster.list("Pod", NAMESPACE) if p["metadata"]["name"] in wanted}
    claims = {c["metadata"]["name"]: c for c in cluster.list("ResourceClaim", NAMESPACE)}
    for name, pod in pods.items():
        entries = pod["spec"].get("resourceClaims") or []
        claim = claims.get(claim_name_for(pod, entries[0])[0] or "") if entries else None
        bound = bool(pod["spec"].get("nodeName")) and (not entries or bool(_results(claim)))
        if bound or _scheduled_condition(pod).get("status") == "False":
            seen[name] = (pod, claim)
    return wanted <= seen.keys()


def _scheduled_condition(pod: dict | None) -> dict:
    return next((c for c in ((pod or {}).get("status") or {}).get("conditions") or []
                 if c.get("type") == "PodScheduled"), {})


def _results(claim: dict | None) -> list[dict]:
    return ((((claim or {}).get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results") or []


def _took(results: list[dict]) -> float:
    """milli-GPU a claim's allocation takes: each result's consumed `shares` (a whole device when
    it consumed none: not multi-allocatable)."""
    out = 0.0
    for r in results:
        shares = (r.get("consumedCapacity") or {}).get(SHARES)
        out += MILLI if shares is None else float(parse_quantity(str(shares)).value)
    return out


def _reason(pod: dict | None, claim: dict | None, name: str) -> str:
    """Why the cluster did not do what the sim did, in the cluster's words."""
    if pod is None:
        return f"pod {name}: the cluster reported no decision on it (not bound, no PodScheduled condition)"
    cond = _scheduled_condition(pod)
    if not pod["spec"].get("nodeName"):
        return (f"pod {name}: not bound: PodScheduled {cond.get('status', '?')} {cond.get('reason', '')}: "
                f"{cond.get('message', '')}").rstrip(": ")
    if claim is None:
        return f"pod {name}: bound to {pod['spec']['nodeName']}, its ResourceClaim not found"
    results = ", ".join(f"{r.get('pool')}/{r['device']}" + (f" ({SHARES} {r['consumedCapacity'][SHARES]})"
                                                            if SHARES in (r.get("consumedCapacity") or {}) else "")
                        for r in _results(claim))
    return (f"pod {name}: bound to {pod['spec']['nodeName']}; ResourceClaim {claim['metadata']['name']} "
            f"allocated {results or 'nothing'}")


def _clean(cluster: Cluster, pods: list[str], templates: list[str], timeout: float) -> None:
    """Delete the check's pods and templates; wait until the pods and their claims are gone."""
    for kind, names in (("Pod", pods), ("ResourceClaimTemplate", templates)):
        for name in names:
            with contextlib.suppress(NotFound):  # a template's claim goes with its pod, a pod may be refused
                cluster.delete(kind, name, NAMESPACE)
    mine = set(pods)

    def gone(c: Cluster) -> bool:
        if any(p["metadata"]["name"] in mine for p in c.list("Pod", NAMESPACE)):
            return False
        return not any(o.get("kind") == "Pod" and o.get("name") in mine
                       for cl in c.list("ResourceClaim", NAMESPACE) for o in cl["metadata"].get("ownerReferences") or [])

    cluster.wait(until=gone, timeout=timeout)


# -- CPU time ----------------------------------------------------------------------------------
_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def tree_cpu_s() -> float:
    """CPU seconds of this process (all threads, and its children reaped so far) and of every live
    process below it (/proc: utime + stime + cutime + cstime); this process's own where /proc is absent."""
    t = os.times()
    own = t.user + t.system + t.children_user + t.children_system
    try:
        entries = [e for e in os.listdir("/proc") if e.isdigit()]
    except OSError:
        return own
    parent: dict[int, int] = {}
    ticks: dict[int, int] = {}
    for e in entries:
        try:
            text = Path(f"/proc/{e}/stat").read_text()
        except OSError:  # gone meanwhile, or not ours to read
            continue
        f = text[text.rindex(")") + 2:].split()  # fields from 3 (state) on; the name may hold spaces
        parent[int(e)] = int(f[1])
        ticks[int(e)] = int(f[11]) + int(f[12]) + int(f[13]) + int(f[14])
    children: dict[int, list[int]] = {}
    for pid, ppid in parent.items():
        children.setdefault(ppid, []).append(pid)
    total, todo = 0, list(children.get(os.getpid(), []))
    while todo:
        pid = todo.pop()
        total += ticks.get(pid, 0)
        todo += children.get(pid, [])
    return own + total / _TICK


def machine_cpu_s() -> float:
    """Busy CPU seconds of the whole machine since boot (/proc/stat: all but idle and iowait); 0 without /proc."""
    try:
        fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    except (OSError, ValueError):
        return 0.0
    return (sum(fields) - fields[3] - fields[4]) / _TICK


def check_all(backend: str, policies: tuple[str, ...] | None = None, trace: str = "default", *,
              seeds: tuple[int, ...] = (42,), every: int = 1, ratio: float = 1.3, nodes: str | Path = NODES_PATH,
              rng: str = "python", progress: bool = False) -> dict:
    """`labkit experiment inflation --check-on BACKEND`: the sim run of every policy x seed first
    (alone on the machine, so its time is its own; a bad policy or trace fails before a cluster
    comes up), then one cluster of the fleet on `backend` (local: the cached control-plane binaries
    only; a missing build is the backend's one-line error, never a build of tens of minutes),
    `check_on` for each run on it one after the other, then down. Returns backend, trace, ratio,
    seeds, sample_every, nodes, gpus, equal (all runs), cluster_up (wall_s, cpu_s, machine_cpu_s of
    bringing the cluster up) and runs (check_on's results, in policy then seed order); `policies`
    None: all six."""
    cells = [(p, s) for p in policies or POLICIES for s in seeds]
    sims = [run_inflation(p, trace, every=every, ratio=ratio, seed=s, nodes=nodes, keep_placements=True, rng=rng)
            for p, s in cells]
    fleet = openb_fleet(nodes, every=every)
    wall0, cpu0, machine0 = time.perf_counter(), tree_cpu_s(), machine_cpu_s()
    cluster = connect(backend, fleet, progress=progress, **({"build": False} if backend == "local" else {}))
    up = {"wall_s": round(time.perf_counter() - wall0, 2), "cpu_s": round(tree_cpu_s() - cpu0, 2),
          "machine_cpu_s": round(machine_cpu_s() - machine0, 2)}
    try:
        runs = [check_on(cluster, p, trace, every=every, ratio=ratio, seed=s, nodes=nodes, rng=rng, run=sim,
                         clean=i < len(cells) - 1)  # the last run's objects go down with the cluster
                for i, ((p, s), sim) in enumerate(zip(cells, sims, strict=True))]
    finally:
        cluster.down()
    return {"backend": backend, "trace": trace, "ratio": ratio, "seeds": list(seeds), "sample_every": every,
            "nodes": runs[0]["nodes"], "gpus": runs[0]["gpus"], "equal": all(r["equal"] for r in runs),
            "cluster_up": up, "runs": runs}
