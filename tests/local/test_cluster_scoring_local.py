"""kube-scheduler itself (local backend) on the scoring scenarios the sim models
(tests/scoring_scenarios.py). Where kube-scheduler breaks a tie at random, only what every tie
break shares is asserted; the sim's choice is the first such node by name.

    pytest -m local tests/local/test_cluster_scoring_local.py
"""

from __future__ import annotations

import pytest

from labkit.cluster import connect
from tests import scoring_scenarios as sc
from tests.scenario_gen import pod_settled

pytestmark = [pytest.mark.local, pytest.mark.slow]


def _run(cluster, objs: list[dict]) -> None:
    cluster.apply(objs)
    for obj in objs:
        if obj["kind"] == "Pod":
            name = obj["metadata"]["name"]
            assert cluster.wait(until=lambda c, n=name: pod_settled(c.get("Pod", n)), timeout=90), name


def _placed(cluster, pod: str) -> tuple[str, str]:
    row = next(p for p in cluster.placements() if p.pod == pod)
    return row.node, row.request


@pytest.fixture(scope="module")
def clusters(local_workshop):
    """A sim and the local lane's workshop cluster (tests/conftest.py: what the test makes there goes after it)."""
    return connect("sim", "workshop", progress=False), local_workshop


def test_scoring_scenarios_on_kube_scheduler(clusters):
    sim, local = clusters
    for c in (sim, local):
        _run(c, sc.prefer_t4())
        for objs in sc.spread_by_cpu():
            _run(c, objs)
        _run(c, sc.preferred_node())
    for c in (sim, local):
        node, request = _placed(c, "prefer-t4")
        assert node in ("t4-0", "t4-1") and request == "gpu/t4", (c.backend, node, request)
        assert len({_placed(c, f"cpu-{i}")[0] for i in range(3)}) == 3, c.backend
        assert _placed(c, "likes-t4-1")[0] == "t4-1", c.backend
    assert _placed(sim, "prefer-t4")[0] == "t4-0"
