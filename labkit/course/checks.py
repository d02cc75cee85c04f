"""Exercise checkers for the course notebooks.

Every checker prints one friendly line (✅ or ❌ with a hint) and returns a bool. None of them
raises: a placeholder (`...`, `None`, or text still containing `???`) or a broken answer gives ❌
and a hint, so a notebook run with the exercise still open does not fail.

Checkers that need to *run* an answer use a private, fresh `sim` cluster, so the verdict does not
depend on the backend the notebook itself uses (sim, local or kind).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import Any

from fake_gpus.computedomain import CLIQUE_LABEL
from fake_gpus.slices import build_slices
from labkit.api import load, with_defaults
from labkit.api.attributes import plain_value
from labkit.api.quantity import parse_quantity
from labkit.cel import CelError, compile_selector, device_input
from labkit.cel.validation import validate
from labkit.cluster import connect
from labkit.cluster.base import Cluster
from labkit.errors import LabkitError

GPU_DRIVER = "gpu.nvidia.com"


class _Fail(LabkitError):
    """Internal: stop a check with a message and a hint."""

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


class Verdict:
    """A checker's result: true for ✅, false for ❌. It already printed its line, so a notebook cell
    ending in a check shows that line and no `Out: True` / `Out: False`."""

    __slots__ = ("passed", "message")

    def __init__(self, passed: bool, message: str) -> None:
        self.passed = passed
        self.message = message

    def __bool__(self) -> bool:
        return self.passed

    def __eq__(self, other: object) -> bool:
        return self.passed == (other.passed if isinstance(other, Verdict) else other)

    def __hash__(self) -> int:
        return hash(self.passed)

    def __repr__(self) -> str:
        return f"Verdict({self.passed}, {self.message!r})"

    def _ipython_display_(self) -> None:  # IPython: the line was printed already; show nothing more
        return None


def ok(message: str) -> Verdict:
    print(f"✅ {message}")
    return Verdict(True, message)


def fail(message: str, hint: str = "") -> Verdict:
    print(f"❌ {message}" + (f"\n   hint: {hint}" if hint else ""))
    return Verdict(False, message)


def is_placeholder(answer: Any) -> bool:
    if answer is None or answer is Ellipsis:
        return True
    return isinstance(answer, str) and (not answer.strip() or "???" in answer)


DOWN_HINT = "run the notebook's first cell (it starts the cluster), then this cell again"


def _live_clusters(args: tuple, kw: dict) -> tuple[tuple, dict, list[Any]]:
    """Replace a stopped cluster argument by a fresh private sim cluster of the same profile (the
    checkers that take the notebook's cluster only read its DeviceClasses and ResourceSlices, which a
    fresh cluster of the profile publishes alike). Returns the new args and the clusters to stop."""
    # lazy: start-up (labkit.widgets loads ipywidgets and IPython; only widget checks need it)
    from labkit.widgets.sources import cluster_is_down

    started: list[Any] = []

    def live(value: Any) -> Any:
        if not isinstance(value, Cluster) or not cluster_is_down(value):
            return value
        profile = getattr(value, "profile", None)
        if profile is None:
            raise _Fail("the cluster is down", DOWN_HINT)
        fresh = connect("sim", profile, progress=False)
        started.append(fresh)
        return fresh

    return tuple(live(a) for a in args), {k: live(v) for k, v in kw.items()}, started


def checker(what: str) -> Callable[[Callable[..., str]], Callable[..., Verdict]]:
    """Turn `fn(answer, ...) -> success message` (raising _Fail) into a never-raising checker."""

    def wrap(fn: Callable[..., str]) -> Callable[..., Verdict]:
        @functools.wraps(fn)
        def run(answer: Any, *args: Any, **kw: Any) -> Verdict:
            if is_placeholder(answer):
                return fail(f"{what}: not answered yet", "replace the placeholder (... or ???) with your answer")
            started: list[Any] = []
            try:
                args, kw, started = _live_clusters(args, kw)
                return ok(fn(answer, *args, **kw))
            except _Fail as exc:
                return fail(exc.message, exc.hint)
            except Exception as exc:  # noqa: BLE001 - a checker reports, never raises
                first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
                return fail(f"{what}: {first}", "read the message, fix the answer and run the cell again")
            finally:
                for c in started:
                    c.down()

        return run

    return wrap


# ---------------------------------------------------------------------------------------------
# helpers

def _objects(text: Any) -> list[dict]:
    """Load and validate manifests like the API server would; problems become a _Fail."""
    try:
        objs = load(text)
    except Exception as exc:  # noqa: BLE001 - LoadError and YAML errors alike
        raise _Fail(f"the YAML does not parse: {str(exc).splitlines()[0]}",
                    "check the indentation: two spaces per level, lists start with '- '") from None
    problems = validate(objs)
    if problems:
        raise _Fail(f"the API server would reject it: {problems[0]}",
                    "fix this field (labkit validate -f file.yaml lists every problem)")
    return [with_defaults(o) for o in objs]  # as stored: count 1, allocationMode ExactCount, ...


def _one(objs: list[dict], *kinds: str) -> dict:
    found = [o for o in objs if o.get("kind") in kinds]
    if len(found) != 1:
        raise _Fail(f"expected exactly one {' or '.join(kinds)}, found {len(found)}",
                    f"your YAML should contain one object of kind {kinds[0]}")
    return found[0]


def _claim_spec(obj: dict) -> dict:
    spec = obj.get("spec", {})
    return spec.get("spec", {}) if obj.get("kind") == "ResourceClaimTemplate" else spec


def _requests(obj: dict) -> list[dict]:
    return _claim_spec(obj).get("devices", {}).get("requests") or []


def _constraints(obj: dict) -> list[dict]:
    return _claim_spec(obj).get("devices", {}).get("constraints") or []


def _devices(slices: Iterable[dict]) -> dict[tuple[str, str, str], dict]:
    """(driver, pool, device) -> device entry."""
    out = {}
    for s in slices:
        spec = s.get("spec", {})
        for d in spec.get("devices") or []:
            out[(spec["driver"], spec["pool"]["name"], d["name"])] = d
    return out


def _attr(device: dict, name: str) -> Any:
    return plain_value((device.get("attributes") or {}).get(name))


def _run_on_sim(objs: list[dict], profile: str) -> Any:
    cluster = connect("sim", profile, progress=False)
    try:
        cluster.apply(objs)
    except Exception as exc:  # noqa: BLE001 - ClusterError: one line per problem
        cluster.down()
        raise _Fail(f"the cluster refused it: {str(exc).splitlines()[0]}", "fix that object and try again") from None
    cluster.wait()
    return cluster


def _pods(objs: list[dict]) -> list[str]:
    pods = [o["metadata"]["name"] for o in objs if o.get("kind") == "Pod"]
    if not pods:
        raise _Fail("your YAML has no Pod", "keep the Pod(s) from the exercise in the answer")
    return pods


def _require_running(cluster: Any, pods: list[str]) -> None:
    for name in pods:
        pod = cluster.get("Pod", name)
        if pod.get("status", {}).get("phase") != "Running":
            why = cluster.explain(name).strip().splitlines()
            raise _Fail(f"pod {name} does not run: {why[0] if why else 'Pending'}",
                        "cluster.explain(pod) tells why; compare with the examples above")


def _placements(cluster: Any, pod: str) -> list[dict]:
    return [r for r in cluster.placements().rows if r["pod"] == pod]


# ---------------------------------------------------------------------------------------------
# 00 setup

@checker("GPU count")
def check_gpu_count(answer: Any, cluster: Any) -> str:
    """00: how many whole GPUs does the cluster publish?"""
    expected = sum(1 for (drv, _, _), d in _devices(cluster.list("ResourceSlice")).items()
                   if drv == GPU_DRIVER and _attr(d, "type") == "gpu")
    if not isinstance(answer, int) or isinstance(answer, bool):
        raise _Fail(f"answer with a number, not {type(answer).__name__}", "e.g. GPUS = 4")
    if answer != expected:
        raise _Fail(f"{answer} is not right", "count the devices whose `type` attribute is 'gpu' in every "
                    "ResourceSlice of driver gpu.nvidia.com (cluster.status() shows the totals)")
    return f"{expected} GPUs: every one is a device in a ResourceSlice"


# ---------------------------------------------------------------------------------------------
# 01 why DRA

@checker("two-GPU template")
def check_two_gpu_template(answer: Any) -> str:
    """01: the DRA form of `nvidia.com/gpu: 2` as a ResourceClaimTemplate."""
    tmpl = _one(_objects(answer), "ResourceClaimTemplate")
    reqs = _requests(tmpl)
    if len(reqs) != 1 or "exactly" not in reqs[0]:
        raise _Fail("use exactly one request with an `exactly:` block", "requests: [{name: gpus, exactly: {...}}]")
    ex = reqs[0]["exactly"]
    if ex.get("deviceClassName") != "gpu.nvidia.com":
        raise _Fail(f"deviceClassName is {ex.get('deviceClassName')!r}",
                    "whole NVIDIA GPUs come from the DeviceClass gpu.nvidia.com")
    if ex.get("allocationMode", "ExactCount") != "ExactCount" or ex.get("count", 1) != 2:
        raise _Fail(f"the request asks for {ex.get('count', 1)} device(s)", "set count: 2")
    if ex.get("selectors"):
        raise _Fail("`nvidia.com/gpu: 2` says nothing about the GPU model", "drop the selectors for this one")
    return "one request, class gpu.nvidia.com, count 2: the same ask as nvidia.com/gpu: 2, now with a name"


# ---------------------------------------------------------------------------------------------
# 02 inventory

def _same_root_nics(profile: str, gpu: str) -> tuple[str, set[str]]:
    devs = _devices(build_slices(profile, "n"))
    root = next(_attr(d, "resource.kubernetes.io/pcieRoot") for (drv, _, name), d in devs.items()
                if drv == GPU_DRIVER and name == gpu)
    nics = {name for (drv, _, name), d in devs.items()
            if drv != GPU_DRIVER and _attr(d, "resource.kubernetes.io/pcieRoot") == root}
    return root, nics


@checker("NICs next to the GPU")
def check_nics_near_gpu(answer: Any, profile: str = "dgx-a100", gpu: str = "gpu-5") -> str:
    """02: the NICs under the same PCIe root as `gpu` on a `profile` node."""
    root, expected = _same_root_nics(profile, gpu)
    given = {answer} if isinstance(answer, str) else set(answer)
    if given != expected:
        raise _Fail(f"{sorted(given)} is not the set of NICs under {gpu}'s PCIe root",
                    f"look up {gpu}'s resource.kubernetes.io/pcieRoot, then every NIC with the same value "
                    "(or devices_under(g, root) in labkit.topology)")
    return f"{', '.join(sorted(expected))} share {root} with {gpu}"


# ---------------------------------------------------------------------------------------------
# 03 CEL

@checker("selector")
def check_big_gpu_selector(answer: Any, cluster: Any, minimum: str = "40Gi") -> str:
    """03: a selector for GPUs with at least `minimum` memory that never errors on any device."""
    try:
        program = compile_selector(answer)
    except CelError as exc:
        raise _Fail(f"does not compile: {exc.message}", exc.hint or "compare with the examples above") from None
    need = parse_quantity(minimum).value
    matched, expected = set(), set()
    for (drv, pool, name), d in _devices(cluster.list("ResourceSlice")).items():
        mem = d.get("capacity", {}).get("memory", {}).get("value")
        if drv == GPU_DRIVER and _attr(d, "type") == "gpu" and mem and parse_quantity(mem).value >= need:
            expected.add((pool, name))
        try:
            if program.evaluate(device_input(drv, d)):
                matched.add((pool, name))
        except CelError as exc:
            raise _Fail(f"error on device {pool}/{name} (driver {drv}): {exc.message}",
                        "the NIC driver's devices have no gpu.nvidia.com capacity: test device.driver first "
                        "(false && error is false) or guard with has()/optional") from None
    if matched != expected:
        extra, missing = sorted(matched - expected), sorted(expected - matched)
        detail = f"matches {len(matched)} devices, expected {len(expected)}"
        if extra:
            detail += f"; should not match {'/'.join(extra[0])}"
        if missing:
            detail += f"; misses {'/'.join(missing[0])}"
        raise _Fail(detail, f"compare memory with quantity: .compareTo(quantity('{minimum}')) >= 0, "
                    "and only whole GPUs (type 'gpu')")
    return f"matches exactly the {len(expected)} GPUs with ≥ {minimum}, and no device errors"


# ---------------------------------------------------------------------------------------------
# 04 claiming by attributes

@checker("T4 template")
def check_t4_template(answer: Any, cluster: Any) -> str:
    """04: a ResourceClaimTemplate for one Tesla T4, chosen by its product name."""
    # lazy: start-up (labkit.widgets loads ipywidgets and IPython; only widget checks need it)
    from labkit.widgets.logic import class_expressions, match_devices

    tmpl = _one(_objects(answer), "ResourceClaimTemplate")
    reqs = _requests(tmpl)
    if len(reqs) != 1 or "exactly" not in reqs[0]:
        raise _Fail("use one request with an `exactly:` block", "requests: [{name: gpu, exactly: {...}}]")
    ex = reqs[0]["exactly"]
    if ex.get("count", 1) != 1 or ex.get("allocationMode", "ExactCount") != "ExactCount":
        raise _Fail("ask for exactly one device", "count: 1 (the default)")
    classes, slices = cluster.list("DeviceClass"), cluster.list("ResourceSlice")
    try:
        exprs = class_expressions(classes, ex["deviceClassName"])
    except KeyError as exc:
        raise _Fail(str(exc).strip("'\""), "use the DeviceClass gpu.nvidia.com") from None
    own = [s["cel"]["expression"] for s in ex.get("selectors") or [] if "cel" in s]
    rows = match_devices(exprs + own, slices)
    errors = [r for r in rows if r.result == "error"]
    if errors:
        raise _Fail(f"selector error on {errors[0].pool}/{errors[0].device}: {errors[0].message}",
                    "check the attribute name: productName, in domain gpu.nvidia.com")
    if not any("productName" in e for e in own):
        raise _Fail("the task asks for the T4 by its product name, and no selector reads productName",
                    "select on device.attributes['gpu.nvidia.com'].productName (e.g. == 'Tesla T4')")
    matched = {(r.pool, r.device) for r in rows if r.result == "match"}
    t4s = {(pool, name) for (drv, pool, name), d in _devices(slices).items()
           if drv == GPU_DRIVER and _attr(d, "productName") == "Tesla T4"}
    if matched != t4s:
        raise _Fail(f"the request matches {len(matched)} devices; there are {len(t4s)} T4s",
                    "select on device.attributes['gpu.nvidia.com'].productName (e.g. == 'Tesla T4')")
    return f"matches exactly the {len(t4s)} Tesla T4s of the cluster"


# ---------------------------------------------------------------------------------------------
# 05 sharing

@checker("shared GPU")
def check_shared_claim(answer: Any) -> str:
    """05: two pods that share one GPU through one named ResourceClaim."""
    objs = _objects(answer)
    pods = _pods(objs)
    if len(pods) < 2:
        raise _Fail("keep both pods", "the exercise has two pods: infer-a and infer-b")
    names = set()
    for o in objs:
        if o.get("kind") == "Pod":
            for rc in o["spec"].get("resourceClaims") or []:
                if rc.get("resourceClaimTemplateName"):
                    raise _Fail(f"pod {o['metadata']['name']} uses a template: it gets a claim of its own",
                                "reference the named claim with resourceClaimName")
                names.add(rc.get("resourceClaimName"))
    if len(names) != 1:
        raise _Fail(f"the pods reference {len(names)} different claims", "both pods must name the same claim")
    cluster = _run_on_sim(objs, "workshop")
    try:
        _require_running(cluster, pods)
        used = {(r["node"], r["device"]) for p in pods for r in _placements(cluster, p)}
        claim = cluster.get("ResourceClaim", names.pop())
        reserved = len(claim.get("status", {}).get("reservedFor") or [])
    finally:
        cluster.down()
    if len(used) != 1:
        raise _Fail(f"the pods use {len(used)} devices", "one claim, one device: both pods see the same GPU")
    node, dev = used.pop()
    return f"{len(pods)} pods share {node}/{dev}; the claim is reserved for {reserved} pods"


# ---------------------------------------------------------------------------------------------
# 06 MIG

@checker("MIG pair")
def check_mig_pair(answer: Any, profiles: tuple[str, str] = ("3g.40gb", "1g.10gb")) -> str:
    """06: two MIG devices of the given profiles carved from the same physical GPU."""
    objs = _objects(answer)
    claim = _one(objs, "ResourceClaim", "ResourceClaimTemplate")
    if not any(c.get("matchAttribute") == "gpu.nvidia.com/parentUUID" for c in _constraints(claim)):
        raise _Fail("nothing makes the two slices come from one GPU",
                    "add constraints: [{matchAttribute: gpu.nvidia.com/parentUUID}]")
    pods = _pods(objs)
    cluster = _run_on_sim(objs, "mig-lab")
    try:
        _require_running(cluster, pods)
        rows = _placements(cluster, pods[0])
    finally:
        cluster.down()
    got = sorted(r["profile"] for r in rows)
    if got != sorted(profiles):
        raise _Fail(f"the pod got MIG profiles {got or 'none'}", f"request one {profiles[0]} and one {profiles[1]} "
                    "with selectors on device.attributes['gpu.nvidia.com'].profile")
    parents = {r["device"].split("-mig-")[0] for r in rows}
    if len(parents) != 1:
        raise _Fail(f"the slices come from {sorted(parents)}", "matchAttribute gpu.nvidia.com/parentUUID")
    return f"{' + '.join(got)} on {rows[0]['node']}/{parents.pop()}: one physical GPU"


# ---------------------------------------------------------------------------------------------
# 07 topology

@checker("aligned GPU + NIC")
def check_gpu_nic_aligned(answer: Any) -> str:
    """07: one GPU and one NIC under the same PCIe root (topology-lab cluster)."""
    objs = _objects(answer)
    claim = _one(objs, "ResourceClaim", "ResourceClaimTemplate")
    if not any(c.get("matchAttribute") == "resource.kubernetes.io/pcieRoot" for c in _constraints(claim)):
        raise _Fail("nothing ties the GPU to the NIC", "constraints: [{matchAttribute: resource.kubernetes.io/pcieRoot}]")
    pods = _pods(objs)
    cluster = _run_on_sim(objs, "topology-lab")
    try:
        _require_running(cluster, pods)
        rows = _placements(cluster, pods[0])
        devs = _devices(cluster.list("ResourceSlice"))
    finally:
        cluster.down()
    drivers = {r["driver"] for r in rows}
    if GPU_DRIVER not in drivers or len(drivers) < 2:
        raise _Fail(f"the pod got devices of {sorted(drivers)}", "request one GPU (gpu.nvidia.com) and one NIC "
                    "(nic.fake-gpus.dev) in the same claim")
    roots = {_attr(devs[(r["driver"], r["pool"], r["device"])], "resource.kubernetes.io/pcieRoot") for r in rows}
    if len(roots) != 1:
        raise _Fail(f"the devices sit under {sorted(roots)}", "the constraint must cover both requests")
    return f"{', '.join(r['device'] for r in rows)} on {rows[0]['node']} share {roots.pop()}"


# ---------------------------------------------------------------------------------------------
# 08 alternatives

@checker("fallback claim")
def check_fallback_claim(answer: Any) -> str:
    """08: prefer an H100, else fall back to one T4; on the workshop cluster the fallback wins."""
    objs = _objects(answer)
    claim = _one(objs, "ResourceClaim", "ResourceClaimTemplate")
    reqs = _requests(claim)
    if len(reqs) != 1 or len(reqs[0].get("firstAvailable") or []) < 2:
        raise _Fail("use one request with a firstAvailable list of at least two alternatives",
                    "firstAvailable: [{name: h100, ...}, {name: t4, ...}]")
    subs = reqs[0]["firstAvailable"]
    first = " ".join(s["cel"]["expression"] for s in subs[0].get("selectors") or [] if "cel" in s)
    if "H100" not in first:
        raise _Fail("the first alternative should ask for an H100", "selector: productName.contains('H100')")
    pods = _pods(objs)
    cluster = _run_on_sim(objs, "workshop")
    try:
        _require_running(cluster, pods)
        rows = _placements(cluster, pods[0])
    finally:
        cluster.down()
    got = {r["request"] for r in rows}
    if not all("/" in r and not r.endswith("/" + subs[0]["name"]) for r in got):
        raise _Fail(f"allocated for {sorted(got)}", "the workshop cluster has no H100: the fallback must win")
    if {r["node"] for r in rows} - {"t4-0", "t4-1"}:
        raise _Fail("the fallback landed on an A100", "make the second alternative select the T4 (productName)")
    return f"no H100 here, so {sorted(got)[0]} won: {rows[0]['node']}/{rows[0]['device']}"


# ---------------------------------------------------------------------------------------------
# 09 debugging

@checker("fixed manifest")
def check_fixed_debug_pod(answer: Any) -> str:
    """09: the broken `debug-me` manifest, fixed: pod Running on a GPU with at least 40Gi."""
    objs = _objects(answer)
    if "debug-me" not in _pods(objs):
        raise _Fail("keep the pod named debug-me", "fix the claim, not the pod's name")
    cluster = _run_on_sim(objs, "workshop")
    try:
        _require_running(cluster, ["debug-me"])
        rows = _placements(cluster, "debug-me")
        devs = _devices(cluster.list("ResourceSlice"))
    finally:
        cluster.down()
    mems = [parse_quantity(devs[(r["driver"], r["pool"], r["device"])]["capacity"]["memory"]["value"]).value
            for r in rows if r["driver"] == GPU_DRIVER]
    if not mems or min(mems) < parse_quantity("40Gi").value:
        raise _Fail("debug-me runs, but not on a GPU with ≥ 40Gi", "keep the memory selector")
    return f"debug-me runs on {rows[0]['node']}/{rows[0]['device']}"


# ---------------------------------------------------------------------------------------------
# 10 gang scheduling

@checker("largest gang")
def check_largest_gang(answer: Any, cluster: Any) -> str:
    """10: the largest minCount of one-A100 workers that still schedules on the cluster."""
    expected = sum(1 for (drv, _, _), d in _devices(cluster.list("ResourceSlice")).items()
                   if drv == GPU_DRIVER and _attr(d, "type") == "gpu" and "A100" in str(_attr(d, "productName")))
    if not isinstance(answer, int) or isinstance(answer, bool):
        raise _Fail(f"answer with a number, not {type(answer).__name__}", "e.g. LARGEST_GANG = 3")
    if answer != expected:
        raise _Fail(f"a gang of {answer} is not the limit",
                    "count the A100s (each worker needs one); one more worker and nobody starts")
    return f"{expected}: one A100 per worker; a gang of {expected + 1} binds nobody"


# ---------------------------------------------------------------------------------------------
# 11 migration

@checker("v1 migration")
def check_v1_migration(answer: Any) -> str:
    """11: the v1beta1 `a100-pair` template rewritten for resource.k8s.io/v1."""
    tmpl = _one(_objects(answer), "ResourceClaimTemplate")
    if tmpl.get("apiVersion") != "resource.k8s.io/v1":
        raise _Fail(f"apiVersion is {tmpl.get('apiVersion')}", "apiVersion: resource.k8s.io/v1")
    reqs = _requests(tmpl)
    if len(reqs) != 1 or "exactly" not in reqs[0]:
        raise _Fail("the request's fields must move under `exactly:`", "- name: gpus\n     exactly: {...}")
    ex = reqs[0]["exactly"]
    sel = " ".join(s["cel"]["expression"] for s in ex.get("selectors") or [] if "cel" in s)
    if ex.get("deviceClassName") != "gpu.nvidia.com" or ex.get("count") != 2 or "A100" not in sel:
        raise _Fail("keep the meaning: class gpu.nvidia.com, count 2, the A100 selector",
                    "only the shape changes, not the request")
    return "valid resource.k8s.io/v1: same request, now under `exactly:`"


# ---------------------------------------------------------------------------------------------
# 12 experiments

@checker("best policy")
def check_best_policy(answer: Any, results: Any, metric: str = "wait_p95_s", best: str = "lowest") -> str:
    """12: the policy with the lowest (or `best="highest"`) value of `metric` in an experiment's results.
    Policies whose values round to the same number tie: any of them is right, and the message says so."""
    rows = {r.summary["policy"]: round(float(r.summary[metric]), 1) for r in results.runs}
    pick = max if best == "highest" else min
    top = pick(rows.values())
    winners = sorted(p for p, v in rows.items() if v == top)
    if answer not in rows:
        raise _Fail(f"{answer!r} is not one of the policies run: {', '.join(rows)}", "copy a name from the table")
    if answer not in winners:
        raise _Fail(f"{answer} has {metric} = {rows[answer]}, not the {best} ({top})",
                    f"compare the {metric} column of every policy")
    tie = f"; tied with {', '.join(w for w in winners if w != answer)}" if len(winners) > 1 else ""
    return f"{answer} has the {best} {metric} ({top}){tie}"


@checker("your policy")
def check_fewer_unallocated(answer: Any, res: Any, than: str) -> str:
    """12: the policy named `answer` left fewer GPUs unallocated at saturation than the policy `than`
    in an inflation run's result (the dict labkit.experiments.inflation.run_all returns)."""
    rows = {name: float(r["unallocated_gpus"]) for name, r in res["policies"].items()}
    for name in (answer, than):
        if name not in rows:
            raise _Fail(f"{name!r} is not one of the policies run: {', '.join(rows)}",
                        "pass both policies to run_all and give your class that name")
    mine, theirs = rows[answer], rows[than]
    if mine >= theirs:
        raise _Fail(f"{answer} leaves {mine:.1f} GPUs unallocated, {than} {theirs:.1f}: not fewer",
                    "change score(); e.g. a CPU-only task (task.gpus == 0) on an idle GPU's node uses the CPU "
                    "those GPUs need")
    return f"{answer} leaves {mine:.1f} GPUs unallocated at saturation, {theirs - mine:.1f} fewer than {than}"


