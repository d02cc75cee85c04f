"""labkit.api.validate: metadata, structure (unknown fields/types), old APIs, Pods, CEL, options."""

from __future__ import annotations

import pytest

from labkit.api.context import CelChecks
from labkit.api.features import FeatureGateError
from labkit.api.validate import check_objects
from labkit.cel import compile_new_selector
from labkit.cel.validation import CEL_CHECKS, validate
from tests.api.test_api_helpers import V1, claim, exact, messages, one, slice_


def test_metadata_name_rules_per_kind() -> None:
    assert "metadata.name: Invalid value: \"Bad_Name\"" in one(claim(name="Bad_Name"))
    assert messages(claim(name="a.b.c")) == []  # claims use DNS subdomain names
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a.b"}}
    assert "must be a DNS label" in one(ns)  # namespaces use DNS labels
    c = claim()
    c["metadata"] = {"generateName": "pod-gpu-", "namespace": "default"}
    assert messages(c) == []
    c["metadata"] = {"namespace": "default"}
    assert "metadata.name: Required value" in one(c)
    assert "metadata: Required value" in one({"apiVersion": V1, "kind": "DeviceClass"})


def test_namespace_on_cluster_scoped_kind() -> None:
    cls = {"apiVersion": V1, "kind": "DeviceClass", "metadata": {"name": "x", "namespace": "default"}}
    assert one(cls).endswith("metadata.namespace: Forbidden: not allowed on this type (DeviceClass is "
                             "cluster-scoped); remove metadata.namespace")
    c = claim(namespace="Team_A")
    assert "metadata.namespace" in one(c)


def test_labels_and_annotations() -> None:
    c = claim()
    c["metadata"]["labels"] = {"app.kubernetes.io/name": "x", "bad key": "v", "ok": "-bad-"}
    found = messages(c)
    assert len(found) == 2 and "metadata.labels" in found[0] and "metadata.labels[ok]" in found[1]


def test_unknown_field_with_suggestion() -> None:
    c = claim([exact(cuont=2)])
    assert one(c) == ('ResourceClaim/c: spec.devices.requests[0].exactly.cuont: unknown field "cuont" '
                      '(did you mean "count"?)')
    assert '(did you mean "allocationMode"?)' in one(claim([exact(allocationmode="All")]))
    assert '(did you mean "deviceClassName"?)' in one(claim([{"name": "g", "exactly": {
        "device_class_name": "x", "deviceClassName": "x"}}]))
    assert 'unknown field "zzz"' in one(claim([exact(zzz=1)])) and "did you mean" not in one(claim([exact(zzz=1)]))
    s = slice_([{"name": "d", "attributes": {"m": {"strng": "x"}}}])
    assert 'attributes[m].strng: unknown field "strng" (did you mean "string"?)' in messages(s)[0]


def test_type_errors() -> None:
    assert one(claim([exact(count="two")])).endswith('exactly.count: must be an integer, not "two"')
    s = slice_([{"name": "d", "attributes": {"i": {"int": "5"}}}])
    assert one(s).endswith('attributes[i].int: must be an integer, not "5"')
    s = slice_([{"name": "d", "capacity": {"cores": {"value": 108}}}])
    assert messages(s) == []  # numbers are fine where quantities go


def test_old_apis_name_the_modern_equivalent() -> None:
    rc = {"apiVersion": "resource.k8s.io/v1alpha2", "kind": "ResourceClass", "metadata": {"name": "gpu"},
          "driverName": "gpu.example.com"}
    assert one(rc) == ("ResourceClass/gpu: kind: ResourceClass was removed in Kubernetes 1.31 (classic DRA); "
                       "use a DeviceClass (resource.k8s.io/v1) with CEL selectors")
    old = claim()
    old["apiVersion"] = "resource.k8s.io/v1alpha2"
    assert "classic DRA, removed by Kubernetes 1.31" in one(old)
    c = claim()
    c["spec"] = {"resourceClassName": "gpu", "parametersRef": {"kind": "ConfigMap", "name": "x"}}
    found = messages(c)
    assert any("resourceClassName was removed" in m for m in found)
    assert any("parametersRef was removed" in m for m in found)
    assert not any("unknown field" in m for m in found)
    flat = claim([{"name": "gpu", "deviceClassName": "gpu.nvidia.com", "count": 1}])
    assert one(flat).endswith("spec.devices.requests[0]: v1beta1 request fields: move deviceClassName/selectors/"
                              "count/allocationMode under `exactly:` (found deviceClassName, count)")
    beta = claim()
    beta["apiVersion"] = "resource.k8s.io/v1beta1"
    assert one(beta).endswith("change apiVersion to resource.k8s.io/v1 (move each request's deviceClassName, "
                              "selectors, allocationMode, count and adminAccess under `exactly:` "
                              "(spec.devices.requests[].exactly))")
    # every old version names each structural change of its kind, not just the apiVersion
    alpha = claim()
    alpha["apiVersion"] = "resource.k8s.io/v1alpha3"
    assert "under `exactly:`" in one(alpha) and "drop spec.controller if set" in one(alpha)
    alpha_slice = slice_([{"name": "d", "basic": {"capacity": {"memory": "80Gi"}}}])
    alpha_slice["apiVersion"] = "resource.k8s.io/v1alpha3"
    assert "remove each device's `basic:` wrapper" in one(alpha_slice)
    assert "write each capacity as {value: QUANTITY}" in one(alpha_slice)
    beta_slice = slice_([{"name": "d", "basic": {}}])
    beta_slice["apiVersion"] = "resource.k8s.io/v1beta1"
    assert "basic:" in one(beta_slice) and "{value:" not in one(beta_slice)
    beta2 = claim()
    beta2["apiVersion"] = "resource.k8s.io/v1beta2"
    assert one(beta2).endswith("(the fields are the same)")
    basic = slice_([{"name": "d", "basic": {"attributes": {}}}])
    assert "v1beta1 `basic:` wrapper" in one(basic)


