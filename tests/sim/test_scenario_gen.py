"""tests/scenario_gen.py: deterministic, every pod pinned, valid on the sim, a mix of outcomes."""

from __future__ import annotations

import yaml

from labkit.cluster import connect
from labkit.cluster.report import simulate_report
from tests.scenario_gen import NODES, generate, scenarios


def test_same_seed_same_scenario() -> None:
    assert generate(7).to_yaml() == generate(7).to_yaml()
    assert generate(7).to_yaml() != generate(8).to_yaml()


def test_every_pod_is_pinned_to_a_profile_node() -> None:
    for sc in scenarios(40):
        assert 1 <= len(sc.pods) <= 4
        for pod in sc.pods:
            assert pod["spec"]["nodeSelector"]["kubernetes.io/hostname"] in NODES[sc.profile]
        docs = list(yaml.safe_load_all(sc.to_yaml()))
        assert docs == sc.objects()
        assert sc.to_yaml().startswith(f"# labkit-profile: {sc.profile}\n")


def test_generated_scenarios_run_on_sim_with_placed_and_pending_pods() -> None:
    placed = pending = 0
    for sc in scenarios(20):
        c = connect("sim", sc.profile, progress=False)
        if sc.setup:
            c.apply(sc.setup)
        for pod in sc.pods:
            c.apply(pod)
            c.wait()
        for p in simulate_report(c)["pods"]:
            if p["node"]:
                placed += 1
            else:
                assert p["reason"] == "Unschedulable"
                pending += 1
    assert placed and pending
