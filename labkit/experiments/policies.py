"""Placement policies: one protocol for every experiment (`run`, `sweep`, `inflation`).

The protocol - what a policy sees and what it returns, as small as it can be:

    from labkit.experiments.policies import ScoringPolicy
    class MyPolicy(ScoringPolicy):
        name = "mine"
        def score(self, task, state, nodes):    # -> one int per candidate (higher wins), or None
            return -state.cpu[nodes]             # e.g. the node with the least CPU left
        def gpus(self, task, state, node):      # optional -> GPU indices on that node, or None
            return None

- `task` (`Task`, frozen): what one pod asks for: `cpu_milli`, `memory_mib`, `gpus` (how many),
  `gpu_milli` (per GPU; 1000 = a whole GPU, less = a share of one), `gpu_types` (allowed GPU
  models, () = any), and from `run` traces `gpu_mem_gib`, `nvlink`, `kind`.
- `state` (`FleetState`, read-only to a policy): every node's `names`, GPU `model`, `ngpu`, free
  `cpu` / `mem`, `cpu_total` / `mem_total`, free milli-GPU per GPU `g` (nodes x 8; absent GPUs
  0), `tags` (GPU pods per shape: column 0 shares, column n n-GPU pods), a per-node `version`
  bumped whenever the node changes (cache per node on it), `workload` (the trace's tasks),
  `rng` (this run's random stream) and `cache` (a dict the policy may keep per-run data in).
- `nodes`: the candidate node indices (numpy); every one fits the task (CPU, memory, GPU model,
  milli-GPU, in `run` GPU memory too). `score` returns one integer per candidate: the highest
  wins, ties go to the run's tie order (inflation: `tie_rank`, `run`: node name); None means "no
  preference": kube-scheduler's default choice (`default_scores`).
- `gpus` (optional) returns which GPUs of the chosen node: None is the default (`default_gpus`:
  the tightest GPU that fits a share, the first idle GPUs for whole ones).

Any policy runs in every experiment: `labkit experiment run|sweep|inflation --policies NAME,PATH.py,
module:Class` (`load_policy`), serially, in local processes or on Dask (workers get the spec
string and load it again). `inflation` places every task by the protocol (with or without the
sim). `run` / `sweep`: the six policies below write their own DRA objects (`objects()`, the node
left to the sim's scheduler, or a `kubernetes.io/hostname` nodeSelector for topology and
frag-aware); a policy without `objects()` (the paper's six, yours) is run one pod at a time: the
runner builds `Task` and `FleetState` from the item and the ledger, picks the node and GPUs by the
protocol and writes DRA objects pinned to them (`ProtocolObjects`: whole GPUs = a claim for
exactly those devices; a share = a named time-sliced claim on that GPU that later shares join).
The paper's six (fgd, best-fit, dot-product, gpu-packing, gpu-clustering, random-fit) live in
labkit.experiments.inflation; `labkit experiment policies` lists all twelve.

The `run` policies. Every placement goes through the sim's real scheduler + DRA allocator: a
policy only writes ResourceClaim(Template)s and Pods. To steer node choice it sets a nodeSelector on
`kubernetes.io/hostname` (what a custom scoring plugin would decide in kube-scheduler). Policies
without node choice leave it to the sim's scheduler (labkit.sim.scoring: kube-scheduler's default
scores over every node below 100 nodes; from 100 nodes on over the sample kube-scheduler's
percentageOfNodesToScore gives, found from a rotating start). In `inflation` (no DRA shapes
there) they are plain protocol policies: `score` None (the default node), default GPUs.

| name         | MIG mode | what it asks for                                                              | node choice |
|--------------|----------|-------------------------------------------------------------------------------|-------------|
| whole-gpu    | none     | device-plugin style: ceil(need) whole GPUs, one claim per pod (template)       | scheduler   |
| shared       | none     | shares packed into named ResourceClaims (1 GPU, TimeSlicing config) that several pods reference | scheduler |
| static-mig   | static   | shares: firstAvailable over the fixed MIG profiles that fit, smallest first   | scheduler   |
| dynamic-mig  | dynamic  | shares: class mig.nvidia.com, firstAvailable over profiles, counters do the rest | scheduler |
| topology     | none     | whole GPUs; multi-GPU jobs matchAttribute on the NVLink domain                | best fit: smallest NVLink island that holds the job |
| frag-aware   | none     | like `shared`                                                                  | FGD: least growth of unusable capacity |
"""

from __future__ import annotations

import bisect
import importlib
import importlib.util
import inspect
import math
import random
import re
import sys
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from fake_gpus.slices import build_slices
from labkit.api.quantity import parse_quantity
from labkit.errors import EngineError, InputError, LabkitError
from labkit.experiments import objects as o
from labkit.experiments.fleet import NVLINK_ATTR, Fleet
from labkit.experiments.fragmentation import GpuState, Mix, gpu_states, states_fragmentation
from labkit.experiments.ledger import Ledger
from labkit.experiments.traces import WorkItem
from labkit.model.profiles import DEFAULT_ALLOCATABLE

if TYPE_CHECKING:
    import numpy as np

MILLI = 1000  # milli-GPU of one whole GPU
#: the GPU columns FleetState.g has at least (the paper's simulator: 8 GPUs per node)
GPU_COLUMNS = 8


class PolicyError(InputError, ValueError):
    """Unknown policy name or a policy that returned unusable objects."""


class PolicyFault(EngineError):
    """A policy failed while it ran (it raised, or chose a placement that cannot be): one line
    naming the policy, the task and what was wrong; exit 1 on the CLI."""


@dataclass
class Context:
    """What a policy may look at: the fleet, what is in use (ledger), the trace's request mix,
    and the devices each named claim got (claim name -> (node, [device names]))."""

    fleet: Fleet
    ledger: Ledger
    mix: Mix
    claim_devices: dict[str, tuple[str, list[str]]] = field(default_factory=dict)
    state: dict[str, Any] = field(default_factory=dict)  # per-policy scratch space
    items: tuple[WorkItem, ...] = ()  # the trace
    seed: int = 0  # the run's seed

    def mem_floor(self, need_gib: float) -> float:
        """The smallest GPU memory size in the fleet that holds `need_gib` (the need itself when
        none does). A selector `memory >= mem_floor(need)` matches exactly the GPUs that
        `memory >= need` matches, with a handful of distinct expressions for the whole trace
        (fewer CEL compilations and evaluations, better scheduler caching)."""
        sizes = self.state.get("_sizes")
        if sizes is None:
            sizes = self.state["_sizes"] = sorted({g.mem_gib for n in self.fleet.nodes
                                                   for g in self.fleet.kind_of[n].gpus if g.whole})
        return next((s for s in sizes if s + 1e-9 >= need_gib), need_gib)


