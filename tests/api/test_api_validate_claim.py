"""labkit.api.validate: ResourceClaim / ResourceClaimTemplate / DeviceClass rules."""

from __future__ import annotations

import pytest

from labkit.api import load
from labkit.cel.validation import validate
from tests.api.test_api_helpers import V1, claim, exact, first, messages, one
from tests.paths import TEST_DATA

DATA = TEST_DATA / "api"


@pytest.mark.parametrize("name", ["nvidia-claims.yaml", "kubectl-claims-list.yaml", "slices.yaml",
                                  "kubectl-pod-node.yaml"])
def test_realistic_manifests_are_valid(name: str) -> None:
    assert messages(load(DATA / name)) == []


def test_minimal_claim_valid() -> None:
    assert messages(claim()) == []


def test_request_needs_exactly_or_first_available() -> None:
    assert one(claim([{"name": "gpu"}])) == (
        "ResourceClaim/c: spec.devices.requests[0]: Required value: "
        "exactly one of `exactly` or `firstAvailable` is required")
    both = {"name": "gpu", "exactly": {"deviceClassName": "x"}, "firstAvailable": first()["firstAvailable"]}
    assert "exactly one of `exactly` or `firstAvailable` is required, but multiple fields are set" in one(claim([both]))


def test_request_name_dns_label_and_unique() -> None:
    assert 'requests[0].name: Invalid value: "GPU"' in one(claim([exact("GPU")]))
    assert one(claim([exact(), exact()])).endswith('spec.devices.requests[1].name: Duplicate value: "gpu"')
    assert one(claim([{"exactly": {"deviceClassName": "x"}}])).endswith("requests[0].name: Required value")


def test_device_class_name_required_and_subdomain() -> None:
    assert "exactly.deviceClassName: Required value" in one(claim([{"name": "g", "exactly": {}}]))
    assert "deviceClassName: Invalid value: \"Gpu_Class\"" in one(claim([exact(deviceClassName="Gpu_Class")]))


def test_count_rules() -> None:
    assert one(claim([exact(count=-1)])).endswith("exactly.count: Invalid value: -1: must be greater than zero")
    assert one(claim([exact(allocationMode="All", count=2)])).endswith(
        "exactly.count: Invalid value: 2: must not be specified when allocationMode is 'All'")
    assert messages(claim([exact(count=0)])) == []  # defaulted to 1 by the API server
    assert messages(claim([exact(allocationMode="All")])) == []
    assert one(claim([exact(allocationMode="Some")])).endswith(
        'exactly.allocationMode: Unsupported value: "Some": supported values: "All", "ExactCount"')


def test_first_available_rules() -> None:
    assert messages(claim([first()])) == []
    subs = [{"name": f"s{i}", "deviceClassName": "x"} for i in range(9)]
    assert one(claim([first(subs=subs)])).endswith("firstAvailable: Too many: 9: must have at most 8 items")
    dup = [{"name": "a", "deviceClassName": "x"}, {"name": "a", "deviceClassName": "x"}]
    assert one(claim([first(subs=dup)])).endswith('firstAvailable[1].name: Duplicate value: "a"')
    assert "firstAvailable[0].count: Invalid value: -2" in one(
        claim([first(subs=[{"name": "a", "deviceClassName": "x", "count": -2}])]))


def test_limits_on_requests_selectors_constraints_config() -> None:
    many = [exact(f"r{i}") for i in range(33)]
    assert one(claim(many)).endswith("spec.devices.requests: Too many: 33: must have at most 32 items")
    sels = [{"cel": {"expression": "true"}}] * 33
    assert one(claim([exact(selectors=sels)])).endswith("selectors: Too many: 33: must have at most 32 items")
    cons = [{"matchAttribute": "gpu.nvidia.com/uuid"}] * 33
    assert one(claim(constraints=cons)).endswith("constraints: Too many: 33: must have at most 32 items")
    cfg = [{"opaque": {"driver": "gpu.nvidia.com", "parameters": {"a": 1}}}] * 33
    assert one(claim(config=cfg)).endswith("config: Too many: 33: must have at most 32 items")
    # the API types say at most 16 tolerations, but no API server 1.34-1.37 checks it: a 1.37
    # kube-apiserver stored a claim with 17 (dry run), so they are valid here too
    tols = [{"key": f"k{i}", "operator": "Exists"} for i in range(17)]
    for version in ("1.36", "1.37"):
        assert messages(claim([exact(tolerations=tols)]), kubernetes_version=version) == []


