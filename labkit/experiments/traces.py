"""Workload traces: a seeded synthetic generator and (re-exported) the Alibaba trace loader.

A trace is a list of `WorkItem`s sorted by arrival. Each item is one pod's worth of work; a
policy (labkit.experiments.policies) turns it into ResourceClaim(Template)s and a Pod.

Synthetic distributions (`generate`, defaults; `describe()` prints this table with the
parameters actually used):

| kind      | share | GPU need                                         | compute (GPU)  | duration (lognormal)   |
|-----------|-------|--------------------------------------------------|----------------|------------------------|
| inference | 0.55  | memory U(2, 20) GiB, one GPU shared (fractional) | mem/80 x U(.5,1.5), in [.05, 1] | median 10 min, sigma 1.0 |
| mig       | 0.30  | fits 1g/2g/3g of an A100-40GB (p .5/.3/.2): memory U(lower, profile] GiB | g/7 | median 15 min, sigma 0.8 |
| finetune  | 0.15  | 1/2/4/8 whole GPUs (p .35/.30/.25/.10), U(16, 40) GiB per GPU, NVLink when > 1 GPU | 1 per GPU | median 60 min, sigma 0.7 |

Arrivals are a Poisson process (exponential gaps, mean 60/rate_per_min seconds). Durations are
capped at 24 h. Everything is drawn from one `random.Random(seed)`, so a seed gives the same trace.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field

#: A100-SXM4-40GB MIG profile memory in GiB (NVIDIA MIG guide: 4864 / 9856 / 19968 MiB)
MIG_MEMORY_GIB = {"1g": 4864 / 1024, "2g": 9856 / 1024, "3g": 19968 / 1024}

KINDS = ("inference", "mig", "finetune", "cpu")


@dataclass(frozen=True)
class WorkItem:
    """One pod's worth of work. `gpus` == 0 means a fractional share of one GPU."""

    name: str
    kind: str  # inference | mig | finetune | cpu
    arrival: float  # seconds from trace start
    duration: float  # seconds of run time once started
    gpus: int = 0  # whole GPUs wanted (0: a share of one GPU)
    gpu_mem_gib: float = 0.0  # GPU memory needed per GPU (GiB)
    compute: float = 0.0  # GPU compute needed per GPU, as a fraction of one GPU
    nvlink: bool = False  # wants all its GPUs in one NVLink domain
    cpu_milli: int = 1000
    memory_mib: int = 2048
    gpu_spec: str = ""  # Alibaba trace: allowed GPU types ("" = any); informational
    tags: dict[str, str] = field(default_factory=dict)

    @property
    def fractional(self) -> bool:
        return self.gpus == 0 and self.gpu_mem_gib > 0

    @property
    def gpu_units(self) -> int:
        """Physical GPUs the item touches (1 for a share)."""
        return self.gpus if self.gpus else (1 if self.gpu_mem_gib > 0 else 0)

    @property
    def needed_mem_gib(self) -> float:
        return self.gpu_mem_gib * self.gpu_units

    @property
    def needed_compute(self) -> float:
        return self.compute * self.gpu_units

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class TraceParams:
    n: int = 500
    rate_per_min: float = 6.0
    mix: tuple[tuple[str, float], ...] = (("inference", 0.55), ("mig", 0.30), ("finetune", 0.15))
    inference_mem_gib: tuple[float, float] = (2.0, 20.0)
    mig_profiles: tuple[tuple[str, float], ...] = (("1g", 0.5), ("2g", 0.3), ("3g", 0.2))
    finetune_gpus: tuple[tuple[int, float], ...] = ((1, 0.35), (2, 0.30), (4, 0.25), (8, 0.10))
    finetune_mem_gib: tuple[float, float] = (16.0, 40.0)
    duration_median_s: tuple[tuple[str, float], ...] = (("inference", 600.0), ("mig", 900.0), ("finetune", 3600.0))
    duration_sigma: tuple[tuple[str, float], ...] = (("inference", 1.0), ("mig", 0.8), ("finetune", 0.7))
    max_duration_s: float = 86400.0


def _pick(rng: random.Random, table: Iterable[tuple]) -> object:
    items = list(table)
    x = rng.random() * sum(w for _, w in items)
    for value, w in items:
        x -= w
        if x < 0:
            return value
    return items[-1][0]


