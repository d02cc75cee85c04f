"""Driver faults on a real kubelet (issue 17.2), shared by tests/e2e/test_kind_faults.py (small) and
tools/reliability.py (full size).

`run_faults` creates and deletes pods with one-GPU claims concurrently while a killer SIGKILLs the
fake driver's plugin process, half of the time while it sits inside a NodePrepareResources /
NodeUnprepareResources call (the plugin pauses there when FAKE_GPUS_FAULT_DELAY_SECONDS is set,
after writing the CDI spec and before writing its checkpoint, and logs `fault-window BEGIN/END`).
Whether a kill landed inside a call is read afterwards from the killed container's log, not
assumed. After every restart the plugin's checkpoint is compared with the API server's claims;
at the end no claim of the run may be left in a checkpoint or as a CDI spec on any node.
`node_restart` restarts a node's container (`docker restart`) with prepared claims and compares
each pod's devices before and after.
"""

from __future__ import annotations

import random
import re
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any

import yaml

from fake_gpus.plugin.server import FAULT_BEGIN, FAULT_DELAY_ENV, FAULT_END
from labkit.cluster.backends.kind.backend import KindCluster

from .kindutil import (
    DRIVER,
    DRIVER_NS,
    cdi_specs,
    checkpoint,
    docker,
    kjson,
    kubectl,
    node_containers,
    node_exec,
    obj,
    plugin_pods,
    poll,
    run,
)

NS = "lk-faults"
TEMPLATE = "lk-one-gpu"
#: pids of the plugin processes inside a node container (kind nodes have no crictl here)
PLUGIN_PIDS = ("for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline 2>/dev/null | grep -q '^python -m fake_gpus plugin' "
               "&& echo ${p#/proc/}; done")
#: run inside a node: SIGKILL the plugin once its container log's last fault mark is a BEGIN
WINDOW_KILL = ("f=$(ls -t /var/log/pods/" + DRIVER_NS + "_{pod}_*/plugin/*.log | head -1); i=0; "
               "while [ $i -lt 600 ]; do case \"$(grep fault-window $f | tail -1)\" in *BEGIN*) "
               "kill -9 {pids}; exit 0;; esac; i=$((i+1)); sleep 0.1; done")
#: a pod slower than this to be Ready has its events kept in the result (`slowPods`)
SLOW_POD_SECONDS = 30.0
PREPARED_RE = re.compile(r"prepared claim (\S+) \(uid ([0-9a-f-]+)\): (.*)$")


@dataclass
class Kill:
    node: str
    aimed: str                       # "window" (waited for a BEGIN line) or "random"
    landed: str = "outside"          # NodePrepareResources / NodeUnprepareResources / outside
    checkpoint_ok: bool = True
    problems: list[str] = field(default_factory=list)
    restart_seconds: float = 0.0


@dataclass
class PodResult:
    name: str
    ran: bool = False
    devices_ok: bool = False
    node: str = ""
    claim_uid: str = ""
    allocated: list[str] = field(default_factory=list)
    seen: list[str] = field(default_factory=list)
    deleted: bool = False
    error: str = ""
    ready_seconds: float = 0.0       # apply -> Running and Ready
    gone_seconds: float = 0.0        # delete -> gone from the API server
    waited_on: list[str] = field(default_factory=list)  # a slow pod's events: what it waited for


def _setup(c: KindCluster, delay: float) -> None:
    kubectl(c, "create", "namespace", NS, check=False)
    template = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                "metadata": {"name": TEMPLATE, "namespace": NS},
                "spec": {"spec": {"devices": {"requests": [
                    {"name": "gpu", "exactly": {"deviceClassName": DRIVER}}]}}}}
    kubectl(c, "apply", "-f", "-", input=yaml.safe_dump(template))
    set_fault_delay(c, delay)