@runtime_checkable
class Policy(Protocol):
    name: str
    mig_mode: str | None  # the fleet's MIG mode under this policy ("none" | "static" | "dynamic" | None = as given)
    sharing: bool  # headroom on shared GPUs counts as usable free capacity

    def objects(self, item: WorkItem, ctx: Context) -> list[dict]:
        """ResourceClaim(Template)s (templates may repeat: applied once) + exactly one Pod named item.name."""
        ...

    def release(self, item: WorkItem, ctx: Context) -> list[tuple[str, str]]:
        """(kind, name) of objects to delete once the item's pod is gone (e.g. an emptied shared claim)."""
        ...


# -- the protocol: Task, FleetState, ScoringPolicy ---------------------------------------------

@dataclass(frozen=True)
class Task:
    """What one pod asks for, in both worlds (an inflation trace row or a `run` WorkItem)."""

    name: str
    cpu_milli: int = 0
    memory_mib: int = 0
    gpus: int = 0  # GPUs it takes (a share: 1)
    gpu_milli: int = 0  # per GPU: 1000 = a whole GPU, less = a share of one
    gpu_types: tuple[str, ...] = ()  # allowed GPU models; () = any
    gpu_mem_gib: float = 0.0  # `run` traces: GPU memory per GPU
    nvlink: bool = False  # `run` traces: all its GPUs in one NVLink domain
    kind: str = ""  # `run` traces: inference | mig | finetune | cpu

    @property
    def share(self) -> bool:
        """Part of one GPU (gpu_milli < 1000)."""
        return self.gpus > 0 and self.gpu_milli < MILLI

    @property
    def milli_total(self) -> int:
        return self.gpus * self.gpu_milli

    # the paper's simulator's words, so its code reads a Task as it reads a trace row
    @property
    def num_gpu(self) -> int:
        return self.gpus

    @property
    def gpu_spec(self) -> tuple[str, ...]:
        return self.gpu_types

    @classmethod
    def of_item(cls, item: WorkItem) -> Task:
        """A `run` trace item as the pod the runner writes asks for it (o.pod's CPU and memory)."""
        milli = 0
        if item.gpu_units:
            milli = MILLI if item.gpus else max(1, min(MILLI, round(item.compute * MILLI)))
        return cls(item.name, o.POD_CPU_MILLI, o.POD_MEMORY_MIB, item.gpu_units, milli, (),
                   item.gpu_mem_gib, item.nvlink, item.kind)


@dataclass
class FleetState:
    """The fleet and what is in use, one row per node (read-only to a policy; the runner changes
    it between decisions and bumps `version[node]`). Arrays are numpy; `g` has one column per GPU
    slot (at least 8; absent GPUs 0)."""

    names: list[str]
    model: list[str]  # the node's GPU model
    ngpu: np.ndarray  # GPUs per node
    cpu: np.ndarray  # free milli-CPU
    mem: np.ndarray  # free MiB
    g: np.ndarray  # (nodes, >= 8): free milli-GPU per GPU
    cpu_total: np.ndarray | None = None  # allocatable milli-CPU (None: the free CPU at the start)
    mem_total: np.ndarray | None = None  # allocatable MiB
    tags: np.ndarray | None = None  # (nodes, >= 9): GPU pods on the node per shape column (Task: tag_col)
    version: np.ndarray | None = None  # per node: bumped whenever the node changes
    gpu_mem: np.ndarray | None = None  # `run`: free GiB per GPU (None: not tracked, as in inflation)
    need_gib: float = 0.0  # `run`: the GPU memory the task being placed asks per GPU (fit() checks it)
    workload: tuple[Task, ...] = ()  # the trace's tasks (inflation: before inflation): the request mix
    typical: Any = None  # inflation: the paper's typical pods of the workload (inflation.Typical)
    rng: random.Random = field(default_factory=lambda: random.Random(0))  # this run's stream for the policy
    cache: dict[str, Any] = field(default_factory=dict)  # per-run scratch space for the policy

    def __post_init__(self) -> None:
        import numpy as np

        n = len(self.names)
        if self.cpu_total is None:
            self.cpu_total = self.cpu.copy()
        if self.mem_total is None:
            self.mem_total = self.mem.copy()
        if self.tags is None:
            self.tags = np.zeros((n, GPU_COLUMNS + 1), dtype=np.int64)
        if self.version is None:
            self.version = np.zeros(n, dtype=np.int64)

    @property
    def capacity_milli(self) -> int:
        return int(self.ngpu.sum()) * MILLI

    def fit(self, idx: np.ndarray | slice, milli: int) -> np.ndarray:
        """(nodes, GPU columns): the GPUs of nodes idx that can take a share of `milli` (in `run`
        also the GPU memory the task asks for)."""
        ok = self.g[idx] >= milli
        if self.gpu_mem is not None:
            ok &= self.gpu_mem[idx] + 1e-9 >= self.need_gib
        return ok

    def place(self, i: int, task: Task, gpus: Sequence[int]) -> None:
        """The task now runs on node i, on GPUs `gpus`."""
        self._change(i, task, gpus, -1)
        if task.gpus:
            self.tags[i, tag_col(task)] += 1  # type: ignore[index]  # set in __post_init__

    def remove(self, i: int, task: Task, gpus: Sequence[int]) -> None:
        """The task placed on node i (GPUs `gpus`) is gone."""
        self._change(i, task, gpus, 1)
        if task.gpus:
            self.tags[i, tag_col(task)] -= 1  # type: ignore[index]  # set in __post_init__

    def _change(self, i: int, task: Task, gpus: Sequence[int], sign: int) -> None:
        self.cpu[i] += sign * task.cpu_milli
        self.mem[i] += sign * task.memory_mib
        for j in gpus:
            self.g[i, j] += sign * min(task.gpu_milli, MILLI)
            if self.gpu_mem is not None:
                self.gpu_mem[i, j] += sign * task.gpu_mem_gib
        self.version[i] += 1  # type: ignore[index]  # set in __post_init__


def tag_col(task: Any) -> int:
    """The column of a GPU pod's shape in FleetState.tags: 0 = a share, n = n whole GPUs."""
    return 0 if task.gpu_milli < MILLI else task.num_gpu


def candidates(task: Task, state: FleetState, allowed: np.ndarray | None = None) -> np.ndarray:
    """Node indices that fit the task (the paper simulator's filters: CPU and memory as
    NodeResourcesFit, GPU model and milli-GPU as Open-Gpu-Share; in `run` GPU memory too).
    `allowed`: the nodes whose GPU model the task allows (computed here when None)."""
    import numpy as np

    ok = (state.cpu >= task.cpu_milli) & (state.mem >= task.memory_mib)
    if task.gpus:
        if allowed is None:
            allowed = (np.isin(np.array(state.model), list(task.gpu_types)) if task.gpu_types
                       else np.ones(len(state.names), dtype=bool))
        ok &= allowed
        fit = state.fit(slice(None), task.gpu_milli if task.share else MILLI)
        if not task.share:
            fit &= state.g == MILLI
        if task.share:
            ok &= fit.any(axis=1)
        else:
            ok &= fit.sum(axis=1) >= task.gpus
    return np.flatnonzero(ok)


