"""Driver faults on a real kubelet (issue 17.2), the CI-sized run of tests/faultrun.py: 30 claims,
6 pods at a time, the fake driver's plugin SIGKILLed at random moments and inside
NodePrepareResources / NodeUnprepareResources; then a kind node restarted with prepared claims.
`tools/reliability.sh` runs the same code with 200+ claims.

Uses the running kind cluster of profile $LABKIT_FAULTS_PROFILE (default workshop) in
$LABKIT_RUN_DIR when there is one, else starts one and removes it. make test runs this file as a
lane of its own, on its own cluster, beside the e2e (tools/test-lanes.sh): most of its time is spent
waiting for kubelets' retries, so it overlaps the e2e instead of adding to it.
"""

from __future__ import annotations

import pytest

from . import faultrun, kindutil

pytestmark = [pytest.mark.kind, pytest.mark.kind_faults, pytest.mark.slow]


@pytest.fixture(scope="module")
def kind_cluster():
    c = kindutil.cluster()
    yield c
    if not c.attached:
        c.down()


def check_driver_faults(c) -> None:
    """The CI-sized fault run on cluster ``c`` (make test calls it on the e2e's workshop cluster)."""
    r = faultrun.run_faults(c, claims=30, concurrency=6, kills=6, seed=17, delay=1.0)
    assert r["problems"] == []
    assert (r["podsRan"], r["podsWithRightDevices"], r["podsDeleted"]) == (30, 30, 30)
    assert r["podsNotRunningInTime"] == 0 and r["claimsPreparedWithDifferentDevices"] == 0
    assert r["kills"] >= 3 and r["checkpointInconsistent"] == 0
    # honest about where the kills landed: at least one inside a call, read from the killed plugin's log
    assert r["killsInsidePrepare"] + r["killsInsideUnprepare"] >= 1, r["killLog"]
    assert (r["checkpointEntriesLeft"], r["cdiSpecsLeft"]) == (0, 0)


def check_node_restart(c) -> None:
    r = faultrun.node_restart(c, pods=3)
    assert r["pluginRegisteredBefore"], r
    assert r["ranBefore"] and r["claimsInCheckpointBefore"] == 3, r
    assert r["cameBack"] and r["samePods"], r
    assert r["sameDevices"], (r["devicesBefore"], r["devicesAfter"])
    assert r["cdiSpecsAfterRestart"] >= 3  # the plugin rewrote them from its checkpoint (/var/run is a tmpfs)
    assert r["checkpointEmptyAfterDelete"]


def test_plugin_killed_during_prepare_and_unprepare_loses_nothing(kind_cluster):
    check_driver_faults(kind_cluster)


def test_node_restart_brings_pods_back_with_the_same_devices(kind_cluster):
    check_node_restart(kind_cluster)
