"""labkit.widgets: the plain functions and the widget logic, headless (no browser)."""

from __future__ import annotations

import pytest

from labkit.cel.validation import validate
from labkit.cluster import connect
from labkit.topology import node_graph
from labkit.widgets import (
    CelPlayground,
    ClaimBuilder,
    ClaimSpec,
    Filter,
    InventoryExplorer,
    RequestSpec,
    TopologyView,
    allocate_on_cluster,
    build_claim,
    inventory_rows,
    preview,
    selector_for,
    svg_model,
)


@pytest.fixture(scope="module")
def cluster():
    c = connect("sim", "workshop", progress=False)
    yield c
    c.down()


@pytest.mark.parametrize(("flt", "cel"), [
    (Filter("memory", ">=", "40Gi"), 'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("40Gi")) >= 0'),
    (Filter("productName", "==", "NVIDIA A100-SXM4-80GB"),
     'device.attributes["gpu.nvidia.com"].productName == "NVIDIA A100-SXM4-80GB"'),
    (Filter("cudaComputeCapability", ">=", "8.0.0"),
     'device.attributes["gpu.nvidia.com"].cudaComputeCapability.compareTo(semver("8.0.0")) >= 0'),
    (Filter("resource.kubernetes.io/pcieRoot", "==", "pci0000:00"),
     'device.attributes["resource.kubernetes.io"].pcieRoot == "pci0000:00"'),
    (Filter("productName", "matches", "H100"), 'device.attributes["gpu.nvidia.com"].productName.matches("H100")'),
    (Filter("profile", "in", "1g.10gb,2g.20gb"), 'device.attributes["gpu.nvidia.com"].profile in ["1g.10gb", "2g.20gb"]'),
])
def test_filters_become_the_cel_a_kubernetes_engineer_writes(flt, cel):
    assert selector_for(flt) == cel


def test_bad_operator_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown operator .*; fix: use one of"):
        selector_for(Filter("memory", "=~", "1"))


def test_built_claims_are_valid_api_objects():
    spec = ClaimSpec("pair", requests=[
        RequestSpec("gpu", "gpu.nvidia.com", 1, filters=[Filter("memory", ">=", "40Gi")],
                    alternatives=[RequestSpec("t4s", "gpu.nvidia.com", 2)]),
        RequestSpec("nic", "nic.fake-gpus.dev", 1),
    ], match_attribute="resource.kubernetes.io/pcieRoot", template=True)
    obj = build_claim(spec)
    assert obj["kind"] == "ResourceClaimTemplate"
    reqs = obj["spec"]["spec"]["devices"]["requests"]
    assert [s["name"] for s in reqs[0]["firstAvailable"]] == ["gpu-0", "t4s"]
    assert reqs[1]["exactly"] == {"deviceClassName": "nic.fake-gpus.dev", "allocationMode": "ExactCount", "count": 1}
    assert obj["spec"]["spec"]["devices"]["constraints"] == [{"matchAttribute": "resource.kubernetes.io/pcieRoot"}]
    assert validate([obj]) == []
    all_spec = ClaimSpec("all", requests=[RequestSpec("gpus", all_devices=True)])
    exact = build_claim(all_spec)["spec"]["devices"]["requests"][0]["exactly"]
    assert exact["allocationMode"] == "All" and "count" not in exact
    assert validate([build_claim(all_spec)]) == []


def test_preview_and_allocate_on_the_workshop(cluster):
    classes, slices, nodes = (cluster.list(k) for k in ("DeviceClass", "ResourceSlice", "Node"))
    claim = build_claim(ClaimSpec("big", requests=[RequestSpec(count=2, filters=[Filter("memory", ">=", "40Gi")])]))
    assert preview(claim, classes, slices) == {"gpu": (8, 16)}  # 8 A100-80GB of 16 GPUs
    placed = allocate_on_cluster(claim, classes, slices, [], nodes)
    assert placed.status == "allocated" and placed.node == "dgx-a100-0"
    assert placed.devices == ["gpu-0", "gpu-1"]
    nine = build_claim(ClaimSpec("nine", requests=[RequestSpec(count=9, filters=[Filter("memory", ">=", "40Gi")])]))
    refused = allocate_on_cluster(nine, classes, slices, [], nodes)
    assert refused.status == "unsatisfiable" and refused.node is None
    assert "t4-0" in refused.summary and "dgx-a100-0" in refused.summary


