"""Sim vs the real control plane (local backend): the scenario set must give identical reports
(after normalize_report: generated-name suffixes, uids and shareIDs differ legitimately).

Needs the local control-plane binaries: `pytest -m local tests/local/test_cluster_sim_vs_local.py`.
"""

from __future__ import annotations

import contextlib
import re
from pathlib import Path

import pytest

from labkit.cluster import connect
from labkit.cluster.base import NotFound
from labkit.cluster.report import normalize_report, simulate_report
from tests.localutil import local_cluster, profile_params
from tests.paths import TEST_DATA

pytestmark = [pytest.mark.local, pytest.mark.slow]

SCENARIOS = TEST_DATA / "scenarios"


def _by_profile() -> dict[str, list[Path]]:
    out: dict[str, list[Path]] = {}
    for f in sorted(SCENARIOS.glob("*.yaml")):
        prof = re.match(r"# labkit-profile: (\S+)", f.read_text()).group(1)
        out.setdefault(prof, []).append(f)
    return out


def _report(backend: str, profile: str, scenario: Path, cluster=None):
    c = cluster or connect(backend, profile, progress=False)
    c.apply(scenario)
    c.wait()
    return normalize_report(simulate_report(c))


@pytest.mark.parametrize("profile", profile_params(sorted(_by_profile())))
def test_scenarios_match_local(profile, request):
    with local_cluster(profile, request) as local:
        for scenario in _by_profile()[profile]:
            got_local = _report("local", profile, scenario, cluster=local)
            got_sim = _report("sim", profile, scenario)
            assert got_sim == got_local, scenario.name
            for kind in ("Pod", "ResourceClaim"):
                for obj in reversed(local.list(kind)):
                    # a template's claim is garbage-collected with its pod: it may be gone already
                    with contextlib.suppress(NotFound):
                        local.delete(kind, obj["metadata"]["name"], obj["metadata"]["namespace"])
            for obj in local.list("DeviceTaintRule"):  # cluster-wide state a later scenario must not see
                local.delete("DeviceTaintRule", obj["metadata"]["name"], None)
            local.wait(until=lambda c: not c.list("ResourceClaim") and not c.list("Pod"), timeout=120)
