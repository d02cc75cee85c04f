"""Cluster profiles: the shipped ones load, errors name file, field path and fix."""

from __future__ import annotations

import pytest
import yaml

from labkit.model.profiles import ProfileError, load_profile, parse_profile, profile_names


def test_shipped_profiles_load():
    names = profile_names()
    for n in ("workshop", "mig-lab", "topology-lab", "fleet-1000", "tiny"):
        assert n in names
    ws = load_profile("workshop")
    assert [n.name for n in ws.nodes] == ["dgx-a100-0", "t4-0", "t4-1"]
    assert [n.node_profile for n in ws.nodes] == ["dgx-a100", "t4-inference", "t4-inference"]
    fleet = load_profile("fleet-1000")
    assert len(fleet.nodes) == 1000
    assert fleet.nodes[0].name == "a100-000" and fleet.nodes[-1].name == "h100-399"
    mig = load_profile("mig-lab")
    assert {n.mig_mode for n in mig.nodes} == {"static", "dynamic", None}
    assert len(load_profile("tiny").nodes) == 1


def test_profile_by_path(tmp_path):
    p = tmp_path / "mine.yaml"
    p.write_text(yaml.safe_dump({"nodes": [{"name": "x", "nodeProfile": "t4-inference"}]}))
    prof = load_profile(str(p))
    assert prof.name == "mine" and prof.nodes[0].name == "x" and prof.kubernetes_version == "1.37"


@pytest.mark.parametrize("doc, expected", [
    ({"nodes": []}, "nodes: required"),
    ({"nodes": [{"name": "a"}]}, "nodes[0].nodeProfile: required"),
    ({"nodes": [{"name": "a", "nodeProfile": "no-such"}]}, "nodes[0].nodeProfile: unknown node profile 'no-such'"),
    ({"nodes": [{"nodeProfile": "t4-inference"}]}, "nodes[0].name: required"),
    ({"nodes": [{"namePrefix": "a-", "count": 0, "nodeProfile": "t4-inference"}]}, "nodes[0].count: must be a positive integer"),
    ({"nodes": [{"name": "a", "nodeProfile": "t4-inference", "taints": [{"key": "k", "effect": "Nope"}]}]},
     'nodes[0].taints[0].effect: node a: Unsupported value: "Nope": supported values: "NoSchedule"'),
    # the API server's Node rules: label keys and values, taint keys, allocatable quantities, names
    ({"nodes": [{"name": "a", "nodeProfile": "t4-inference", "labels": {"-x": "y"}}]},
     'nodes[0].labels: node a: Invalid value: "-x": name part must be'),
    ({"nodes": [{"name": "a", "nodeProfile": "t4-inference", "labels": {"x": "a b"}}]},
     'nodes[0].labels[x]: node a: Invalid value: "a b": must be empty or at most 63'),
    ({"nodes": [{"name": "a", "nodeProfile": "t4-inference", "taints": [{"key": "a/b/c", "effect": "NoSchedule"}]}]},
     'nodes[0].taints[0].key: node a: Invalid value: "a/b/c"'),
    ({"nodes": [{"name": "a", "nodeProfile": "t4-inference", "taints": [{"key": "k", "effect": "NoSchedule"},
                                                                        {"key": "k", "effect": "NoSchedule"}]}]},
     "nodes[0].taints[1]: node a: Duplicate value: {key: k, effect: NoSchedule}: taints must be unique"),
    ({"nodes": [{"name": "a", "nodeProfile": "t4-inference", "allocatable": {"cpu": "-1"}}]},
     'nodes[0].allocatable[cpu]: node a: Invalid value: "-1": must be greater than or equal to 0'),
    ({"nodes": [{"name": "a", "nodeProfile": "t4-inference", "allocatable": {"memory": "lots"}}]},
     "nodes[0].allocatable[memory]: node a: Invalid value: \"lots\": quantity 'lots': quantities must match"),
    ({"nodes": [{"name": "a", "nodeProfile": "t4-inference", "allocatable": {"nvidia.com/gpu": "0.5"}}]},
     'nodes[0].allocatable[nvidia.com/gpu]: node a: Invalid value: "500m": must be an integer'),
    ({"nodes": [{"name": "Node_A", "nodeProfile": "t4-inference"}]},
     'nodes[0].name: node Node_A: Invalid value: "Node_A": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters'),
    ({"nodes": [{"namePrefix": "Gpu-", "count": 2, "nodeProfile": "t4-inference"}]},
     'nodes[0].name: node Gpu-0: Invalid value: "Gpu-0": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters'),
    ({"nodes": [{"name": "a", "nodeProfile": "t4-inference"}, {"name": "a", "nodeProfile": "t4-inference"}]},
     "nodes[1].name: node name 'a' is used twice"),
    ({"kubernetesVersion": 1.3, "nodes": [{"name": "a", "nodeProfile": "t4-inference"}]}, "kubernetesVersion: 1.3 is not supported"),
    ({"kubernetesVersion": "1.20", "nodes": [{"name": "a", "nodeProfile": "t4-inference"}]}, "kubernetesVersion: 1.20 is not supported"),
    ({"nodse": []}, "nodse: unknown field"),
    ({"nodes": [{"name": "a", "nodeProfile": "t4-inference", "lables": {}}]}, "nodes[0].lables: unknown field"),
])
def test_errors_name_the_field(doc, expected):
    with pytest.raises(ProfileError) as e:
        parse_profile(doc, origin="p.yaml")
    msg = str(e.value)
    assert msg.startswith("p.yaml: ") and expected in msg and "\n" not in msg


def test_unknown_profile_lists_known():
    with pytest.raises(ProfileError, match="known profiles: .*workshop"):
        load_profile("nope")


def test_invalid_yaml_names_line(tmp_path):
    p = tmp_path / "bad.yaml"
    p.write_text("nodes:\n  - name: [\n")
    with pytest.raises(ProfileError, match=r"bad.yaml:doc 1: line \d+: "):
        load_profile(str(p))