# ---------------------------------------------------------------------------------------------
# 13 platform engineers

@checker("what-if")
def check_whatif_pending(answer: Any, whatif: Any, new_pods: Any) -> str:
    """13: the names of the new pods that stay Pending in the what-if sim started from the snapshot."""
    names = [p["metadata"]["name"] for p in new_pods if p.get("kind") == "Pod"]
    pending = sorted(n for n in names if not whatif.get("Pod", n)["spec"].get("nodeName"))
    if isinstance(answer, str) or not isinstance(answer, (list, set, tuple)):
        raise _Fail(f"answer with a list of pod names, not {type(answer).__name__}", 'e.g. PENDING = ["finetune"]')
    unknown = sorted(set(map(str, answer)) - set(names))
    if unknown:
        raise _Fail(f"{', '.join(unknown)} is not one of the new pods", f"choose among {', '.join(names)}")
    if sorted(set(map(str, answer))) != pending:
        raise _Fail(f"{sorted(set(map(str, answer)))} is not what the what-if shows",
                    "read the node column of the table: an empty node means Pending; whatif.explain(name) says why")
    return (f"{', '.join(pending) or 'none'}: Pending in the what-if"
            " — found before anything touched the real cluster")


# ---------------------------------------------------------------------------------------------
# 14 rack-scale NVLink

