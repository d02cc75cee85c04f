"""Property: whatever pods come and go, the scheduler's in-use device state equals what the stored
claims say, no device is held by two claims, and every reserved pod is bound where its devices are."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from labkit.allocator.state import AllocatedState
from labkit.cluster import connect

TEMPLATES = """
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: one}
spec: {spec: {devices: {requests: [{name: g, exactly: {deviceClassName: gpu.nvidia.com}}]}}}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: three}
spec: {spec: {devices: {requests: [{name: g, exactly: {deviceClassName: gpu.nvidia.com, count: 3}}]}}}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: shared}
spec: {devices: {requests: [{name: g, exactly: {deviceClassName: gpu.nvidia.com}}]}}
"""

ops = st.lists(st.tuples(st.sampled_from(["add-one", "add-three", "add-shared", "add-legacy", "delete"]),
                         st.integers(0, 30)), min_size=1, max_size=25)


def _pod(name, kind):
    spec = {"containers": [{"name": "m", "image": "x"}]}
    if kind == "add-legacy":
        spec["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": "2"}}
    elif kind == "add-shared":
        spec["resourceClaims"] = [{"name": "g", "resourceClaimName": "shared"}]
    else:
        spec["resourceClaims"] = [{"name": "g", "resourceClaimTemplateName": kind.split("-")[1]}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


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