def test_claim_builder_drives_like_a_user(cluster):
    b = ClaimBuilder(cluster, name="widget-claim")
    panel = b.requests.children[0]
    panel.count.value = 2
    row = panel.add_filter("memory", ">=", "40Gi")
    assert "memory" in row.name.options  # names offered come from the class's devices
    assert "8 of 16" in b.preview_label.value
    assert b.picture.layout.display == "none", "no broken image before a placement exists"
    assert "compareTo(quantity(&quot;40Gi&quot;))" in b.yaml_view.value
    placement = b.allocate()
    assert placement.devices == ["gpu-0", "gpu-1"]
    assert "allocated on dgx-a100-0: gpu-0, gpu-1" in b.result.value
    assert bytes(b.picture.value).startswith(b"\x89PNG") and b.picture.layout.display == ""
    b.constraint.value = "resource.kubernetes.io/pcieRoot"
    assert b.claim()["spec"]["devices"]["constraints"] == [{"matchAttribute": "resource.kubernetes.io/pcieRoot"}]
    b.apply()
    assert cluster.get("ResourceClaim", "widget-claim")["spec"]["devices"]["requests"][0]["exactly"]["count"] == 2


def test_claim_builder_without_cluster_cannot_apply():
    b = ClaimBuilder(classes=[], slices=[])
    assert b.apply_button.disabled
    assert b.apply() == []


def test_cel_playground_counts_and_errors(cluster):
    p = CelPlayground(cluster)
    assert p.summary.value.count("match") >= 2
    p.expression.value = 'device.capacity["gpu.nvidia.com"].memory >= quantity("40Gi")'
    assert "compile error" in p.summary.value and "compareTo" in p.summary.value
    p.expression.value = 'device.driver == "gpu.nvidia.com" && device.attributes["gpu.nvidia.com"].type == "gpu"'
    rows = p.run()
    assert sum(r.result == "match" for r in rows) == 16
    assert not any(r.result == "error" for r in rows), "false && error is false (CEL error absorption)"
    p.expression.value = 'device.attributes["gpu.nvidia.com"].index == 0'
    assert all(r.result == "error" and "no such key: index" in r.message for r in p.run())


def test_inventory_rows_and_explorer(cluster):
    claims = [{"metadata": {"name": "held", "namespace": "ns"}, "status": {"allocation": {"devices": {"results": [
        {"request": "r", "driver": "gpu.nvidia.com", "pool": "t4-0", "device": "gpu-2"}]}}}}]
    rows = inventory_rows(cluster.list("ResourceSlice"), claims)
    held = [r for r in rows if r.state.startswith("in use")]
    assert [(r.node, r.device, r.state) for r in held] == [("t4-0", "gpu-2", "in use by ns/held")]
    e = InventoryExplorer(cluster)
    e.node.value = "t4-1"
    e.kind.value = "gpu"
    assert e.summary.value.startswith("4 devices")


def test_topology_view_model_and_click():
    g = node_graph("dgx-a100")
    model = svg_model(g, {"gpu-0": "default/train"}, {"gpu-0": "default/train"})
    by_id = {n["id"]: n for n in model["nodes"]}
    assert by_id["GPU0"]["fill"] != by_id["GPU1"]["fill"]
    assert "held by default/train" in by_id["GPU0"]["title"]
    assert sum(e["type"] == "nvlink" for e in model["edges"]) == 8
    # a DGX is drawn one socket per row, every box inside the drawing's extent (the view fits it on open)
    assert model["rows"] == ["CPU socket 0", "CPU socket 1"]
    assert all(n["x"] - n["w"] / 2 >= 0 and n["x"] + n["w"] / 2 <= model["width"] for n in model["nodes"])
    assert all(n["y"] - n["h"] / 2 >= 0 and n["y"] + n["h"] / 2 <= model["height"] for n in model["nodes"])
    assert model["width"] <= 1100
    view = TopologyView(g, overlay={"gpu-0": "default/train"})
    assert "claim default/train" in view.legend.value and "NVLink" in view.legend.value
    assert "scroll to zoom" in view.legend.value
    view.svg.selected = "GPU0"
    assert "default/train" in view.info.value and "NVIDIA A100-SXM4-80GB" in view.info.value


def test_widgets_say_the_cluster_is_down_instead_of_doing_nothing():
    """After the notebook stopped its cluster, a click shows what to do inside the widget."""
    from labkit.cluster import connect

    c = connect("sim", "workshop", progress=False)
    builder = ClaimBuilder(c, name="late")
    explorer = InventoryExplorer(c)
    view = TopologyView(node_graph("t4-inference"))
    c.down()
    builder.allocate_button.click()
    assert "the cluster is down" in builder.result.value and "first cell" in builder.result.value
    builder.result.value = ""
    builder.apply_button.click()
    assert "the cluster is down" in builder.result.value
    explorer.refresh_button.click()
    assert "the cluster is down" in explorer.summary.value
    # any other error raised in a callback is shown too, in one line
    view.g = None  # a broken graph: describe() fails
    view.svg.selected = "GPU0"
    assert "labkit-error" in view.info.value and "TypeError" in view.info.value


def test_claim_builder_yaml_never_wraps_a_cel_string():
    long = "x" * 150
    b = ClaimBuilder(classes=[], slices=[])
    b.requests.children[0].add_filter("productName", "==", long)
    lines = [line for line in b.yaml_view.value.splitlines() if "expression" in line]
    assert len(lines) == 1 and long in lines[0] and lines[0].rstrip().endswith("&quot;")
