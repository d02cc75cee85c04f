"""Node selectors and tolerations: one home (labkit.allocator.nodes / .taints) for the sim and the
allocator, checked against Kubernetes' rules.

Tolerations: core/v1 ``Toleration.ToleratesTaint`` and ``resourceclaim.ToleratesTaint`` (empty
effect = every effect, empty key = every key, Exists = every value, empty operator = Equal).
Node selectors: ``nodeaffinity.NewNodeSelector`` (strict, DRA) and ``NewLazyErrorNodeSelector``
(lazy, a pod's required node affinity); the bad-input answers below are what the Go oracle
(k8s.io/dynamic-resource-allocation 0.37) printed for the same selectors on a ResourceSlice.
"""

from __future__ import annotations

import json

import pytest

from labkit.allocator import nodes, taints
from labkit.cli import main
from labkit.cluster import connect
from labkit.sim import filters, scoring, taintctl
from tests import builders as b

TAINT = {"key": "gpu.example.com/broken", "value": "ecc", "effect": "NoSchedule"}


@pytest.mark.parametrize("toleration, want", [
    ({"operator": "Exists"}, True),                                   # empty key + Exists: everything
    ({"operator": "Exists", "effect": "NoSchedule"}, True),
    ({"operator": "Exists", "effect": "NoExecute"}, False),           # effect given: must be equal
    ({"key": "gpu.example.com/broken", "operator": "Exists"}, True),  # empty effect: every effect
    ({"key": "other", "operator": "Exists"}, False),
    ({"key": "gpu.example.com/broken", "value": "ecc"}, True),        # empty operator = Equal
    ({"key": "gpu.example.com/broken", "operator": "Equal", "value": "xid"}, False),
    # empty key with Equal: validation rejects it; past validation Kubernetes compares values only
    ({"operator": "Equal", "value": "ecc"}, True),
    ({"operator": "Equal"}, False),
    ({"key": "gpu.example.com/broken", "operator": "Gt", "value": "1"}, False),  # unknown operator
])
def test_toleration_rule_is_kubernetes(toleration, want):
    assert taints.tolerates(toleration, TAINT) is want


def test_sim_and_allocator_share_one_toleration_and_selector_rule():
    assert taintctl.tolerates is scoring.tolerates is taints.tolerates
    assert filters.untolerated_taint is taints.untolerated_taint
    assert filters.pod_matches_node_affinity is nodes.pod_matches_node_affinity


def test_untolerated_node_taint_ignores_prefer_no_schedule():
    node = {"spec": {"taints": [{"key": "a", "effect": "PreferNoSchedule"}, {"key": "b", "effect": "NoExecute"}]}}
    assert taints.untolerated_taint({"spec": {}}, node) == {"key": "b", "effect": "NoExecute"}
    assert taints.untolerated_taint({"spec": {"tolerations": [{"operator": "Exists"}]}}, node) is None


NODE = {"metadata": {"name": "n1", "labels": {"zone": "a", "gpus": "8"}}}


def sel(*terms: dict) -> dict:
    return {"nodeSelectorTerms": list(terms)}