def test_cel_length_limit() -> None:
    long_expr = "true && " * 1300 + "true"
    assert one(claim([exact(selectors=[{"cel": {"expression": long_expr}}])])).endswith(
        "selectors[0].cel.expression: Too long: may not be more than 10240 bytes")
    assert "selectors[0].cel: Required value" in one(claim([exact(selectors=[{}])]))


def test_cel_estimated_cost_limit() -> None:
    """A new selector whose estimated worst-case cost is above 1,000,000 is refused."""
    nested = "lists.range({0}).all(x, lists.range({0}).all(y, true))"
    too_complex = [{"cel": {"expression": nested.format(1000)}}]  # Kubernetes estimates 4,016,012
    assert one(claim([exact(selectors=too_complex)])) == (
        "ResourceClaim/c: spec.devices.requests[0].exactly.selectors[0].cel.expression: "
        "Forbidden: too complex, exceeds cost limit")
    assert messages(claim([exact(selectors=[{"cel": {"expression": nested.format(100)}}])])) == []  # 41,612
    cls = {"apiVersion": V1, "kind": "DeviceClass", "metadata": {"name": "gpu.example.com"},
           "spec": {"selectors": [{"cel": {"expression": "true"}}] + too_complex}}
    assert one(cls) == ("DeviceClass/gpu.example.com: spec.selectors[1].cel.expression: "
                        "Forbidden: too complex, exceeds cost limit")
    sub = {"name": "s", "deviceClassName": "x", "selectors": too_complex}
    assert one(claim([first(subs=[sub])])).endswith(
        "firstAvailable[0].selectors[0].cel.expression: Forbidden: too complex, exceeds cost limit")


def test_constraint_references() -> None:
    reqs = [first("gpu"), exact("nic", deviceClassName="nic.example.com")]
    ok = claim(reqs, constraints=[{"requests": ["gpu/big", "nic"], "matchAttribute":
                                   "resource.kubernetes.io/pcieRoot"}])
    assert messages(ok) == []
    msg = ("must be the name of a request in the claim or the name of a request and a subrequest "
           "separated by '/'")
    bad = claim(reqs, constraints=[{"requests": ["gpu/huge"], "matchAttribute": "a.b/c"}])
    assert msg in one(bad) and "constraints[0].requests[0]" in one(bad)
    bad = claim(reqs, constraints=[{"requests": ["a/b/c"], "matchAttribute": "a.b/c"}])
    assert one(bad).endswith(f'requests[0]: Invalid value: "a/b/c": {msg}')
    bad = claim(reqs, config=[{"requests": ["gone"], "opaque": {"driver": "d.io", "parameters": {}}}])
    assert msg in one(bad) and "config[0].requests[0]" in one(bad)
    dup = claim(reqs, constraints=[{"requests": ["nic", "nic"], "matchAttribute": "a.b/c"}])
    assert one(dup).endswith('requests[1]: Duplicate value: "nic"')


def test_constraint_attribute_names() -> None:
    assert one(claim(constraints=[{"matchAttribute": "parentUUID"}])).endswith(
        'matchAttribute: Invalid value: "parentUUID": a fully qualified name must be a domain and a name '
        "separated by a slash")
    # two slashes: stored by the API server (its rule checks one and two parts only)
    assert messages(claim(constraints=[{"matchAttribute": "a.b/c/d"}])) == []
    # an uppercase domain: 1.37's declarative validation refuses it (a 1.37 kube-apiserver said
    # `prefix: a lowercase RFC 1123 subdomain ...`); up to 1.36 the domain is checked lowercased
    upper = claim(constraints=[{"matchAttribute": "GPU.example.com/model"}])
    assert 'matchAttribute: Invalid value: "GPU.example.com/model": prefix: a lowercase RFC 1123 subdomain' \
        in one(upper, kubernetes_version="1.37")
    assert messages(upper, kubernetes_version="1.36") == []
    assert "prefix: a lowercase" in one(claim(constraints=[{"distinctAttribute": "Gpu.nvidia.com/uuid"}]),
                                        kubernetes_version="1.37")
    assert "exactly one of `matchAttribute` or `distinctAttribute` is required" in one(claim(constraints=[{}]))
    assert messages(claim(constraints=[{"distinctAttribute": "gpu.nvidia.com/uuid"}])) == []
    # both set: stored by every API server 1.34-1.37 (its rule reads matchAttribute only); from 1.37
    # distinctAttribute's format is checked all the same
    both = [{"matchAttribute": "a.b/c", "distinctAttribute": "a.b/d"}]
    assert messages(claim(constraints=both)) == []
    bad_distinct = [{"matchAttribute": "a.b/c", "distinctAttribute": "A.b/d"}]
    assert "distinctAttribute" in one(claim(constraints=bad_distinct), kubernetes_version="1.37")
    assert messages(claim(constraints=bad_distinct), kubernetes_version="1.36",
                    feature_gates={"DRAConsumableCapacity": True}) == []


