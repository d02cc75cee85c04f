"""ipywidgets for DRA: ClaimBuilder, CelPlayground, InventoryExplorer, TopologyView.

Everything a widget does is also a plain function in `labkit.widgets.logic`.
"""

from labkit.widgets.claim_builder import ClaimBuilder
from labkit.widgets.explorers import CelPlayground, InventoryExplorer, evaluate
from labkit.widgets.logic import (
    ClaimSpec,
    Filter,
    RequestSpec,
    allocate_on_cluster,
    build_claim,
    inventory_rows,
    match_devices,
    preview,
    selector_for,
)
from labkit.widgets.topology_view import TopologyView, svg_model

__all__ = [
    "CelPlayground", "ClaimBuilder", "ClaimSpec", "Filter", "InventoryExplorer", "RequestSpec", "TopologyView",
    "allocate_on_cluster", "build_claim", "evaluate", "inventory_rows", "match_devices", "preview",
    "selector_for", "svg_model",
]