@checker("ComputeDomain job")
def check_compute_domain_pair(answer: Any) -> str:
    """14: a ComputeDomain and two pods, 4 GPUs each, that run in one NVLink domain with an IMEX
    channel (nvl72-rack cluster)."""
    objs = _objects(answer)
    cds = [o for o in objs if o.get("kind") == "ComputeDomain"]
    if len(cds) != 1:
        raise _Fail(f"{len(cds)} ComputeDomain(s) in your YAML", "keep exactly one kind: ComputeDomain")
    spec = cds[0].get("spec") or {}
    if spec.get("numNodes"):  # NVIDIA's computedomain.go: deprecated, "recommended to be set to zero"
        raise _Fail(f"numNodes: {spec['numNodes']} sizes the ComputeDomain; numNodes is deprecated upstream",
                    "leave numNodes out (0): a ComputeDomain is as big as the nodes its pods land on")
    tmpl = ((spec.get("channel") or {}).get("resourceClaimTemplate") or {}).get("name")
    pods = _pods(objs)
    for o in objs:
        if o.get("kind") == "Pod":
            names = [c.get("resourceClaimTemplateName") for c in o["spec"].get("resourceClaims") or []]
            if tmpl not in names:
                raise _Fail(f"pod {o['metadata']['name']} does not use the channel template {tmpl!r}",
                            "resourceClaims: [{name: channel, resourceClaimTemplateName: <the CD's template>}]")
            if CLIQUE_LABEL not in (o["spec"].get("nodeSelector") or {}):
                raise _Fail(f"pod {o['metadata']['name']} is not kept in one NVLink domain",
                            f"nodeSelector: {{{CLIQUE_LABEL}: <the clique id>}}; a ComputeDomain follows "
                            "the pods, it does not place them")
    cluster = _run_on_sim(objs, "nvl72-rack")
    try:
        _require_running(cluster, pods)
        nodes = {p: cluster.get("Pod", p)["spec"]["nodeName"] for p in pods}
        channels = {p: cluster.pod_env(p).get("FAKE_IMEX_CHANNELS") for p in pods}
        cd = cluster.get("ComputeDomain", cds[0]["metadata"]["name"])
    finally:
        cluster.down()
    if len(set(nodes.values())) != len(pods):
        raise _Fail(f"the pods share a tray: {nodes}", "ask for 4 GPUs per pod (a tray has 4)")
    missing = [p for p, ch in channels.items() if ch != "channel0"]
    if missing:
        raise _Fail(f"{', '.join(missing)} got no IMEX channel", "the container must list the channel claim in "
                    "resources.claims")
    if (cd.get("status") or {}).get("status") != "Ready":
        raise _Fail(f"ComputeDomain {cd['metadata']['name']} is {cd.get('status', {}).get('status')}",
                    "every pod's tray must run its IMEX daemon: the pods must be Running on their trays")
    return f"{', '.join(f'{p} on {n}' for p, n in sorted(nodes.items()))}; ComputeDomain Ready, channel0 in each"


