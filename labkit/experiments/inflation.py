"""The ATC'23 FGD paper's workload-inflation experiment on the sim, with DRA objects.

Method (Weng et al., "Beware of Fragmentation", USENIX ATC '23, and its simulator
hkust-adsl/kubernetes-scheduler-simulator): the pod list is shuffled and inflated (draws appended)
until its GPU request is `ratio` (1.3) x the cluster's GPU capacity (`openb.inflate`), and the pods
arrive one by one in that order and never leave. Each is placed by one policy or fails. The
curve: x = arrived GPU request as % of the cluster's GPUs (0..130), y = allocated GPUs as % of the
cluster's GPUs; unallocated GPUs at saturation = cluster GPUs - allocated GPUs once every pod has arrived.

The six policies score nodes exactly as the simulator's score plugins do (integer scores, the
best score wins; on a tie the smallest node name, as the simulator's selectHost does, where its
node names carry a random prefix drawn once per run: `tie_rank`) and choose the GPU(s) as its
Open-Gpu-Share Reserve does:

| policy | node score | GPU for a share |
|---|---|---|
| fgd | sigmoid(fragmentation before - after / 1000) x 100 (typical pods: the most common shapes up to 95 %) | least fragmentation growth |
| best-fit | 100 x (1 - (cpu left after / 128 cores + milli-GPU left after / 8000) / 2) | tightest GPU |
| dot-product | 100 x (1 - <node free, pod request> / 2), both normalised by (128 cores, 8000 milli-GPU) | tightest GPU |
| gpu-packing | shared GPU > idle GPU of a busy node > idle node (packing inside each tier) | tightest GPU |
| gpu-clustering | nodes already running pods of the same GPU shape first | tightest GPU |
| random-fit | a random feasible node | a random GPU that fits |

Every decision becomes real objects on the sim: a Pod asking its CPU and memory and pinned to
the chosen node by a node-affinity `matchFields metadata.name` term (kube-scheduler's NodeAffinity
PreFilter restricts the pod to that node), and, for GPU pods, a ResourceClaim from a template:
one request of class gpu.nvidia.com with `count` = num_gpu, a CEL selector on the chosen GPUs'
PCI bus ids, the gpu_spec as a selector on productName, and a consumable-capacity request of
`shares: <gpu_milli>` (1000 for a whole GPU). The sim's scheduler and the real structured
allocator then place it; the experiment reads the allocation back and fails loudly when the sim
does not agree with the policy. Pods the policy finds no node for fail (as in the paper) and are
not submitted.
"""

from __future__ import annotations

import json
import math
import os
import random
import statistics
import time
import zlib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from fake_gpus.catalog import gpu_model
from labkit.cluster import connect
from labkit.errors import LabkitError, one_line
from labkit.experiments import objects as o
from labkit.experiments.gorand import GoRand
from labkit.experiments.openb import (
    DATA,
    MODELS,
    NODES_PATH,
    OpenbError,
    OpenbPod,
    inflate,
    openb_fleet,
    openb_nodes,
    openb_pods,
    sample_nodes,
)
from labkit.experiments.policies import (
    FleetState,
    PolicyFault,
    ScoringPolicy,
    Task,
    candidates,
    choose,
    choose_gpus,
    gpu_bus_ids,
    load_policy,
    policy_name,
    policy_spec,
    tag_col,
)
from labkit.experiments.sweep import check_shippable, run_map
from labkit.fileio import save_figure
from labkit.model.podutil import claim_name_for
from labkit.sim.engine import fewer_collections

POLICIES = ("fgd", "best-fit", "dot-product", "gpu-packing", "gpu-clustering", "random-fit")
MILLI = 1000
MAX_CPU = 128_000  # the simulator's MaxSpecCpu (milli-CPU)
MAX_GPU = 8_000  # its MaxSpecGpu (milli-GPU)
MAX_SCORE = 100
SHARES = "shares"
PCI_ATTR = "resource.kubernetes.io"
#: x-axis points of the curve (arrived GPU request, % of the cluster's GPUs)
X_STEP = 1


class InflationError(OpenbError):
    """Bad inflation-experiment input (policy, ratio, sample, seeds)."""


@dataclass
class Typical:
    """The simulator's typical pods (GetTypicalPods): the most common (cpu, milli, count, spec)
    shapes, CPU-only ones included, until they cover 95 % of the pods; weights renormalised."""

    cpu: np.ndarray
    milli: np.ndarray
    num: np.ndarray
    p: np.ndarray
    acc: np.ndarray  # (nodes, K): the node's model is allowed for shape k
    #: `--rng go`: the simulator's exact arithmetic (see `of` and `_go_frag`)
    go: bool = False

    @classmethod
    def of(cls, pods: list[OpenbPod], model_of: list[str], threshold: float = 0.95, go: bool = False) -> Typical:
        """`go`: as the simulator's code has it, to the last bit (pkg/utils/frag.go GetTypicalPods): the GPU
        type keyed by the verbatim gpu_spec text (V100M16|V100M32|V100M32 is its own shape), equal counts at
        the cut in sort.Reverse order (the larger (cpu, milli, count, type) first), the cut at
        95 * total / 100, weights (count / total) / (cum / total). Otherwise the smaller key first and
        weights count / cum (the default mode's numbers since the kit has had them)."""
        counts = Counter((p.cpu_milli, p.gpu_milli, p.num_gpu, p.gpu_spec_text if go else p.gpu_spec) for p in pods)
        total = sum(counts.values())
        order = sorted(counts.items(), key=lambda kv: (kv[1], kv[0]), reverse=True) if go else \
            sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
        cut = round(threshold * 100) * total / 100 if go else threshold * total
        chosen, cum = [], 0
        for key, n in order:
            if cum >= cut:
                break
            chosen.append((key, n))
            cum += n
        cpu = np.array([k[0] for k, _ in chosen], dtype=np.int64)
        milli = np.array([k[1] for k, _ in chosen], dtype=np.int64)
        num = np.array([k[2] for k, _ in chosen], dtype=np.int64)
        p = np.array([(n / total) / (cum / total) if go else n / cum for _, n in chosen], dtype=np.float64)
        specs = [set(k[3].split("|")) - {""} if go else k[3] for k, _ in chosen]
        acc = np.array([[not sp or m in sp for sp in specs] for m in model_of], dtype=bool)
        return cls(cpu, milli, num, p, acc, go)


