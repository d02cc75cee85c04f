"""Selectors over ResourceSlices: every device of some slices, evaluated like kube-scheduler does.

The one home of "CEL over slices": the ``labkit cel`` CLI (:mod:`labkit.cel.cli`) and the CEL
explorer widget (:func:`labkit.widgets.logic.match_devices`) both list devices with this.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from labkit.cel.device import device_input
from labkit.cel.engine import SelectorProgram
from labkit.cel.errors import CelRuntimeError

__all__ = ["DeviceMatch", "evaluate_slices", "node_of"]


@dataclass
class DeviceMatch:
    """One device of a slice and what the selectors said about it."""

    node: str      # the node name, "<all nodes>", "<node selector>" or "" (see node_of)
    driver: str
    pool: str
    device: str
    result: str    # "match" | "no match" | "error"
    message: str = ""


def node_of(spec: dict[str, Any], device: dict[str, Any]) -> str:
    """Where a device is: its own node fields (per-device node selection), else its slice's."""
    for source in (device, spec):
        if source.get("nodeName"):
            return str(source["nodeName"])
        if source.get("allNodes"):
            return "<all nodes>"
        if source.get("nodeSelector"):
            return "<node selector>"
    return ""


def evaluate_slices(programs: SelectorProgram | Sequence[SelectorProgram],
                    slices: Iterable[object]) -> list[DeviceMatch]:
    """One row per device of the ResourceSlices in ``slices`` (other objects are skipped).

    Several programs are ANDed and stop at the first false or error, like the allocator; a
    runtime error is the row's message (a device the selectors cannot judge), not an exception.
    """
    progs = [programs] if hasattr(programs, "evaluate") else list(programs)
    rows: list[DeviceMatch] = []
    for obj in slices:
        if not isinstance(obj, dict) or obj.get("kind", "ResourceSlice") != "ResourceSlice":
            continue
        spec = obj.get("spec") or {}
        driver = str(spec.get("driver", ""))
        pool = str((spec.get("pool") or {}).get("name", ""))
        for dev in spec.get("devices") or []:
            if not isinstance(dev, dict):
                continue
            row = DeviceMatch(node_of(spec, dev), driver, pool, str(dev.get("name", "")), "match")
            inp = device_input(driver, dev)
            for prog in progs:
                try:
                    if not prog.evaluate(inp):
                        row.result = "no match"
                        break
                except CelRuntimeError as exc:
                    row.result, row.message = "error", str(exc)
                    break
            rows.append(row)
    return rows