def set_fault_delay(c: KindCluster, delay: float) -> None:
    """Set (or with 0 remove) the plugin's fault pause on every driver DaemonSet and wait for the rollout."""
    arg = f"{FAULT_DELAY_ENV}={delay}" if delay > 0 else f"{FAULT_DELAY_ENV}-"
    kubectl(c, "-n", DRIVER_NS, "set", "env", "daemonset", "--all", arg)
    for ds in kjson(c, "-n", DRIVER_NS, "get", "daemonsets")["items"]:
        kubectl(c, "-n", DRIVER_NS, "rollout", "status", f"daemonset/{ds['metadata']['name']}", "--timeout", "300s",
                timeout=320)


def _pod(c: KindCluster, name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS, "labels": {"app": NS}},
            "spec": {"terminationGracePeriodSeconds": 1,
                     "containers": [{"name": "main", "image": c.workload_image, "imagePullPolicy": "IfNotPresent",
                                     "args": ["sleep"], "resources": {"claims": [{"name": "gpu"}]}}],
                     "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": TEMPLATE}]}}


def _ready(pod: dict[str, Any]) -> bool:
    st = pod.get("status", {})
    return st.get("phase") == "Running" and all(s.get("ready") for s in st.get("containerStatuses") or [{}])


def _gpu_names(env: dict[str, str]) -> list[str]:
    return sorted(v for k, v in env.items() if k.startswith("FAKE_GPU_") and k.endswith("_NAME"))


def _claim(c: KindCluster, pod: dict[str, Any]) -> dict[str, Any] | None:
    names = [s.get("resourceClaimName") for s in pod.get("status", {}).get("resourceClaimStatuses") or []]
    if not names or not names[0]:
        return None
    return obj(c, "ResourceClaim", names[0], NS)


def _one_pod(c: KindCluster, name: str, timeout: float, hold: float) -> PodResult:
    r = PodResult(name)
    t0 = time.monotonic()
    try:
        kubectl(c, "apply", "-f", "-", input=yaml.safe_dump(_pod(c, name)))
        pod = poll(lambda: (p := obj(c, "Pod", name, NS)) and _ready(p) and p, timeout, 1.0)
        r.ready_seconds = round(time.monotonic() - t0, 1)
        if r.ready_seconds > SLOW_POD_SECONDS:
            r.waited_on = [f"{e.get('reason')}: {e.get('message', '')}"[:300] for e in c.events()
                           if (e.get("involvedObject") or {}).get("name") == name
                           and (e.get("involvedObject") or {}).get("namespace") == NS][-12:]
        if not pod:
            r.error = "not Running within the timeout"
        else:
            r.ran, r.node = True, pod["spec"]["nodeName"]
            claim = _claim(c, pod)
            if claim is None:
                r.error = "no claim in the pod's status"
            else:
                r.claim_uid = claim["metadata"]["uid"]
                results = claim.get("status", {}).get("allocation", {}).get("devices", {}).get("results", [])
                r.allocated = sorted(x["device"] for x in results)
                env = c.pod_env(name, NS)
                r.seen = _gpu_names(env)
                r.devices_ok = bool(r.allocated) and r.seen == r.allocated
                if not r.devices_ok:
                    r.error = f"container sees {r.seen}, the claim has {r.allocated}"
            time.sleep(hold)
    except Exception as exc:  # one pod's trouble is a result, not the end of the run
        r.error = f"{type(exc).__name__}: {exc}"
    kubectl(c, "-n", NS, "delete", "pod", name, "--wait=false", check=False)
    t1 = time.monotonic()
    r.deleted = bool(poll(lambda: obj(c, "Pod", name, NS) is None, timeout, 1.0))
    r.gone_seconds = round(time.monotonic() - t1, 1)
    if not r.deleted and not r.error:
        r.error = "not deleted within the timeout"
    return r


