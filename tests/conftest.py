"""Fixtures more than one test file needs: the Go oracles (built here when Go is installed, so the
tests that compare with Kubernetes run wherever they can), shared sample inputs, and the kind lane's
clusters (one per profile for the whole lane: the e2e and the kind column of the backend cases share
them)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.differential import harness
from tests.paths import REPO, TEST_DATA, TESTS

DATA = TEST_DATA


@pytest.fixture(scope="session")
def oracle() -> Path:
    """The 1.37 allocator oracle (tools/oracle): built or found; skipped only without Go and binary."""
    path, reason = harness.ensure_oracle()
    if path is None:
        pytest.skip(reason)
    return path


@pytest.fixture(scope="session")
def cel_oracle() -> Callable[[list[dict[str, Any]]], list[dict[str, Any]]]:
    """Kubernetes' own DRA CEL environment behind a CLI (tools/cel-oracle), built or found: a
    function from request rows ({"expr", "driver", ...}) to its answers, one per row, in order."""
    path, reason = harness.ensure_cel_oracle()
    if path is None:
        pytest.skip(reason)

    def ask(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        proc = subprocess.run([str(path)], input="".join(json.dumps(r) + "\n" for r in rows),
                              capture_output=True, text=True, check=True)
        answers = [json.loads(line) for line in proc.stdout.splitlines()]
        assert len(answers) == len(rows), f"{path}: {len(rows)} rows in, {len(answers)} answers out"
        return answers

    return ask


@pytest.fixture
def cel_slices() -> str:
    """Two ResourceSlices for `labkit cel`: two GPUs on node-1 (one A100 with a driverVersion, one T4)
    and a NIC pool on all nodes."""
    return str(DATA / "cel" / "slices.yaml")


@pytest.fixture(scope="session")
def oracle_of() -> Callable[[str], Path]:
    """The allocator oracle of a Kubernetes release ("1.36" -> oracle-0.36), built or found."""

    def get(version: str) -> Path:
        path, reason = harness.ensure_oracle("0." + version.split(".")[1])
        if path is None:
            pytest.skip(reason)
        return path

    return get


# -- the kind lane's clusters (tests/kindutil.py imports the kind backend, so only when asked) -----
@pytest.fixture(scope="session")
def kind_host_before() -> dict[str, set[str]]:
    """The engine's containers and networks before the lane's first cluster."""
    from tests import kindutil

    return kindutil.host_snapshot()


@pytest.fixture(scope="session")
def kind_clusters(tmp_path_factory: pytest.TempPathFactory, kind_host_before: dict[str, set[str]]) -> Iterator[Any]:
    """The kind lane's `labkit cluster up`/`down` manager (tests/kindutil.py `Clusters`): one cluster
    per profile, the profiles one after the other (tests/e2e/test_cluster_kind_e2e.py's order)."""
    from labkit.cluster.backends.kind.preflight import check_host
    from tests import kindutil

    failed = [c for c in check_host("1.37") if not c.ok]
    if failed:
        pytest.fail("kind cannot run here (make test sets it up through tools/with-kind.sh):\n"
                    + "\n".join(map(str, failed)))
    with kindutil.lane_clusters(tmp_path_factory.mktemp("kind-run")) as cl:
        yield cl


@pytest.fixture(scope="session")
def kind_workshop(kind_clusters: Any) -> Any:
    """The kind lane's workshop cluster, connected (a KindCluster): the one the e2e's workshop tests
    use, no cluster of its own. Its users leave it as they found it (the e2e's next tests apply into
    it) and run before the e2e's (`pytest_collection_modifyitems` below): the e2e's later profiles
    replace it."""
    return kind_clusters.get("workshop")


# -- the local lane's workshop cluster (tests/localutil.py imports the local backend, so only when asked) --
def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "local_workshop: uses the local lane's shared workshop cluster (the "
                            "`local_workshop` fixture of tests/conftest.py) through a fixture of its own")


_local_workshop: Any = None  # the SharedLocalWorkshop, once a test asked for it


def _uses_local_workshop(item: pytest.Item | None) -> bool:
    return item is not None and ("local_workshop" in getattr(item, "fixturenames", ())
                                 or item.get_closest_marker("local_workshop") is not None)


