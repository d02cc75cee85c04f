"""Plain-text views of a cluster that are the same on every backend: no claim-name suffixes,
uids or timestamps, rows sorted. The notebooks print these in cells whose output nbval checks."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from fake_gpus.plugin.cdi import nvidia_container_view
from labkit.api.attributes import plain_attributes

HIDDEN_ENV = ("FAKE_DRA_CLAIM", "FAKE_DRA_CLAIM_UID")


def table(rows: Iterable[Sequence[Any]], header: Sequence[str]) -> str:
    """A left-aligned text table."""
    cells = [[str(c) for c in r] for r in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(header)]
    out = ["  ".join(h.upper().ljust(w) for h, w in zip(header, widths)).rstrip()]
    out += ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in cells]
    return "\n".join(out)


def placement_lines(cluster: Any, pods: Iterable[str] | None = None,
                    columns: Sequence[str] = ("pod", "request", "node", "device", "profile")) -> str:
    """Which device each pod got, without the generated claim names."""
    wanted = set(pods) if pods is not None else None
    rows = sorted({tuple(r[c] for c in columns) for r in cluster.placements().rows
                   if wanted is None or r["pod"] in wanted})
    return table(rows, columns) if rows else "(no placements)"


def pod_lines(cluster: Any, names: Iterable[str] | None = None, namespace: str = "default") -> str:
    """Pod, phase and node of each pod (sorted by name)."""
    wanted = set(names) if names is not None else None
    rows = []
    for p in cluster.list("Pod", namespace=namespace):
        name = p["metadata"]["name"]
        if wanted is None or name in wanted:
            rows.append((name, p.get("status", {}).get("phase", "Pending"), p["spec"].get("nodeName") or "-"))
    return table(sorted(rows), ("pod", "phase", "node")) if rows else "(no pods)"


def show_env(env: Mapping[str, str], prefixes: Sequence[str] = ("NVIDIA_VISIBLE_DEVICES", "FAKE_")) -> str:
    """The device variables of a container's environment, one per line, sorted."""
    keys = sorted(k for k in env if k.startswith(tuple(prefixes)) and k not in HIDDEN_ENV)
    return "\n".join(f"{k}={env[k]}" for k in keys) if keys else "(no device variables)"


def show_container_view(env: Mapping[str, str], keys: Sequence[str] = ("NVIDIA_VISIBLE_DEVICES", "FAKE_GPU_DEVICES")) -> str:
    """Side by side: what the container got from the fake driver (``keys`` of its env) and what
    NVIDIA's real driver would hand the same container (`fake_gpus.plugin.cdi.nvidia_container_view`)."""
    real = nvidia_container_view(dict(env))
    left = [f"{k}={env[k]}" for k in keys if k in env] or ["(no GPU)"]
    right = [*real.get("env", []), *(f"device node {n}" for n in real.get("deviceNodes", [])),
             *(f"mount {m}" for m in real.get("mounts", [])), *(f"hook {h}" for h in real.get("hooks", [])),
             *(f"inside: {c}" for c in real.get("check", []))] or ["(no GPU)"]
    rows = [(left[i] if i < len(left) else "", right[i] if i < len(right) else "")
            for i in range(max(len(left), len(right)))]
    return table(rows, ("this lab (fake driver)", "NVIDIA's driver (real cluster)"))


def device_table(slices: Iterable[dict], node: str, driver: str | None = None) -> str:
    """Devices one node publishes: name, type, product / profile, memory, PCIe root."""
    rows = []
    for s in slices:
        spec = s.get("spec", {})
        if spec.get("nodeName") != node or (driver and spec.get("driver") != driver):
            continue
        for d in spec.get("devices", []):
            attrs = {k.split("/")[-1] if k.startswith(spec["driver"]) else k: "" if v is None else str(v)
                     for k, v in plain_attributes(d).items()}
            mem = d.get("capacity", {}).get("memory", {}).get("value", "")
            rows.append((d["name"], attrs.get("type", ""), attrs.get("profile") or attrs.get("productName", ""),
                         mem, attrs.get("resource.kubernetes.io/pcieRoot", "")))
    return table(rows, ("device", "type", "product/profile", "memory", "pcieRoot"))


def show_yaml(path: Any, first: int | None = None) -> None:
    """Print a manifest file from examples/ as it is on disk (or only its first `first` documents,
    saying how many more the file holds), so the cell shows what the next line applies."""
    from pathlib import Path

    text = Path(path).read_text(encoding="utf-8")
    docs = [d.strip("\n") for d in text.split("\n---\n") if d.strip()]
    shown = docs if first is None else docs[:first]
    print(f"# {Path(path).as_posix()}")
    print("\n---\n".join(shown))
    if len(shown) < len(docs):
        print(f"# ... {len(docs) - len(shown)} more document(s) in the file")


def taint_lines(cluster: Any, node: str | None = None) -> str:
    """Every device taint: the ones drivers publish in their ResourceSlices and the ones
    DeviceTaintRules add (an admin's), one row per device and taint, sorted."""
    rows = set()
    slices = cluster.list("ResourceSlice")
    for s in slices:
        spec = s.get("spec", {})
        if node is None or spec.get("nodeName") == node:
            for d in spec.get("devices", []):
                for t in d.get("taints") or []:
                    rows.add((spec.get("pool", {}).get("name", ""), d["name"], t.get("key", ""), t.get("value", ""),
                              t.get("effect", ""), f"ResourceSlice ({spec.get('driver', '')})"))
    for r in cluster.list("DeviceTaintRule"):
        sel, t = r["spec"].get("deviceSelector") or {}, r["spec"].get("taint") or {}
        if node is None or sel.get("pool") in (None, node):
            rows.add((sel.get("pool", "*"), sel.get("device", "*"), t.get("key", ""), t.get("value", ""),
                      t.get("effect", ""), f"DeviceTaintRule {r['metadata']['name']}"))
    return table(sorted(rows), ("pool", "device", "key", "value", "effect", "from")) if rows else "(no device taints)"


def health_lines(cluster: Any, pods: Iterable[str] | None = None, namespace: str = "default") -> str:
    """The kubelet's view of each pod's devices (status.containerStatuses[].allocatedResourcesStatus):
    pod, container, entry, resourceID (a CDI device ID, its claim uid shortened) and health."""
    wanted = set(pods) if pods is not None else None
    rows = []
    for p in cluster.list("Pod", namespace=namespace):
        name = p["metadata"]["name"]
        if wanted is not None and name not in wanted:
            continue
        for cs in p.get("status", {}).get("containerStatuses") or []:
            for entry in cs.get("allocatedResourcesStatus") or []:
                for r in entry.get("resources") or []:
                    rid = str(r.get("resourceID", ""))
                    kind, _, dev = rid.partition("=")
                    short = f"{kind}=<claim uid>-{dev[37:]}" if len(dev) > 37 and dev[36] == "-" else rid
                    rows.append((name, cs.get("name", ""), entry.get("name", ""), short, r.get("health", "")))
    return table(sorted(rows), ("pod", "container", "entry", "resourceID", "health")) if rows else "(no health reported)"