class Killer:
    """SIGKILLs the plugin process of a random node, aimed at the fault window or at a random moment."""

    def __init__(self, c: KindCluster, kills: int, seed: int, window_share: float = 0.5):
        self.c = c
        self.kills = kills
        self.rng = random.Random(seed)
        self.window_share = window_share
        self.ctrs = node_containers(c)
        self.nodes = sorted(n for n in plugin_pods(c) if n in self.ctrs)
        self.done: list[Kill] = []
        self.logs: list[str] = []        # logs of killed containers
        self.stop = threading.Event()
        self.claim_nodes: dict[str, str] = {}  # uid -> node, filled by the run

    def _log(self, pod: str, *args: str) -> str:
        return kubectl(self.c, "-n", DRIVER_NS, "logs", pod, "-c", "plugin", *args, check=False)

    def run(self) -> None:
        for _ in range(self.kills):
            if self.stop.is_set():
                return
            self.stop.wait(self.rng.uniform(1.0, 4.0))
            node = self.rng.choice(self.nodes)
            aimed = "window" if self.rng.random() < self.window_share else "random"
            self.done.append(self.kill(node, aimed))

    def _status(self, pod: str) -> dict[str, Any]:
        p = obj(self.c, "Pod", pod, DRIVER_NS)
        return ((p or {}).get("status", {}).get("containerStatuses") or [{}])[0]

    def kill(self, node: str, aimed: str) -> Kill:
        ctr = self.ctrs[node]
        k = Kill(node, aimed)
        pod = plugin_pods(self.c).get(node, "")
        if not pod:
            k.problems.append(f"no plugin pod on {node} to kill")
            return k
        restarts = self._status(pod).get("restartCount", 0)
        pids = node_exec(ctr, "sh", "-c", PLUGIN_PIDS, check=False).split()
        if not pids:
            k.problems.append(f"no plugin process on {node} to kill")
            return k
        if aimed == "window":  # inside the node: kill as soon as the log's last fault mark is a BEGIN (<= 60 s)
            node_exec(ctr, "sh", "-c", WINDOW_KILL.format(pod=pod, pids=" ".join(pids)), check=False, timeout=90)
        node_exec(ctr, "kill", "-9", *pids, check=False)
        t0 = time.monotonic()
        # the kubelet restarts the container; its log before the kill is then --previous
        restarted = poll(lambda: self._status(pod).get("restartCount", 0) > restarts, 120, 0.5)
        log = self._log(pod, "--previous") if restarted else ""
        self.logs.append(log)
        k.landed = _landed(log)
        if restarts + 1 >= 2:  # a fresh pod instead, before the kubelet's crash back-off grows
            kubectl(self.c, "-n", DRIVER_NS, "delete", "pod", pod, "--wait=true", "--timeout=120s", check=False,
                    timeout=150)

        ok = poll(lambda: plugin_registered(self.c, node), 300, 1.0)
        k.restart_seconds = round(time.monotonic() - t0, 1)
        if not ok:
            k.problems.append("the plugin did not come back and register within 300s")
            k.checkpoint_ok = False
            return k
        k.problems += check_checkpoint(self.c, node, ctr, self.claim_nodes)
        k.checkpoint_ok = not k.problems
        return k


def plugin_registered(c: KindCluster, node: str) -> bool:
    """The fake driver's pod on `node` is ready and the kubelet registered it (its log says so)."""
    pod = plugin_pods(c).get(node, "")
    if not pod:
        return False
    st = ((obj(c, "Pod", pod, DRIVER_NS) or {}).get("status", {}).get("containerStatuses") or [{}])[0]
    if not st.get("ready"):
        return False
    log = kubectl(c, "-n", DRIVER_NS, "logs", pod, "-c", "plugin", check=False)
    return f"kubelet registered driver {DRIVER}" in log


