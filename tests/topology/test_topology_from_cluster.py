"""Drawings from a running cluster (issue 44, item 3): `node_graph(cluster, node)` takes the node's
hardware from the cluster (its profile entry and its own ResourceSlices), `placement_overlay(cluster,
node)` says who holds each device (the join the lessons used to write by hand), and the two pictures
of a node share one public home (labkit.topology.picture): no module imports another's private names
(tools/check_imports.py, rule 4)."""

from __future__ import annotations

import ast
import subprocess
import sys

import pytest

from labkit import topology
from labkit.cluster import connect
from labkit.errors import InputError, NotFoundError, one_line
from labkit.topology import draw_node, node_graph
from tests.paths import REPO

ROOT = REPO
EXAMPLES = ROOT / "examples"


@pytest.fixture(scope="module")
def workshop():
    cluster = connect("sim", "workshop", progress=False)
    cluster.apply(EXAMPLES / "sharing/shared-claim.yaml")
    cluster.apply(EXAMPLES / "sharing/own-gpu.yaml")
    cluster.wait()
    yield cluster
    cluster.down()


def _same_graph(a, b) -> None:
    assert sorted(a.nodes) == sorted(b.nodes)
    assert sorted(map(sorted, a.edges)) == sorted(map(sorted, b.edges))
    assert {n: d.get("device") for n, d in a.nodes(data=True)} == {n: d.get("device") for n, d in b.nodes(data=True)}


def test_node_graph_of_a_cluster_node_is_its_profile_graph(workshop):
    for spec in workshop.profile.nodes:
        g = node_graph(workshop, spec.name)
        assert g.graph == {"name": spec.name, "profile": spec.node_profile}
        _same_graph(g, node_graph(spec.node_profile, node_name=spec.name))
        _same_graph(node_graph(workshop, node_name=spec.name), g)
    # the old forms (a profile name, the node's slices, a node name) keep working
    own = [s for s in workshop.list("ResourceSlice") if s["spec"].get("nodeName") == "dgx-a100-0"]
    _same_graph(node_graph("dgx-a100", own, "dgx-a100-0"), node_graph(workshop, "dgx-a100-0"))
    assert node_graph("dgx-a100").graph["name"] == "dgx-a100"


def test_a_mig_node_is_drawn_from_the_slices_the_cluster_publishes():
    cluster = connect("sim", "mig-lab", progress=False)
    try:
        for node, profile in (("a100-static-0", "mig-a100"), ("a100-dynamic-0", "dgx-a100")):
            own = [s for s in cluster.list("ResourceSlice") if s["spec"].get("nodeName") == node]
            g = node_graph(cluster, node)
            _same_graph(g, node_graph(profile, own, node))  # what lesson 06 wrote by hand
            assert any(d.get("kind") == "mig" for _, d in g.nodes(data=True)), node
    finally:
        cluster.down()


def test_the_overlay_is_the_nodes_placements(workshop):
    rows = workshop.placements().rows
    for label in ("pod", "claim"):
        by_hand = {r["device"]: r[label] for r in rows if r["node"] == "dgx-a100-0"}
        assert topology.placement_overlay(workshop, "dgx-a100-0", label=label) == by_hand
    overlay = topology.placement_overlay(workshop, "dgx-a100-0")
    assert set(overlay.values()) >= {"own-a", "own-b"} and len(overlay) == 3  # shared-gpu's GPU, own-a's, own-b's
    assert topology.placement_overlay(workshop, "t4-0") == {}
    fig = draw_node(node_graph(workshop, "dgx-a100-0"), overlay)
    assert {t.get_text() for t in fig.legends[0].get_texts()} >= {"own-a", "own-b"}


def test_a_node_the_cluster_lacks_is_a_one_line_error_naming_its_nodes(workshop):
    message = "cluster workshop: no node 'dgx-a100-9'; its nodes: dgx-a100-0, t4-0, t4-1"
    for call in (lambda: node_graph(workshop, "dgx-a100-9"), lambda: topology.placement_overlay(workshop, "dgx-a100-9")):
        with pytest.raises(NotFoundError) as err:
            call()
        assert str(err.value) == message
        assert one_line(err.value) == f"{message}; fix: name one of its nodes, e.g. 'dgx-a100-0'"
    with pytest.raises(InputError) as bad:
        topology.placement_overlay(workshop, "dgx-a100-0", label="device")
    assert one_line(bad.value) == ("placement_overlay: label 'device' is not one of pod, claim; "
                                   "fix: label=\"pod\" or label=\"claim\"")


def test_no_module_imports_another_modules_private_names():
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import check_imports
    finally:
        sys.path.remove(str(ROOT / "tools"))
    code = ("from labkit.topology.draw import _span\n"   # a private name of another module: refused
            "from labkit.cel import _proto\n"            # a private module of its package: allowed
            "from labkit.topology.picture import layout\n")
    assert check_imports.private_imports(ast.parse(code)) == [(1, "labkit.topology.draw._span")]
    out = subprocess.run([sys.executable, str(ROOT / "tools/check_imports.py")], cwd=ROOT, capture_output=True,
                         text=True, check=False)
    assert out.returncode == 0, out.stdout
    assert "private name" not in out.stdout
