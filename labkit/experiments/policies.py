"""Placement policies: how a WorkItem becomes DRA objects, and (optionally) which node it goes to.

A policy is anything with the `Policy` protocol; subclass `BasePolicy` in a notebook cell:

    class MyPolicy(BasePolicy):
        name = "mine"
        def objects(self, item, ctx):
            return self.whole_gpu_objects(item, ctx)     # + your tweaks

Every placement goes through the sim's real scheduler + DRA allocator: a policy only writes
ResourceClaim(Template)s and Pods. To steer node choice it sets a nodeSelector on
`kubernetes.io/hostname` (what a custom scoring plugin would decide in kube-scheduler). Policies
without node choice leave it to the sim's scheduler (labkit.sim.scoring: kube-scheduler's default
scores over every node below 100 nodes; from 100 nodes on over the sample kube-scheduler's
percentageOfNodesToScore gives, found from a rotating start).

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
import math
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from labkit.errors import InputError
from labkit.experiments import objects as o
from labkit.experiments.fleet import NVLINK_ATTR, Fleet
from labkit.experiments.fragmentation import GpuState, Mix, gpu_states, states_fragmentation
from labkit.experiments.ledger import Ledger
from labkit.experiments.traces import WorkItem


class PolicyError(InputError, ValueError):
    """Unknown policy name or a policy that returned unusable objects."""


@dataclass
class Context:
    """What a policy may look at: the fleet, what is in use (ledger), the trace's request mix,
    and the devices each named claim got (claim name -> (node, [device names]))."""

    fleet: Fleet
    ledger: Ledger
    mix: Mix
    claim_devices: dict[str, tuple[str, list[str]]] = field(default_factory=dict)
    state: dict[str, Any] = field(default_factory=dict)  # per-policy scratch space

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


def _labels(policy: str, item: WorkItem) -> dict[str, str]:
    return {"labkit.dev/experiment": policy, "labkit.dev/workload": item.kind}


class BasePolicy:
    """Defaults: whole GPUs per pod, no node choice, nothing to release."""

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


POLICIES: dict[str, type[BasePolicy]] = {p.name: p for p in (WholeGpu, SharedClaims, StaticMig, DynamicMig,
                                                                TopologyAware, FragmentationAware)}


def get_policy(spec: str | Policy) -> Policy:
    """A policy instance from a name (see POLICIES) or an instance (returned as is)."""
    if not isinstance(spec, str):
        if not isinstance(spec, Policy):
            raise PolicyError(f"policy {spec!r}: needs name, mig_mode, sharing, objects() and release(); "
                              "subclass labkit.experiments.policies.BasePolicy")
        return spec
    cls = POLICIES.get(spec.strip())
    if cls is None:
        raise PolicyError(f"policy {spec!r}: unknown; use one of {', '.join(POLICIES)}")
    return cls()