def why_not_ready(c: KindCluster, names: list[str]) -> dict[str, Any]:
    """For a failed wait: each pod's phase, node, unready conditions and waiting reasons, and the
    events of the pods and their claims (what `kubectl describe` would show)."""
    out: dict[str, Any] = {}
    for name in names:
        p = obj(c, "Pod", name, NS) or {}
        st = p.get("status", {})
        out[name] = {
            "phase": st.get("phase"), "node": p.get("spec", {}).get("nodeName"),
            "conditions": [f"{x['type']}={x['status']} {x.get('reason', '')} {x.get('message', '')}".strip()
                           for x in st.get("conditions") or [] if x.get("status") != "True"],
            "waiting": [f"{cs['name']}: {cs['state']['waiting'].get('reason', '')} "
                        f"{cs['state']['waiting'].get('message', '')}".strip()
                        for cs in st.get("containerStatuses") or [] if "waiting" in cs.get("state", {})]}
    out["events"] = [f"{e['involvedObject'].get('kind')}/{e['involvedObject'].get('name')}: {e.get('reason')} "
                     f"{e.get('message', '')}".strip()
                     for e in c.events() if e.get("involvedObject", {}).get("namespace") == NS][-20:]
    return out


def _landed(log: str) -> str:
    """The call a killed plugin was inside: its log ends (as far as the fault marks go) with a BEGIN."""
    marks = [ln for ln in log.splitlines() if FAULT_BEGIN in ln or FAULT_END in ln]
    if marks and FAULT_BEGIN in marks[-1]:
        return marks[-1].split(FAULT_BEGIN, 1)[1].split()[0]
    return "outside"


def check_checkpoint(c: KindCluster, node: str, ctr: str, claim_nodes: dict[str, str]) -> list[str]:
    """The plugin's checkpoint on `node` against the API server: each entry of this run's namespace
    names a claim allocated on this node with the same devices (or one being deleted, which the
    kubelet still unprepares), and every Running pod of the run on this node has its claim in it."""
    problems = []
    ckpt = {uid: e for uid, e in checkpoint(ctr).items() if e.get("namespace") == NS}
    claims = {cl["metadata"]["uid"]: cl for cl in c.list("ResourceClaim", NS)}
    for uid, entry in ckpt.items():
        cl = claims.get(uid)
        alloc = ((cl or {}).get("status", {}).get("allocation") or {}).get("devices", {}).get("results", [])
        if cl is None or cl["metadata"].get("deletionTimestamp") or not alloc:
            # deleted, or released after its pod ended (the controller deallocates before the kubelet
            # has unprepared): the kubelet's unprepare removes the entry, checked at the end
            continue
        want = sorted(x["device"] for x in alloc if x.get("driver") == DRIVER and x.get("pool") == node)
        have = sorted(d["device_name"] for d in entry.get("devices", []))
        if want != have:
            problems.append(f"checkpoint on {node}: claim {entry['name']} (uid {uid}) has {have}, "
                            f"the API server allocated {want}")
    for pod in c.list("Pod", NS):
        if pod["spec"].get("nodeName") != node or not _ready(pod) or pod["metadata"].get("deletionTimestamp"):
            continue
        cl = _claim(c, pod)
        # read again when missing: the pod may have become Ready after the checkpoint was read
        if cl is not None and cl["metadata"]["uid"] not in ckpt and cl["metadata"]["uid"] not in checkpoint(ctr):
            problems.append(f"checkpoint on {node}: pod {pod['metadata']['name']} runs with claim "
                            f"{cl['metadata']['name']} (uid {cl['metadata']['uid']}), which it lacks")
    return problems


def prepared_counts(logs: list[str]) -> tuple[Counter[str], int]:
    """(prepare log lines per claim uid of this run, uids prepared with different devices)."""
    seen: dict[str, set[str]] = {}
    count: Counter[str] = Counter()
    for log in logs:
        for ln in log.splitlines():
            m = PREPARED_RE.search(ln)
            if m and m.group(1).startswith(NS + "/"):
                count[m.group(2)] += 1
                seen.setdefault(m.group(2), set()).add(m.group(3).strip())
    return count, sum(1 for v in seen.values() if len(v) > 1)


