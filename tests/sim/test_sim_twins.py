"""Twin nodes (labkit.allocator.twins): a node whose devices look the same to a claims shape as a
node asked before gets that node's outcome, renamed. It must be exactly what the node's own
search gives, for every kind of node and claim, and the sim must bind exactly as without it."""

from __future__ import annotations

import copy
import random

import pytest

from labkit.allocator.twins import TwinTable, claims_refs
from labkit.cluster import connect
from labkit.experiments import generate, run_policy
from labkit.sim.dra import DraState
from tests import builders as b

pytestmark = pytest.mark.slow  # heavy: `make check` leaves it out, `make test` runs it


FLEET = {"name": "twins", "kubernetesVersion": "1.37", "nodes": [
    {"namePrefix": "whole-", "count": 4, "nodeProfile": "dgx-a100"},
    {"namePrefix": "dyn-", "count": 3, "nodeProfile": "dgx-a100", "migMode": "dynamic"},
    {"namePrefix": "static-", "count": 3, "nodeProfile": "mig-a100", "migMode": "static"},
    {"namePrefix": "mixed-", "count": 3, "nodeProfile": "mixed-a100-t4"},
    {"namePrefix": "shares-", "count": 2, "nodeProfile": "h100-shares"},
]}


def _cluster(version: str = "1.37"):
    return connect("sim", dict(FLEET, kubernetesVersion=version), progress=False)


@pytest.fixture(scope="module")
def cluster():
    return _cluster()


def _dra(cluster) -> DraState:
    return cluster.sim.scheduler.dra


def _nodes(cluster) -> list[dict]:
    return cluster.sim.store.list("Node")


def _claim(name: str, requests: list[dict], constraints: list[dict] | None = None) -> dict:
    return b.claim(name, requests=requests, constraints=constraints or ())


def _exactly(cls: str, count: int | None, sel: str | None) -> dict:
    out: dict = {"deviceClassName": cls, "allocationMode": "ExactCount" if count else "All"}
    if count:
        out["count"] = count
    if sel:
        out["selectors"] = [{"cel": {"expression": sel}}]
    return out


def _random_claims(rng: random.Random, uuids: list[str]) -> list[dict]:
    """One or two claims over whole GPUs, MIG devices and NICs, with selectors every GPU of a kind
    passes alike (memory, product, profile) or that one GPU passes (its uuid), sometimes a
    constraint, a firstAvailable list or allocation mode All."""
    gpu_selectors = [
        None,
        "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0",
        "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('70Gi')) >= 0",
        "device.attributes['gpu.nvidia.com'].productName.startsWith('NVIDIA A100')",
        f"device.attributes['gpu.nvidia.com'].uuid == '{rng.choice(uuids)}'",
    ]
    mig_selectors = [None, "device.attributes['gpu.nvidia.com'].profile == '1g.10gb'",
                     "device.attributes['gpu.nvidia.com'].profile == '3g.40gb'"]
    claims = []
    for ci in range(rng.choice((1, 1, 2))):
        requests = []
        for ri in range(rng.choice((1, 1, 2))):
            kind = rng.choice(("gpu", "gpu", "mig", "nic", "first"))
            if kind == "gpu":
                sel = rng.choice(gpu_selectors)
                count = 1 if sel and "uuid" in sel else rng.choice((1, 2, 4, 8))  # one GPU has that uuid
                body = {"exactly": _exactly("gpu.nvidia.com", count, sel)}
            elif kind == "mig":
                body = {"exactly": _exactly("mig.nvidia.com", rng.choice((1, 2)), rng.choice(mig_selectors))}
            elif kind == "nic":
                body = {"exactly": _exactly("nic.fake-gpus.dev", rng.choice((1, 2, None)), None)}
            else:
                body = {"firstAvailable": [
                    {"name": "big", **_exactly("gpu.nvidia.com", rng.choice((2, 4)), rng.choice(gpu_selectors))},
                    {"name": "slice", **_exactly("mig.nvidia.com", 1, rng.choice(mig_selectors))}]}
            requests.append({"name": f"r{ri}", **body})
        constraints = None
        if len(requests) == 2 and rng.random() < 0.5:
            constraints = [{"matchAttribute": "resource.kubernetes.io/pcieRoot"}]
        claims.append(_claim(f"c{ci}", requests, constraints))
    return claims


