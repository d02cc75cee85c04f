"""Unallocatable capacity: free GPU memory that no typical request of the trace can use.

In the spirit of FGD (Weng et al., ATC'23): for each request class r of the trace's mix (weight
w_r), the free memory of a node that r cannot use; the node's fragmentation is the weighted sum.
- a share of one GPU needing m GiB cannot use a free piece smaller than m (a piece: a whole free
  GPU, a free static MIG device, the unconsumed part of a dynamic-MIG GPU, the headroom of a
  shared GPU when the policy shares);
- a job of g whole GPUs can only use a node with g idle whole GPUs (in one NVLink domain when
  g > 1); then every other free piece of that node is unusable for it, otherwise all of them are.
"""

from __future__ import annotations

import math

from labkit.experiments.fleet import GpuInfo
from labkit.experiments.ledger import GpuUse, Ledger

Mix = list[tuple[int, float, float]]  # (whole GPUs, GiB per share, weight)


def _whole_free(u: GpuUse) -> bool:
    return u.idle and (u.info.whole or u.info.dynamic_mig)


#: one GPU's state for the metric: (free pieces GiB, idle whole GPU?, NVLink domain, memory GiB)
GpuState = tuple[tuple[float, ...], bool, str, float]


def gpu_state(u: GpuUse, sharing: bool) -> GpuState:
    return tuple(u.chunks(sharing)), _whole_free(u), u.info.nvlink or u.info.name, u.info.mem_gib


def gpu_states(uses: list[GpuUse], sharing: bool) -> tuple[GpuState, ...]:
    return tuple(gpu_state(u, sharing) if u.devices else _idle_state(u.info) for u in uses)


#: id(GpuInfo) -> (that GpuInfo, its state when idle): most GPUs of a fleet are idle at any time
_IDLE: dict[int, tuple[GpuInfo, GpuState]] = {}


def _idle_state(info: GpuInfo) -> GpuState:
    """gpu_state of a GPU without devices, which depends on its GpuInfo alone (an idle GPU's free
    pieces do not depend on sharing), worked out once per GpuInfo."""
    hit = _IDLE.get(id(info))
    if hit is not None and hit[0] is info:
        return hit[1]
    state = gpu_state(GpuUse(info), False)
    if len(_IDLE) >= 4096:  # the GPU kinds of the fleets measured lately
        _IDLE.clear()
    _IDLE[id(info)] = (info, state)
    return state


def node_fragmentation(uses: list[GpuUse], mix: Mix, sharing: bool) -> float:
    return states_fragmentation(gpu_states(uses, sharing), mix)


def states_fragmentation(states: tuple[GpuState, ...], mix: Mix) -> float:
    free = sum(sum(s[0]) for s in states)
    if free <= 1e-9:
        return 0.0
    total = 0.0
    for g, m, w in mix:
        if g == 0:
            total += w * sum(x for s in states for x in s[0] if x + 1e-9 < m)
            continue
        domains: dict[str, int] = {}
        whole_mem = 0.0
        for s in states:
            if s[1]:
                domains[s[2]] = domains.get(s[2], 0) + 1
                whole_mem += s[3]
        fits = (max(domains.values(), default=0) >= g) if g > 1 else bool(domains)
        total += w * (free - whole_mem if fits else free)
    return total


#: 2**-1074 is the smallest positive float: every float is an integer multiple of it
_ULP_SHIFT = 1074
_SCALE = 1 << _ULP_SHIFT


def _exact(x: float) -> int:
    """`x` as an exact integer number of 2**-1074 (sums of these are exact; `total / _SCALE` is
    the correctly rounded float of the sum, as float(Fraction) is, and far cheaper)."""
    n, d = x.as_integer_ratio()  # d is a power of two, at most 2**1074
    return n << (_ULP_SHIFT - d.bit_length() + 1)


class FragmentationMeter:
    """Fleet fragmentation; per-node values are re-read only for nodes the ledger touched."""

    def __init__(self, ledger: Ledger, mix: Mix, sharing: bool) -> None:
        self.ledger = ledger
        self.mix = mix
        self.sharing = sharing
        self._frag: list[float] = []  # by fleet position
        self._free: list[float] = []
        self._seen = 0  # position in ledger.changed
        self._by_states: dict[tuple[GpuState, ...], float] = {}
        self._idle: dict[int, tuple[float, float]] = {}  # id(NodeKind) -> node() of an untouched node
        self._frag_total = self._free_total = 0  # exact sums of _frag and _free, in 2**-1074 (_exact)

    def node(self, node: str) -> tuple[float, float]:
        """(fragmented GiB, free GiB) of one node."""
        uses = self.ledger.gpus.made(node)
        if uses is None:  # never touched: all its GPUs idle, as for every node of its kind
            kind = self.ledger.fleet.kind_of[node]
            hit = self._idle.get(id(kind))
            if hit is None:  # the fleet holds its kinds, so an id stays theirs
                hit = self._idle[id(kind)] = self._of_states(tuple(_idle_state(g) for g in kind.gpus))
            return hit
        return self._of_states(gpu_states(uses, self.sharing))

    def _of_states(self, states: tuple[GpuState, ...]) -> tuple[float, float]:
        frag = self._by_states.get(states)
        if frag is None:  # nodes of one kind in the same state (idle ones, say) are worked out once
            frag = states_fragmentation(states, self.mix)
            if len(self._by_states) < 65_536:
                self._by_states[states] = frag
        return frag, sum(sum(s[0]) for s in states)

    def fleet(self) -> tuple[float, float]:
        """(fragmented GiB, free GiB) of the fleet: the exact sums of the nodes' values, rounded
        once (what math.fsum gives, so fleet_scan() is equal bit for bit). Called every tick of a
        trace, it updates the exact totals for the nodes the ledger touched, instead of adding up
        the whole fleet again."""
        led = self.ledger
        if not self._frag:
            for n in led.fleet.nodes:
                a, b = self.node(n)
                self._frag.append(a)
                self._free.append(b)
            self._frag_total = sum(map(_exact, self._frag))
            self._free_total = sum(map(_exact, self._free))
        else:
            for n in set(led.changed[self._seen:]):
                i = led.index_of[n]
                a, b = self.node(n)
                if a != self._frag[i]:
                    self._frag_total += _exact(a) - _exact(self._frag[i])
                    self._frag[i] = a
                if b != self._free[i]:
                    self._free_total += _exact(b) - _exact(self._free[i])
                    self._free[i] = b
        self._seen = len(led.changed)
        return self._frag_total / _SCALE, self._free_total / _SCALE

    def fleet_scan(self) -> tuple[float, float]:
        """fleet() recomputed from every node (the reference the cached version is tested against)."""
        per_node = [self.node(n) for n in self.ledger.fleet.nodes]
        return math.fsum(a for a, _ in per_node), math.fsum(b for _, b in per_node)
