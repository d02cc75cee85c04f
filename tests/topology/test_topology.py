"""labkit.topology: graph facts per node profile, queries, pictures, CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fake_gpus.catalog import load_node_profile, node_profiles
from fake_gpus.topology import topo_code, topology_matrix
from labkit.cli import main
from labkit.errors import NotFoundError
from labkit.model.profiles import load_profile
from labkit.topology import (
    cluster_graph,
    devices_under,
    distance,
    draw_node,
    gpus,
    layout,
    node_graph,
    nvlink_islands,
    queries,
    save_png,
    stats,
    topo_matrix,
)


def test_dgx_a100_facts():
    g = node_graph("dgx-a100", node_name="dgx-0")
    assert len(gpus(g)) == 8
    assert nvlink_islands(g) == [[f"gpu-{i}" for i in range(8)]]
    roots = sorted(n for n, d in g.nodes(data=True) if d["kind"] == "pcieRoot")
    assert len(roots) == 4
    for root in roots:
        under = devices_under(g, root)
        assert len([d for d in under if d.startswith("gpu-")]) == 2, (root, under)
        assert any(d.startswith("nic-") for d in under), "every root has a NIC beside its GPUs"
    assert distance(g, "gpu-0", "gpu-7") == "NV12"
    assert distance(g, "gpu-0", "nic-0") == "PIX"
    assert distance(g, "gpu-0", "nic-4") == "SYS"
    assert distance(g, "gpu-0", "gpu-0") == "X"
    # DRA view attached from the node's own slices
    assert g.nodes["GPU0"]["device"] == "gpu-0" and g.nodes["GPU0"]["pool"] == "dgx-0"
    assert g.nodes["GPU0"]["attributes"]["productName"] == "NVIDIA A100-SXM4-80GB"


def test_t4_is_pcie_only():
    g = node_graph("t4-inference")
    assert nvlink_islands(g) == [["gpu-0"], ["gpu-1"], ["gpu-2"], ["gpu-3"]]
    assert {distance(g, "gpu-0", f"gpu-{i}") for i in range(1, 4)} <= {"PIX", "PHB", "NODE"}
    assert not any(d.get("type") == "nvlink" for _, _, d in g.edges(data=True))


def _at(numa: int, root: str, *chain: str) -> dict:
    return {"numaNode": numa, "pcieRoot": root, "switchChain": list(chain)}


@pytest.mark.parametrize("a, b, nvlinks, code", [
    (_at(0, "r0"), _at(1, "r2"), 12, "NV12"),           # NVLink wins over any PCIe path
    (_at(0, "r0"), _at(1, "r2"), 0, "SYS"),
    (_at(0, "r0"), _at(0, "r1"), 0, "NODE"),
    (_at(0, "r0", "sw1"), _at(0, "r0", "sw1"), 0, "PIX"),
    (_at(0, "r0", "sw1", "sw0"), _at(0, "r0", "sw2", "sw0"), 0, "PXB"),
    (_at(0, "r0", "sw1"), _at(0, "r0", "sw2"), 0, "PHB"),
    (_at(0, "r0"), _at(0, "r0", "sw2"), 0, "PHB"),
])
def test_topo_code_rule(a, b, nvlinks, code):
    assert topo_code(a, b, nvlinks) == code == topo_code(b, a, nvlinks)


def test_one_topology_rule():
    assert queries.topo_code is topo_code   # labkit's distance() and the driver's matrix share it


@pytest.mark.parametrize("name", node_profiles())
def test_graph_distance_agrees_with_the_driver_matrix(name):
    profile = load_node_profile(name)
    g = node_graph(profile)
    assert topo_matrix(g) == topology_matrix(profile)


def test_static_mig_instances_hang_off_their_gpu():
    g = node_graph("mig-a100")
    migs = [n for n, d in g.nodes(data=True) if d["kind"] == "mig"]
    assert migs, "static MIG profile publishes MIG devices"
    for m in migs:
        parent = g.nodes[m]["parent"]
        assert g.nodes[parent]["kind"] == "gpu" and g.has_edge(parent, m)
        assert distance(g, m, parent) == "X"
    # MIG instances are reachable by their DRA name and count as devices under their root
    root = g.nodes[g.nodes[migs[0]]["parent"]]["pcieRoot"]
    assert g.nodes[migs[0]]["device"] in devices_under(g, root)


def test_unknown_device_and_root_give_clear_errors():
    g = node_graph("t4-inference")
    with pytest.raises(KeyError, match="no device 'gpu-9'") as exc:
        distance(g, "gpu-9", "gpu-0")
    assert isinstance(exc.value, NotFoundError) and str(exc.value).startswith("topology ")
    with pytest.raises(KeyError, match="no PCIe root 'pci9999:00'"):
        devices_under(g, "pci9999:00")


def test_cluster_graph_of_the_workshop():
    g = cluster_graph(load_profile("workshop"))
    nodes = sorted(n for n, d in g.nodes(data=True) if d["kind"] == "node")
    assert nodes == ["dgx-a100-0", "t4-0", "t4-1"]
    assert sum(1 for _, d in g.nodes(data=True) if d["kind"] == "gpu") == 8 + 4 + 4
    assert g.nodes["t4-1/GPU3"]["device"] == "gpu-3" and g.nodes["t4-1/GPU3"]["pool"] == "t4-1"
    assert stats(g)["kinds"]["node"] == 3


def test_layout_is_tiered_and_ordered():
    g = node_graph("dgx-a100")
    pos = layout(g)
    ys = {d["kind"]: pos[n][1] for n, d in g.nodes(data=True) if n in pos}
    assert ys["socket"] > ys["pcieRoot"] > ys["pcieSwitch"] > ys["gpu"] > ys["nvswitchFabric"]
    # each switch sits above the middle of its own devices: no crossing edges inside a tier
    for n, d in g.nodes(data=True):
        if d["kind"] == "pcieSwitch":
            kids = [pos[k][0] for k, kd in g.nodes(data=True) if kd.get("pcieSwitch") == n and kd["kind"] != "mig"]
            assert min(kids) <= pos[n][0] <= max(kids)
    assert layout(g) == pos  # deterministic


def test_pictures_have_content(tmp_path: Path):
    import matplotlib.image as mpimg

    g = node_graph("dgx-a100")
    path = save_png(g, str(tmp_path / "dgx.png"), overlay={"gpu-0": "default/train", "gpu-3": "in use"})
    img = mpimg.imread(path)
    assert img.shape[0] > 300 and img.shape[1] > 800
    assert img.std() > 0.05, "not a blank image"
    fig = draw_node(node_graph("mig-a100"))
    labels = {t.get_text() for t in fig.axes[0].texts}
    assert {"1g", "3g"} <= labels, "MIG slices are drawn inside their GPUs"
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "NVLink" in legend and "PCIe" in legend


def test_overlay_colours_each_claim_differently():
    fig = draw_node(node_graph("t4-inference"), overlay={"gpu-0": "ns/a", "gpu-1": "ns/b", "gpu-2": "in use"})
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert legend[:3] == ["ns/a", "ns/b", "in use"]


def test_cli_png_json_and_errors(tmp_path: Path, capsys):
    out = tmp_path / "t.png"
    assert main(["topology", "--profile", "workshop", "--node", "dgx-a100-0", "--png", str(out), "--json"]) == 0
    assert out.stat().st_size > 10_000
    data = json.loads(capsys.readouterr().out)
    assert data["kinds"]["gpu"] == 8 and data["nvlinkIslands"] == [[f"gpu-{i}" for i in range(8)]]
    assert main(["topology", "--profile", "workshop", "--node", "nope"]) == 2
    assert "no node 'nope'" in capsys.readouterr().err
    assert main(["topology", "--profile", "t4-inference", "--matrix"]) == 0
    assert "PHB" in capsys.readouterr().out


def test_node_graph_uses_only_its_own_nodes_slices():
    from fake_gpus.slices import build_slices

    static = build_slices("mig-a100", "static-0", mig_mode="static")
    dynamic = build_slices("mig-a100", "dynamic-0", mig_mode="none")
    g = node_graph("mig-a100", static + dynamic, node_name="dynamic-0")
    assert not any(d["kind"] == "mig" for _, d in g.nodes(data=True)), "static node's MIG devices leaked in"
    assert g.nodes["GPU0"]["pool"] == "dynamic-0"


def test_wide_nodes_are_drawn_one_socket_per_row_at_notebook_width(tmp_path: Path):
    import matplotlib.image as mpimg

    for profile in ("dgx-a100", "dgx-h100"):
        fig = draw_node(node_graph(profile))
        assert [a.get_title(loc="left") for a in fig.axes] == ["CPU socket 0", "CPU socket 1"]
        width_px = fig.get_figwidth() * fig.dpi
        assert 700 < width_px <= 1100, (profile, width_px)
        labels = {t.get_text() for a in fig.axes for t in a.texts}
        assert {f"gpu-{i}" for i in range(8)} <= labels
        sizes = {t.get_fontsize() for a in fig.axes for t in a.texts if t.get_text() == "gpu-0"}
        assert min(sizes) >= 9, "device names readable when the picture is shown ~900 px wide"
    fig = draw_node(node_graph("t4-inference"))
    assert len(fig.axes) == 1, "a small node stays one row"
    path = save_png(node_graph("dgx-h100"), str(tmp_path / "h100.png"))
    assert mpimg.imread(path).shape[1] <= 1100


def test_draw_node_shows_inline_in_a_jupyter_kernel():
    """A notebook cell ending in draw_node(...); displays a PNG (the kernel's inline backend is kept)."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "from labkit.topology import draw_node, node_graph\n"
        "draw_node(node_graph('dgx-a100'), title='x');\n"
        "import matplotlib; print(matplotlib.get_backend())")])
    NotebookClient(nb, timeout=120, kernel_name="python3").execute()
    outputs = nb.cells[0].outputs
    images = [o for o in outputs if o.output_type == "display_data" and "image/png" in o.data]
    assert len(images) == 1, outputs
    assert "inline" in "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