def _take(dra: DraState, rng: random.Random, nodes: list[dict]) -> list[dict]:
    """Mark devices as taken: the same device names on several nodes of a kind (so that twins in
    use exist), and random ones elsewhere. Returns the results to give back."""
    results = []
    for node in nodes:
        name = node["metadata"]["name"]
        if rng.random() < 0.4:
            continue
        slices = [s for s in dra.slices_for(node) if (s["spec"].get("devices"))]
        s = rng.choice(slices)
        pick = [0] if rng.random() < 0.6 else rng.sample(range(len(s["spec"]["devices"])), min(2, len(s["spec"]["devices"])))
        for i in pick:
            dev = s["spec"]["devices"][i]
            result = {"devices": {"results": [{"request": "r", "driver": s["spec"]["driver"],
                                               "pool": s["spec"]["pool"]["name"], "device": dev["name"]}]}}
            dra.allocated.add(result, owner=f"default/taken-{name}")
            results.append(result)
    return results


def _uuids(cluster) -> list[str]:
    return [d["attributes"]["uuid"]["string"] for s in cluster.sim.store.list("ResourceSlice")
            for d in s["spec"].get("devices") or [] if "uuid" in (d.get("attributes") or {})]


def _plain(allocations: list[dict]) -> list[dict]:
    """Without shareIDs: every search draws new ones (shared devices never have twins)."""
    out = copy.deepcopy(allocations)
    for a in out:
        for r in (a.get("devices") or {}).get("results") or ():
            r.pop("shareID", None)
    return out


@pytest.mark.parametrize("version", ["1.34", "1.37"])  # 1.34: no partitionable devices, stable profile
def test_twin_outcomes_equal_each_nodes_own_search(version):
    cluster = _cluster(version)
    dra = _dra(cluster)
    nodes = _nodes(cluster)
    uuids = _uuids(cluster)
    rng = random.Random(7)
    hits = compared = 0
    for i in range(60 if version == "1.37" else 20):  # 1.34's searches are slower here
        taken = _take(dra, rng, nodes) if i % 2 else []  # half of the time on an idle fleet
        try:
            claims = _random_claims(rng, uuids)
            table = TwinTable()
            for node in rng.sample(nodes, len(nodes)) * 2:  # every node twice, in random order
                before = table.hits
                # no filterTimeout: under load a search can pass 10 s in one of the two runs only
                got = dra.allocate(node, claims, table, timeout=None)
                own = dra.allocator_for(node).allocate(node, copy.deepcopy(claims), timeout=None)
                assert (got.status, got.error, _plain(got.allocations)) == (
                    own.status, own.error, _plain(own.allocations)), (node["metadata"]["name"], claims)
                compared += 1
                hits += table.hits - before
        finally:
            for r in taken:
                dra.allocated.remove(r, owner=None)
    # the comparison is worth something only if most answers came from a twin
    assert hits > compared / 3, (hits, compared)


def test_nodes_with_shared_devices_have_no_twin(cluster):
    dra = _dra(cluster)
    claims = [_claim("c", [{"name": "g", "exactly": _exactly("gpu.nvidia.com", 1, None)}])]
    table = TwinTable()
    for node in _nodes(cluster):
        found = dra._twin_key(node, claims, table)
        assert (found is None) == node["metadata"]["name"].startswith("shares-")


def test_a_uuid_selector_makes_every_node_distinct(cluster):
    dra = _dra(cluster)
    uuid = next(u for s in cluster.sim.store.list("ResourceSlice") if s["spec"]["nodeName"] == "whole-2"
                for u in [d["attributes"]["uuid"]["string"] for d in s["spec"].get("devices") or []
                          if "uuid" in d.get("attributes", {})][:1])
    claims = [_claim("c", [{"name": "g", "exactly": _exactly(
        "gpu.nvidia.com", 1, f"device.attributes['gpu.nvidia.com'].uuid == '{uuid}'")}])]
    table = TwinTable()
    fits = [n["metadata"]["name"] for n in _nodes(cluster) if n["metadata"]["name"].startswith("whole-")
            and dra.allocate(n, claims, table).status == "allocated"]
    assert fits == ["whole-2"]
    assert table.hits == 0


