"""The sim's ComputeDomain controller finds a domain's nodes and daemon pods through the label
`resource.nvidia.com/computeDomain` (an index kept from the watch, labkit.sim.computedomains); it
must follow the label as it changes: a node labelled for a live domain gets a daemon pod, one
whose label goes loses it, and a label naming no domain is removed (kubernetes-sigs/
dra-driver-nvidia-gpu, cmd/compute-domain-controller: the DaemonSet's nodeSelector is the label;
RemoveStaleComputeDomainLabels)."""

from __future__ import annotations

from labkit.cluster.backends import connect

LABEL = "resource.nvidia.com/computeDomain"
DRIVER_NS = "dra-driver-nvidia-gpu"
DOMAIN = """
apiVersion: resource.nvidia.com/v1beta1
kind: ComputeDomain
metadata: {name: d}
spec: {numNodes: 0, channel: {resourceClaimTemplate: {name: d-channel}}}
"""


def relabel(c, node: str, value: str | None) -> None:
    n = c.get("Node", node)
    labels = {k: v for k, v in n["metadata"]["labels"].items() if k != LABEL}
    if value is not None:
        labels[LABEL] = value
    c.apply({"apiVersion": "v1", "kind": "Node", "metadata": {"name": node, "labels": labels}})
    c.wait()


def daemon_nodes(c) -> list[str]:
    return sorted(p["spec"]["nodeName"] for p in c.list("Pod", DRIVER_NS))


def labelled(c) -> dict[str, str]:
    return {n["metadata"]["name"]: n["metadata"]["labels"][LABEL] for n in c.list("Node")
            if LABEL in n["metadata"]["labels"]}


def test_daemons_and_labels_follow_the_node_label_as_it_changes():
    c = connect("sim", "nvl72-rack", progress=False)
    c.apply(DOMAIN)
    c.wait()
    uid = c.get("ComputeDomain", "d")["metadata"]["uid"]
    a, b = sorted(n["metadata"]["name"] for n in c.list("Node") if n["metadata"]["name"].startswith("rack-a-"))[:2]
    assert daemon_nodes(c) == [] and labelled(c) == {}
    relabel(c, a, uid)
    relabel(c, b, uid)
    assert daemon_nodes(c) == [a, b] and labelled(c) == {a: uid, b: uid}
    relabel(c, a, None)
    assert daemon_nodes(c) == [b]
    relabel(c, b, "no-such-domain")  # a label naming no domain is removed, and b's daemon goes
    assert labelled(c) == {} and daemon_nodes(c) == []
    relabel(c, a, uid)
    assert daemon_nodes(c) == [a]
    c.delete("ComputeDomain", "d")
    c.wait()
    assert labelled(c) == {} and daemon_nodes(c) == [] and c.list("ComputeDomain") == []