def generate(n: int = 500, seed: int = 0, *, rate_per_min: float = 6.0, params: TraceParams | None = None) -> list[WorkItem]:
    """A synthetic trace of `n` items (see the module docstring for the distributions)."""
    p = params or TraceParams(n=n, rate_per_min=rate_per_min)
    if n < 0:
        raise ValueError(f"generate(n={n}): n must be >= 0")
    if p.rate_per_min <= 0:
        raise ValueError(f"generate(rate_per_min={p.rate_per_min}): must be > 0 (pods per minute)")
    rng = random.Random(seed)
    med, sig = dict(p.duration_median_s), dict(p.duration_sigma)
    t = 0.0
    out: list[WorkItem] = []
    width = max(4, len(str(n)))
    for i in range(n):
        t += rng.expovariate(p.rate_per_min / 60.0)
        kind = str(_pick(rng, p.mix))
        dur = min(p.max_duration_s, rng.lognormvariate(math.log(med[kind]), sig[kind]))
        name = f"{kind[:3]}-{i:0{width}d}"
        if kind == "inference":
            mem = round(rng.uniform(*p.inference_mem_gib), 2)
            comp = min(1.0, max(0.05, mem / 80 * rng.uniform(0.5, 1.5)))
            item = WorkItem(name, kind, t, dur, 0, mem, round(comp, 3), False, 2000, 8192)
        elif kind == "mig":
            prof = str(_pick(rng, p.mig_profiles))
            order = [k for k, _ in p.mig_profiles]
            lower = MIG_MEMORY_GIB[order[order.index(prof) - 1]] if order.index(prof) else 1.0
            mem = round(rng.uniform(lower, MIG_MEMORY_GIB[prof]), 2)
            item = WorkItem(name, kind, t, dur, 0, mem, round(int(prof[0]) / 7, 3), False, 1000, 4096,
                            tags={"migProfile": prof})
        else:
            g = int(_pick(rng, p.finetune_gpus))  # type: ignore[call-overload]  # _pick gives a finetune_gpus count
            mem = round(rng.uniform(*p.finetune_mem_gib), 2)
            item = WorkItem(name, kind, t, dur, g, mem, 1.0, g > 1, 8000 * g, 65536 * g)
        out.append(item)
    return out


def describe(trace: list[WorkItem] | None = None, params: TraceParams | None = None) -> str:
    """The generator's distribution table, and (given a trace) what the trace actually holds."""
    p = params or TraceParams()
    med, sig = dict(p.duration_median_s), dict(p.duration_sigma)
    mix = dict(p.mix)
    lines = [
        f"arrivals: Poisson, {p.rate_per_min:g} pods/min; durations lognormal, capped at {p.max_duration_s:g} s",
        f"{'kind':<10} {'share':>5}  {'need':<58} {'median':>7} {'sigma':>5}",
        f"{'inference':<10} {mix.get('inference', 0):>5.2f}  "
        f"{f'U({p.inference_mem_gib[0]:g},{p.inference_mem_gib[1]:g}) GiB of one GPU, compute mem/80*U(.5,1.5)':<58} "
        f"{med['inference'] / 60:>5.0f}m {sig['inference']:>5.1f}",
        f"{'mig':<10} {mix.get('mig', 0):>5.2f}  "
        f"{'fits ' + '/'.join(f'{k}(p{w:g})' for k, w in p.mig_profiles) + ' of A100-40GB, compute g/7':<58} "
        f"{med['mig'] / 60:>5.0f}m {sig['mig']:>5.1f}",
        f"{'finetune':<10} {mix.get('finetune', 0):>5.2f}  "
        f"{'/'.join(f'{g}(p{w:g})' for g, w in p.finetune_gpus) + f' whole GPUs, U({p.finetune_mem_gib[0]:g},{p.finetune_mem_gib[1]:g}) GiB each, NVLink if >1':<58} "
        f"{med['finetune'] / 60:>5.0f}m {sig['finetune']:>5.1f}",
    ]
    if trace is not None:
        lines.append(summarize(trace))
    return "\n".join(lines)


def summarize(trace: list[WorkItem]) -> str:
    """One line per kind: count, mean GPU memory need, mean duration."""
    if not trace:
        return "trace: empty"
    span = max(i.arrival for i in trace) - min(i.arrival for i in trace)
    lines = [f"trace: {len(trace)} items over {span / 3600:.2f} h"]
    for kind in KINDS:
        items = [i for i in trace if i.kind == kind]
        if items:
            lines.append(f"  {kind:<10} {len(items):>6}  mean need {sum(i.needed_mem_gib for i in items) / len(items):6.1f} GiB"
                         f"  mean duration {sum(i.duration for i in items) / len(items) / 60:6.1f} min")
    return "\n".join(lines)


def request_mix(trace: list[WorkItem], top: int = 12) -> list[tuple[int, float, float]]:
    """The trace's typical requests as (whole GPUs, GiB per GPU, weight), most frequent first.

    Fractional needs are rounded up to 2 GiB buckets, whole-GPU jobs keyed by GPU count only
    (they take whole GPUs whatever their memory need). Used by the fragmentation metric."""
    counts: dict[tuple[int, float], int] = {}
    for it in trace:
        if it.gpu_units == 0:
            continue
        key = (it.gpus, 0.0) if it.gpus else (0, float(2 * math.ceil(it.gpu_mem_gib / 2)))
        counts[key] = counts.get(key, 0) + 1
    total = sum(counts.values()) or 1
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:top]
    kept = sum(c for _, c in ranked) or 1
    del total
    return [(g, m, c / kept) for (g, m), c in ranked]