@dataclass
class State(FleetState):
    """The protocol's FleetState as the simulator's NodeResource holds it (CPU and memory left,
    milli-GPU left per GPU, the GPU model, the GPU-shape tags of its pods), plus what the run
    itself needs: each GPU's PCI bus id (the claims' selectors) and, in dynamic MIG mode, the
    memory slices in use."""

    bus: list[list[str]] = field(default_factory=list)  # PCI bus id per GPU
    #: dynamic MIG only (gpu_mode "mig"): the memory slices in use per GPU, a bit mask (nodes, 8)
    slices: np.ndarray | None = None

    def fit(self, idx: np.ndarray | slice, milli: int) -> np.ndarray:
        """(nodes, 8): the GPUs of nodes idx that can take a share of `milli`: that much left and,
        with dynamic MIG, a free placement of the profile the share is rounded to."""
        ok = self.g[idx] >= milli
        if self.slices is not None:
            ok &= mig_place_ok(self.slices[idx], milli)
        return ok

    def place(self, i: int, task: Task, gpus: list[int]) -> None:
        super().place(i, task, gpus)
        if self.slices is not None:
            for j in gpus:
                self.slices[i, j] = mig_place(int(self.slices[i, j]), task.gpu_milli)


def _tag(pod: OpenbPod) -> str:
    if pod.num_gpu == 0:
        return ""
    return "share" if pod.gpu_milli < MILLI else f"{pod.num_gpu}-gpu"


def _best_gpu(g: np.ndarray, fit: np.ndarray) -> int:
    fits = np.flatnonzero(fit)
    return int(fits[np.argmin(g[fits])])  # the first of the tightest


def _whole(g: np.ndarray, n: int) -> list[int]:
    return [int(i) for i in np.flatnonzero(g == MILLI)[:n]]