def test_a_twin_answer_names_its_own_node_and_explains_itself(cluster):
    dra = _dra(cluster)
    by_name = {n["metadata"]["name"]: n for n in _nodes(cluster)}
    claims = [_claim("c", [{"name": "g", "exactly": _exactly("gpu.nvidia.com", 2, None)},
                           {"name": "n", "exactly": _exactly("nic.fake-gpus.dev", 1, None)}])]
    table = TwinTable()
    first = dra.allocate(by_name["whole-0"], claims, table)
    second = dra.allocate(by_name["whole-1"], claims, table)
    assert table.hits == 1
    results = second.allocations[0]["devices"]["results"]
    assert {(r["driver"], r["pool"]) for r in results} == {("gpu.nvidia.com", "whole-1"), ("nic.fake-gpus.dev", "whole-1")}
    assert second.allocations[0]["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]["values"] == ["whole-1"]
    assert first.allocations[0]["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]["values"] == ["whole-0"]
    # the twin's own results are its own dicts: changing them does not change the first node's
    results[0]["pool"] = "changed"
    assert dra.allocate(by_name["whole-2"], claims, table).allocations[0]["devices"]["results"][0]["pool"] == "whole-2"
    # an unsatisfiable answer explains itself for its own node
    nine = [_claim("c", [{"name": "g", "exactly": _exactly("gpu.nvidia.com", 9, None)}])]
    table = TwinTable()  # one table per claims shape
    dra.allocate(by_name["whole-0"], nine, table)
    late = dra.allocate(by_name["whole-3"], nine, table)
    assert late.status == "unsatisfiable" and table.hits == 1
    text = str(late.explanation)
    assert "whole-3" in text and "whole-0" not in text


def test_a_slice_that_changes_is_searched_again():
    cluster = _cluster()
    dra, store = _dra(cluster), cluster.sim.store
    by_name = {n["metadata"]["name"]: n for n in _nodes(cluster)}
    claims = [_claim("c", [{"name": "g", "exactly": _exactly("gpu.nvidia.com", 8, None)}])]
    table = TwinTable()
    assert dra.allocate(by_name["whole-0"], claims, table).status == "allocated"
    # whole-1 loses a GPU: its slice is replaced (a new resourceVersion), so it has no twin now
    s = next(s for s in store.list("ResourceSlice") if s["spec"]["nodeName"] == "whole-1"
             and s["spec"]["driver"] == "gpu.nvidia.com")
    new = copy.deepcopy(s)
    new["spec"]["devices"] = new["spec"]["devices"][:7]
    store.update(new)
    got = dra.allocate(by_name["whole-1"], claims, table)
    assert got.status == "unsatisfiable"
    assert dra.allocate(by_name["whole-2"], claims, table).status == "allocated"


@pytest.mark.parametrize("policy", ["whole-gpu", "dynamic-mig", "topology"])
def test_binds_are_identical_with_and_without_twins(policy, monkeypatch):
    trace = generate(150, seed=3, rate_per_min=120.0)
    fleet = {"name": "twins-bind", "kubernetesVersion": "1.37", "nodes": [
        {"namePrefix": "a-", "count": 6, "nodeProfile": "dgx-a100"},
        {"namePrefix": "m-", "count": 4, "nodeProfile": "mixed-a100-t4"}]}
    runs = {}
    for on in (False, True):
        init = DraState.__init__

        def patched(self, *a, on=on, init=init, **kw):
            init(self, *a, **kw)
            self.twins = on

        monkeypatch.setattr(DraState, "__init__", patched)
        run = run_policy(trace, fleet, policy, keep_cluster=True)
        monkeypatch.setattr(DraState, "__init__", init)
        sched = run.cluster.sim.scheduler
        hits = sum(s.twins.hits for s in sched._claim_shapes.values())
        runs[on] = ([(r.name, r.node, r.start, r.end, r.devices) for r in run.records], hits)
    assert runs[True][0] == runs[False][0]
    assert runs[False][1] == 0 and runs[True][1] > 0


def test_claims_of_an_unexpected_shape_have_no_twin():
    classes = {"gpu.nvidia.com": {"spec": {"selectors": [{"cel": {"expression": "device.driver == 'x'"}}]}}}
    odd = [_claim("c", ["not a request"]), _claim("d", [{"name": "g", "exactly": "gpu"}]),
           _claim("e", [{"name": "g", "exactly": {"deviceClassName": "gpu.nvidia.com", "selectors": ["x"]}}]),
           _claim("f", [{"name": "g", "exactly": _exactly("gpu.nvidia.com", 1, None)}], [{"matchAttribute": 3}])]
    for claim in odd:
        assert claims_refs([claim], classes) is None
    good = _claim("g", [{"name": "g", "exactly": _exactly(
        "gpu.nvidia.com", 1, "device.attributes['gpu.nvidia.com'].uuid == 'u'")}],
        [{"matchAttribute": "resource.kubernetes.io/pcieRoot"}])
    assert claims_refs([good], classes) == (("gpu.nvidia.com", "uuid"), ("resource.kubernetes.io", "pcieRoot"))
