"""NVIDIA's ComputeDomain CRD (resource.nvidia.com/v1beta1), as its OpenAPI schema admits it.

kubernetes-sigs/dra-driver-nvidia-gpu at 95932046,
deployments/helm/dra-driver-nvidia-gpu/crds/resource.nvidia.com_computedomains.yaml (generated from
api/nvidia.com/resource/v1beta1/computedomain.go): `spec.channel` and
`spec.channel.resourceClaimTemplate.name` are required; `numNodes` is an integer >= 0;
`channel.allocationMode` is `All` or `Single`.
"""

from __future__ import annotations

from typing import Any

from labkit.api.problem import Sink, as_dict

COMPUTE_DOMAIN_API = "resource.nvidia.com/v1beta1"
ALLOCATION_MODES = ["All", "Single"]


def check_compute_domain(sink: Sink, obj: dict[str, Any]) -> None:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        sink.required("spec.channel", "a ComputeDomain names its channel claim template in spec.channel")
        return
    nodes = spec.get("numNodes", 0)
    if isinstance(nodes, bool) or not isinstance(nodes, int):
        sink.invalid("spec.numNodes", nodes, "must be an integer")
    elif nodes < 0:
        sink.invalid("spec.numNodes", nodes, "should be greater than or equal to 0")
    channel = spec.get("channel")
    if not isinstance(channel, dict):
        sink.required("spec.channel", "channel: {resourceClaimTemplate: {name: <template your pods use>}}")
        return
    mode = channel.get("allocationMode", "Single")
    if mode not in ALLOCATION_MODES:
        sink.unsupported("spec.channel.allocationMode", mode, ALLOCATION_MODES)
    name = as_dict(channel.get("resourceClaimTemplate")).get("name")
    if not isinstance(name, str) or not name:
        sink.required("spec.channel.resourceClaimTemplate.name", "the name of the claim template your pods use")
