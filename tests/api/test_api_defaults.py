"""labkit.api.with_defaults: API-server defaulting on a copy."""

from __future__ import annotations

from labkit.api import load, with_defaults
from tests.api.test_api_helpers import V1, claim, exact, first


def test_exact_request_defaults() -> None:
    c = claim([exact(tolerations=[{"key": "k"}])])
    out = with_defaults(c)
    body = out["spec"]["devices"]["requests"][0]["exactly"]
    assert body["allocationMode"] == "ExactCount" and body["count"] == 1
    assert body["tolerations"][0]["operator"] == "Equal"
    assert "allocationMode" not in c["spec"]["devices"]["requests"][0]["exactly"]  # input untouched


def test_count_zero_becomes_one_but_all_keeps_no_count() -> None:
    out = with_defaults(claim([exact(count=0), exact("b", allocationMode="All"), exact("c", count=3)]))
    reqs = [r["exactly"] for r in out["spec"]["devices"]["requests"]]
    assert reqs[0]["count"] == 1
    assert reqs[1] == {"deviceClassName": "gpu.nvidia.com", "allocationMode": "All"}
    assert reqs[2]["count"] == 3


def test_first_available_subrequests_defaulted() -> None:
    out = with_defaults(claim([first()]))
    subs = out["spec"]["devices"]["requests"][0]["firstAvailable"]
    assert [(s["allocationMode"], s["count"]) for s in subs] == [("ExactCount", 1), ("ExactCount", 2)]


def test_template_spec_spec_defaulted() -> None:
    tmpl = {"apiVersion": V1, "kind": "ResourceClaimTemplate", "metadata": {"name": "t"},
            "spec": {"spec": claim()["spec"]}}
    out = with_defaults(tmpl)
    assert out["spec"]["spec"]["devices"]["requests"][0]["exactly"]["count"] == 1


def test_only_v1_objects_and_garbage_tolerated() -> None:
    beta = claim()
    beta["apiVersion"] = "resource.k8s.io/v1beta1"
    assert with_defaults(beta) == beta
    pod = load("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n")[0]
    assert with_defaults(pod) == pod
    weird = {"apiVersion": V1, "kind": "ResourceClaim", "spec": {"devices": {"requests": ["x", {"exactly": 5}]}}}
    assert with_defaults(weird) == weird


def test_capacity_and_counters_without_value_are_stored_as_zero() -> None:
    # what a 1.37 kube-apiserver stored for them (dry run)
    dev = {"name": "d0", "capacity": {"mem": {}, "cores": {"value": "8"}},
           "consumesCounters": [{"counterSet": "cs", "counters": {"c": {}}}]}
    got = with_defaults({"apiVersion": V1, "kind": "ResourceSlice", "metadata": {"name": "s"},
                         "spec": {"driver": "d", "devices": [dev]}})
    device = got["spec"]["devices"][0]
    assert device["capacity"] == {"mem": {"value": "0"}, "cores": {"value": "8"}}
    assert device["consumesCounters"][0]["counters"] == {"c": {"value": "0"}}
    shared = with_defaults({"apiVersion": V1, "kind": "ResourceSlice", "metadata": {"name": "s"},
                            "spec": {"driver": "d", "sharedCounters": [{"name": "cs", "counters": {"c": {"value": None}}}]}})
    assert shared["spec"]["sharedCounters"][0]["counters"] == {"c": {"value": "0"}}
    pool = with_defaults({"apiVersion": V1, "kind": "ResourceSlice", "metadata": {"name": "s"},
                          "spec": {"driver": "d", "pool": {"name": "p", "resourceSliceCount": 1}}})
    assert pool["spec"]["pool"]["generation"] == 0