def test_missing_apiversion_kind_and_unknown_kinds() -> None:
    assert "kind: Required value" in one({"apiVersion": "v1", "metadata": {"name": "x"}})
    assert "apiVersion: Required value" in messages({"kind": "Pod", "metadata": {"name": "x"}})[0]
    assert messages({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "data": {}}) == []
    assert "DeviceClass is resource.k8s.io/v1" in one({"apiVersion": "v1", "kind": "DeviceClass",
                                                       "metadata": {"name": "x"}})
    assert "expected a Kubernetes object" in str(validate(["nope"])[0])  # type: ignore[list-item]


def _pod(claims: list, container_claims: list) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
            "spec": {"containers": [{"name": "c", "image": "busybox",
                                     "resources": {"limits": {"nvidia.com/gpu": 1}, "claims": container_claims}}],
                     "resourceClaims": claims}}


def test_pod_claims() -> None:
    assert messages(_pod([{"name": "gpu", "resourceClaimTemplateName": "t"}], [{"name": "gpu"}])) == []
    both = _pod([{"name": "gpu", "resourceClaimTemplateName": "t", "resourceClaimName": "c"}], [{"name": "gpu"}])
    assert one(both).endswith("at most one of `resourceClaimName` or `resourceClaimTemplateName` may be specified")
    none = _pod([{"name": "gpu"}], [{"name": "gpu"}])
    assert "spec.resourceClaims[0]: Invalid value: {}: must specify one of: `resourceClaimName`, " \
        "`resourceClaimTemplateName`" in one(none)
    missing = _pod([{"name": "gpu", "resourceClaimName": "c"}], [{"name": "gpus"}])
    assert one(missing).endswith('spec.containers[0].resources.claims[0]: Not found: "gpus": must be one of the '
                                 "names in pod.spec.resourceClaims: gpu")
    assert one(_pod([], [{"name": "gpu"}])).endswith("must be one of the names in pod.spec.resourceClaims which is empty")
    dup = _pod([{"name": "gpu", "resourceClaimName": "c"}, {"name": "gpu", "resourceClaimName": "d"}], [])
    assert 'Duplicate value: "gpu"' in one(dup)


def test_container_claim_references_repeat_as_the_api_server_counts() -> None:
    # a claim referenced whole covers all its requests (a 1.37 kube-apiserver refused each of these)
    pod_claims = [{"name": "pairs", "resourceClaimName": "c"}]
    for refs in ([{"name": "pairs", "request": "a"}, {"name": "pairs"}],
                 [{"name": "pairs"}, {"name": "pairs", "request": "a"}],
                 [{"name": "pairs"}, {"name": "pairs"}]):
        assert one(_pod(pod_claims, refs)).endswith('resources.claims[1]: Duplicate value: "pairs"'), refs
    same = [{"name": "pairs", "request": "a"}, {"name": "pairs", "request": "a"}]
    assert one(_pod(pod_claims, same)).endswith('resources.claims[1]: Duplicate value: "pairs/a"')
    two_requests = [{"name": "pairs", "request": "a"}, {"name": "pairs", "request": "b"}]
    assert messages(_pod(pod_claims, two_requests)) == []


def test_deployment_template_pod_claims_checked_and_rest_passed_through() -> None:
    dep = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": "default"},
           "spec": {"whatever": 1, "template": {"spec": {"containers": [
               {"name": "c", "image": "busybox", "resources": {"claims": [{"name": "gpu"}]}}]}}}}
    assert "spec.template.spec.containers[0].resources.claims[0]: Not found" in one(dep)
    pg = {"apiVersion": "scheduling.k8s.io/v1alpha3", "kind": "PodGroup", "metadata": {"name": "g", "namespace": "x"},
          "spec": {"anything": True}}
    assert messages(pg) == []


