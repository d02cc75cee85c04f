"""Property tests (hypothesis): invariants of every allocation, on random scenarios."""

from __future__ import annotations

import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.allocator.test_allocator_differential import allocator_for, random_scenario


def _build(seed: int):
    objs, case = random_scenario(random.Random(seed))
    alloc, _by, pending, done = allocator_for(objs, "1.37", case.get("featureGates") or {})
    return alloc, pending, done


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(min_value=0, max_value=10**6))
def test_allocations_respect_the_rules(seed):
    alloc, pending, done = _build(seed)
    out = alloc.allocate({"metadata": {"name": "node-1"}}, pending)
    assert out.status in ("allocated", "unsatisfiable", "error")
    if out.status != "allocated":
        assert out.allocations == []
        return
    assert len(out.allocations) == len(pending)
    busy = {(r["driver"], r["pool"], r["device"]) for c in done
            for r in c["status"]["allocation"]["devices"]["results"]}
    taken: set = set()
    for claim, result in zip(pending, out.allocations):
        results = result["devices"].get("results", [])
        assert len(results) <= 32
        names = {r["name"] for r in claim["spec"]["devices"]["requests"]}
        for r in results:
            did = (r["driver"], r["pool"], r["device"])
            assert r["request"].split("/")[0] in names
            if "shareID" in r or r.get("adminAccess"):
                continue
            assert did not in busy and did not in taken   # a dedicated device is never given twice
            taken.add(did)
        assert result["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]["values"] == ["node-1"]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(min_value=0, max_value=10**6))
def test_explanation_never_changes_the_result(seed):
    alloc, pending, _ = _build(seed)
    node = {"metadata": {"name": "node-1"}}
    first = alloc.allocate(node, pending)
    exp = first.explanation
    again = alloc.allocate(node, pending)

    def strip(allocs):
        return [[{k: v for k, v in r.items() if k != "shareID"} for r in a["devices"].get("results", [])]
                for a in allocs]

    assert (first.status, first.error, strip(first.allocations)) == (again.status, again.error,
                                                                      strip(again.allocations))
    assert exp is not None and isinstance(exp.summary(), str)
    if first.status != "allocated" and pending:
        assert exp.failing_claim is not None
