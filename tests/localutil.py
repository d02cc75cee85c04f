"""The local control plane as the tests that compare with the real kube-scheduler use it."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from typing import Any

import pytest

from labkit.cluster import NotFound, connect
from labkit.cluster.backends.local import LocalCluster, binaries


def need_local_binaries() -> None:
    """Skip where the control plane can be neither found nor built (no cached binaries, no Go)."""
    if binaries.find("1.37") is None and not binaries.can_build():
        pytest.skip("control-plane binaries not built (tools/build-controlplane.sh) and Go is not installed")


def ready(c: LocalCluster) -> bool:
    """Whether the nodes have lost their not-ready taint (pods applied before that sit in back-off)."""
    return not any(n["spec"].get("taints") for n in c.list("Node"))


@contextlib.contextmanager
def ready_local_cluster(profile: str) -> Iterator[LocalCluster]:
    """A `local` cluster of `profile` whose nodes have lost their not-ready taint (pods applied
    before that would sit in back-off), removed at the end; skipped only where the control plane
    can be neither found nor built (a cluster that fails to come up fails the test)."""
    need_local_binaries()
    c = connect("local", profile, progress=False, build=binaries.find("1.37") is None)
    try:
        assert c.wait(until=ready, timeout=120)
        yield c
    finally:
        c.down()


#: what the local lane's tests make; a module gives the shared cluster back without what it added of these
#: (pods first: a claim in use waits for its pods; namespaces last: they take what is left in them along)
MADE_KINDS = ("Pod", "ResourceClaim", "ResourceClaimTemplate", "DeviceTaintRule", "DeviceClass", "ResourceSlice",
              "Namespace")


def _objects(c: LocalCluster) -> dict[tuple[str, str, str], str]:
    """(kind, namespace, name) -> uid of every object of MADE_KINDS."""
    out: dict[tuple[str, str, str], str] = {}
    for kind in MADE_KINDS:
        with contextlib.suppress(NotFound):  # a kind this cluster does not serve
            for o in c.list(kind):
                meta = o["metadata"]
                out[(kind, meta.get("namespace") or "", meta["name"])] = str(meta.get("uid"))
    return out


@contextlib.contextmanager
def left_as_found(c: LocalCluster) -> Iterator[LocalCluster]:
    """`c`, with whatever was made in it meanwhile deleted at the end (and waited for until gone);
    fails when an object that was there before is gone or was replaced."""
    before = _objects(c)
    try:
        yield c
    finally:
        made = [k for k in _objects(c) if k not in before]
        for kind, namespace, name in sorted(made, key=lambda k: MADE_KINDS.index(k[0])):
            with contextlib.suppress(NotFound):  # a template's claim goes with its pod, a namespace's objects with it
                c.delete(kind, name, namespace or None)

        def clean(x: Any) -> bool:
            return not any(k not in before for k in _objects(x))

        assert c.wait(until=clean, timeout=180), sorted(k for k in _objects(c) if k not in before)
        after = _objects(c)
        lost = sorted(k for k, uid in before.items() if after.get(k) != uid)
        assert not lost, f"deleted or replaced in the shared local cluster: {lost}"


class SharedLocalWorkshop:
    """One ready `workshop` local cluster lent to the local lane's modules in turn (tests/conftest.py
    `local_workshop`): a control plane costs ~9 CPU-s to start and stop and ~0.07 CPU-s a second to keep,
    so it is started by the first module that asks and stopped after the last of a run of them
    (`stop_when_returned`), once no module holds it."""

    def __init__(self) -> None:
        self._stack: contextlib.ExitStack | None = None
        self.cluster: LocalCluster | None = None
        self.holders = 0
        self.stopping = False

    def lend(self) -> LocalCluster:
        self.stopping = False
        if self.cluster is None:
            stack = contextlib.ExitStack()
            self.cluster = stack.enter_context(ready_local_cluster("workshop"))
            self._stack = stack
        self.holders += 1
        return self.cluster

    def give_back(self) -> None:
        self.holders -= 1
        if self.stopping and not self.holders:
            self.close()

    def stop_when_returned(self) -> None:
        self.stopping = True
        if not self.holders:
            self.close()

    def close(self) -> None:
        stack, self._stack, self.cluster, self.stopping = self._stack, None, None, False
        if stack is not None:
            stack.close()


def profile_params(profiles: Iterable[str]) -> list[Any]:
    """`profiles` for parametrize, `workshop` marked as a user of the shared cluster (`local_cluster`)."""
    return [pytest.param(p, marks=pytest.mark.local_workshop) if p == "workshop" else p for p in profiles]


@contextlib.contextmanager
def local_cluster(profile: str, request: pytest.FixtureRequest) -> Iterator[LocalCluster]:
    """`ready_local_cluster(profile)`, or for `workshop` the shared one (`local_workshop`; the test
    then carries the `local_workshop` mark), which the test leaves as it found it."""
    if profile == "workshop":
        yield request.getfixturevalue("local_workshop")
    else:
        with ready_local_cluster(profile) as c:
            yield c