def test_config_opaque() -> None:
    assert "config[0].opaque: Required value" in one(claim(config=[{}]))
    big = {"blob": "x" * 11000}
    assert one(claim(config=[{"opaque": {"driver": "gpu.nvidia.com", "parameters": big}}])).endswith(
        "config[0].opaque.parameters: Too long: may not be more than 10240 bytes")
    assert "opaque.parameters: Required value" in one(claim(config=[{"opaque": {"driver": "gpu.nvidia.com"}}]))
    assert "opaque.driver" in one(claim(config=[{"opaque": {"driver": "bad_driver", "parameters": {}}}]))


def test_tolerations() -> None:
    ok = [{"key": "gpu.nvidia.com/xid", "operator": "Exists", "effect": "NoExecute"},
          {"key": "k", "value": "v"}]
    assert messages(claim([exact(tolerations=ok)])) == []
    assert "must be empty for operator `Exists`" in one(
        claim([exact(tolerations=[{"key": "k", "operator": "Exists", "value": "v"}])]))
    assert 'operator: Unsupported value: "In"' in one(claim([exact(tolerations=[{"key": "k", "operator": "In"}])]))
    assert 'effect: Unsupported value: "NoRun"' in one(claim([exact(tolerations=[{"key": "k", "effect": "NoRun"}])]))


def test_capacity_requests_quantities_and_gate() -> None:
    ok = claim([exact(capacity={"requests": {"memory": "10Gi"}})])
    assert messages(ok) == []
    assert "capacity.requests[memory]: Invalid value: \"ten\"" in one(
        claim([exact(capacity={"requests": {"memory": "ten"}})]))
    gated = one(ok, kubernetes_version="1.35")
    assert "exactly.capacity: Forbidden: needs feature gate DRAConsumableCapacity" in gated
    assert messages(ok, kubernetes_version="1.35", feature_gates={"DRAConsumableCapacity": True}) == []
    assert one(ok, feature_gates={"DRAConsumableCapacity": False}).endswith(
        "needs feature gate DRAConsumableCapacity (beta, on by default in Kubernetes 1.37 but turned off by "
        "--feature-gates); drop DRAConsumableCapacity=false")
    assert "(alpha, off in Kubernetes 1.35; on by default from Kubernetes 1.36)" in gated


def test_prioritized_list_gate() -> None:
    assert messages(claim([first()]), kubernetes_version="1.34") == []
    assert "DRAPrioritizedList" in one(claim([first()]), kubernetes_version="1.35",
                                       feature_gates={"DRAPrioritizedList": False})


def test_template_uses_spec_spec_paths() -> None:
    tmpl = {"apiVersion": V1, "kind": "ResourceClaimTemplate", "metadata": {"name": "t", "namespace": "d"},
            "spec": {"metadata": {"labels": {"a": "b"}}, "spec": claim([exact(count=-1)])["spec"]}}
    assert one(tmpl).startswith("ResourceClaimTemplate/t: spec.spec.devices.requests[0].exactly.count")


def test_admin_access_needs_namespace_label() -> None:
    c = claim([exact(adminAccess=True, allocationMode="All")], namespace="monitoring")
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "monitoring"}}
    assert messages([c]) == []  # namespace unknown: cannot tell
    msg = one([ns, c])
    assert "admin access to devices requires the `resource.kubernetes.io/admin-access: true` label" in msg
    ns["metadata"]["labels"] = {"resource.kubernetes.io/admin-access": "true"}
    assert messages([ns, c]) == []


def test_claim_status() -> None:
    c = load(DATA / "kubectl-claims-list.yaml")[0]
    c["status"]["allocation"]["devices"]["results"][0]["request"] = "nope"
    assert 'status.allocation.devices.results[0].request: Invalid value: "nope": must be the name' in one(c)
    c = load(DATA / "kubectl-claims-list.yaml")[0]
    del c["status"]["allocation"]
    assert one(c).endswith("status.reservedFor: Forbidden: may not be specified when `allocated` is not set")


