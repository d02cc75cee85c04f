"""One table of backend cases, run on every backend (issue 44 item 5; kwok's style): each case is a
function taking a connected workshop Cluster, and the table runs it on sim (the main lane), local
(the local lane: one control plane for the whole table) and kind (the kind lane: the e2e's workshop
cluster, through the `kind_workshop` fixture of tests/conftest.py).

The workshop profile: dgx-a100-0 (8 A100 80GB GPUs and 8 NICs), t4-0 and t4-1 (4 Tesla T4 16GB each).
Each case names its objects with its own prefix, so the cases never see each other's objects, and
deletes what it made, so they can share one cluster.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from labkit.cluster import Cluster, ClusterInputError, NotFound, connect
from labkit.errors import InputError, NotFoundError
from tests import builders as b

#: (node, driver) of every ResourceSlice the workshop profile publishes (one pool, one slice each)
WORKSHOP_SLICES = {("dgx-a100-0", "gpu.nvidia.com"), ("dgx-a100-0", "nic.fake-gpus.dev"),
                   ("t4-0", "gpu.nvidia.com"), ("t4-1", "gpu.nvidia.com")}
#: long enough for a real kube-scheduler's back-off and a kubelet's container start
TIMEOUT = 180.0


# -- helpers ---------------------------------------------------------------------------------------
def phase(c: Cluster, pod: str) -> str:
    return str((c.get("Pod", pod).get("status") or {}).get("phase", "Pending"))


def running(c: Cluster, *pods: str) -> None:
    ok = c.wait(until=lambda cl: all(phase(cl, p) == "Running" for p in pods), timeout=TIMEOUT)
    assert ok, {p: c.get("Pod", p).get("status") for p in pods}


def unschedulable(c: Cluster, pod: str) -> bool:
    conds = (c.get("Pod", pod).get("status") or {}).get("conditions") or []
    return any(x.get("type") == "PodScheduled" and x.get("status") == "False" for x in conds)


def rows(c: Cluster, *pods: str) -> list[dict[str, str]]:
    return [r for r in c.placements().rows if r["pod"] in pods]


def allocated(c: Cluster) -> set[tuple[str, str, str]]:
    """(driver, pool, device) of every device some ResourceClaim holds."""
    return {(r["driver"], r["pool"], r["device"]) for cl in c.list("ResourceClaim")
            for r in (((cl.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results") or []}


def remove(c: Cluster, objs: list[dict[str, Any]]) -> None:
    """Delete `objs` (pods first: a claim in use waits for its pods) and wait until they are gone."""
    order = sorted(objs, key=lambda o: o["kind"] != "Pod")
    for o in order:
        with contextlib.suppress(NotFound):
            c.delete(o["kind"], o["metadata"]["name"], o["metadata"].get("namespace"))
    gone = c.wait(until=lambda cl: all(cl.find(o["kind"], o["metadata"]["name"], o["metadata"].get("namespace"))
                                       is None for o in order), timeout=TIMEOUT)
    assert gone, [o["metadata"]["name"] for o in order if c.find(o["kind"], o["metadata"]["name"])]


@contextlib.contextmanager
def made(c: Cluster, *objs: dict[str, Any]) -> Iterator[list[dict[str, Any]]]:
    """Apply `objs`, yield them as stored, and remove them at the end whatever happened."""
    try:
        yield c.apply(list(objs))
    finally:
        remove(c, list(objs))


# -- the cases -------------------------------------------------------------------------------------
def gpu_by_memory_runs_on_the_node_that_has_it(c: Cluster) -> None:
    """A claim for a GPU of at least 40Gi: only dgx-a100-0's A100s have that much; placements() shows it."""
    with made(c, b.claim("bm-big", selectors=[b.memory_at_least("40Gi")]), b.pod("bm-trainer", claims="bm-big")):
        running(c, "bm-trainer")
        assert c.get("Pod", "bm-trainer")["spec"]["nodeName"] == "dgx-a100-0"
        [row] = rows(c, "bm-trainer")
        assert (row["claim"], row["request"], row["node"], row["driver"]) == \
            ("bm-big", "gpu", "dgx-a100-0", "gpu.nvidia.com")
        a100s = {d["name"] for s in c.list("ResourceSlice") if s["spec"].get("nodeName") == "dgx-a100-0"
                 and s["spec"]["driver"] == "gpu.nvidia.com" for d in s["spec"]["devices"]}
        assert row["device"] in a100s


def unsatisfiable_claim_leaves_the_pod_pending_and_explain_says_why(c: Cluster) -> None:
    """No GPU has 1Ti: the pod stays Pending, nothing is placed, and explain() says so."""
    with made(c, b.claim("un-huge", selectors=[b.memory_at_least("1Ti")]), b.pod("un-waiting", claims="un-huge")):
        assert c.wait(until=lambda cl: unschedulable(cl, "un-waiting"), timeout=TIMEOUT), \
            c.get("Pod", "un-waiting").get("status")
        assert phase(c, "un-waiting") == "Pending"
        assert "nodeName" not in c.get("Pod", "un-waiting")["spec"]
        assert rows(c, "un-waiting") == []
        text = c.explain("un-waiting")
        assert text.startswith("Pod default/un-waiting is Pending"), text
        assert "cannot allocate all claims" in text, text  # kube-scheduler's DynamicResources verdict


