"""core/v1 objects validated as kube-apiserver does (pkg/apis/core/validation), through
`labkit validate` as typed: Pods, Nodes, Namespaces; names quoted as the API server quotes them."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from labkit.cli import main

POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
       "spec": {"containers": [{"name": "main", "image": "busybox"}]}}


def _validate(capsys, tmp_path: Path, obj: dict | str) -> tuple[int, list[str]]:
    f = tmp_path / "obj.yaml"
    f.write_text(obj if isinstance(obj, str) else yaml.safe_dump(obj))
    code = main(["validate", "-f", str(f)])
    out, err = capsys.readouterr()
    return code, [ln for ln in (out + err).splitlines() if ln.strip()]


def _pod(**container: object) -> dict:
    return {**POD, "spec": {"containers": [{"name": "main", "image": "busybox", **container}]}}


@pytest.mark.parametrize("obj, expected", [
    (_pod(resources={"requests": {"cpu": "-1"}}),
     'Pod/p: spec.containers[0].resources.requests[cpu]: Invalid value: "-1": must be greater than or equal to 0'),
    (_pod(resources={"requests": {"memory": "NaN"}}),
     "Pod/p: spec.containers[0].resources.requests[memory]: Invalid value: \"NaN\": quantity 'NaN': quantities must match"),
    (_pod(resources={"limits": {"cpu": float("inf")}}),
     "Pod/p: spec.containers[0].resources.limits[cpu]: Invalid value: inf: quantities must be finite numbers"),
    (_pod(resources={"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}),
     'Pod/p: spec.containers[0].resources.requests: Invalid value: "2": must be less than or equal to cpu limit of 1'),
    (_pod(resources={"limits": {"nvidia.com/gpu": "0.5"}}),
     'Pod/p: spec.containers[0].resources.limits[nvidia.com/gpu]: Invalid value: "500m": must be an integer'),
    (_pod(resources={"requests": {"nvidia.com/gpu": "1"}}),
     "Pod/p: spec.containers[0].resources.limits: Required value: Limit must be set for non overcommitable resources"),
    (_pod(resources={"requests": {"gpus": "1"}}),
     'Pod/p: spec.containers[0].resources.requests[gpus]: Invalid value: "gpus": must be a standard resource type '
     "or fully qualified"),
    (_pod(image=""), "Pod/p: spec.containers[0].image: Required value: e.g. busybox:1.36"),
    ({**POD, "spec": {"containers": []}}, "Pod/p: spec.containers: Required value"),
    ({**POD, "spec": {"containers": [{"name": "a", "image": "x"}, {"name": "a", "image": "x"}]}},
     'Pod/p: spec.containers[1].name: Duplicate value: "a"'),
    ({**POD, "spec": {"containers": [{"name": "Main", "image": "x"}]}},
     'Pod/p: spec.containers[0].name: Invalid value: "Main": must be a DNS label'),
    ({**POD, "spec": {**POD["spec"], "tolerations": [{"operator": "Equal", "value": "x"}]}},
     'Pod/p: spec.tolerations[0].operator: Invalid value: "Equal": operator must be Exists when `key` is empty'),
    ({**POD, "spec": {**POD["spec"], "nodeSelector": {"-x": "y"}}},
     'Pod/p: spec.nodeSelector: Invalid value: "-x": name part must be'),
    ({**POD, "spec": {**POD["spec"], "restartPolicy": "Sometimes"}},
     'Pod/p: spec.restartPolicy: Unsupported value: "Sometimes": supported values: "Always", "OnFailure", "Never"'),
    ({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-1"},
      "spec": {"taints": [{"key": "k", "effect": "NoSchedule"}, {"key": "k", "effect": "NoSchedule"}]}},
     "Node/node-1: spec.taints[1]: Duplicate value: {key: k, effect: NoSchedule}: taints must be unique by key and "
     "effect pair"),
    ({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-1"}, "spec": {"taints": [{"key": "k"}]}},
     "Node/node-1: spec.taints[0].effect: Required value"),
    ({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-1"}, "status": {"capacity": {"pods": "-3"}}},
     'Node/node-1: status.capacity.pods: Invalid value: "-3": must be greater than or equal to 0'),
    ({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "Team"}},
     'Namespace/Team: metadata.name: Invalid value: "Team": must be a DNS label'),
])
def test_core_objects_refused_as_the_api_server_does(capsys, tmp_path, obj, expected):
    code, lines = _validate(capsys, tmp_path, obj)
    assert code == 1
    assert any(ln.startswith(expected) for ln in lines), lines


def test_a_valid_pod_node_and_namespace_pass(capsys, tmp_path):
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-1"},
            "spec": {"taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]},
            "status": {"capacity": {"cpu": "64", "nvidia.com/gpu": 8}, "allocatable": {"memory": "512Gi"}}}
    pod = _pod(resources={"requests": {"cpu": "500m", "nvidia.com/gpu": 1}, "limits": {"nvidia.com/gpu": 1}})
    text = "---\n".join(yaml.safe_dump(o) for o in [pod, node, {"apiVersion": "v1", "kind": "Namespace",
                                                                "metadata": {"name": "team-a"}}])
    assert _validate(capsys, tmp_path, text) == (0, ["3 objects valid"])


def test_control_characters_are_quoted_as_the_api_server_does(capsys, tmp_path):
    """Go's %q: a BEL in a name reaches the terminal as \\a, a BOM as \\ufeff, never raw."""
    code, lines = _validate(capsys, tmp_path, 'apiVersion: v1\nkind: Namespace\nmetadata:\n  name: "a\\x07b"\n')
    assert code == 1 and lines == ['Namespace/"a\\ab": metadata.name: Invalid value: "a\\ab": must be a DNS label: '
                                   "lowercase letters, digits and '-', starting and ending with a letter or digit "
                                   "(e.g. 'gpu-0')"]
    code, lines = _validate(capsys, tmp_path, 'apiVersion: v1\nkind: Namespace\nmetadata:\n  name: "\\ufeffb"\n')
    assert code == 1 and lines[0].startswith('Namespace/"\\ufeffb": metadata.name: Invalid value: "\\ufeffb"')