def test_options_errors() -> None:
    with pytest.raises(FeatureGateError, match="not supported"):
        validate([], kubernetes_version="1.30")
    with pytest.raises(FeatureGateError, match="does not exist"):
        validate([], feature_gates={"NoSuchGate": True})
    assert validate([], kubernetes_version="v1.36.4") == []


def api_messages(objs: object, cel: CelChecks | None) -> list[str]:
    """labkit.api.validate.check_objects itself, given ``cel`` (what callers above labkit.cel hand in)."""
    return [str(p) for p in check_objects(objs, cel=cel)]  # type: ignore[arg-type]


def test_cel_compile_errors_reported_with_labkit_cel_checks() -> None:
    bad = claim([exact(selectors=[{"cel": {"expression": "device.attributes["}}])])
    msg = one(bad)
    assert "selectors[0].cel.expression: Invalid value: \"device.attributes[\"" in msg
    assert "compilation failed" in msg
    assert api_messages(bad, CEL_CHECKS) == [msg]
    good = claim([exact(selectors=[{"cel": {"expression":
                                            "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0"}}])])
    assert messages(good) == []


def test_api_validate_without_cel_checks_checks_length_only() -> None:
    assert api_messages(claim([exact(selectors=[{"cel": {"expression": "device.attributes["}}])]), None) == []
    (long,) = api_messages(claim([exact(selectors=[{"cel": {"expression": "a" * (10 * 1024 + 1)}}])]), None)
    assert long.endswith("selectors[0].cel.expression: Too long: may not be more than 10240 bytes")


def test_cel_compiler_bugs_do_not_become_problems() -> None:
    def broken(*_a: object, **_k: object) -> None:
        raise RuntimeError("bug")
    assert api_messages(claim([exact(selectors=[{"cel": {"expression": "true"}}])]), CelChecks(broken)) == []


def test_cel_cost_estimate_against_the_limit() -> None:
    for cost, problems in ((1_000_000, 0), (1_000_001, 1)):
        checks = CelChecks(lambda *_a, **_k: None, lambda *_a, c=cost, **_k: c)
        found = api_messages(claim([exact(selectors=[{"cel": {"expression": "true"}}])]), checks)
        assert len(found) == problems
    assert found[0].endswith("selectors[0].cel.expression: Forbidden: too complex, exceeds cost limit")
    nested = "lists.range(1000).all(x, lists.range(1000).all(y, true))"
    assert one(claim([exact(selectors=[{"cel": {"expression": nested}}])])).endswith(
        "selectors[0].cel.expression: Forbidden: too complex, exceeds cost limit")


def test_cel_cost_estimator_bugs_do_not_become_problems() -> None:
    def broken(*_a: object, **_k: object) -> int:
        raise RuntimeError("bug")
    assert api_messages(claim([exact(selectors=[{"cel": {"expression": "true"}}])]),
                        CelChecks(compile_new_selector, broken)) == []
    nested = "lists.range(1000).all(x, lists.range(1000).all(y, true))"
    assert api_messages(claim([exact(selectors=[{"cel": {"expression": nested}}])]),
                        CelChecks(compile_new_selector)) == []


def test_cel_cost_error_maps_to_api_text() -> None:
    class CelError(Exception):
        pass

    def costly(*_a: object, **_k: object) -> None:
        raise CelError("estimated cost exceeds limit")
    (found,) = api_messages(claim([exact(selectors=[{"cel": {"expression": "true"}}])]), CelChecks(costly))
    assert found.endswith("cel.expression: Forbidden: too complex, exceeds cost limit")


def test_cel_type_errors_carry_the_fix() -> None:
    bad = claim([exact(selectors=[{"cel": {"expression": "device.capacity['gpu.nvidia.com'].memory > 5"}}])])
    msg = one(bad)
    assert "found no matching overload" in msg and "(fix: use device.capacity" in msg
    assert "must evaluate to bool" in one(claim([exact(selectors=[{"cel": {"expression": "1"}}])]))


def test_unknown_resource_kind_suggests() -> None:
    obj = {"apiVersion": V1, "kind": "ResourceClaims", "metadata": {"name": "x"}}
    assert one(obj) == 'ResourceClaims/x: kind: "ResourceClaims" is not a kind of resource.k8s.io/v1 (did you mean "ResourceClaim"?)'
    obj["kind"] = "ResourcePoolStatusRequest"
    assert "known kinds: DeviceClass, ResourceClaim" in one(obj)
