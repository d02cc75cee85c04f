"""The container runtime's part of CDI, reduced to env: resolve fully qualified CDI device IDs
(`vendor/class=name`) against the spec files in a node's CDI dir and merge their env edits
(spec-level edits first, then the device's, in ID order; later values win like in runc)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

import yaml

from fake_gpus.plugin.cdi import visible_devices
from labkit.errors import EngineError


class CDIError(EngineError, RuntimeError):
    pass


def load_specs(dirs: Iterable[Path]) -> dict[str, dict]:
    """kind -> merged spec index {"edits": [...], "devices": {name: edits}} for every spec file."""
    index: dict[str, dict] = {}
    for d in dirs:
        if not d.is_dir():
            continue
        for f in sorted(d.iterdir()):
            if f.suffix not in (".yaml", ".yml", ".json") or f.name.startswith("."):
                continue
            try:
                text = f.read_text()
                spec = json.loads(text) if f.suffix == ".json" else yaml.safe_load(text)
            except (OSError, ValueError, yaml.YAMLError) as exc:
                raise CDIError(f"CDI spec {f}: unreadable ({exc})") from None
            if not isinstance(spec, dict) or "kind" not in spec:
                continue
            entry = index.setdefault(spec["kind"], {"edits": [], "devices": {}})
            entry["edits"].append(spec.get("containerEdits") or {})
            for dev in spec.get("devices") or []:
                entry["devices"][dev.get("name")] = (spec.get("containerEdits") or {}, dev.get("containerEdits") or {})
    return index


def resolve_env(device_ids: Iterable[str], dirs: Iterable[Path]) -> dict[str, str]:
    """The env a container gets when the runtime injects `device_ids`."""
    dirs = list(dirs)
    index = load_specs(dirs)
    env: dict[str, str] = {}
    seen_specs: set[int] = set()
    for cdi_id in device_ids:
        kind, sep, name = cdi_id.partition("=")
        if not sep:
            raise CDIError(f"CDI device ID {cdi_id!r} is not fully qualified (want vendor/class=name)")
        entry = (index.get(kind) or {}).get("devices", {}).get(name)
        if entry is None:
            raise CDIError(f"CDI device {cdi_id} not found in any spec under {', '.join(map(str, dirs))}")
        spec_edits, dev_edits = entry
        if id(spec_edits) not in seen_specs:
            seen_specs.add(id(spec_edits))
            _apply(env, spec_edits)
        _apply(env, dev_edits)
    return visible_devices(env)  # the fake runtime hook: lists of the injected devices


def _apply(env: dict[str, str], edits: dict) -> None:
    for item in edits.get("env") or []:
        k, _, v = str(item).partition("=")
        env[k] = v
