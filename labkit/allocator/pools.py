"""Which resource pools a node can see (``GatherPools``), per variant.

A pool is (driver, pool name). Only the newest generation counts; a pool is incomplete when
fewer slices than ``resourceSliceCount`` exist at that generation, obsolete (silently dropped)
when a newer generation exists elsewhere, invalid on duplicate device names, duplicate counter
sets, or devices consuming unknown counters.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from labkit.allocator.features import Features, VariantProfile
from labkit.allocator.model import SliceInfo
from labkit.allocator.nodes import NodeSelectorError, node_matches
from labkit.errors import InputError

__all__ = ["Pool", "PoolError", "gather_pools"]


class PoolError(InputError):
    """Fatal error while gathering pools (bad node selector in a slice)."""


@dataclass(eq=False)
class Pool:
    driver: str
    pool: str
    incomplete: bool = False
    invalid: bool = False
    invalid_reason: str = ""
    device_slices: list[SliceInfo] = field(default_factory=list)
    other_slices: list[SliceInfo] = field(default_factory=list)
    counter_sets: dict[str, dict[str, Fraction | int]] = field(default_factory=dict)
    #: candidate devices per (engine, class and request selectors), filled by the Allocator
    candidates: dict[tuple[Any, ...], Any] = field(default_factory=dict, repr=False)

    @property
    def id(self) -> tuple[str, str]:
        return (self.driver, self.pool)

    def __str__(self) -> str:
        return f"{self.driver}/{self.pool}"

    def has_binding_conditions(self) -> bool:
        return any(s.has_binding_conditions for s in self.device_slices)


def _matches(node: dict[str, Any], s: SliceInfo, what: str, fn: Callable[[], bool]) -> bool:
    try:
        return fn()
    except NodeSelectorError as exc:
        raise PoolError(f"failed to perform node selection for {what}: {exc}") from exc


def _relevant(node: dict[str, Any], s: SliceInfo) -> bool | None:
    """True/False for known node selection; None for an unknown (future) kind."""
    if s.node_name or s.all_nodes or s.node_selector is not None:
        return _matches(node, s, f"slice {s.name}",
                        lambda: node_matches(node, s.node_name, s.all_nodes, s.node_selector))
    if s.per_device:
        for d in s.devices:
            if _matches(node, s, f"device {d.name} in slice {s.name}",
                        lambda d=d: node_matches(node, d.node_name, d.all_nodes, d.node_selector)):  # type: ignore[misc]  # mypy cannot infer a lambda with a default (d=d binds the loop's device)
                return True
        return False
    return None


def gather_pools(slices_for_node: list[SliceInfo], node: dict[str, Any], features: Features,
                 all_slices: Callable[[], list[SliceInfo]], profile: VariantProfile) -> list[Pool]:
    """``all_slices`` is called only when a pool has fewer slices here than it says it has."""
    everywhere = profile.counter_slices_everywhere
    by_pool: dict[tuple[str, str], list[SliceInfo]] = {}
    for s in slices_for_node:
        if not features.PartitionableDevices and (s.per_device is not None or s.shared_counters):
            continue
        if not features.CompatibilityGroups and s.uses_compat_groups:
            continue
        if everywhere and s.shared_counters:
            relevant: bool | None = True
        else:
            relevant = _relevant(node, s)
        if relevant is None or not relevant:
            continue
        key = (s.driver, s.pool)
        have = by_pool.get(key)
        if have is None or s.generation > have[0].generation:
            by_pool[key] = [s]
        elif s.generation == have[0].generation:
            have.append(s)

    result: list[Pool] = []
    with_binding: list[Pool] = []
    for (driver, name), pool_slices in by_pool.items():
        first = pool_slices[0]
        if len(pool_slices) == first.count:
            pool = _build_pool(driver, name, pool_slices, features, None, profile)
        else:
            obsolete, all_for_pool = _check_slices_in_pool(all_slices(), driver, name, first.generation)
            if obsolete:
                continue
            if not features.CompatibilityGroups:
                all_for_pool = [s for s in all_for_pool if not s.uses_compat_groups]
            if len(all_for_pool) != first.count:
                if profile.release <= 34:  # 1.34 still searched incomplete pools (ExactCount)
                    pool = _build_pool(driver, name, pool_slices, features, None, profile)
                    pool.incomplete = True
                    result.append(pool)
                else:
                    result.append(Pool(driver, name, incomplete=True))
                continue
            pool = _build_pool(driver, name, pool_slices, features, all_for_pool, profile)
        if profile.sort_pools and pool.has_binding_conditions():
            with_binding.append(pool)
        else:
            result.append(pool)
    # Go map order in stable (and before 1.36) is random; LabKit uses sorted order there too.
    result.sort(key=lambda p: (p.driver, p.pool))
    with_binding.sort(key=lambda p: (p.driver, p.pool))
    return result + with_binding


def _check_slices_in_pool(all_slices: list[SliceInfo], driver: str, pool: str,
                          generation: int) -> tuple[bool, list[SliceInfo]]:
    found = []
    for s in all_slices:
        if s.driver != driver or s.pool != pool:
            continue
        if s.generation == generation:
            found.append(s)
        elif s.generation > generation:
            return True, []
    return False, found


def _invalid(driver: str, name: str, reason: str) -> Pool:
    return Pool(driver, name, invalid=True, invalid_reason=reason)


def _build_pool(driver: str, name: str, slices: list[SliceInfo], features: Features,
                all_for_pool: list[SliceInfo] | None, profile: VariantProfile) -> Pool:
    if profile.sort_slices:
        slices = sorted(slices, key=lambda s: s.name)
    pd = features.PartitionableDevices
    device_slices = [s for s in slices if not (pd and s.shared_counters)]
    counter_slices = [s for s in slices if pd and s.shared_counters]
    others: list[SliceInfo] = []
    if all_for_pool is not None and len(slices) < len(all_for_pool):
        names = {s.name for s in slices}
        for s in all_for_pool:
            if s.name in names:
                continue
            if pd and s.shared_counters:
                counter_slices.append(s)
            else:
                others.append(s)
    seen: set[str] = set()
    for s in device_slices:
        for dev_name in s.device_names:
            if dev_name in seen:
                return _invalid(driver, name, f"duplicate device name {dev_name}")
            seen.add(dev_name)
    if not pd:
        return Pool(driver, name, device_slices=device_slices)
    counter_sets: dict[str, dict[str, Fraction | int]] = {}
    for s in counter_slices:
        for cs_name, counters in s.shared_counters:
            if cs_name in counter_sets:
                return _invalid(driver, name, f"duplicate counter set name {cs_name}")
            counter_sets[cs_name] = counters
    for group in (device_slices, others):
        for s in group:
            if not s.consumes_counters:
                continue
            for d in s.devices:
                for cs_name, counters in d.consumes:
                    if cs_name not in counter_sets:
                        return _invalid(driver, name, f"counter set {cs_name} not found")
                    for counter in counters:
                        if counter not in counter_sets[cs_name]:
                            return _invalid(driver, name, f"counter {counter} not found in counter set {cs_name}")
    return Pool(driver, name, device_slices=device_slices, other_slices=others, counter_sets=counter_sets)