class FgdScores:
    """FGD's bookkeeping for one run (kept in the state's cache): each node's fragmentation and
    per-typical-shape counts, re-read for the nodes whose `version` changed, and the scores per
    pod shape and node."""

    def __init__(self, st: FleetState, typical: Typical) -> None:
        self.st, self.typ = st, typical
        self.frag = np.zeros(len(st.names))
        self.frag[:] = self._frag(np.arange(len(st.names)), st.cpu, st.g)
        self.ge, self.sm = self._counts(st.g)
        self.seen = st.version.copy()  # type: ignore[union-attr]  # the versions frag/ge/sm were read at
        self.cache: dict[tuple, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}

    def refresh(self) -> None:
        """Re-read the nodes that changed since the last decision."""
        for i in np.flatnonzero(self.seen != self.st.version):
            idx = np.array([i])
            self.frag[i] = self._frag(idx, self.st.cpu[idx], self.st.g[idx])[0]
            ge, sm = self._counts(self.st.g[idx])
            self.ge[i], self.sm[i] = ge[0], sm[0]
            self.seen[i] = self.st.version[i]  # type: ignore[index]  # FleetState.__post_init__ sets it

    def _counts(self, g: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per node and typical shape: GPUs with at least the shape's milli left, and the milli
        left on the GPUs with less (kept per node, updated when a node changes)."""
        tm = self.typ.milli[None, None, :]
        return (g[:, :, None] >= tm).sum(axis=1), (g[:, :, None] * (g[:, :, None] < tm)).sum(axis=1)

    # -- FGD -------------------------------------------------------------------------------
    def _frag(self, idx: np.ndarray, cpu: np.ndarray, g: np.ndarray) -> np.ndarray:
        """Fragmentation (milli-GPU) of nodes idx in states (cpu, g), as NodeGpuShareFragAmountScore."""
        t = self.typ
        s = g.sum(axis=1).astype(np.float64)
        gpu_t = t.num > 0
        ge = (g[:, :, None] >= t.milli[None, None, :]).sum(axis=1)
        small = (g[:, :, None] * (g[:, :, None] < t.milli[None, None, :])).sum(axis=1)
        if t.go:
            return _go_frag(t, t.acc[idx], ge, cpu[:, None], small, s[:, None])
        q3 = gpu_t[None, :] & t.acc[idx] & (ge >= t.num[None, :]) & (cpu[:, None] >= t.cpu[None, :])
        return (np.where(q3, small, s[:, None]) * t.p[None, :]).sum(axis=1)

    def _fgd(self, idx: np.ndarray, pod: Task) -> tuple[np.ndarray, np.ndarray | None]:
        st = self.st
        before = self.frag[idx]  # type: ignore[index]  # numpy stubs: no overload for an integer-array index
        cpu = st.cpu[idx] - pod.cpu_milli
        g = st.g[idx]
        if pod.num_gpu == 1 and pod.gpu_milli < MILLI:
            t = self.typ
            m = pod.gpu_milli
            s = g.sum(axis=1) - m
            gi = g[:, :, None]  # (M, 8, 1): the candidate GPU before
            gi2 = gi - m
            tm = t.milli[None, None, :]
            ge0 = self.ge[idx][:, None, :]  # type: ignore[index]  # numpy stubs: no overload for an integer-array index
            sm0 = self.sm[idx][:, None, :]  # type: ignore[index]  # numpy stubs: no overload for an integer-array index
            ge = ge0 - (gi >= tm) + (gi2 >= tm)
            sm = sm0 - gi * (gi < tm) + gi2 * (gi2 < tm)
            q3 = ((t.num > 0)[None, None, :] & t.acc[idx][:, None, :] & (ge >= t.num[None, None, :])
                  & (cpu[:, None, None] >= t.cpu[None, None, :]))
            after = (_go_frag(t, t.acc[idx][:, None, :], ge, cpu[:, None, None], sm, s[:, None, None]) if t.go
                     else (np.where(q3, sm, s[:, None, None]) * t.p[None, None, :]).sum(axis=2))  # (M, 8)
            scores = (_sigmoid((before[:, None] - after) / 1000) * MAX_SCORE).astype(np.int64)
            scores = np.where(st.fit(idx, m), scores, -1)
            best = scores.argmax(axis=1)  # the first GPU of the best score
            return scores[np.arange(len(idx)), best], best
        g2 = g.copy()
        if pod.num_gpu:
            for r in range(len(idx)):
                g2[r, _whole(g[r], pod.num_gpu)] = 0
        after = self._frag(idx, cpu, g2)
        return (_sigmoid((before - after) / 1000) * MAX_SCORE).astype(np.int64), None

    def _fgd_cached(self, idx: np.ndarray, pod: Task) -> tuple[np.ndarray, np.ndarray | None]:
        """_fgd, kept per pod shape and node: a node's score for a shape is recomputed only when
        the node changed since that shape last looked at it (a trace has a few dozen shapes)."""
        key = (pod.cpu_milli, pod.gpu_milli, pod.num_gpu, pod.gpu_spec)
        hit = self.cache.get(key)
        if hit is None:
            n = len(self.st.names)
            hit = self.cache[key] = (np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64),
                                     np.full(n, -1, dtype=np.int64))
        scores, best, seen = hit
        version = self.st.version
        stale = idx[seen[idx] != version[idx]]  # type: ignore[index]  # FleetState.__post_init__ sets it
        if len(stale):
            s, b = self._fgd(stale, pod)
            scores[stale] = s
            if b is not None:
                best[stale] = b
            seen[stale] = version[stale]  # type: ignore[index]  # FleetState.__post_init__ sets it
        share = pod.num_gpu == 1 and pod.gpu_milli < MILLI
        return scores[idx], (best[idx] if share else None)



def typical_pods(state: FleetState) -> Typical:
    """The run's typical pods: the inflation run's (state.typical), else from the state's workload."""
    return state.typical if state.typical is not None else Typical.of(list(state.workload), state.model)  # type: ignore[arg-type]  # a Task has the fields of OpenbPod that of() reads


class Fgd(ScoringPolicy):
    """FGD: the least growth of fragmentation for the typical pods (sigmoid of the drop / 1000 x
    100); a share goes to the GPU of the node's best score."""

    name = "fgd"
    description = "fragmentation gradient descent: the node (and GPU) whose placement grows fragmentation least"

    def score(self, task: Task, state: FleetState, nodes: np.ndarray) -> np.ndarray:
        f = state.cache.get("fgd")
        if f is None:
            f = state.cache["fgd"] = FgdScores(state, typical_pods(state))
        f.refresh()
        scores, best = f._fgd_cached(nodes, task)
        state.cache["fgd_best"] = (nodes, best)
        return scores

    def gpus(self, task: Task, state: FleetState, node: int) -> list[int] | None:
        nodes, best = state.cache.get("fgd_best", (None, None))
        if best is None or not task.share:
            return None
        return [int(best[int(np.searchsorted(nodes, node))])]


class BestFit(ScoringPolicy):
    name = "best-fit"
    description = "the node with the least CPU and GPU left after the task (100 x (1 - mean of the two shares left))"

    def score(self, task: Task, state: FleetState, nodes: np.ndarray) -> np.ndarray:
        gleft = state.g[nodes].sum(axis=1)
        cpu = state.cpu[nodes]
        v = (cpu - task.cpu_milli) / MAX_CPU * 0.5 + (gleft - task.milli_total) / MAX_GPU * 0.5
        return ((1.0 - v) * MAX_SCORE).astype(np.int64)


class DotProduct(ScoringPolicy):
    name = "dot-product"
    description = "the node whose free (CPU, GPU) vector is least aligned with the task's request"

    def score(self, task: Task, state: FleetState, nodes: np.ndarray) -> np.ndarray:
        gleft = state.g[nodes].sum(axis=1)
        cpu = state.cpu[nodes]
        dot = (cpu / MAX_CPU) * (task.cpu_milli / MAX_CPU) + (gleft / MAX_GPU) * (task.milli_total / MAX_GPU)
        return ((1.0 - dot / 2) * MAX_SCORE).astype(np.int64)


class GpuPacking(ScoringPolicy):
    name = "gpu-packing"
    description = "a shared GPU first, then an idle GPU of a busy node, then an idle node"

    def score(self, task: Task, state: FleetState, nodes: np.ndarray) -> np.ndarray:
        """getPackingScore: a shared GPU (100 - its free % / 10, at least 50) > an idle GPU of a
        busy node (50 - idle GPUs taken, at least 33) > an idle node (33 - its GPUs)."""
        if task.milli_total <= 0:
            return np.zeros(len(nodes), dtype=np.int64)
        g, k = state.g[nodes], state.ngpu[nodes]
        free = (g == MILLI).sum(axis=1)
        idle = np.maximum(MAX_SCORE // 3 - free, free)
        if task.gpu_milli >= MILLI:  # whole GPUs: always idle ones
            busy = np.full(len(nodes), max(MAX_SCORE // 2 - task.num_gpu, MAX_SCORE // 3))
        else:  # a share takes the GPU with the least left that fits
            tight = np.where(state.fit(nodes, task.gpu_milli), g, MILLI + 1).min(axis=1)
            busy = np.where(tight == MILLI, max(MAX_SCORE // 2 - 1, MAX_SCORE // 3),
                            np.maximum(MAX_SCORE - (tight * 100 // MILLI) // 10, MAX_SCORE // 2))
        return np.where(free == k, idle, busy).astype(np.int64)


class GpuClustering(ScoringPolicy):
    name = "gpu-clustering"
    description = "nodes already running pods of the same GPU shape first"

    def score(self, task: Task, state: FleetState, nodes: np.ndarray) -> np.ndarray:
        """GpuClusteringScore: nodes running only pods of this GPU shape (75-100), of this and
        others (50-75), idle nodes (25-50), others (0-25); fuller nodes first inside each band."""
        if task.num_gpu == 0:
            return np.zeros(len(nodes), dtype=np.int64)
        gleft = state.g[nodes].sum(axis=1)
        tags = state.tags[nodes]  # type: ignore[index]  # FleetState.__post_init__ sets it
        mine = tags[:, tag_col(task)] > 0
        kinds = (tags > 0).sum(axis=1)
        base = MAX_SCORE // 4 * (MAX_GPU - gleft) // MAX_GPU
        band = np.where(mine, np.where(kinds == 1, MAX_SCORE * 3 // 4, MAX_SCORE * 2 // 4),
                        np.where(kinds == 0, MAX_SCORE // 4, 0))
        return (base + band).astype(np.int64)


class RandomFit(ScoringPolicy):
    name = "random-fit"
    description = "a random node that fits, a random GPU that fits a share (the run's own stream: state.rng)"

    def score(self, task: Task, state: FleetState, nodes: np.ndarray) -> np.ndarray:
        s = np.zeros(len(nodes), dtype=np.int64)
        s[state.rng.randrange(len(nodes))] = MAX_SCORE
        return s

    def gpus(self, task: Task, state: FleetState, node: int) -> list[int] | None:
        if not task.share:
            return None
        k = int(state.ngpu[node])
        fit = state.fit(np.array([node]), task.gpu_milli)[0, :k]
        return [state.rng.choice([int(j) for j in np.flatnonzero(fit)])]


def _task(pod: OpenbPod) -> Task:
    return Task(pod.name, pod.cpu_milli, pod.memory_mib, pod.num_gpu, pod.gpu_milli, pod.gpu_spec)


def policy_seed(name: str, seed: int) -> int:
    """The seed of a policy's own stream (state.rng): the paper's six as the kit has always drawn
    them (random-fit's numbers), any other policy from its name."""
    return seed * 1_000_003 + (POLICIES.index(name) if name in POLICIES else zlib.crc32(name.encode()))


def tie_rank(names: list[str], rng: random.Random | GoRand) -> np.ndarray:
    """Each node's place in the order the simulator breaks score ties in (smallest name first).

    Its syncClusterResourceList sorts the nodes by name and renames node i to
    `f"{perm[i]:04d}-{name}"` with perm = rand.Perm(n) before it creates them, so "the smallest
    name" among equal scores is a node drawn at random once per run (seed), not openb-node-0000:
    without the prefix, ties (every CPU-only task under GPU Packing and GPU Clustering, whose
    scores are 0 on every node) pile onto the first nodes by name, the 2-GPU P100 nodes. With a GoRand,
    perm is Go's rand.Perm (simulator.go:481), otherwise a shuffle of range(n)."""
    by_name = sorted(range(len(names)), key=names.__getitem__)
    if isinstance(rng, GoRand):
        perm = rng.perm(len(names))
    else:
        perm = list(range(len(names)))
        rng.shuffle(perm)
    renamed = [""] * len(names)
    for pos, i in enumerate(by_name):
        renamed[i] = f"{perm[pos]:04d}-{names[i]}"
    return np.argsort(np.argsort(np.array(renamed)))


#: NodeGpuShareFragAmount's categories in FragRatioDataMap order (pkg/utils/frag.go), Q3 (index 2) left out of
#: the fragmentation sum (FragAmountSumExceptQ3)
_GO_FRAG_SUMMED = (0, 1, 3, 4, 5, 6)


def _go_frag(t: Typical, acc: np.ndarray, ge: np.ndarray, cpu: np.ndarray, small: np.ndarray,
             s: np.ndarray) -> np.ndarray:
    """Scorer._frag's sum in the simulator's float order (`--rng go`; the same terms, so the same value up to
    the last bits, which decide a score of 49 against 50 when the true difference is 0): each typical pod
    (in order) adds weight x milli into its category - Q1 lack both 0, Q2 lack GPU 1, Q3 2 (only its
    GPUs too small for the pod count, and into Q2), Q4 lack CPU 3, XL CPU-only fits 4, XR CPU-only does
    not 5, no access 6 (GetNodePodFrag) - then the categories are added in that order, Q3 left out.
    Arguments broadcast over the last axis (typical pods): acc, ge (GPUs with enough left), cpu (left),
    small (milli left on the GPUs with too little), s (milli left in all)."""
    cpu_ok = cpu >= t.cpu
    cat = np.where(t.num == 0, np.where(cpu_ok, 4, 5),
                   np.where(~acc, 6, np.where(ge >= t.num, np.where(cpu_ok, 1, 3), np.where(cpu_ok, 1, 0))))
    q3 = (t.num > 0) & acc & (ge >= t.num) & cpu_ok
    amount = np.where(q3, small, s) * t.p
    out = np.zeros(np.broadcast_shapes(amount.shape[:-1], cat.shape[:-1]))
    for c in _GO_FRAG_SUMMED:
        out = out + np.cumsum(np.where(cat == c, amount, 0.0), axis=-1)[..., -1]  # cumsum: strictly left to right
    return out


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


#: `--rng`: python (random.Random(seed), the default) or go (the simulator's own draws: gorand.GoRand)
RNGS = ("python", "go")
#: rand.Float64() draws the scheduler's informers make (one per first watch, the vendored client-go
#: tools/cache/reflector.go:400) between the simulator's workload tuning and its node prefixes
INFORMER_DRAWS = 10


@lru_cache(maxsize=8)
def _arrivals(original: tuple[OpenbPod, ...], capacity_milli: int, ratio: float, seed: int,
              names: tuple[str, ...], rng: str = "python") -> tuple[tuple[OpenbPod, ...], np.ndarray]:
    """The inflated arrival list and the nodes' tie-break ranks of one seed: the same for every policy run on
    that seed (a lesson runs six policies on one trace), so drawn once. The ranks are drawn after the pods,
    from the same generator, as the simulator draws its node prefixes.

    rng "go": the simulator's one global stream, in its order: rand.Seed(seed) and one rand.Int()
    (pkg/simulator/core.go:102-103, the Debugf argument is evaluated), the name sort and rand.Shuffle
    (SortClusterPods, simulator.go:843-851), the tuning's rand.Intn (simulator.go:1105-1140), the
    informers' INFORMER_DRAWS rand.Float64(), then rand.Perm over the nodes sorted by name (:481)."""
    draws: random.Random | GoRand = random.Random(seed) if rng == "python" else GoRand(seed)
    if isinstance(draws, GoRand):
        draws.int_()
    pods = tuple(inflate(list(original), capacity_milli, ratio, rng=draws))
    if isinstance(draws, GoRand):
        for _ in range(INFORMER_DRAWS):
            draws.float64()
    rank = tie_rank(list(names), draws)
    rank.flags.writeable = False
    return pods, rank


def _state(fleet: dict) -> State:
    names, model, ngpu, cpu, mem, bus = [], [], [], [], [], []
    for n in fleet["nodes"]:
        ids = gpu_bus_ids(n["nodeProfile"])
        names.append(n["name"])
        model.append(n["labels"]["labkit.dev/openb-model"])
        ngpu.append(len(ids))
        cpu.append(int(n["allocatable"]["cpu"].removesuffix("m")))
        mem.append(int(n["allocatable"]["memory"].removesuffix("Mi")))
        bus.append(list(ids))
    k = len(names)
    g = np.zeros((k, 8), dtype=np.int64)
    for r, c in enumerate(ngpu):
        g[r, :c] = MILLI
    return State(names, model, np.array(ngpu), np.array(cpu, dtype=np.int64), np.array(mem, dtype=np.int64), g,
                 tags=np.zeros((k, 9), dtype=np.int64), bus=bus)


def claim_template(pod: OpenbPod, bus: list[str], product: dict[str, str]) -> dict:
    """The task's ResourceClaimTemplate: its GPUs picked by PCI bus id (`bus`), a share as `shares`."""
    sels = [{"cel": {"expression": f"device.attributes['{PCI_ATTR}'].pciBusID in {sorted(bus)!r}"}}]
    if pod.gpu_spec:
        names = sorted(product[m] for m in pod.gpu_spec)
        sels.append({"cel": {"expression": f"device.attributes['{o.GPU_CLASS}'].productName in {names!r}"}})
    req = o.exactly(o.GPU_CLASS, pod.num_gpu, sels)
    req["capacity"] = {"requests": {SHARES: str(min(pod.gpu_milli, MILLI))}}
    spec = o.claim_spec([{"name": "gpu", "exactly": req}])
    key = f"{pod.num_gpu}-{pod.gpu_milli}-{'-'.join(b.split(':')[1] for b in sorted(bus))}-{'-'.join(pod.gpu_spec).lower()}"
    return o.template(f"openb-{key}"[:63].rstrip("-"), spec)


def pinned_pod(name: str, pod: OpenbPod, node: str, template: str | None) -> dict:
    """The task's Pod, pinned to `node` by node affinity (see the module text), with the claim of `template`."""
    p = o.pod(name, template_name=template, labels={"labkit.dev/experiment": "inflation"})
    p["spec"]["containers"][0]["resources"]["requests"] = {"cpu": f"{pod.cpu_milli}m", "memory": f"{pod.memory_mib}Mi"}
    p["spec"]["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]}}}
    return p


@fewer_collections()
def run_inflation(policy: str | Any, trace: str = "default", *, every: int = 1, ratio: float = 1.3, seed: int = 42,
                  sim: bool = True, whole_gpus: bool = False, gpu_mode: str = "shares", nodes: str | Path = NODES_PATH,
                  product_names: dict[str, str] | None = None, keep_placements: bool = False,
                  rng: str = "python") -> dict:
    """One policy, one seed: the curve and the unallocated GPUs at saturation (see the module text).
    `every`: run on 1 node in `every` of each node group (and inflate to that cluster's capacity);
    `sim=False` skips the sim (the policy's own bookkeeping only; for comparison and speed tests).
    `whole_gpus`: no sharing - a task asking for part of a GPU gets a whole one (what a DRA claim
    without a capacity request gets from a device that is not multi-allocatable); the x axis still
    counts what the tasks asked for. `gpu_mode`: "shares" (the default: consumable capacity),
    "whole" (= whole_gpus) or "mig" (dynamic MIG, see MIG_MODEL; bookkeeping only, sim=False).
    `keep_placements`: the result's "placements" lists every placed task in arrival order as
    (pod name, trace pod name, node, GPU indices) - what another cluster must reproduce.
    `policy`: any policy of the protocol (labkit.experiments.policies): a built-in name of either
    world, PATH.py[:Class], module:Class or a policy object; a `run` policy places by the protocol's
    defaults here (kube-scheduler's default node, the default GPUs).
    `rng`: "python" (random.Random(seed)) or "go": the authors' simulator's own draws (Go's math/rand, as
    it seeds it; `_arrivals`) and its FGD arithmetic to the last bit (`Typical.of`, `_go_frag`); the
    result then also has alloc_pct_published_metric / unallocated_gpus_published_metric, the paper's
    value at the last x (`published_alloc_pct`). Random-fit's draws stay the kit's own."""
    gpu_mode = "whole" if whole_gpus else gpu_mode
    check_gpu_mode(gpu_mode, sim)
    check_rng(rng)
    pol = load_policy(policy)
    name = pol.name
    started, cpu_started = time.perf_counter(), time.process_time()
    fleet = openb_fleet(nodes, every=every)
    st = _state(fleet)
    original = openb_pods(trace)
    pods, rank = _arrivals(tuple(original), st.capacity_milli, ratio, seed, tuple(st.names), rng)
    pods = list(pods)
    asked = [p.milli_total for p in pods]
    if gpu_mode == "whole":
        original = [_whole_pod(p) for p in original]
        pods = [_whole_pod(p) for p in pods]
    elif gpu_mode == "mig":
        original = [_mig_pod(p) for p in original]
        pods = [_mig_pod(p) for p in pods]
        st.slices = np.zeros_like(st.g)
    #: what a placed pod takes of the GPUs, in milli-GPU (MIG: compute slices / 7 of each GPU)
    takes = [p.milli_total if gpu_mode != "mig" or not p.num_gpu or p.gpu_milli >= MILLI
             else _mig_profile(p.gpu_milli)[1] * MILLI / gpu_model(MIG_MODEL).mig_compute_slices for p in pods]
    st.rng = random.Random(policy_seed(name, seed))  # the policy's own draws, e.g. random-fit's (either rng)
    typical = Typical.of(original, st.model, go=rng == "go")  # the simulator's: from the pod list before inflation
    st.typical, st.workload = typical, tuple(_task(p) for p in original)
    tasks = [_task(p) for p in pods]
    product = product_names or gpu_product_names()
    cluster = connect("sim", fleet, seed=seed, validate=False, progress=False) if sim else None
    allowed_cache: dict[tuple[str, ...], np.ndarray] = {}
    models = np.array(st.model)
    applied: set[str] = set()
    cap = st.capacity_milli
    arrived = allocated = served = 0
    curve: list[float] = []
    next_x = 0
    failed = Counter()
    placements: list[tuple[str, str, str, list[int]]] = []
    events: list[tuple[int, float]] = []  # (arrived, allocated) milli-GPU after each task: the paper's metric
    for k, pod in enumerate(pods):
        arrived += asked[k]
        allowed = allowed_cache.get(pod.gpu_spec)
        if allowed is None:
            allowed = allowed_cache[pod.gpu_spec] = (np.isin(models, list(pod.gpu_spec)) if pod.gpu_spec
                                                     else np.ones(len(models), dtype=bool))
        task = tasks[k]
        idx = candidates(task, st, allowed)
        if len(idx) == 0:
            failed[_tag(pod) or "cpu"] += 1
        else:
            scores, _ = choose(pol, task, st, idx)
            top = np.flatnonzero(scores == scores.max())
            # the simulator's kube-scheduler takes the smallest node name among the best (not a
            # random one, as upstream's selectHost does), "for reproducibility"; the names carry
            # a random prefix (tie_rank), so a tie goes to a node drawn once per run
            pick = int(top[np.argmin(rank[idx[top]])]) if len(top) > 1 else int(top[0])
            i = int(idx[pick])
            gpus = choose_gpus(pol, task, st, i)
            if cluster is not None:
                _place(cluster, st, i, pod, gpus, f"p{k:05d}", product, applied)
            if keep_placements:
                placements.append((f"p{k:05d}", pod.name, st.names[i], list(gpus)))
            st.place(i, task, gpus)
            allocated += takes[k]
            served += asked[k]
        events.append((arrived, allocated))
        while next_x * X_STEP * cap <= arrived * 100 and next_x * X_STEP <= ratio * 100 + 1e-9:
            curve.append(round(100 * allocated / cap, 3))
            next_x += 1
    while next_x * X_STEP <= ratio * 100 + 1e-9:  # the last pods did not reach the last points
        curve.append(round(100 * allocated / cap, 3))
        next_x += 1
    gpus_total = int(st.ngpu.sum())
    return {"policy": name, "trace": trace, "seed": seed, "ratio": ratio, "nodes": len(st.names), "gpus": gpus_total,
            "pods": len(pods), "failed_pods": sum(failed.values()), "failed_by_kind": dict(failed),
            "x_step_pct": X_STEP, "alloc_pct": curve,
            "alloc_pct_at_saturation": round(100 * allocated / cap, 3),
            "unallocated_gpus": round(gpus_total - allocated / MILLI, 3),
            "served_gpus": round(served / MILLI, 3),
            "wall_s": round(time.perf_counter() - started, 2),
            "cpu_s": round(time.process_time() - cpu_started, 2), "sim": sim, "whole_gpus": gpu_mode == "whole",
            "gpu_mode": gpu_mode, **({"placements": placements} if keep_placements else {}),
            **({"rng": rng, **_published(events, gpus_total, ratio)} if rng == "go" else {})}


def check_rng(rng: str) -> None:
    if rng not in RNGS:
        raise InflationError(f"--rng {rng!r}: unknown; use one of {', '.join(RNGS)}")


def published_alloc_pct(events: list[tuple[int, float]], gpus: int, x_pct: int) -> float | None:
    """The paper's allocated GPUs (% of the fleet) at x % arrived, as its merge_alloc_discrete.py:97-119
    computes the published columns from the simulator's per-task [Alloc] log lines: arrived % rounded to
    a whole number, allocated % rounded to 2 decimals, the mean over the tasks whose arrived % rounds to
    x (else to x - 1 .. x + 1), rounded to 2 decimals (numpy's rounding, as pandas gives it)."""
    arrive = [round(a / gpus / 10, 0) for a, _ in events]
    alloc = [round(u / gpus / 10, 2) for _, u in events]
    vals = [v for r, v in zip(arrive, alloc, strict=True) if r == x_pct] or \
        [v for r, v in zip(arrive, alloc, strict=True) if x_pct - 1 <= r <= x_pct + 1]
    return float(np.round(np.mean(np.array(vals)), 2)) if vals else None


def _published(events: list[tuple[int, float]], gpus: int, ratio: float) -> dict[str, float | None]:
    a = published_alloc_pct(events, gpus, round(ratio * 100))
    return {"alloc_pct_published_metric": a,
            "unallocated_gpus_published_metric": None if a is None else round(gpus * (100 - a) / 100, 2)}


def _whole_pod(p: OpenbPod) -> OpenbPod:
    return OpenbPod(p.name, p.cpu_milli, p.memory_mib, p.num_gpu, MILLI, p.gpu_spec) if p.num_gpu else p


# -- dynamic MIG (gpu_mode "mig") ------------------------------------------------------------
#: the MIG-capable model every GPU of the fleet is assumed to be in gpu_mode "mig" (none of the
#: trace's models supports MIG): 7 compute slices, 8 memory slices, the catalog's placements
MIG_MODEL = "A100-SXM4-40GB"
GPU_MODES = ("shares", "whole", "mig")


def check_gpu_mode(gpu_mode: str, sim: bool) -> None:
    if gpu_mode not in GPU_MODES:
        raise InflationError(f"--gpus {gpu_mode!r}: unknown; use one of {', '.join(GPU_MODES)}")
    if gpu_mode == "mig" and sim:
        raise InflationError("--gpus mig: dynamic MIG runs on the policies' bookkeeping only; add --no-sim")


@cache
def mig_profiles() -> tuple[tuple[str, int, int, tuple[int, ...]], ...]:
    """MIG_MODEL's profiles a share can be rounded to, smallest first, one per compute size (the
    catalog's first: 1g.5gb, not 1g.10gb; no +me media variants): (name, compute slices, the
    share's milli-GPU once rounded to it (floor of slices x 1000 / 7; 1000 for the whole GPU),
    the memory-slice bit masks of its placements in the catalog's order)."""
    model = gpu_model(MIG_MODEL)
    out: dict[int, tuple[str, int, int, tuple[int, ...]]] = {}
    for prof in model.mig_profiles:
        k = prof.compute_slices
        if "+" in prof.name or k in out:
            continue
        masks = tuple(sum(1 << b for b in prof.slices_at(start)) for start in prof.placements)
        out[k] = (prof.name, k, MILLI if k >= model.mig_compute_slices else k * MILLI // model.mig_compute_slices,
                  masks)
    return tuple(out[k] for k in sorted(out))


def _mig_profile(milli: int) -> tuple[str, int, int, tuple[int, ...]]:
    """The smallest profile with at least `milli` / 1000 of the GPU's compute (what a claim's
    firstAvailable over the profiles, smallest first, gets); a rounded share maps to itself."""
    total = gpu_model(MIG_MODEL).mig_compute_slices
    for prof in mig_profiles():
        if prof[2] == milli or prof[1] * MILLI >= milli * total:
            return prof
    return mig_profiles()[-1]


def _mig_pod(p: OpenbPod) -> OpenbPod:
    if not p.num_gpu or p.gpu_milli >= MILLI:
        return p
    return OpenbPod(p.name, p.cpu_milli, p.memory_mib, p.num_gpu, _mig_profile(p.gpu_milli)[2], p.gpu_spec)


def mig_place_ok(slices: np.ndarray, milli: int) -> np.ndarray:
    """Per GPU (memory-slice masks `slices`): a placement of the share's profile is free."""
    ok = np.zeros(slices.shape, dtype=bool)
    for mask in _mig_profile(milli)[3]:
        ok |= (slices & mask) == 0
    return ok


def mig_place(used: int, milli: int) -> int:
    """The memory-slice mask of a GPU after the share's profile takes its first free placement
    (whole GPUs: all eight slices)."""
    if milli >= MILLI:
        return 0xFF
    for mask in _mig_profile(milli)[3]:
        if used & mask == 0:
            return used | mask
    raise InflationError(f"MIG placement of {milli} milli-GPU on slices {used:#x}: none free; this is a bug")


def gpu_product_names() -> dict[str, str]:
    return {code: gpu_model(model).product_name for code, model in MODELS.items()}


def _place(cluster: Any, st: State, i: int, pod: OpenbPod, gpus: list[int], name: str, product: dict[str, str],
           applied: set[str]) -> None:
    node = st.names[i]
    objs = []
    template = None
    if pod.num_gpu:
        t = claim_template(pod, [st.bus[i][j] for j in gpus], product)
        template = t["metadata"]["name"]
        if template not in applied:
            applied.add(template)
            objs.append(t)
    objs.append(pinned_pod(name, pod, node, template))
    cluster.apply(objs)
    cluster.wait()
    got = cluster.find("Pod", name, "default")
    bound = (got or {}).get("spec", {}).get("nodeName")
    if bound != node:
        raise InflationError(f"pod {name} ({pod.name}): the policy chose {node} but the sim did not bind it there "
                             f"(got {bound!r}); this is a bug, please report it")
    if pod.num_gpu:
        claim_name, _ = claim_name_for(got, got["spec"]["resourceClaims"][0])
        claim = cluster.find("ResourceClaim", claim_name, "default")
        res = (((claim or {}).get("status") or {}).get("allocation") or {}).get("devices", {}).get("results") or []
        want = {f"gpu-{j}" for j in gpus}
        if {r["device"] for r in res} != want:
            raise InflationError(f"pod {name}: the allocator gave {sorted(r['device'] for r in res)}, the policy chose "
                                 f"{sorted(want)}; this is a bug, please report it")


def run_all(trace: str = "default", policies: Sequence[Any] = POLICIES, *, seeds: tuple[int, ...] = (42,),
            every: int = 1, ratio: float = 1.3, sim: bool = True, workers: int | None = 1, address: str | None = None,
            whole_gpus: bool = False, gpu_mode: str = "shares", nodes: str | Path = NODES_PATH,
            progress: bool | None = False, rng: str = "python") -> dict:
    """Every policy x seed; per policy the mean curve and unallocated GPUs (documented keys: see
    `labkit experiment inflation --help`). The cells run as sweeps do (labkit.experiments.sweep):
    serially (`workers=1`), in `workers` local processes (None: the CPU count) or on the Dask
    scheduler at `address`; every engine gives the same figures. `rng`: see run_inflation ("go": also
    the paper's own metric per policy and seed). `policies`: built-in names of either world,
    PATH.py[:Class] or module:Class specs (workers load them again), or policy objects (run
    serially, or pickled to the workers: their class must be importable there)."""
    pols = [load_policy(p) for p in policies]
    names = [p.name for p in pols]
    twice = next((n for n in names if names.count(n) > 1), None)
    if twice:
        raise InflationError(f"policy {twice!r}: given twice (policies are told apart by name)",
                             fix="give each policy once, or give your copy another name")
    specs = [policy_spec(p) for p in pols]
    if address or len(specs) * len(seeds) > 1 and (workers or os.cpu_count() or 1) > 1:
        for p in specs:
            check_shippable(p)
    cells = [(p, s) for p in specs for s in seeds]
    if every < 1:
        raise InflationError(f"--sample {every}: give a whole number >= 1 (1 = every node)")
    if workers is not None and workers < 1:
        raise InflationError(f"--workers {workers}: give at least 1 (1 = serially in this process)")
    gpu_mode = "whole" if whole_gpus else gpu_mode
    check_gpu_mode(gpu_mode, sim)
    check_rng(rng)
    openb_pods(trace)  # a bad trace fails here, in one line, before any work is sent out
    started = time.perf_counter()
    runs, engine, n = run_map(_cell, [(p, trace, every, ratio, s, sim, gpu_mode, str(nodes), rng) for p, s in cells],
                              workers=workers, address=address, progress=progress, desc="inflation: cells")
    out: dict[str, Any] = {"trace": trace, "ratio": ratio, "seeds": list(seeds), "sample_every": every,
                           "nodes": runs[0]["nodes"], "gpus": runs[0]["gpus"], "sim": sim,
                           "whole_gpus": gpu_mode == "whole", "gpu_mode": gpu_mode, "x_step_pct": X_STEP, "engine": engine, "workers": n, "rng": rng, "policies": {}}
    for p in names:
        mine = [r for r in runs if r["policy"] == p]
        by_seed = [r["unallocated_gpus"] for r in mine]
        curve = [round(sum(c) / len(c), 3) for c in zip(*(r["alloc_pct"] for r in mine), strict=True)]
        out["policies"][p] = {
            "alloc_pct": curve,
            "alloc_pct_at_saturation": round(sum(r["alloc_pct_at_saturation"] for r in mine) / len(mine), 3),
            "unallocated_gpus": round(sum(by_seed) / len(mine), 2),
            "unallocated_gpus_by_seed": by_seed,
            "unallocated_gpus_sd": round(statistics.stdev(by_seed), 2) if len(by_seed) > 1 else 0.0,
            "unallocated_gpus_min": min(by_seed),
            "unallocated_gpus_max": max(by_seed),
            "failed_pods": round(sum(r["failed_pods"] for r in mine) / len(mine), 1),
            "served_gpus": round(sum(r["served_gpus"] for r in mine) / len(mine), 2),
            "pods": mine[0]["pods"],
            "wall_s": round(sum(r["wall_s"] for r in mine), 2),
            "cpu_s": round(sum(r["cpu_s"] for r in mine), 2),
        }
        if rng == "go":
            pub = [r["unallocated_gpus_published_metric"] for r in mine]
            out["policies"][p].update({
                "alloc_pct_published_metric_by_seed": [r["alloc_pct_published_metric"] for r in mine],
                "unallocated_gpus_published_metric": None if None in pub else round(sum(pub) / len(pub), 2),
                "unallocated_gpus_published_metric_by_seed": pub})
    out["wall_s"] = round(time.perf_counter() - started, 2)
    out["cpu_s"] = round(sum(r["cpu_s"] for r in runs), 2)
    return out


def _cell(args: tuple) -> dict:
    """One (policy, seed) run; a module-level function (the engines pickle it by name). A bad
    input comes back as {"error": one line}, so no exception crosses a process boundary."""
    p, trace, every, ratio, s, sim, gpu_mode, nodes, rng = args
    try:
        return run_inflation(p, trace, every=every, ratio=ratio, seed=s, sim=sim, gpu_mode=gpu_mode, nodes=nodes,
                             rng=rng)
    except PolicyFault as exc:  # the policy failed: exit 1, not a bad input
        return {"error": f"{trace} / seed {s}: {one_line(exc)}", "policy_fault": True}
    except LabkitError as exc:
        return {"error": f"{policy_name(p)} / {trace} / seed {s}: {one_line(exc)}"}


def fleet_summary(every: int = 1) -> dict[str, int]:
    nodes = sample_nodes(openb_nodes(), every)
    return {"nodes": len(nodes), "gpus": sum(n.gpus for n in nodes)}


def unallocated_at(curve: list[float], gpus: int, x_pct: float) -> float:
    """Unallocated GPUs at x % arrived workload, from an alloc_pct curve."""
    i = min(len(curve) - 1, max(0, math.floor(x_pct / X_STEP)))
    return gpus * (100 - curve[i]) / 100


PAPER = DATA / "paper_reference.json"


def paper_figures(trace: str) -> dict | None:
    """The paper simulator's own results for a shipped trace (data/openb/paper_reference.json:
    per policy alloc_pct_at_130, unallocated_gpus_at_130, alloc_pct_curve_step5), or None."""
    name = str(trace).removeprefix("openb_pod_list_").removesuffix(".gz").removesuffix(".csv")
    return json.loads(PAPER.read_text())["traces"].get(name)


LABELS = {"fgd": "FGD", "best-fit": "Best-fit", "dot-product": "Dot-product", "gpu-packing": "GPU Packing",
          "gpu-clustering": "GPU Clustering", "random-fit": "Random-fit"}


def plot_inflation(res: dict, path: str | Path | None = None) -> Any:
    """The paper's Fig. 9(a)-style figure: allocated GPUs (% of the fleet) against arrived workload
    (% of the fleet's GPUs), one line per policy (ours solid, the paper's dotted when known), and
    the unallocated GPUs at saturation as bars."""
    # lazy: matplotlib only for figures (the notebooks extra)
    from matplotlib.figure import Figure

    fig = Figure(figsize=(11, 4.5), constrained_layout=True)
    ax, bx = fig.subplots(1, 2, gridspec_kw={"width_ratios": [3, 2]})
    paper = res.get("paper") or {}
    names = list(res["policies"])
    for k, name in enumerate(names):
        r = res["policies"][name]
        xs = [i * res["x_step_pct"] for i in range(len(r["alloc_pct"]))]
        line, = ax.plot(xs, r["alloc_pct"], label=f"{LABELS.get(name, name)}{' (ours)' if paper else ''}", lw=1.6)
        ref = paper.get(name)
        if ref:
            ax.plot([i * 5 for i in range(len(ref["alloc_pct_curve_step5"]))], ref["alloc_pct_curve_step5"], ":",
                    color=line.get_color(), lw=1.2, label=f"{LABELS.get(name, name)} (paper)")
        bx.bar(k - 0.2, r["unallocated_gpus"], 0.4, color=line.get_color())
        if ref:
            bx.bar(k + 0.2, ref["unallocated_gpus_at_130"], 0.4, color=line.get_color(), alpha=0.4, hatch="//")
    ax.set_xlim(60, max(100 * res["ratio"], 100))
    ax.set_ylim(60, 100)
    ax.set_xlabel("arrived workload (% of the fleet's GPUs)")
    ax.set_ylabel("allocated GPUs (% of the fleet)")
    ax.set_title(f"{res['trace']}: {res['gpus']} GPUs, seeds {','.join(map(str, res['seeds']))}")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    bx.set_xticks(range(len(names)), [LABELS.get(n, n) for n in names], rotation=30, ha="right", fontsize=8)
    bx.set_ylabel(f"unallocated GPUs at {100 * res['ratio']:.0f} %")
    bx.set_title("ours (solid) vs paper (hatched)" if paper else "unallocated GPUs per policy")
    if path is not None:
        save_figure(fig, path)
    return fig
