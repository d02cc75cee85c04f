"""SlicePublisher, DeviceClasses and KubeClaimSource against a small fake API server over HTTP
(support module: FakeApi), exercising the real `kubernetes` client path."""

from __future__ import annotations

import copy

import pytest
from kubernetes import client

from fake_gpus.plugin.claims import ClaimSourceError, KubeClaimSource
from fake_gpus.plugin.publisher import SlicePublisher, apply_device_classes
from fake_gpus.plugin.state import DriverState
from tests.fake_gpus.test_fake_gpus_plugin_support import (
    CLASSES,
    DRIVER,
    NODE,
    SLICES,
    make_claim,
    node_slices,
    serve_fake_api,
)


@pytest.fixture
def api():
    with serve_fake_api() as (fake, url):
        cfg = client.Configuration()
        cfg.host = url
        yield fake, client.ApiClient(cfg)


def test_publish_creates_slices_with_node_owner(api):
    fake, api_client = api
    fake.add("/api/v1/nodes", {"metadata": {"name": NODE, "uid": "node-uid-1"}})
    pub = SlicePublisher(api_client, NODE, DRIVER)
    names = pub.publish(node_slices())
    assert names == [f"{NODE}-{DRIVER}-0"]
    obj = fake.objects[SLICES][names[0]]
    assert obj["metadata"]["ownerReferences"] == [
        {"apiVersion": "v1", "kind": "Node", "name": NODE, "uid": "node-uid-1", "controller": True}]
    assert obj["spec"]["pool"]["generation"] == 1  # as `python -m fake_gpus slices` prints it
    assert len(obj["spec"]["devices"]) == 5


def test_publish_without_node_has_no_owner(api):
    fake, api_client = api
    SlicePublisher(api_client, NODE, DRIVER).publish(node_slices())
    (obj,) = fake.objects[SLICES].values()
    assert "ownerReferences" not in obj["metadata"]


def test_republish_unchanged_keeps_generation_changed_bumps_and_prunes(api):
    """Kubernetes' resourceslice controller: new pool -> 1; nothing or one slice changed -> kept;
    a new slice or several changed -> +1; obsolete slices deleted."""
    fake, api_client = api
    pub = SlicePublisher(api_client, NODE, DRIVER)

    def gens() -> set[int]:
        return {o["spec"]["pool"]["generation"] for o in fake.objects[SLICES].values()}

    two = node_slices() + [{**copy.deepcopy(node_slices()[0]), "metadata": {"name": "extra"}}]
    pub.publish(two)
    assert set(fake.objects[SLICES]) == {f"{NODE}-{DRIVER}-0", "extra"}
    assert gens() == {1}
    pub.publish(two)
    assert gens() == {1}
    both_changed = copy.deepcopy(two)
    for sl in both_changed:
        sl["spec"]["devices"] = sl["spec"]["devices"][:-1]
    pub.publish(both_changed)  # two slices changed: a new generation
    assert gens() == {2}
    pub.publish(node_slices())  # one slice fewer: pruned; the one left is a single update -> kept
    assert set(fake.objects[SLICES]) == {f"{NODE}-{DRIVER}-0"}
    assert gens() == {2}
    pub.publish(node_slices() + [{**copy.deepcopy(node_slices()[0]), "metadata": {"name": "third"}}])
    assert gens() == {3}  # a new slice: a new generation


def test_other_nodes_and_drivers_are_left_alone(api):
    fake, api_client = api
    fake.add(SLICES, node_slices(node="node-b")[0])
    fake.add(SLICES, node_slices(driver="nic.example.com")[0])
    pub = SlicePublisher(api_client, NODE, DRIVER)
    pub.publish(node_slices())
    assert pub.delete_all() == 1
    assert set(fake.objects[SLICES]) == {f"node-b-{DRIVER}-0", f"{NODE}-nic.example.com-0"}


def test_publish_names_unnamed_slices(api):
    fake, api_client = api
    sl = node_slices()
    del sl[0]["metadata"]["name"]
    names = SlicePublisher(api_client, NODE, DRIVER).publish(sl)
    assert names == ["node-a-gpu.nvidia.com-0"]


def test_apply_device_classes_create_then_update(api):
    fake, api_client = api
    dc = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu.nvidia.com"},
          "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.nvidia.com'"}}]}}
    assert apply_device_classes(api_client, [dc]) == ["gpu.nvidia.com"]
    dc2 = copy.deepcopy(dc)
    dc2["spec"]["selectors"][0]["cel"]["expression"] = "true"
    apply_device_classes(api_client, [dc2])
    assert fake.objects[CLASSES]["gpu.nvidia.com"]["spec"]["selectors"][0]["cel"]["expression"] == "true"


def test_kube_claim_source(api, tmp_path):
    fake, api_client = api
    claim = make_claim("c", "uid-1", [("gpu", "gpu-0")], namespace="team")
    claim["status"]["allocation"]["futureField"] = {"x": 1}  # unknown to the client: must survive
    fake.claims[("team", "c")] = claim
    src = KubeClaimSource(api_client)
    assert src.get_claim("team", "c") == claim
    assert src.get_claim("team", "missing") is None
    state = DriverState(DRIVER, src, cdi_dir=tmp_path / "cdi", checkpoint_path=tmp_path / "cp.json",
                        slices=node_slices())
    assert [d.device_name for d in state.prepare("team", "c", "uid-1").devices] == ["gpu-0"]
    fake.fail_with = 500
    with pytest.raises(ClaimSourceError, match="HTTP 500 injected failure"):
        src.get_claim("team", "c")


def test_kube_claim_source_unreachable():
    cfg = client.Configuration()
    cfg.host = "http://127.0.0.1:9"  # discard port: connection refused
    cfg.retries = 0
    src = KubeClaimSource(client.ApiClient(cfg))
    with pytest.raises(ClaimSourceError, match="cannot reach the API server"):
        src.get_claim("ns", "c")
