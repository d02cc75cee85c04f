"""Property: whatever pods come and go, the scheduler's in-use device state equals what the stored
claims say, no device is held by two claims, and every reserved pod is bound where its devices are."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from labkit.allocator.state import AllocatedState
from labkit.cluster import connect
from tests import builders as b

TEMPLATES = [b.claim_template("one", requests=[b.request("g")]),
             b.claim_template("three", requests=[b.request("g", count=3)]),
             b.claim("shared", requests=[b.request("g")])]

ops = st.lists(st.tuples(st.sampled_from(["add-one", "add-three", "add-shared", "add-legacy", "delete"]),
                         st.integers(0, 30)), min_size=1, max_size=25)


def _pod(name, kind):
    if kind == "add-legacy":
        return b.pod(name, containers=[{"name": "m", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "2"}}}])
    if kind == "add-shared":
        return b.pod(name, claims={"g": "shared"}, container="m", image="x", command=None)
    return b.pod(name, templates={"g": kind.split("-")[1]}, container="m", image="x", command=None)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops)
def test_allocated_state_matches_claims(sequence):
    c = connect("sim", "tiny", progress=False)
    c.apply(TEMPLATES)
    for i, (op, n) in enumerate(sequence):
        if op == "delete":
            pods = c.list("Pod")
            if pods:
                c.delete("Pod", pods[n % len(pods)]["metadata"]["name"])
        else:
            c.apply(_pod(f"p{i}", op))
        c.wait()
    claims = c.list("ResourceClaim")
    expected = AllocatedState.from_claims(claims)
    got = c.sim.dra.allocated
    assert {k: v for k, v in got.devices.items() if v} == {k: v for k, v in expected.devices.items() if v}
    assert all(v == 1 for v in expected.devices.values())  # no device twice
    pods = {p["metadata"]["uid"]: p for p in c.list("Pod")}
    for claim in claims:
        st_ = claim.get("status") or {}
        if st_.get("reservedFor"):
            assert st_.get("allocation")
        for ref in st_.get("reservedFor") or []:
            pod = pods[ref["uid"]]
            assert pod["spec"]["nodeName"] == "node-0"
    # everything bound has all its claims allocated and reserved for it
    for pod in pods.values():
        if pod["spec"].get("nodeName"):
            assert pod["status"]["phase"] == "Running"
    for p in list(pods.values()):
        c.delete("Pod", p["metadata"]["name"])
    c.wait()
    assert not any(c.sim.dra.allocated.devices.values())
    assert not c.sim.dra.allocated.owners
    assert all("allocation" not in (cl.get("status") or {}) for cl in c.list("ResourceClaim"))
