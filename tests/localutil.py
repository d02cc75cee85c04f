"""The local control plane as the tests that compare with the real kube-scheduler use it."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest

from labkit.cluster import connect
from labkit.cluster.backends.local import LocalCluster, binaries


def need_local_binaries() -> None:
    """Skip where the control plane can be neither found nor built (no cached binaries, no Go)."""
    if binaries.find("1.37") is None and not binaries.can_build():
        pytest.skip("control-plane binaries not built (tools/build-controlplane.sh) and Go is not installed")


@contextlib.contextmanager
def ready_local_cluster(profile: str) -> Iterator[LocalCluster]:
    """A `local` cluster of `profile` whose nodes have lost their not-ready taint (pods applied
    before that would sit in back-off), removed at the end; skipped only where the control plane
    can be neither found nor built (a cluster that fails to come up fails the test)."""
    need_local_binaries()
    c = connect("local", profile, progress=False, build=binaries.find("1.37") is None)
    try:
        assert c.wait(until=lambda x: not any(n["spec"].get("taints") for n in x.list("Node")), timeout=120)
        yield c
    finally:
        c.down()
