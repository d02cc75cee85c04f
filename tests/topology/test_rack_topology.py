"""Topology across nodes (issue 27): the fleet graph of NVL72 racks, `nvidia-smi topo`-style codes
across trays and racks, and a multi-node job's placement drawn on the racks."""

from __future__ import annotations

from labkit.cluster.backends import connect
from labkit.topology import (
    draw_racks,
    fleet_distance,
    fleet_graph,
    fleet_matrix,
    format_matrix,
    nvlink_domains,
    nvlink_islands,
    placement,
)
from labkit.widgets import TopologyView
from tests.paths import TEST_DATA

UP = TEST_DATA / "upstream" / "nvidia-computedomain"


def test_two_racks_are_two_nvlink_domains_of_72_gpus():
    g = fleet_graph("nvl72-two-racks")
    domains = nvlink_domains(g)
    assert sorted(len(v) for v in domains.values()) == [18, 18]
    gpus_only = g.subgraph(n for n, d in g.nodes(data=True) if d.get("kind") in ("gpu", "nvlinkDomain"))
    assert [len(i) for i in nvlink_islands(gpus_only)] == [72, 72]


def test_codes_across_trays_and_racks():
    g = fleet_graph("nvl72-two-racks")
    assert fleet_distance(g, "rack-a-tray-00/GPU0", "rack-a-tray-00/GPU3") == "NV18"
    assert fleet_distance(g, "rack-a-tray-00/gpu-0", "rack-a-tray-17/gpu-2") == "NV18"
    assert fleet_distance(g, "rack-a-tray-00/GPU0", "rack-b-tray-00/GPU0") == "NET"
    assert fleet_distance(g, "rack-a-tray-00/NIC2", "rack-b-tray-05/NIC2") == "RAIL"
    assert fleet_distance(g, "rack-a-tray-00/NIC2", "rack-b-tray-05/NIC1") == "NET"
    assert fleet_distance(g, "rack-a-tray-00/GPU0", "rack-a-tray-00/NIC0") == "PHB"
    text = format_matrix(fleet_matrix(g, ["rack-a-tray-00/GPU0", "rack-b-tray-00/GPU0"]))
    assert text.splitlines()[1].split() == ["rack-a-tray-00/GPU0", "X", "NET"]


def test_placement_of_the_nvbandwidth_job_is_drawn_on_its_rack(tmp_path):
    c = connect("sim", "nvl72-two-racks", progress=False)
    c.apply(UP / "nvbandwidth-test-job-1.yaml")
    c.wait()
    where = placement(c)
    assert sorted(where) == ["rack-a-tray-00/gpu-0", "rack-a-tray-00/gpu-1", "rack-a-tray-01/gpu-0",
                             "rack-a-tray-01/gpu-1"]
    assert set(where.values()) == {"nvbandwidth-test-1-worker-0", "nvbandwidth-test-1-worker-1"}
    fig = draw_racks(fleet_graph("nvl72-two-racks"), where)
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert legend == ["nvbandwidth-test-1", "free"]
    fig.savefig(tmp_path / "racks.png")
    assert (tmp_path / "racks.png").stat().st_size > 5000


def test_topology_across_nodes_as_typed(capsys):
    from labkit.cli import main

    assert main(["topology", "--profile", "nvl72-two-racks", "--across", "rack-a-tray-00/GPU0",
                 "rack-a-tray-05/gpu-1", "rack-b-tray-00/GPU0"]) == 0
    rows = [ln.split() for ln in capsys.readouterr().out.splitlines()[1:]]
    assert rows == [["rack-a-tray-00/GPU0", "X", "NV18", "NET"], ["rack-a-tray-05/gpu-1", "NV18", "X", "NET"],
                    ["rack-b-tray-00/GPU0", "NET", "NET", "X"]]
    assert main(["topology", "--profile", "nvl72-two-racks", "--across", "rack-a-tray-00/GPU9"]) == 3
    assert "no device 'rack-a-tray-00/GPU9'" in capsys.readouterr().err


def test_topology_view_renders_a_fleet_with_a_multi_node_jobs_placement():
    """TopologyView over fleet_graph: a column per NVLink domain, a row per tray, the nvbandwidth
    workers' GPUs in their pods' colours; clicking one of them names its holder."""
    c = connect("sim", "nvl72-rack", progress=False)
    c.apply(UP / "nvbandwidth-test-job-1.yaml")
    c.wait()
    overlay = placement(c)
    assert sorted(set(overlay.values())) == ["nvbandwidth-test-1-worker-0", "nvbandwidth-test-1-worker-1"]
    view = TopologyView(fleet_graph("nvl72-rack"), overlay=overlay)
    model = view.svg.graph
    bars = [n for n in model["nodes"] if n["kind"] == "nvlinkDomain"]
    trays = [n for n in model["nodes"] if n["kind"] == "node"]
    gpus = {n["id"]: n for n in model["nodes"] if n["kind"] == "gpu"}
    # the rack's domain, and a column for the control-plane node (no clique, no GPUs)
    assert [b["label"] for b in bars] == ["NVLink domain 1c0a01.1 (18 nodes)", "no NVLink domain"]
    assert len(trays) == 19
    assert len(gpus) == 72
    coloured = {gid for gid, n in gpus.items() if n["fill"] != "#ffffff"}
    assert {f"{k.split('/')[0]}/GPU{k.rsplit('-', 1)[1]}" for k in overlay} == coloured
    assert set(model["claims"]) == set(overlay.values())
    held = sorted(coloured)[0]
    view.svg.selected = held
    assert "nvbandwidth-test-1-worker-" in view.info.value and "gpu.nvidia.com" in view.info.value