def leftovers(c: KindCluster, uids: set[str]) -> dict[str, Any]:
    """Per node: checkpoint entries and CDI specs of this run's claims still there."""
    out: dict[str, Any] = {"checkpoint": {}, "cdi": {}}
    for node, ctr in node_containers(c).items():
        ck = [uid for uid, e in checkpoint(ctr).items() if e.get("namespace") == NS or uid in uids]
        specs = [f for f in cdi_specs(ctr) if any(u in f for u in uids)]
        if ck:
            out["checkpoint"][node] = ck
        if specs:
            out["cdi"][node] = specs
    return out


def run_faults(c: KindCluster, *, claims: int = 30, concurrency: int = 6, kills: int = 4, seed: int = 1,
               delay: float = 1.0, pod_timeout: float = 600.0, hold: float = 1.0) -> dict[str, Any]:
    """Create `claims` pods (one claim each), `concurrency` at a time, while `kills` plugin kills
    happen; returns the counts (see the module docstring)."""
    t0 = time.monotonic()
    phases: dict[str, float] = {}  # where the run's time went, phase by phase
    mark = [t0]

    def phase(name: str) -> None:
        now = time.monotonic()
        phases[name] = round(now - mark[0], 1)
        mark[0] = now

    _setup(c, delay)
    phase("setup (fault delay rolled out)")
    killer = Killer(c, kills, seed)
    thread = threading.Thread(target=killer.run, daemon=True)
    thread.start()
    try:
        with ThreadPoolExecutor(concurrency) as pool:
            results = list(pool.map(lambda i: _one_pod(c, f"f-{seed}-{i:04d}", pod_timeout, hold), range(claims)))
    finally:
        killer.stop.set()  # the kill under way finishes, with its restart and checkpoint check
        phase("pods (all deleted)")
        thread.join(timeout=900)
    phase("the last kill's restart")
    for r in results:
        killer.claim_nodes[r.claim_uid] = r.node
    uids = {r.claim_uid for r in results if r.claim_uid}
    # claims go with their pods; wait until the API server has none left, then for the kubelets' unprepares
    poll(lambda: not c.list("ResourceClaim", NS), 180, 2.0)
    phase("claims gone")
    left = poll(lambda: (lo := leftovers(c, uids)) and not lo["checkpoint"] and not lo["cdi"] and lo, 180, 3.0) \
        or leftovers(c, uids)
    phase("checkpoints and CDI specs empty")
    current = [kubectl(c, "-n", DRIVER_NS, "logs", pod, "-c", "plugin", check=False) for pod in plugin_pods(c).values()]
    counts, conflicting = prepared_counts(killer.logs + current)
    set_fault_delay(c, 0)
    phase("fault delay removed")
    kills_done = killer.done
    return {
        "claims": claims, "concurrency": concurrency, "faultDelaySeconds": delay, "seed": seed,
        "podsRan": sum(r.ran for r in results),
        "podsWithRightDevices": sum(r.devices_ok for r in results),
        "podsDeleted": sum(r.deleted for r in results),
        # a pod not Running in time is not a lost claim by itself: the kubelet tries a failed prepare again
        # at its next resync of the pod (10-15 s apart on labkit's kind clusters, 60-90 s with the kubelet's
        # default: labkit/cluster/backends/kind/config.py KUBELET_CONFIG), so `pod_timeout` covers many
        "podsNotRunningInTime": sum(not r.ran for r in results),
        "kills": len(kills_done),
        "killsInsidePrepare": sum(k.landed == "NodePrepareResources" for k in kills_done),
        "killsInsideUnprepare": sum(k.landed == "NodeUnprepareResources" for k in kills_done),
        "killsOutside": sum(k.landed == "outside" for k in kills_done),
        "killsAimedAtWindow": sum(k.aimed == "window" for k in kills_done),
        "checkpointChecks": len(kills_done),
        "checkpointInconsistent": sum(not k.checkpoint_ok for k in kills_done),
        "restartSecondsMax": max((k.restart_seconds for k in kills_done), default=0.0),
        "claimsPreparedAgainAfterKill": sum(1 for n in counts.values() if n > 1),
        "claimsPreparedWithDifferentDevices": conflicting,
        "checkpointEntriesLeft": sum(len(v) for v in left["checkpoint"].values()),
        "cdiSpecsLeft": sum(len(v) for v in left["cdi"].values()),
        "seconds": round(time.monotonic() - t0, 1),
        "phaseSeconds": phases,
        "podReadySeconds": sorted(r.ready_seconds for r in results),
        "podGoneSeconds": sorted(r.gone_seconds for r in results),
        "slowPods": {r.name: {"readySeconds": r.ready_seconds, "events": r.waited_on} for r in results if r.waited_on},
        "problems": [p for k in kills_done for p in k.problems] + [f"{r.name}: {r.error}" for r in results if r.error],
        "killLog": [asdict(k) for k in kills_done],
    }


