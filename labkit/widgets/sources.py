"""Where a widget gets its objects: a live `Cluster`, or plain lists (for scripts and tests)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from labkit.cluster.base import ClusterError
from labkit.widgets.logic import class_expressions, iter_devices, match_devices


@dataclass
class Inventory:
    classes: list[dict] = field(default_factory=list)
    slices: list[dict] = field(default_factory=list)
    claims: list[dict] = field(default_factory=list)
    nodes: list[dict] = field(default_factory=list)
    cluster: Any = None
    kubernetes_version: str = "1.37"

    @classmethod
    def of(cls, source: Any = None, **lists: Any) -> Inventory:
        """`source` is a Cluster, an Inventory, or None (then `lists` give the objects)."""
        if isinstance(source, Inventory):
            return source
        if source is None:
            return cls(**lists)
        version = getattr(getattr(source, "profile", None), "kubernetes_version", "1.37")
        inv = cls(cluster=source, kubernetes_version=version)
        inv.refresh()
        return inv

    def refresh(self) -> None:
        if self.cluster is None:
            return
        self.classes = self.cluster.list("DeviceClass")
        self.slices = self.cluster.list("ResourceSlice")
        self.claims = self.cluster.list("ResourceClaim")
        self.nodes = self.cluster.list("Node")

    def node_profile(self, node_name: str) -> str | None:
        profile = getattr(self.cluster, "profile", None)
        for n in getattr(profile, "nodes", []) or []:
            if n.name == node_name:
                return n.node_profile
        for n in self.nodes:
            if n["metadata"]["name"] == node_name:
                return n["metadata"].get("labels", {}).get("fake-gpus.dev/node-profile")
        return None

    def device_names_for_class(self, class_name: str) -> tuple[list[str], list[str]]:
        """(attribute names, capacity names) seen on devices that the class selects."""
        try:
            exprs = class_expressions(self.classes, class_name)
        except KeyError:
            return [], []
        matching = {(m.pool, m.device) for m in match_devices(exprs, self.slices) if m.result == "match"}
        attrs: set[str] = set()
        caps: set[str] = set()
        for s, d in iter_devices(self.slices):
            if (s["spec"]["pool"]["name"], d["name"]) in matching:
                attrs.update(d.get("attributes") or {})
                caps.update(d.get("capacity") or {})
        return sorted(attrs), sorted(caps)


CLUSTER_DOWN = ("the cluster is down: run the notebook's first cell (it starts the cluster), "
                "then this widget's cell again")


def cluster_is_down(cluster: Any) -> bool:
    """True when `cluster` was stopped (or never started): listing objects fails with ClusterError."""
    if cluster is None:
        return False
    try:
        cluster.list("DeviceClass")
    except ClusterError:
        return True
    return False


def error_html(exc: BaseException, cluster: Any = None) -> str:
    """One red line for a widget: what went wrong, or that the cluster is down and what to do."""
    from html import escape

    if cluster_is_down(cluster):
        text = CLUSTER_DOWN
    else:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        text = f"{type(exc).__name__}: {first}" if first else type(exc).__name__
    return f"<pre class='labkit-error' style='color:#b00020; white-space:pre-wrap'>{escape(text)}</pre>"


def guarded(show: Callable[[str], None], fn: Callable[..., Any], cluster: Callable[[], Any] = lambda: None
            ) -> Callable[..., None]:
    """A widget callback that shows its error in the widget (`show(html)`) instead of losing it in the
    kernel log, where ipywidgets puts exceptions raised by on_click / observe handlers."""

    def run(*args: Any) -> None:
        try:
            fn(*args)
        except Exception as exc:  # noqa: BLE001 - shown to the learner, in the widget
            show(error_html(exc, cluster()))

    return run