def test_device_class_rules() -> None:
    cls = {"apiVersion": V1, "kind": "DeviceClass", "metadata": {"name": "gpu.example.com"},
           "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.example.com'"}}],
                    "extendedResourceName": "example.com/gpu",
                    "config": [{"opaque": {"driver": "gpu.example.com", "parameters": {"a": 1}}}]}}
    assert messages(cls) == []
    cls["spec"]["extendedResourceName"] = "cpu"
    assert "must be a valid extended resource name" in one(cls)
    assert "DRAExtendedResource" in one(cls, kubernetes_version="1.35")
    cls["spec"] = {"config": [{}] * 33}
    assert one(cls).endswith("spec.config: Too many: 33: must have at most 32 items")


def test_problem_str_and_fields() -> None:
    (p,) = validate(claim([exact(count=-1)]))
    assert (p.kind, p.name, p.path) == ("ResourceClaim", "c", "spec.devices.requests[0].exactly.count")
    assert str(p) == f"{p.kind}/{p.name}: {p.path}: {p.message}"


def test_claim_device_status() -> None:
    c = load(DATA / "kubectl-claims-list.yaml")[0]
    c["status"]["devices"] = [{"driver": "gpu.nvidia.com", "pool": "worker-1", "device": "gpu-0",
                               "data": {"health": "ok"}, "networkData": {"interfaceName": "eth1"}}]
    assert messages(c) == []
    c["status"]["devices"][0]["device"] = "gpu-9"
    assert one(c).endswith('status.devices[0]: Invalid value: "gpu.nvidia.com/worker-1/gpu-9": must be an '
                           "allocated device in the claim")
    c["status"]["devices"][0].update(device="gpu-0", conditions=[{}] * 9)
    found = messages(c)
    assert any(m.endswith("status.devices[0].conditions: Too many: 9: must have at most 8 items") for m in found)


def test_derived_attributes_need_gate_and_a_constraint() -> None:
    attrs = [{"name": "example.com/numa", "expression": "device.attributes['gpu.nvidia.com'].index"}]
    used = claim([exact(derivedAttributes=attrs)], constraints=[{"matchAttribute": "example.com/numa"}])
    assert "does not exist in Kubernetes 1.36" in one(used, kubernetes_version="1.36")
    assert "needs feature gate DRADerivedAttributes (alpha, off in Kubernetes 1.37)" in one(used)
    # gate off: the API server drops the field, so what is inside is not asked for (a 1.37 kube-apiserver
    # stored `derivedAttributes: [{}]`); only the gate is said
    empty = claim([exact(derivedAttributes=[{}])])
    assert "needs feature gate DRADerivedAttributes" in one(empty)
    on = {"DRADerivedAttributes": True}
    assert messages(used, feature_gates=on) == []
    unused = claim([exact(derivedAttributes=attrs)])
    assert one(unused, feature_gates=on).endswith(
        "derivedAttributes[0].name: Invalid value: \"example.com/numa\": must be referenced by at least one "
        "matchAttribute or distinctAttribute constraint targeting this request")
    sub = claim([first(subs=[{"name": "a", "deviceClassName": "x", "derivedAttributes": attrs}])],
                constraints=[{"requests": ["gpu"], "distinctAttribute": "example.com/numa"}])
    assert messages(sub, feature_gates=on) == []


def test_allocation_result_share_id_and_gates() -> None:
    c = load(DATA / "kubectl-claims-list.yaml")[0]
    result = c["status"]["allocation"]["devices"]["results"][0]
    result.update(shareID="1b4e28ba-2fa1-11d2-883f-0016d3cca427", consumedCapacity={"memory": "10Gi"})
    assert messages(c) == []
    assert "DRAConsumableCapacity" in one(c, kubernetes_version="1.35")
    result["shareID"] = "1B4E28BA-2FA1-11D2-883F-0016D3CCA427"
    assert "shareID: Invalid value" in one(c) and "lowercase RFC 4122 UUID" in one(c)


def test_template_metadata_only_labels_and_annotations() -> None:
    tmpl = {"apiVersion": V1, "kind": "ResourceClaimTemplate", "metadata": {"name": "t", "namespace": "d"},
            "spec": {"metadata": {"labels": {"team": "a"}, "annotations": {"x.io/y": "z"}},
                     "spec": claim()["spec"]}}
    assert messages(tmpl) == []
    tmpl["spec"]["metadata"]["name"] = "fixed"
    assert one(tmpl).endswith("spec.metadata.name: Forbidden: cannot be set; only labels and annotations are "
                              "copied to the generated claims")
    tmpl["spec"]["metadata"] = {"labels": {"bad key": "v"}}
    assert "spec.metadata.labels" in one(tmpl)