def node_restart(c: KindCluster, *, pods: int = 3, timeout: float = 600.0) -> dict[str, Any]:
    """`docker restart` a worker with prepared claims; its pods must come back with the same devices.
    It starts once the node's plugin is registered (after the fault run the DaemonSet rolls out anew),
    and a wait that fails says why (`whyNotRunning`, `whyNotBack`)."""
    t0 = time.monotonic()
    _setup(c, 0)
    names = [f"nr-{i}" for i in range(pods)]
    workers = [n for n in plugin_pods(c)]
    node = sorted(workers)[0]
    registered = bool(poll(lambda: plugin_registered(c, node), timeout, 1.0))
    for name in names:
        pod = _pod(c, name)
        pod["spec"]["nodeSelector"] = {"kubernetes.io/hostname": node}
        kubectl(c, "apply", "-f", "-", input=yaml.safe_dump(pod))
    ok = poll(lambda: len([p for p in c.list("Pod", NS) if p["metadata"]["name"] in names and _ready(p)])
              == len(names), timeout, 1.0)
    why_not_running = {} if ok else why_not_ready(c, names)
    before = {n: _gpu_names(c.pod_env(n, NS)) for n in names} if ok else {}
    uids_before = {n: c.get("Pod", n, NS)["metadata"]["uid"] for n in names}
    ctr = node_containers(c)[node]
    from_ckpt = {e["name"] for e in checkpoint(ctr).values() if e.get("namespace") == NS}
    t1 = time.monotonic()
    run(docker(), "restart", ctr, check=True, timeout=180)

    def back() -> bool:
        ps = c.list("Pod", NS)
        restarted = [p for p in ps if p["metadata"]["name"] in names and _ready(p)
                     and any(s.get("restartCount", 0) > 0 for s in p["status"].get("containerStatuses") or [])]
        return len(restarted) == len(names)

    came_back = bool(poll(back, timeout, 2.0))
    why_not_back = {} if came_back else why_not_ready(c, names)
    after = {n: _gpu_names(c.pod_env(n, NS)) for n in names} if came_back else {}
    uids_after = {n: c.get("Pod", n, NS)["metadata"]["uid"] for n in names} if came_back else {}
    specs_after = cdi_specs(ctr)
    for name in names:
        kubectl(c, "-n", NS, "delete", "pod", name, "--wait=false", check=False)
    poll(lambda: not c.list("ResourceClaim", NS), 180, 2.0)
    left = poll(lambda: not [u for u, e in checkpoint(ctr).items() if e.get("namespace") == NS], 120, 2.0)
    return {
        "node": node, "pods": pods, "pluginRegisteredBefore": registered, "ranBefore": bool(ok),
        "whyNotRunning": why_not_running, "whyNotBack": why_not_back, "claimsInCheckpointBefore": len(from_ckpt),
        "cameBack": came_back, "sameDevices": bool(before) and before == after,
        "samePods": bool(uids_after) and uids_before == uids_after,
        "devicesBefore": before, "devicesAfter": after,
        "cdiSpecsAfterRestart": len([f for f in specs_after if "claim_" in f]),
        "checkpointEmptyAfterDelete": bool(left),
        "restartSeconds": round(time.monotonic() - t1, 1), "seconds": round(time.monotonic() - t0, 1),
    }