@pytest.fixture(scope="module")
def local_workshop() -> Iterator[Any]:
    """The local lane's ready `workshop` cluster (a LocalCluster), one for the modules that run one after the
    other (`pytest_collection_modifyitems` puts them together) instead of one per module. Each module
    gets it as the one before left it: what it made (pods, claims, classes, slices, namespaces ...) is
    deleted when it is done, and it fails if something that was there before is gone."""
    global _local_workshop
    from tests.localutil import SharedLocalWorkshop, left_as_found

    if _local_workshop is None:
        _local_workshop = SharedLocalWorkshop()
    shared = _local_workshop
    cluster = shared.lend()
    try:
        with left_as_found(cluster) as c:
            yield c
    finally:
        shared.give_back()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """The shared workshop cluster stops after the last test of a run of tests that use it."""
    yield
    if _local_workshop is not None and _uses_local_workshop(item) and not _uses_local_workshop(nextitem):
        _local_workshop.stop_when_returned()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The tests on the local lane's shared workshop cluster (`local_workshop`) run one after the other,
    where the first of them is, so that it is started once. The kind lane's other tests (kind-marked,
    not faults or standalone) run before the e2e's (the tests that ask `kind_clusters` by name), on its
    workshop cluster (`kind_workshop`), so that cluster is neither created twice nor used after the
    e2e's Helm test replaced its driver."""
    shared = [i for i, it in enumerate(items) if _uses_local_workshop(it)]
    if shared:
        first = shared[0]
        tail = items[first:]
        items[first:] = [it for it in tail if _uses_local_workshop(it)] + [it for it in tail if not _uses_local_workshop(it)]
    e2e = [i for i, it in enumerate(items) if "kind_clusters" in getattr(it, "fixturenames", ())]
    if not e2e:
        return
    first = e2e[0]

    def early(it: pytest.Item) -> bool:
        return (it.get_closest_marker("kind") is not None and "kind_clusters" not in getattr(it, "fixturenames", ())
                and it.get_closest_marker("kind_faults") is None and it.get_closest_marker("kind_standalone") is None)

    tail = items[first:]
    items[first:] = [it for it in tail if early(it)] + [it for it in tail if not early(it)]


# folder lanes (issue 44 item 5): tools/test-lanes.sh collects the local, course, site, kind and
# faults lanes from their folders only, so a test whose marker picks one of those lanes must live in that
# folder, or no lane would run it.
_MARKER_FOLDERS = {
    "local": ("local", "cluster", "e2e", "fake_gpus"),
    "kind": ("e2e", "cluster"),
    "kind_faults": ("e2e",),
    "kind_standalone": ("e2e",),
    "browser": ("course", "site"),
    "site": ("site",),
}


_misplaced: list[str] = []


def pytest_itemcollected(item: pytest.Item) -> None:
    """Each test as it is collected, before `-m` deselects: a misplaced test is refused in every lane."""
    if TESTS not in item.path.resolve().parents:  # e.g. notebooks under nbval
        return
    folder = item.path.resolve().relative_to(TESTS).parts[0]
    for marker, folders in _MARKER_FOLDERS.items():
        if item.get_closest_marker(marker) and folder not in folders:
            where = " or ".join(f"tests/{f}/" for f in folders)
            _misplaced.append(f"{item.nodeid}: marked {marker}, so it belongs in {where}")


def pytest_collection_finish(session: pytest.Session) -> None:
    if _misplaced:
        raise pytest.UsageError("tests outside their lane's folder:\n  " + "\n  ".join(sorted(set(_misplaced))))


@pytest.fixture(scope="module")
def site_py() -> Iterator[Any]:
    """A tests/cliserver.py server that loaded notebooks/site.py once (its imports, jupytext, nbformat and
    jsonschema, cost ~2.4 CPU-s a process): `site_py.python(CODE, str(site.py), ARGS...)` runs `python -c`
    forked from it, where `runpy.run_path` of site.py returns what the server loaded."""
    from tests.cliserver import CliServer

    server = CliServer(scripts=[REPO / "notebooks" / "site.py"])
    try:
        yield server
    finally:
        server.close()
