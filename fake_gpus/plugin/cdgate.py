"""The compute-domain kubelet plugin's checks before it hands out an IMEX channel, against the API
server (NVIDIA's applyComputeDomainChannelConfigDriverManaged): the rule is
fake_gpus.computedomain.channel_check; this asks the API server and labels the node."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from fake_gpus import computedomain as cd

from .kube import KubeError, KubeRest

CDS = "/apis/resource.nvidia.com/v1beta1"


def find_domain(rest: KubeRest, uid: str) -> dict[str, Any] | None:
    for item in (rest.call("GET", f"{CDS}/computedomains") or {}).get("items") or []:
        if (item.get("metadata") or {}).get("uid") == uid:
            return item
    return None


class ChannelGate:
    """The compute-domain plugin's checks before a channel is handed out, against the API server:
    returns the error for the kubelet (it retries), or None. Labels the node as NVIDIA's plugin does."""

    def __init__(self, rest: KubeRest, node: str) -> None:
        self.rest, self.node = rest, node

    def __call__(self, claim: dict[str, Any]) -> str | None:
        try:
            config = cd.claim_config(claim)
        except cd.ConfigError as exc:
            return cd.prepare_error(claim, str(exc))
        if config is None or config["kind"] != cd.CHANNEL_CONFIG_KIND:
            return None
        try:
            domain = find_domain(self.rest, config["domainID"])
            node = self.rest.call("GET", f"/api/v1/nodes/{quote(self.node)}")
            labels = (node.get("metadata") or {}).get("labels") or {}
            why, label = cd.channel_check(claim, domain, self.node, labels)
            if label and domain is not None:
                self.rest.call("PATCH", f"/api/v1/nodes/{quote(self.node)}",
                               body={"metadata": {"labels": {cd.LABEL: domain["metadata"]["uid"]}}},
                               query={"fieldManager": "compute-domain-kubelet-plugin"})
        except KubeError as exc:
            return cd.prepare_error(claim, f"error talking to the API server: {exc}")
        return cd.prepare_error(claim, why) if why else None

    def daemon_env(self, claim: dict[str, Any]) -> dict[str, str]:
        """CLIQUE_ID (the node's nvidia.com/gpu.clique label) and the domain's name and namespace for a
        daemon claim; {} for other claims. An API error leaves out what it could not read."""
        config = cd.daemon_config(claim)
        if config is None:
            return {}
        try:
            node = self.rest.call("GET", f"/api/v1/nodes/{quote(self.node)}")
            clique = ((node.get("metadata") or {}).get("labels") or {}).get(cd.CLIQUE_LABEL, "")
            return cd.daemon_env(find_domain(self.rest, config["domainID"]), clique)
        except KubeError:
            return {}


