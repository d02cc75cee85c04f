"""Placement table: which device each pod got, backend-neutral.

Built from plain Pod and ResourceClaim dicts, so every backend (sim, local, kind) renders the
same rows for the same objects.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass

from labkit.api.attributes import lookup_attribute, plain_value
from labkit.output import Table

COLUMNS = ("pod", "namespace", "claim", "request", "node", "driver", "pool", "device", "profile", "shareID")


@dataclass(frozen=True)
class Placement:
    """One allocated device of one claim used by one pod."""

    pod: str
    namespace: str
    claim: str
    request: str
    node: str
    driver: str
    pool: str
    device: str
    profile: str = ""  # MIG profile when the device is a MIG slice (e.g. "3g.40gb")
    shareID: str = ""  # set for multi-allocatable (shared) devices


class PlacementTable:
    """Rows of placements; prints as text, renders as HTML in notebooks, `.rows` for dicts."""

    def __init__(self, placements: Iterable[Placement] = ()) -> None:
        self.placements: list[Placement] = list(placements)

    @property
    def rows(self) -> list[dict[str, str]]:
        return [asdict(p) for p in self.placements]

    def __len__(self) -> int:
        return len(self.placements)

    def __iter__(self) -> Iterator[Placement]:
        return iter(self.placements)

    def __getitem__(self, i: int) -> Placement:
        return self.placements[i]

    def _cells(self) -> list[list[str]]:
        return [[str(getattr(p, c)) for c in COLUMNS] for p in self.placements]

    def __str__(self) -> str:
        if not self.placements:
            return "(no placements)"
        return str(Table(COLUMNS, self._cells()))  # labkit.output's table: the data escaped for a terminal

    def __repr__(self) -> str:
        return f"PlacementTable({len(self.placements)} rows)"

    def _repr_html_(self) -> str:
        head = "".join(f"<th>{html.escape(c)}</th>" for c in COLUMNS)
        body = "".join(
            "<tr>" + "".join(f"<td>{html.escape(v)}</td>" for v in r) + "</tr>" for r in self._cells()
        )
        return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _device_attrs(slices: Iterable[dict]) -> dict[tuple[str, str, str], dict]:
    out: dict[tuple[str, str, str], dict] = {}
    for s in slices:
        spec = s.get("spec") or {}
        driver = spec.get("driver", "")
        pool = (spec.get("pool") or {}).get("name", "")
        for d in spec.get("devices") or []:
            out[(driver, pool, d.get("name", ""))] = d.get("attributes") or {}
    return out


def _mig_profile(attrs: dict) -> str:
    """The MIG profile attribute NVIDIA's driver publishes ("1g.10gb"), or ""."""
    value = plain_value(lookup_attribute(attrs, "gpu.nvidia.com", "gpu.nvidia.com/profile"))
    return value if isinstance(value, str) else ""


def build_placements(pods: Iterable[dict], claims: Iterable[dict], slices: Iterable[dict] = ()) -> PlacementTable:
    """Rows for every (pod, claim, device) where the claim is allocated and reserved for the pod.

    `slices` (optional) lets the table show MIG profiles. Sorted by namespace, pod, claim, request.
    """
    attrs = _device_attrs(slices)
    by_uid = {(p.get("metadata") or {}).get("uid"): p for p in pods}
    rows: list[Placement] = []
    for claim in claims:
        meta = claim.get("metadata") or {}
        status = claim.get("status") or {}
        results = ((status.get("allocation") or {}).get("devices") or {}).get("results") or []
        for ref in status.get("reservedFor") or []:
            pod = by_uid.get(ref.get("uid"))
            if pod is None or ref.get("resource", "pods") != "pods":
                continue
            pmeta = pod.get("metadata") or {}
            node = (pod.get("spec") or {}).get("nodeName") or ""
            for r in results:
                key = (r.get("driver", ""), r.get("pool", ""), r.get("device", ""))
                rows.append(
                    Placement(
                        pod=pmeta.get("name", ""),
                        namespace=pmeta.get("namespace", "default"),
                        claim=meta.get("name", ""),
                        request=r.get("request", ""),
                        node=node,
                        driver=key[0],
                        pool=key[1],
                        device=key[2],
                        profile=_mig_profile(attrs.get(key, {})),
                        shareID=r.get("shareID", "") or "",
                    )
                )
    rows.sort(key=lambda p: (p.namespace, p.pod, p.claim, p.request, p.device))
    return PlacementTable(rows)