@pytest.mark.parametrize("term, want", [
    ({"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["n1"]}]}, False),
    # another field key is no parse error: the node has no such field, In never matches, NotIn does
    ({"matchFields": [{"key": "metadata.uid", "operator": "In", "values": ["x"]}]}, False),
    ({"matchFields": [{"key": "metadata.uid", "operator": "NotIn", "values": ["x"]}]}, True),
    ({"matchExpressions": [{"key": "gpus", "operator": "Gt", "values": ["7"]}]}, True),
    ({"matchExpressions": [{"key": "zone", "operator": "Gt", "values": ["1"]}]}, False),  # label not a number
    ({}, False),                                                                           # empty term
])
def test_selector_semantics(term, want):
    assert nodes.selector_matches(sel(term), NODE) is want


BAD = [
    ({"key": "zone", "operator": "In", "values": []},
     "nodeSelectorTerms[0].matchExpressions[0].values: Invalid value: []: for 'in', 'notin' operators, "
     "values set can't be empty"),
    ({"key": "zone", "operator": "Gt", "values": ["x"]},
     "nodeSelectorTerms[0].matchExpressions[0].values[0]: Invalid value: 'x': for 'Gt', 'Lt' operators, "
     "the value must be an integer"),
    ({"key": "bad key!", "operator": "Exists"}, "nodeSelectorTerms[0].matchExpressions[0].key: Invalid value"),
    ({"key": "zone", "operator": "In", "values": ["bad value!"]},
     "nodeSelectorTerms[0].matchExpressions[0].values[0][zone]: Invalid value: 'bad value!'"),
    ({"key": "zone", "operator": "Like", "values": ["a"]},
     "nodeSelectorTerms[0].matchExpressions[0].operator: Unsupported value: 'Like'"),
]


@pytest.mark.parametrize("expr, message", BAD)
def test_bad_selector_strict_raises_lazy_skips_the_term(expr, message):
    good = {"matchExpressions": [{"key": "zone", "operator": "Exists"}]}
    selector = sel({"matchExpressions": [expr]}, good)
    with pytest.raises(nodes.NodeSelectorError) as exc:
        nodes.selector_matches(selector, NODE)
    assert message in str(exc.value)
    assert nodes.selector_matches_lazy(selector, NODE) is True
    assert nodes.selector_matches_lazy(sel({"matchExpressions": [expr]}), NODE) is False
    assert nodes.node_selector_matches(NODE, selector) is False   # an allocation's selector: fits no node
    assert nodes.node_selector_matches(NODE, None) is True


def test_field_selector_needs_one_value():
    with pytest.raises(nodes.NodeSelectorError, match=r"matchFields\[0\]\.values: .*must have one element"):
        nodes.selector_matches(sel({"matchFields": [{"key": "metadata.name", "operator": "In",
                                                    "values": ["n1", "n2"]}]}), NODE)


def _slice_input(terms: list[dict]) -> list[dict]:
    return [
        b.device_class("nic", 'device.driver == "nic.example.com"'),
        b.node("node-1", labels={"zone": "a"}),
        b.resource_slice(None, "nic.example.com", "zone-a", [b.device("nic-0")], name="net",
                         nodeSelector={"nodeSelectorTerms": terms}),
        b.claim("c1", requests=[b.request("nic", device_class="nic")]),
    ]


def _allocate(capsys, tmp_path, terms: list[dict]) -> tuple[int, dict]:
    path = tmp_path / "in.yaml"
    path.write_text(b.yaml_docs(_slice_input(terms)))
    code = main(["allocate", "-f", str(path), "--node", "node-1", "--no-validate", "-o", "json"])
    return code, json.loads(capsys.readouterr().out)


def test_allocate_slice_with_bad_selector_is_an_error_like_kube_scheduler(capsys, tmp_path):
    # the second term matches, but NewNodeSelector refuses the whole selector
    code, doc = _allocate(capsys, tmp_path, [{"matchExpressions": [{"key": "zone", "operator": "In", "values": []}]},
                                             {"matchExpressions": [{"key": "zone", "operator": "Exists"}]}])
    assert (code, doc["status"]) == (2, "error")
    assert "failed to perform node selection for slice net: failed to parse node selector" in doc["error"]
    assert "values set can't be empty" in doc["error"]


def test_allocate_slice_selector_on_another_field_key(capsys, tmp_path):
    code, doc = _allocate(capsys, tmp_path, [{"matchFields": [{"key": "metadata.uid", "operator": "NotIn",
                                                               "values": ["x"]}]}])
    assert (code, doc["status"]) == (0, "allocated")
    code, doc = _allocate(capsys, tmp_path, [{"matchFields": [{"key": "metadata.uid", "operator": "In",
                                                               "values": ["x"]}]}])
    assert (code, doc["status"]) == (3, "unsatisfiable")


def _pod(name: str, terms: list[dict]) -> dict:
    return b.pod(name, container="c", command=None, affinity={"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}})


def test_sim_pod_affinity_is_lazy_like_the_node_affinity_filter():
    c = connect("sim", "workshop", progress=False, validate=False)
    bad = {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": []}]}
    t4 = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["t4-1"]}]}
    c.apply([_pod("bad-then-good", [bad, t4]), _pod("only-bad", [bad])])
    c.wait()
    assert c.get("Pod", "bad-then-good")["spec"].get("nodeName") == "t4-1"
    assert not c.get("Pod", "only-bad")["spec"].get("nodeName")