def default_scores(task: Task, state: FleetState, nodes: np.ndarray) -> np.ndarray:
    """kube-scheduler's default node choice on the state: NodeResourcesFit's LeastAllocated
    strategy with cpu and memory at weight 1 (kube-scheduler's default config,
    pkg/scheduler/apis/config/v1/default_plugins.go and defaults.go; the arithmetic of
    pkg/scheduler/framework/plugins/noderesources/least_allocated.go: per resource
    (allocatable - requested) * 100 // allocatable, 0 when over; the weighted sum // the weights),
    vectorised; labkit.sim.scoring.least_allocated is the sim's per-node copy. The requests are
    explicit (a pod asks its cpu and memory), so kube-scheduler's non-zero defaults do not apply."""
    import numpy as np

    total = np.zeros(len(nodes), dtype=np.int64)
    weights = np.zeros(len(nodes), dtype=np.int64)
    for free, cap_all, ask in ((state.cpu, state.cpu_total, task.cpu_milli),
                               (state.mem, state.mem_total, task.memory_mib)):
        cap = cap_all[nodes].astype(np.int64)  # type: ignore[index]  # *_total: set in __post_init__
        req = cap - free[nodes] + ask
        has = cap > 0
        part = np.where(req > cap, 0, (cap - req) * 100 // np.where(has, cap, 1))
        total += np.where(has, part, 0)
        weights += has
    return np.where(weights > 0, total // np.maximum(weights, 1), 0)


def default_gpus(task: Task, state: FleetState, node: int) -> list[int]:
    """The GPUs a task gets on its node when the policy has no preference: whole GPUs, the first
    idle ones; a share, the first of the tightest GPUs that fit it."""
    import numpy as np

    if not task.gpus:
        return []
    k = int(state.ngpu[node])
    g = state.g[node, :k]
    fit = state.fit(np.array([node]), task.gpu_milli if task.share else MILLI)[0, :k]
    if not task.share:
        fit &= g == MILLI
    fits = np.flatnonzero(fit)
    if not task.share:
        return [int(i) for i in fits[:task.gpus]]
    return [int(fits[np.argmin(g[fits])])] if len(fits) else []


class ScoringPolicy:
    """The protocol's defaults: no preference for a node, the default GPUs. Subclass it and
    override `score` (and `gpus` if the GPU choice matters); see the module text."""

    name = "scoring"
    description = ""

    def score(self, task: Task, state: FleetState, nodes: np.ndarray) -> np.ndarray | Sequence[int] | None:
        """One integer per candidate node (nodes[i]); higher wins. None: kube-scheduler's default."""
        return None

    def gpus(self, task: Task, state: FleetState, node: int) -> Sequence[int] | None:
        """The GPU indices (into state.g[node]) the task takes on `node`. None: the default."""
        return None


def choose(policy: Any, task: Task, state: FleetState, nodes: np.ndarray) -> tuple[np.ndarray, bool]:
    """The policy's scores for the candidates, checked (one integer per candidate), and whether
    the policy gave them (False: no preference, kube-scheduler's default was used). A policy that
    raises or returns something unusable is a PolicyFault naming the policy, the task and why."""
    import numpy as np

    name = _name(policy)
    try:
        raw = policy.score(task, state, nodes)
    except LabkitError:
        raise
    except Exception as exc:  # noqa: BLE001 - a user's policy: any error is reported in one line
        raise PolicyFault(f"policy {name}: score() failed on task {task.name}: {exc_line(exc)}") from None
    if raw is None:
        return default_scores(task, state, nodes), False
    try:
        arr = np.asarray(raw)
    except Exception as exc:  # noqa: BLE001 - e.g. a ragged list
        raise PolicyFault(f"policy {name}: score() on task {task.name} returned {_short(raw)}, not an array "
                          f"({exc_line(exc)})", fix="return one integer per candidate node") from None
    if arr.shape != (len(nodes),):
        raise PolicyFault(f"policy {name}: score() on task {task.name} returned shape {arr.shape} for "
                          f"{len(nodes)} candidate nodes", fix="return one integer per candidate node (len(nodes))")
    if arr.dtype.kind not in "iub":
        if arr.dtype.kind != "f":
            raise PolicyFault(f"policy {name}: score() on task {task.name} returned {arr.dtype} values, not numbers",
                              fix="return integers, one per candidate node")
        if not np.isfinite(arr).all():
            bad = arr[~np.isfinite(arr)][0]
            raise PolicyFault(f"policy {name}: score() on task {task.name} returned {bad} for a node",
                              fix="return finite integers, one per candidate node")
        if (arr != np.floor(arr)).any():
            raise PolicyFault(f"policy {name}: score() on task {task.name} returned a fraction "
                              f"({arr[arr != np.floor(arr)][0]!r})",
                              fix="return integers (e.g. (x * 100).astype(int)): scores compare exactly")
    return arr.astype(np.int64), True


def choose_gpus(policy: Any, task: Task, state: FleetState, node: int) -> list[int]:
    """The policy's GPUs for the task on `node` (the default when it returns None), checked: as
    many as the task takes, distinct, present on the node, and each able to take the task."""
    name = _name(policy)
    fn = getattr(policy, "gpus", None)
    try:
        raw = fn(task, state, node) if fn is not None else None
    except LabkitError:
        raise
    except Exception as exc:  # noqa: BLE001 - a user's policy: any error is reported in one line
        raise PolicyFault(f"policy {name}: gpus() failed on task {task.name}: {exc_line(exc)}") from None
    if raw is None:
        return default_gpus(task, state, node)
    where = f"policy {name}: gpus() on task {task.name} (node {state.names[node]})"
    try:
        got = [int(j) for j in raw]
        if any(j != x for j, x in zip(got, raw, strict=True)):
            raise ValueError
    except (TypeError, ValueError):
        raise PolicyFault(f"{where} returned {_short(raw)}", fix="return a list of GPU indices") from None
    k = int(state.ngpu[node])
    if len(got) != task.gpus or len(set(got)) != len(got):
        raise PolicyFault(f"{where} returned {got}: the task takes {task.gpus} distinct GPU(s)",
                          fix=f"return {task.gpus} distinct GPU indices")
    for j in got:
        if not 0 <= j < k:
            raise PolicyFault(f"{where} returned GPU index {j}: out of range, the node has {k} GPU(s) (0-{k - 1})",
                              fix="return indices of the node's GPUs")
        import numpy as np

        need = task.gpu_milli if task.share else MILLI
        ok = bool(state.fit(np.array([node]), need)[0, j]) and (task.share or int(state.g[node, j]) == MILLI)
        if not ok:
            mem = "" if state.gpu_mem is None else f" and {state.gpu_mem[node, j]:g} GiB"
            raise PolicyFault(f"{where} returned GPU {j}: it has {int(state.g[node, j])} milli-GPU{mem} free, the task "
                              f"needs {need}{'' if state.gpu_mem is None else f' and {task.gpu_mem_gib:g} GiB'}",
                              fix="return GPUs that fit the task (state.fit)")
    return got


def policy_name(policy: Any) -> str:
    """A policy's name (a spec string names itself)."""
    return policy if isinstance(policy, str) else str(getattr(policy, "name", type(policy).__name__))


_name = policy_name


def exc_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def _short(v: Any) -> str:
    text = repr(v)
    return text if len(text) <= 60 else text[:57] + "..."


def _labels(policy: str, item: WorkItem) -> dict[str, str]:
    return {"labkit.dev/experiment": policy, "labkit.dev/workload": item.kind}


class BasePolicy(ScoringPolicy):
    """A `run` policy: it writes its own DRA objects. Defaults: whole GPUs per pod, no node
    choice, nothing to release; in `inflation` the protocol's defaults (ScoringPolicy)."""

    name = "base"
    mig_mode: str | None = "none"
    sharing = False
    description = ""
    #: node-choosing policies: the runner applies and schedules each arrival before deciding the
    #: next one, so that decisions see the previous placements (one pod at a time, like kube-scheduler)
    one_at_a_time = False

    def objects(self, item: WorkItem, ctx: Context) -> list[dict]:
        return self.whole_gpu_objects(item, ctx)

    def release(self, item: WorkItem, ctx: Context) -> list[tuple[str, str]]:
        return []

    def choose_node(self, item: WorkItem, ctx: Context) -> str | None:
        return None

    # -- building blocks -------------------------------------------------------------------
    def pod(self, item: WorkItem, ctx: Context, *, template: str | None = None, claim: str | None = None) -> dict:
        return o.pod(item.name, template_name=template, claim_name=claim, node=self.choose_node(item, ctx),
                     labels=_labels(self.name, item))

    def whole_gpu_objects(self, item: WorkItem, ctx: Context, *, nvlink: bool = False) -> list[dict]:
        if item.gpu_units == 0:
            return [self.pod(item, ctx)]
        count = item.gpus or max(1, math.ceil(item.compute))
        mem = ctx.mem_floor(item.gpu_mem_gib)  # exact: ceil() would exclude a 79.6 GiB H100 from ">= 80"
        name = f"{self.name}-gpu{count}-m{math.ceil(mem * 1024)}{'-nvl' if nvlink and count > 1 else ''}"
        constraints = [{"matchAttribute": NVLINK_ATTR}] if nvlink and count > 1 else None
        if nvlink and count == 1:
            # one GPU: prefer a GPU outside any NVLink island, so that islands stay whole
            subs = [{"name": "no-island", **o.exactly(o.GPU_CLASS, 1, [o.mem_selector(mem), o.no_nvlink_selector()])},
                    {"name": "any", **o.exactly(o.GPU_CLASS, 1, [o.mem_selector(mem)])}]
            spec = o.claim_spec([{"name": "gpu", "firstAvailable": subs}])
        else:
            spec = o.claim_spec([{"name": "gpu", "exactly": o.exactly(o.GPU_CLASS, count, [o.mem_selector(mem)])}],
                                constraints)
        return [o.template(name, spec), self.pod(item, ctx, template=name)]


class WholeGpu(BasePolicy):
    name = "whole-gpu"
    description = "device-plugin style: every GPU pod gets whole GPUs (ceil of its need)"


@dataclass
class _Shared:
    name: str
    floor_gib: float = 0.0  # the claim's selector: its GPU has at least this much memory
    pods: set[str] = field(default_factory=set)
    mem: float = 0.0
    compute: float = 0.0


class SharedClaims(BasePolicy):
    """Small pods packed into named claims (one GPU, TimeSlicing) that several pods reference.

    A claim takes pods up to its GPU's memory (before allocation: the memory its selector
    guarantees), compute 1.0 and `max_pods` pods."""

    name = "shared"
    sharing = True
    max_pods = 8
    description = "shares packed into named ResourceClaims several pods reference (time-slicing)"

    def _claims(self, ctx: Context) -> dict[str, _Shared]:
        return ctx.state.setdefault("claims", {})

    def _capacity(self, c: _Shared, ctx: Context) -> float:
        got = ctx.claim_devices.get(c.name)
        info = ctx.ledger.device(got[0], got[1][0]) if got and got[1] else None
        return info.mem_gib if info else c.floor_gib

    def _fits(self, c: _Shared, item: WorkItem, ctx: Context) -> bool:
        return (c.mem + item.gpu_mem_gib <= self._capacity(c, ctx) + 1e-9 and c.compute + item.compute <= 1.0 + 1e-9
                and len(c.pods) < self.max_pods)

    def _join(self, c: _Shared, item: WorkItem, ctx: Context) -> list[dict]:
        c.pods.add(item.name)
        c.mem += item.gpu_mem_gib
        c.compute += item.compute
        ctx.state.setdefault("claim_of", {})[item.name] = c.name
        return [o.pod(item.name, claim_name=c.name, labels=_labels(self.name, item))]

    def _new_claim(self, item: WorkItem, ctx: Context, node: str | None = None) -> list[dict]:
        n = ctx.state["next"] = ctx.state.get("next", 0) + 1
        c = _Shared(f"{self.name}-claim-{n:05d}", ctx.mem_floor(item.gpu_mem_gib))
        self._claims(ctx)[c.name] = c
        sel = o.mem_selector(c.floor_gib)
        spec = o.claim_spec([{"name": "gpu", "exactly": o.exactly(o.GPU_CLASS, 1, [sel])}],
                            config=o.time_slicing_config())
        objs = [o.claim(c.name, spec, {"labkit.dev/experiment": self.name})]
        pod = self._join(c, item, ctx)[0]
        if node:
            pod["spec"]["nodeSelector"] = {o.HOSTNAME_LABEL: node}
        return objs + [pod]

    def objects(self, item: WorkItem, ctx: Context) -> list[dict]:
        if not item.fractional:
            return self.whole_gpu_objects(item, ctx)
        for c in self._claims(ctx).values():
            if self._fits(c, item, ctx):
                return self._join(c, item, ctx)
        return self._new_claim(item, ctx)

    def release(self, item: WorkItem, ctx: Context) -> list[tuple[str, str]]:
        name = ctx.state.get("claim_of", {}).pop(item.name, None)
        c = self._claims(ctx).get(name or "")
        if c is None:
            return []
        c.pods.discard(item.name)
        c.mem -= item.gpu_mem_gib
        c.compute -= item.compute
        if not c.pods:
            del self._claims(ctx)[c.name]
            ctx.claim_devices.pop(c.name, None)
            return [("ResourceClaim", c.name)]
        return []


class _MigPolicy(BasePolicy):
    def whole_or_7g(self, item: WorkItem, ctx: Context) -> list[dict]:
        """Whole GPUs; where MIG mode hides them (Ampere in dynamic mode), a full-size MIG device
        per GPU as a second choice (firstAvailable). A 7g MIG device has no NVLink peer access.
        A whole-GPU item (gpus >= 1) takes the 7g device of a GPU as large as it asks for: 7g.80gb
        publishes 79 GiB, and an Alibaba row's whole GPU is the fleet's 80 GiB GPU."""
        full = [p for p in ctx.fleet.mig_profiles()
                if p[2] == 7 and max(p[1], _nominal_gib(p[0]) if item.gpus else 0.0) + 1e-9 >= item.gpu_mem_gib]
        if self.mig_mode != "dynamic" or not full or item.gpu_units == 0:
            return self.whole_gpu_objects(item, ctx)
        count = item.gpus or 1
        mem = ctx.mem_floor(item.gpu_mem_gib)
        name = f"{self.name}-gpu{count}-m{math.ceil(mem * 1024)}-or7g"
        subs = [{"name": "whole", **o.exactly(o.GPU_CLASS, count, [o.mem_selector(mem)])}]
        subs += [{"name": f"mig{i}", **o.exactly(o.MIG_CLASS, count, [o.profile_selector(p[0])])}
                 for i, p in enumerate(full[:7])]
        spec = o.claim_spec([{"name": "gpu", "firstAvailable": subs}])
        return [o.template(name, spec), self.pod(item, ctx, template=name)]

    def mig_objects(self, item: WorkItem, ctx: Context) -> list[dict]:
        if not item.fractional:
            return self.whole_or_7g(item, ctx)
        fitting = [p for p in ctx.fleet.mig_profiles() if p[1] + 1e-9 >= item.gpu_mem_gib and "+" not in p[0]]
        if not fitting:  # no MIG device is big enough: a whole GPU
            return self.whole_or_7g(item, ctx)
        fitting = fitting[:8]  # firstAvailable allows at most 8 subrequests
        name = f"{self.name}-{'-'.join(p[0].replace('.', '') for p in fitting[:2])}-n{len(fitting)}"
        subs = [{"name": f"p{i}", **o.exactly(o.MIG_CLASS, 1, [o.profile_selector(p[0])])} for i, p in enumerate(fitting)]
        spec = o.claim_spec([{"name": "gpu", "firstAvailable": subs}])
        return [o.template(name, spec), self.pod(item, ctx, template=name)]

    def objects(self, item: WorkItem, ctx: Context) -> list[dict]:
        return self.mig_objects(item, ctx)


def _nominal_gib(profile: str) -> float:
    """The GPU size a MIG profile name carries: 80 for 7g.80gb (0 when the name has none)."""
    size = profile.rsplit(".", 1)[-1]
    return float(size[:-2]) if size.endswith("gb") and size[:-2].isdigit() else 0.0


class StaticMig(_MigPolicy):
    name = "static-mig"
    mig_mode = "static"
    description = "fleet with a static MIG layout; shares ask the smallest fitting profile (firstAvailable)"


class DynamicMig(_MigPolicy):
    name = "dynamic-mig"
    mig_mode = "dynamic"
    description = "partitionable devices: class mig.nvidia.com + profile selector, counters do the rest"


def _domain_free(states: tuple[GpuState, ...], min_mem: float) -> dict[str, int]:
    out: dict[str, int] = {}
    for _chunks, whole, dom, mem in states:
        if whole and mem + 1e-9 >= min_mem:
            out[dom] = out.get(dom, 0) + 1
    return out


class _NodeStates:
    """Per-node GPU states cached on the ledger's node versions, and the nodes grouped by state.

    Node-choosing policies score a state, not a node: nodes in the same state score alike, and
    of those the first in fleet order (fleet.nodes is sorted by name) wins ties. `groups()`
    gives each distinct state with its first node, so a decision costs O(distinct states), not
    O(nodes); it follows the ledger's change log, so only touched nodes are re-read."""

    def __init__(self, sharing: bool) -> None:
        self.sharing = sharing
        self._cache: dict[str, tuple[int, tuple[GpuState, ...]]] = {}
        self._groups: dict[tuple[GpuState, ...], list[int]] = {}  # state -> sorted fleet positions
        self._group_of: list[tuple[GpuState, ...]] = []  # fleet position -> the state it is grouped under
        self._seen = 0  # position in ledger.changed

    def get(self, node: str, ledger: Ledger) -> tuple[GpuState, ...]:
        v = ledger.node_version.get(node, 0)
        hit = self._cache.get(node)
        if hit is None or hit[0] != v:
            hit = (v, gpu_states(ledger.gpus[node], self.sharing))
            self._cache[node] = hit
        return hit[1]

    def groups(self, ledger: Ledger) -> list[tuple[tuple[GpuState, ...], int]]:
        """(state, fleet position of its first node) for every state some node is in."""
        nodes = ledger.fleet.nodes
        if not self._group_of:
            for i, node in enumerate(nodes):
                st = self.get(node, ledger)
                self._group_of.append(st)
                self._groups.setdefault(st, []).append(i)
            self._seen = len(ledger.changed)
        elif self._seen < len(ledger.changed):
            pos = ledger.index_of
            for node in set(ledger.changed[self._seen:]):
                i = pos[node]
                st, old = self.get(node, ledger), self._group_of[i]
                if st == old:
                    continue
                members = self._groups[old]
                members.remove(i)
                if not members:
                    del self._groups[old]
                bisect.insort(self._groups.setdefault(st, []), i)
                self._group_of[i] = st
            self._seen = len(ledger.changed)
        return [(st, members[0]) for st, members in self._groups.items()]


class TopologyAware(BasePolicy):
    """Whole GPUs; multi-GPU jobs in one NVLink domain (matchAttribute), on the node whose
    smallest sufficient NVLink island is the tightest fit (keeps big islands whole)."""

    name = "topology"
    one_at_a_time = True
    description = "matchAttribute on the NVLink domain + best-fit island node choice"

    def objects(self, item: WorkItem, ctx: Context) -> list[dict]:
        return self.whole_gpu_objects(item, ctx, nvlink=True)

    def choose_node(self, item: WorkItem, ctx: Context) -> str | None:
        if item.gpu_units == 0:
            return None
        need = item.gpus or 1
        states = ctx.state.setdefault("states", _NodeStates(False))
        best: tuple[int, int, int] | None = None  # (score, fleet position): the first node of the best score
        for st, first in states.groups(ctx.ledger):
            free = _domain_free(st, item.gpu_mem_gib)
            fitting = [n for n in free.values() if n >= need]
            if fitting:
                cand = (min(fitting) - need, -sum(1 for s in st if not s[1]), first)
                if best is None or cand < best:
                    best = cand
        return ctx.fleet.nodes[best[2]] if best else None


class FragmentationAware(SharedClaims):
    """Shared claims, placed where the trace's request mix loses the least usable capacity (FGD)."""

    name = "frag-aware"
    one_at_a_time = True
    description = "FGD-style: choose the node (and shared GPU) whose placement grows fragmentation least"

    def objects(self, item: WorkItem, ctx: Context) -> list[dict]:
        states = ctx.state.setdefault("states", _NodeStates(True))
        if not item.fractional:
            node = self._best_node_whole(item, ctx, states)
            objs = self.whole_gpu_objects(item, ctx)
            if node:
                objs[-1]["spec"]["nodeSelector"] = {o.HOSTNAME_LABEL: node}
            return objs
        # joining an allocated shared claim: its GPU's headroom shrinks
        best: tuple[float, str, str | None] | None = None  # (delta, node, claim or None for a new one)
        memo_join: dict[tuple, float] = {}
        for c in self._claims(ctx).values():
            if c.name not in ctx.claim_devices or not self._fits(c, item, ctx):
                continue
            node, devs = ctx.claim_devices[c.name]
            st = states.get(node, ctx.ledger)
            idx = self._gpu_index(ctx, node, devs[0])
            key = (st, idx, item.gpu_mem_gib)
            d = memo_join.get(key)
            if d is None:
                new = list(st)
                chunks = list(new[idx][0])
                if chunks:
                    chunks[0] = max(0.0, chunks[0] - item.gpu_mem_gib)
                new[idx] = (tuple(chunks), new[idx][1], new[idx][2], new[idx][3])
                d = memo_join[key] = self._frag(tuple(new), ctx) - self._frag(st, ctx)
            if best is None or (d, node) < best[:2]:
                best = (d, node, c.name)
        fresh = self._best_node_new(item, ctx, states)
        if fresh is not None and (best is None or fresh < best[:2]):
            best = (*fresh, None)
        if best is None:
            return self._new_claim(item, ctx)  # nothing fits now: it waits as Pending
        if best[2] is not None:
            return self._join(self._claims(ctx)[best[2]], item, ctx)
        return self._new_claim(item, ctx, node=best[1])

    def _best_node_new(self, item: WorkItem, ctx: Context, states: _NodeStates) -> tuple[float, str] | None:
        """(growth, node) of the best node for a new shared claim (the first node of the least growth)."""
        best: tuple[float, str] | None = None
        nodes = ctx.fleet.nodes
        for st, first in states.groups(ctx.ledger):
            d = self._delta_new(st, item, ctx)
            if d is not None and (best is None or (d, nodes[first]) < best):
                best = (d, nodes[first])
        return best

    @staticmethod
    def _gpu_index(ctx: Context, node: str, device: str) -> int:
        info = ctx.ledger.device(node, device)
        names = [g.name for g in ctx.fleet.kind_of[node].gpus]
        return names.index(info.gpu) if info else 0

    @staticmethod
    def _frag(st: tuple[GpuState, ...], ctx: Context) -> float:
        """states_fragmentation memoised per node state (nodes in the same state score alike)."""
        memo = ctx.state.setdefault("frag_memo", {})
        v = memo.get(st)
        if v is None:
            if len(memo) > 200_000:
                memo.clear()
            v = memo[st] = states_fragmentation(st, ctx.mix)
        return v

    def _delta_new(self, st: tuple[GpuState, ...], item: WorkItem, ctx: Context) -> float | None:
        for i, (_chunks, whole, dom, mem) in enumerate(st):
            if whole and mem + 1e-9 >= item.gpu_mem_gib:  # the allocator takes the first idle GPU that fits
                new = list(st)
                new[i] = ((mem - item.gpu_mem_gib,), False, dom, mem)
                return self._frag(tuple(new), ctx) - self._frag(st, ctx)
        return None

    def _best_node_whole(self, item: WorkItem, ctx: Context, states: _NodeStates) -> str | None:
        need = item.gpus or 1
        best: tuple[float, str] | None = None
        nodes = ctx.fleet.nodes
        for st, first in states.groups(ctx.ledger):
            idle = [i for i, s in enumerate(st) if s[1] and s[3] + 1e-9 >= item.gpu_mem_gib]
            if len(idle) < need:
                continue
            new = list(st)
            for i in idle[:need]:
                new[i] = ((), False, st[i][2], st[i][3])
            d = self._frag(tuple(new), ctx) - self._frag(st, ctx)
            if best is None or (d, nodes[first]) < best:
                best = (d, nodes[first])
        return best[1] if best else None


class ProtocolObjects(BasePolicy):
    """A protocol policy (score / gpus, no objects()) in `run` and `sweep`, one pod at a time:
    the task and the fleet's state from the item and the ledger, the node and GPUs from the
    policy, and DRA objects pinned to them: whole GPUs, a claim (from a template) for exactly
    those devices (a PCI-bus selector; the pod's nodeSelector names the node); a share, a named
    time-sliced claim on that GPU that later shares of the same GPU join (deleted with its last
    pod), as SharedClaims does. A task no node fits now waits unpinned (whole GPUs, any node)."""

    one_at_a_time = True
    sharing = True

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name = _name(inner)
        self.description = getattr(inner, "description", "")

    def objects(self, item: WorkItem, ctx: Context) -> list[dict]:
        import numpy as np

        st = self._state(ctx)
        task = Task.of_item(item)
        st.need_gib = task.gpu_mem_gib
        nodes = candidates(task, st)
        if not len(nodes):
            return self.whole_gpu_objects(item, ctx)
        scores, _ = choose(self.inner, task, st, nodes)
        i = int(nodes[int(np.flatnonzero(scores == scores.max())[0])])  # ties: the first node by name
        gpus = choose_gpus(self.inner, task, st, i)
        node = st.names[i]
        if not task.gpus:
            return [o.pod(item.name, node=node, labels=_labels(self.name, item))]
        bus = _bus_ids(ctx, node)
        if task.share:
            return self._share(item, ctx, node, gpus[0], bus[gpus[0]])
        ids = [bus[j] for j in gpus]
        tname = _dns_name(f"{self.name}-{len(ids)}-{zlib.crc32(','.join(sorted(ids)).encode()):08x}")
        spec = o.claim_spec([{"name": "gpu", "exactly": o.exactly(o.GPU_CLASS, len(ids), [o.bus_selector(ids)])}])
        return [o.template(tname, spec), o.pod(item.name, template_name=tname, node=node,
                                               labels=_labels(self.name, item))]

    def _share(self, item: WorkItem, ctx: Context, node: str, j: int, bus: str) -> list[dict]:
        claims: dict[tuple[str, int], _Shared] = ctx.state.setdefault("pclaims", {})
        c = claims.get((node, j))
        objs = []
        if c is None:
            n = ctx.state["next"] = ctx.state.get("next", 0) + 1
            c = claims[(node, j)] = _Shared(_dns_name(f"{self.name}-share-{n:05d}"))
            spec = o.claim_spec([{"name": "gpu", "exactly": o.exactly(o.GPU_CLASS, 1, [o.bus_selector([bus])])}],
                                config=o.time_slicing_config())
            objs.append(o.claim(c.name, spec, {"labkit.dev/experiment": self.name}))
        c.pods.add(item.name)
        c.mem += item.gpu_mem_gib
        c.compute += Task.of_item(item).gpu_milli
        ctx.state.setdefault("claim_of", {})[item.name] = (node, j)
        return [*objs, o.pod(item.name, claim_name=c.name, node=node, labels=_labels(self.name, item))]

    def release(self, item: WorkItem, ctx: Context) -> list[tuple[str, str]]:
        key = ctx.state.get("claim_of", {}).pop(item.name, None)
        claims: dict[tuple[str, int], _Shared] = ctx.state.get("pclaims", {})
        c = claims.get(key) if key else None
        if c is None:
            return []
        c.pods.discard(item.name)
        c.mem -= item.gpu_mem_gib
        c.compute -= Task.of_item(item).gpu_milli
        if c.pods:
            return []
        del claims[key]
        ctx.claim_devices.pop(c.name, None)
        return [("ResourceClaim", c.name)]

    def _state(self, ctx: Context) -> FleetState:
        """The FleetState, rows re-read from the ledger for the nodes it changed since last time."""
        import numpy as np

        st: FleetState | None = ctx.state.get("fleet_state")
        ledger, fleet = ctx.ledger, ctx.fleet
        if st is None:
            specs = {n.name: n for n in fleet.profile.nodes}
            width = max([GPU_COLUMNS, *(len(fleet.kind_of[n].gpus) for n in fleet.nodes)])
            k = len(fleet.nodes)
            cpu = np.array([_allocatable(specs[n], "cpu", 1000) for n in fleet.nodes], dtype=np.int64)
            mem = np.array([_allocatable(specs[n], "memory", 1 / 2**20) for n in fleet.nodes], dtype=np.int64)
            st = FleetState(list(fleet.nodes), [specs[n].node_profile for n in fleet.nodes],
                            np.array([len(fleet.kind_of[n].gpus) for n in fleet.nodes]), cpu.copy(), mem.copy(),
                            np.zeros((k, width), dtype=np.int64), cpu, mem,
                            np.zeros((k, width + 1), dtype=np.int64), gpu_mem=np.zeros((k, width)),
                            workload=tuple(Task.of_item(i) for i in ctx.items),
                            rng=random.Random(ctx.seed * 1_000_003 + zlib.crc32(self.name.encode())))
            ctx.state["fleet_state"] = st
            ctx.state["seen"] = 0
            todo = set(fleet.nodes)
        else:
            todo = set(ledger.changed[ctx.state["seen"]:])
        ctx.state["seen"] = len(ledger.changed)
        if not todo:
            return st
        claims: dict[tuple[str, int], _Shared] = ctx.state.get("pclaims", {})
        pods: dict[str, list[WorkItem]] = {n: [] for n in todo}
        for item, node, _devs in ledger.pods.values():
            if node in pods:
                pods[node].append(item)
        for node in todo:
            i = ledger.index_of[node]
            for j, use in enumerate(ledger.gpus[node]):
                c = claims.get((node, j))
                if c is not None:
                    st.g[i, j], st.gpu_mem[i, j] = MILLI - c.compute, use.info.mem_gib - c.mem  # type: ignore[index]  # run's state has gpu_mem
                else:
                    st.g[i, j] = MILLI if use.idle else 0
                    st.gpu_mem[i, j] = use.info.mem_gib if use.idle else 0.0  # type: ignore[index]  # run's state has gpu_mem
            mine = pods[node]
            st.cpu[i] = st.cpu_total[i] - o.POD_CPU_MILLI * len(mine)  # type: ignore[index]  # set in __post_init__
            st.mem[i] = st.mem_total[i] - o.POD_MEMORY_MIB * len(mine)  # type: ignore[index]  # set in __post_init__
            st.tags[i] = 0  # type: ignore[index]  # set in __post_init__
            for item in mine:
                task = Task.of_item(item)
                if task.gpus and tag_col(task) < st.tags.shape[1]:  # type: ignore[union-attr]  # set in __post_init__
                    st.tags[i, tag_col(task)] += 1  # type: ignore[index]  # set in __post_init__
            st.version[i] += 1  # type: ignore[index]  # set in __post_init__
        return st


def _allocatable(spec: Any, resource: str, scale: float) -> int:
    text = {**DEFAULT_ALLOCATABLE, **spec.allocatable}.get(resource, "0")
    return int(parse_quantity(str(text)).value * scale)


def _bus_ids(ctx: Context, node: str) -> tuple[str, ...]:
    specs = ctx.state.get("specs")
    if specs is None:
        specs = ctx.state["specs"] = {n.name: n.node_profile for n in ctx.fleet.profile.nodes}
    return gpu_bus_ids(specs[node])


def gpu_bus_ids(node_profile: str) -> tuple[str, ...]:
    """The PCI bus ids of a fake_gpus node profile's GPUs, in the order its ResourceSlices list them."""
    hit = _BUS.get(node_profile)
    if hit is None:
        devs = [d for s in build_slices(node_profile, "probe", mig_mode="none") if s["spec"].get("driver") == o.GPU_CLASS
                for d in s["spec"].get("devices") or [] if d["attributes"].get("type", {}).get("string") == "gpu"]
        devs.sort(key=lambda d: int(d["name"].split("-")[1]))
        hit = _BUS[node_profile] = tuple(d["attributes"]["resource.kubernetes.io/pciBusID"]["string"] for d in devs)
    return hit


_BUS: dict[str, tuple[str, ...]] = {}


def _dns_name(text: str) -> str:
    return re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")[:63].rstrip("-")


POLICIES: dict[str, type[BasePolicy]] = {p.name: p for p in (WholeGpu, SharedClaims, StaticMig, DynamicMig,
                                                                TopologyAware, FragmentationAware)}
#: the paper's six (labkit.experiments.inflation), by name -> "module:Class" (loaded when asked for)
PAPER_POLICIES = {"fgd": "Fgd", "best-fit": "BestFit", "dot-product": "DotProduct", "gpu-packing": "GpuPacking",
                  "gpu-clustering": "GpuClustering", "random-fit": "RandomFit"}
#: every built-in of both worlds: name -> "module:Class"
BUILTINS: dict[str, str] = {**{n: f"{c.__module__}:{c.__name__}" for n, c in POLICIES.items()},
                            **{n: f"labkit.experiments.inflation:{c}" for n, c in PAPER_POLICIES.items()}}
SPEC_HELP = ("a built-in name (`labkit experiment policies`), PATH.py or PATH.py:Class (a file with a policy "
             "class), or module:Class")


def builtin_class(name: str) -> type:
    module, _, cls = BUILTINS[name].partition(":")
    return getattr(importlib.import_module(module), cls)


def load_policy(spec: Any) -> Any:
    """A policy object from a spec: a built-in name (either world), `path/to/file.py` (the file's
    one policy class) or `file.py:Class`, or `module:Class`; a policy object is returned as is.

    Objects loaded from a spec remember it (`policy_spec`), so that local worker processes and
    Dask workers load the policy again from the spec string (a file path is made absolute); an
    object passed in a notebook runs serially, or is pickled for workers (its class must then be
    importable there: define it in a module or a file, not in a notebook cell)."""
    if not isinstance(spec, str):
        if not callable(getattr(spec, "score", None)) and not callable(getattr(spec, "objects", None)):
            raise PolicyError(f"policy {_short(spec)}: not a policy (it has neither score() nor objects())",
                              fix="subclass labkit.experiments.policies.ScoringPolicy and give it a name and score()")
        return spec
    text = spec.strip()
    if not text:
        raise PolicyError("policy '': empty", fix=f"give {SPEC_HELP}")
    if text in BUILTINS:
        obj = builtin_class(text)()
        obj.policy_spec = text
        return obj
    path_text, _, cls_name = text.partition(".py:") if ".py:" in text else (text, "", "")
    if path_text.endswith(".py") or cls_name or "/" in path_text or "\\" in path_text:
        file = Path(path_text if path_text.endswith(".py") else path_text + ".py").expanduser()
        module = _load_file(text, file)
        cls = _pick_class(text, module, cls_name)
    elif ":" in text:
        mod_name, _, cls_name = text.partition(":")
        try:
            module = importlib.import_module(mod_name)
        except ImportError as exc:
            raise PolicyError(f"policy {text!r}: cannot import module {mod_name!r} ({exc_line(exc)})",
                              fix="check the module name and that it is on PYTHONPATH") from None
        except Exception as exc:  # noqa: BLE001 - the user's module failed while it loaded
            raise PolicyError(f"policy {text!r}: importing {mod_name!r} failed: {exc_line(exc)}") from None
        cls = _pick_class(text, module, cls_name)
    else:
        raise PolicyError(f"policy {text!r}: unknown; use one of {', '.join(BUILTINS)}",
                          fix="or give PATH.py[:Class] (a file with a policy class) or module:Class")
    try:
        obj = cls()
    except Exception as exc:  # noqa: BLE001 - the user's constructor
        raise PolicyError(f"policy {text!r}: {cls.__name__}() failed: {exc_line(exc)}",
                          fix="a policy class is built without arguments") from None
    if not isinstance(getattr(obj, "name", None), str) or not obj.name:
        raise PolicyError(f"policy {text!r}: {cls.__name__} has no name", fix='give the class a name = "..." line')
    obj.policy_spec = _absolute(text)
    return obj


def policy_spec(policy: Any) -> Any:
    """What a worker gets for a policy: the spec it was loaded from, else the object itself."""
    return getattr(policy, "policy_spec", None) if isinstance(getattr(policy, "policy_spec", None), str) else policy


def _absolute(spec: str) -> str:
    path, sep, cls = spec.partition(".py:") if ".py:" in spec else (spec, "", "")
    if spec.endswith(".py") or sep:
        full = str(Path(path if path.endswith(".py") else path + ".py").expanduser().resolve())
        return f"{full.removesuffix('.py')}.py:{cls}" if sep else full
    return spec


def _load_file(spec: str, file: Path) -> Any:
    if not file.is_file():
        raise PolicyError(f"policy {spec!r}: no file {str(file)!r}", fix=f"give {SPEC_HELP}")
    full = file.resolve()
    name = f"labkit_policy_{zlib.crc32(str(full).encode()):08x}_{re.sub(r'[^A-Za-z0-9_]', '_', full.stem)}"
    if name in sys.modules:
        return sys.modules[name]
    loader = importlib.util.spec_from_file_location(name, full)
    if loader is None or loader.loader is None:
        raise PolicyError(f"policy {spec!r}: {str(file)!r} is not a Python file", fix=f"give {SPEC_HELP}")
    module = importlib.util.module_from_spec(loader)
    sys.modules[name] = module  # dataclasses and pickling look classes up in sys.modules
    try:
        loader.loader.exec_module(module)
    except SyntaxError as exc:
        del sys.modules[name]
        raise PolicyError(f"policy {spec!r}: {file}:{exc.lineno}: syntax error: {exc.msg}") from None
    except Exception as exc:  # noqa: BLE001 - the user's file failed while it loaded
        del sys.modules[name]
        raise PolicyError(f"policy {spec!r}: loading {str(file)!r} failed: {exc_line(exc)}") from None
    return module


def _pick_class(spec: str, module: Any, cls_name: str) -> type:
    if cls_name:
        cls = getattr(module, cls_name, None)
        if not inspect.isclass(cls):
            raise PolicyError(f"policy {spec!r}: no class {cls_name!r} in {module.__name__!r}",
                              fix=f"classes there: {', '.join(_policy_classes(module)) or 'none with score()'}")
        return cls
    found = _policy_classes(module)
    if len(found) != 1:
        what = (f"{len(found)} policy classes ({', '.join(found)}): name one, e.g. {spec}:{found[0]}" if found
                else "no policy class (a class with score() or objects())")
        raise PolicyError(f"policy {spec!r}: the file has {what}", fix="give PATH.py:Class")
    return getattr(module, found[0])


def _policy_classes(module: Any) -> list[str]:
    """The classes defined in the module (not imported into it) that implement the protocol."""
    return [n for n, c in vars(module).items() if inspect.isclass(c) and c.__module__ == module.__name__
            and not n.startswith("_") and (callable(getattr(c, "score", None)) or callable(getattr(c, "objects", None)))]


def get_policy(spec: str | Policy) -> Policy:
    """A `run` policy from a spec (see load_policy) or an object: the six `run` policies as they
    are, any other protocol policy behind ProtocolObjects (pinned DRA objects)."""
    pol = load_policy(spec)
    if callable(getattr(pol, "objects", None)):
        return pol
    return ProtocolObjects(pol)
