"""Upstream dra-example-driver demos on the local backend (real kube-apiserver, scheduler and
controller-manager; LabKit's node agent and the fake plugin's CDI specs): the same report as the
sim, including what each container sees.

Needs the local control-plane binaries: `pytest -m local tests/local/test_cluster_local_upstream.py`.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest

from labkit.cluster import connect
from labkit.cluster.base import NotFound
from labkit.cluster.report import normalize_report, simulate_report
from tests.localutil import ready_local_cluster
from tests.paths import TEST_DATA

pytestmark = [pytest.mark.local, pytest.mark.slow]

EX = TEST_DATA / "upstream" / "dra-example-driver"
DEMOS = ["basic-resourceclaim-opaque-config", "basic-multiple-requests", "initcontainer-shared-gpu",
         "basic-shared-claim-across-pods"]


def _report(cluster, path: Path) -> dict:
    cluster.apply(path)
    cluster.wait()
    return normalize_report(simulate_report(cluster))


def test_example_driver_demos_match_sim():
    with ready_local_cluster("example-driver") as local:
        for demo in DEMOS:
            path = EX / demo / f"{demo}.yaml"
            got_local = _report(local, path)
            got_sim = _report(connect("sim", "example-driver", progress=False), path)
            assert got_local == got_sim, demo
            envs = [c["env"] for p in got_local["pods"] for c in p["containers"]]
            assert all(e.get("DRA_RESOURCE_DRIVER_NAME") == "gpu.example.com" for e in envs), demo
            for kind in ("Pod", "ResourceClaim"):
                for obj in reversed(local.list(kind)):
                    with contextlib.suppress(NotFound):
                        local.delete(kind, obj["metadata"]["name"], obj["metadata"]["namespace"])
            local.wait(until=lambda c: not c.list("ResourceClaim") and not c.list("Pod"), timeout=120)
