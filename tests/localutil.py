"""The local control plane as the tests that compare with the real kube-scheduler use it."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest

from labkit.cluster import connect
from labkit.cluster.base import ClusterError
from labkit.cluster.local import LocalCluster


@contextlib.contextmanager
def ready_local_cluster(profile: str) -> Iterator[LocalCluster]:
    """A `local` cluster of `profile` whose nodes have lost their not-ready taint (pods applied
    before that would sit in back-off), removed at the end; the test is skipped when the local
    backend cannot run here."""
    try:
        c = connect("local", profile, progress=False, build=False)
    except ClusterError as exc:
        pytest.skip(f"local backend unavailable: {exc}")
    try:
        assert c.wait(until=lambda x: not any(n["spec"].get("taints") for n in x.list("Node")), timeout=120)
        yield c
    finally:
        c.down()
