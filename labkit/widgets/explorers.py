"""CelPlayground (type a selector, see every device match / not / fail with the hint) and
InventoryExplorer (slices and devices per node, free or held by which claim)."""

from __future__ import annotations

from collections import Counter
from html import escape
from typing import Any

import ipywidgets as W

from labkit.cel import DEFAULT_ENGINE, ENGINES, CelError
from labkit.widgets.logic import html_table, inventory_rows, match_devices
from labkit.widgets.sources import Inventory, guarded

EXAMPLE = 'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("40Gi")) >= 0'


def evaluate(expression: str, slices: list[dict], engine: str | None = None) -> tuple[str, list[Any]]:
    """(summary line, rows) for one expression over all devices; compile errors give no rows."""
    try:
        rows = match_devices([expression], slices, engine=engine)
    except CelError as exc:
        return f"compile error: {exc}", []
    counts = Counter(r.result for r in rows)
    summary = " · ".join(f"{counts.get(k, 0)} {k}" for k in ("match", "no match", "error"))
    return summary, rows


class CelPlayground(W.VBox):
    def __init__(self, cluster: Any = None, *, expression: str = EXAMPLE, engine: str = DEFAULT_ENGINE,
                 **lists: Any):
        """``engine``: the kit's default (cel-expr-python where installed; cel-python in a browser)."""
        self.inventory = Inventory.of(cluster, **lists)
        self.expression = W.Textarea(value=expression, layout=W.Layout(width="100%", height="70px"),
                                     continuous_update=False)
        self.expression.add_class("labkit-cel-expression")
        self.engine = W.Dropdown(options=list(ENGINES), value=engine, description="engine")
        self.only = W.ToggleButtons(options=["all", "match", "no match", "error"], value="all",
                                    style={"button_width": "auto"})
        self.only.add_class("labkit-cel-only")
        self.summary = W.HTML()
        self.summary.add_class("labkit-cel-summary")
        self.table = W.HTML()
        for w in (self.expression, self.engine, self.only):
            w.observe(guarded(self._show_error, lambda _: self.run(), lambda: self.inventory.cluster), names="value")
        super().__init__([self.expression, W.HBox([self.engine, self.only]), self.summary, self.table])
        self.add_class("labkit-cel-playground")
        self.run()

    def _show_error(self, html: str) -> None:
        self.summary.value = html

    def run(self) -> list[Any]:
        summary, rows = evaluate(self.expression.value, self.inventory.slices, self.engine.value)
        colour = "#b00020" if summary.startswith("compile error") else "#333"
        self.summary.value = f"<pre style='color:{colour}; white-space:pre-wrap'>{escape(summary)}</pre>"
        shown = [r for r in rows if self.only.value == "all" or r.result == self.only.value]
        self.table.value = html_table(shown)
        return rows


class InventoryExplorer(W.VBox):
    def __init__(self, cluster: Any = None, **lists: Any):
        self.inventory = Inventory.of(cluster, **lists)
        nodes = sorted({r.node for r in inventory_rows(self.inventory.slices)})
        self.node = W.Dropdown(options=["all nodes", *nodes], value="all nodes", description="node")
        self.kind = W.Dropdown(options=["all", "gpu", "mig", "nic"], value="all", description="type")
        self.free_only = W.Checkbox(value=False, description="free only", indent=False, layout=W.Layout(width="auto"))
        self.node.add_class("labkit-inventory-node")
        self.kind.add_class("labkit-inventory-type")
        self.refresh_button = refresh = W.Button(description="refresh", icon="refresh")
        refresh.on_click(guarded(self._show_error, lambda _: self.show(refresh=True), lambda: self.inventory.cluster))
        refresh.add_class("labkit-inventory-refresh")
        self.summary = W.HTML()
        self.summary.add_class("labkit-inventory-summary")
        self.table = W.HTML()
        for w in (self.node, self.kind, self.free_only):
            w.observe(guarded(self._show_error, lambda _: self.show(), lambda: self.inventory.cluster), names="value")
        super().__init__([W.HBox([self.node, self.kind, self.free_only, refresh]), self.summary, self.table])
        self.add_class("labkit-inventory")
        self.show()

    def _show_error(self, html: str) -> None:
        self.summary.value = html

    def rows(self) -> list[Any]:
        rows = inventory_rows(self.inventory.slices, self.inventory.claims)
        if self.node.value != "all nodes":
            rows = [r for r in rows if r.node == self.node.value]
        if self.kind.value != "all":
            rows = [r for r in rows if r.type == self.kind.value]
        return rows

    def show(self, refresh: bool = False) -> None:
        if refresh:
            self.inventory.refresh()
        rows = self.rows()
        free = sum(1 for r in rows if r.state == "free")
        self.summary.value = f"{len(rows)} devices · {free} free · {len(rows) - free} in use or tainted"
        self.table.value = html_table([r for r in rows if r.state == "free"] if self.free_only.value else rows)