def two_pods_sharing_a_claim_get_the_same_device(c: Cluster) -> None:
    """One ResourceClaim named by two pods: allocated once, both pods run with the same device."""
    with made(c, b.claim("sh-t4", selectors=[b.product_is("Tesla T4")]),
              b.pod("sh-a", claims="sh-t4"), b.pod("sh-b", claims="sh-t4")):
        running(c, "sh-a", "sh-b")
        got = {r["pod"]: (r["node"], r["device"]) for r in rows(c, "sh-a", "sh-b")}
        assert set(got) == {"sh-a", "sh-b"} and got["sh-a"] == got["sh-b"], got
        assert got["sh-a"][0] in {"t4-0", "t4-1"}
        reserved = c.get("ResourceClaim", "sh-t4")["status"]["reservedFor"]
        assert sorted(r["name"] for r in reserved) == ["sh-a", "sh-b"]


def deleting_the_pod_and_claim_frees_the_device(c: Cluster) -> None:
    """A second claim asks for the very device the first holds (by its uuid): its pod waits; deleting the
    first pod and claim frees the device, and the waiting pod gets it."""
    first = [b.claim("fr-first", selectors=[b.product_is("Tesla T4")]), b.pod("fr-first", claims="fr-first")]
    with made(c, *first):
        running(c, "fr-first")
        [row] = rows(c, "fr-first")
        held = (row["driver"], row["pool"], row["device"])
        assert held in allocated(c)
        [dev] = [d for s in c.list("ResourceSlice") if (s["spec"]["driver"], s["spec"]["pool"]["name"]) == held[:2]
                 for d in s["spec"]["devices"] if d["name"] == held[2]]
        uuid = dev["attributes"]["uuid"]["string"]
        second = [b.claim("fr-second", selectors=[f"device.attributes['gpu.nvidia.com'].uuid == '{uuid}'"]),
                  b.pod("fr-second", claims="fr-second")]
        with made(c, *second):
            assert c.wait(until=lambda cl: unschedulable(cl, "fr-second"), timeout=TIMEOUT)
            remove(c, first)
            running(c, "fr-second")
            [again] = rows(c, "fr-second")
            assert (again["driver"], again["pool"], again["device"]) == held
    assert held not in allocated(c)


def get_of_a_missing_claim_is_not_found(c: Cluster) -> None:
    with pytest.raises(NotFound) as err:
        c.get("ResourceClaim", "nf-never-made")
    assert isinstance(err.value, NotFoundError)
    assert "nf-never-made" in str(err.value)
    assert c.find("ResourceClaim", "nf-never-made") is None


def invalid_claim_is_refused_naming_the_field(c: Cluster) -> None:
    """allocationMode accepts "All" or "ExactCount" (k8s.io/api/resource/v1/types.go,
    DeviceAllocationMode; pkg/apis/resource/validation/validation.go): the apply is refused as the
    user's mistake, naming the claim and the field path, and nothing is stored."""
    bad = b.claim("iv-bad", requests=[b.request(allocation_mode="Some")])
    try:
        with pytest.raises(ClusterInputError) as err:
            c.apply([bad])
        assert isinstance(err.value, InputError)
        text = str(err.value)
        assert "iv-bad" in text and "spec.devices.requests[0].exactly.allocationMode" in text, text
        assert '"Some"' in text, text
        assert c.find("ResourceClaim", "iv-bad") is None
    finally:
        with contextlib.suppress(NotFound):
            c.delete("ResourceClaim", "iv-bad")


def resource_slices_one_per_node_and_driver(c: Cluster) -> None:
    """Each node publishes one ResourceSlice per driver of its hardware (the drivers' plugins may still be
    publishing on a fresh cluster: wait for them)."""
    def published(cl: Cluster) -> Counter[tuple[str, str]]:
        return Counter((s["spec"].get("nodeName", ""), s["spec"]["driver"]) for s in cl.list("ResourceSlice"))

    c.wait(until=lambda cl: set(published(cl)) >= WORKSHOP_SLICES, timeout=TIMEOUT)
    counts = published(c)
    assert set(counts) == WORKSHOP_SLICES, counts
    assert all(n == 1 for n in counts.values()), counts
    assert {node for node, _ in WORKSHOP_SLICES} == {n.name for n in c.profile.nodes}


CASES: list[Callable[[Cluster], None]] = [
    gpu_by_memory_runs_on_the_node_that_has_it,
    unsatisfiable_claim_leaves_the_pod_pending_and_explain_says_why,
    two_pods_sharing_a_claim_get_the_same_device,
    deleting_the_pod_and_claim_frees_the_device,
    get_of_a_missing_claim_is_not_found,
    invalid_claim_is_refused_naming_the_field,
    resource_slices_one_per_node_and_driver,
]

#: the columns: each backend runs in its own lane (make test: tools/test-lanes.sh picks them by marker)
BACKENDS = [
    pytest.param("sim", id="sim"),
    pytest.param("local", id="local", marks=[pytest.mark.local, pytest.mark.local_workshop]),  # tests/conftest.py
    pytest.param("kind", id="kind", marks=pytest.mark.kind),
]


# -- the clusters ----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def sim_workshop() -> Iterator[Cluster]:
    """One sim for the table too, so the sim column checks the cases' isolation as the others do."""
    with connect("sim", "workshop", progress=False) as c:
        yield c


@pytest.fixture
def cluster(request: pytest.FixtureRequest) -> Cluster:
    """The backend's workshop cluster; the kind one is the e2e's (tests/conftest.py `kind_workshop`)."""
    name = {"sim": "sim_workshop", "local": "local_workshop", "kind": "kind_workshop"}[request.param]
    c: Cluster = request.getfixturevalue(name)
    return c


@pytest.mark.parametrize("cluster", BACKENDS, indirect=True)
@pytest.mark.parametrize("case", CASES, ids=lambda f: f.__name__)
def test_backend_case(cluster: Cluster, case: Callable[[Cluster], None]) -> None:
    case(cluster)
