"""networkx topology graphs of nodes (NVLink / PCIe / NUMA) and clusters, with pictures.

    from labkit.topology import node_graph, nvlink_islands, distance, draw_node, placement_overlay
    g = node_graph("dgx-a100")                      # a node profile of the catalog
    nvlink_islands(g); distance(g, "gpu-0", "nic-0"); draw_node(g)
    g = node_graph(cluster, "dgx-a100-0")           # a node of a running cluster, by its name
    draw_node(g, placement_overlay(cluster, "dgx-a100-0"))   # who holds which device
"""

from labkit.api.attributes import plain_attributes
from labkit.topology.draw import draw_node, save_png
from labkit.topology.graph import cluster_graph, node_graph
from labkit.topology.picture import layout
from labkit.topology.queries import devices_under, distance, gpus, nvlink_islands, stats, topo_matrix
from labkit.topology.rack import (
    draw_racks,
    fleet_distance,
    fleet_graph,
    fleet_matrix,
    format_matrix,
    nvlink_domains,
    placement,
    placement_overlay,
)

__all__ = [
    "cluster_graph", "devices_under", "distance", "draw_node", "draw_racks", "fleet_distance", "fleet_graph",
    "fleet_matrix", "format_matrix", "gpus", "layout", "node_graph", "nvlink_domains", "nvlink_islands", "placement",
    "placement_overlay", "plain_attributes", "save_png", "stats", "topo_matrix",
]