# ---------------------------------------------------------------------------------------------
# 15 device health

def _extended_gpu_pod(name: str, node: str) -> dict:
    """A pod asking for `nvidia.com/gpu: 1` on `node` (a DRA-backed extended resource)."""
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"nodeSelector": {"kubernetes.io/hostname": node},
                     "containers": [{"name": "main", "image": "busybox",
                                     "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}


@checker("node drain")
def check_node_drain(answer: Any, node: str = "t4-1", other: str = "t4-0") -> str:
    """15: one DeviceTaintRule that drains every GPU of `node` (NoExecute): on a fresh workshop
    cluster its pods go, another node's stay."""
    rule = _one(_objects(answer), "DeviceTaintRule")
    sel, taint = rule["spec"].get("deviceSelector") or {}, rule["spec"].get("taint") or {}
    if taint.get("effect") != "NoExecute":
        raise _Fail(f"the taint's effect is {taint.get('effect')!r}: running pods would stay",
                    "effect: NoExecute evicts the pods already using the devices")
    if sel.get("device"):
        raise _Fail(f"the rule selects only device {sel['device']}", "leave out deviceSelector.device: "
                    "driver and pool select every device of the node's pool")
    if sel.get("driver") != GPU_DRIVER or sel.get("pool") != node:
        raise _Fail(f"the rule selects driver {sel.get('driver')!r}, pool {sel.get('pool')!r}",
                    f"deviceSelector: {{driver: {GPU_DRIVER}, pool: {node}}} (a node's pool is named after it)")
    cluster = _run_on_sim([_extended_gpu_pod("on-" + node, node), _extended_gpu_pod("on-" + other, other)],
                          "workshop")
    try:
        _require_running(cluster, ["on-" + node, "on-" + other])
        cluster.apply([rule])
        cluster.wait()
        left = {p["metadata"]["name"] for p in cluster.list("Pod")}
        evicted = [e["involvedObject"]["name"] for e in cluster.events() if e["reason"] == "DeviceTaintManagerEviction"]
    finally:
        cluster.down()
    if "on-" + node in left or "on-" + other not in left:
        raise _Fail(f"pods left: {sorted(left)}", f"only the pod on {node} should be evicted")
    return f"{', '.join(evicted)} evicted (DeviceTaintManagerEviction); the pod on {other} stays"
