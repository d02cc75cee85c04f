"""The container runtime's part of CDI, reduced to env, for the local backend's node agent: read the
spec files in a node's CDI dirs, refuse what a CDI runtime refuses (naming the file and the field), and
resolve fully qualified device IDs (`vendor/class=name`) with the fake driver's own resolution
(`fake_gpus.plugin.cdi.resolve_env`: spec-level edits first, then the device's, in ID order; later
values win like in runc)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from fake_gpus.plugin import cdi as fake_cdi
from labkit.errors import EngineError


class CDIError(EngineError, RuntimeError):
    pass


#: libyaml when PyYAML has it: the agent reads every spec at each container start, and a spec (JSON,
#: as most drivers write it, is YAML too) parses ~10x faster than with the pure-Python loader
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _read(f: Path) -> Any:
    try:
        text = f.read_text(encoding="utf-8")
        return json.loads(text) if f.suffix == ".json" else yaml.load(text, Loader=_LOADER)  # noqa: S506 - a safe loader
    except (OSError, ValueError, yaml.YAMLError, RecursionError) as exc:
        raise CDIError(f"CDI spec {f}: unreadable ({str(exc).splitlines()[0] if str(exc) else type(exc).__name__}); "
                       "fix: write it as YAML or JSON (the CDI spec format)") from None


def load_specs(dirs: Iterable[Path]) -> list[dict]:
    """Every spec file (.yaml, .yml, .json) in ``dirs``, in name order, checked as a CDI runtime
    checks it (`fake_gpus.plugin.cdi.validate_spec`); a device name defined by two files of one kind
    is refused too, as the runtime's registry does."""
    specs: list[dict] = []
    owner: dict[str, Path] = {}
    for d in dirs:
        if not d.is_dir():
            continue
        for f in sorted(d.iterdir()):
            if f.suffix not in (".yaml", ".yml", ".json") or f.name.startswith("."):
                continue
            spec = _read(f)
            problems = fake_cdi.validate_spec(spec)
            if problems:
                raise CDIError(f"CDI spec {f}: {problems[0]}; fix the driver that wrote it "
                               "(the CDI spec format: cdiVersion, kind vendor/class, devices with names and env)")
            for dev in spec["devices"]:
                cdi_id = f"{spec['kind']}={dev['name']}"
                if cdi_id in owner:
                    raise CDIError(f"CDI spec {f}: device {cdi_id} is also defined in {owner[cdi_id]}; fix: one "
                                   "file per device")
                owner[cdi_id] = f
            specs.append(spec)
    return specs


def resolve_env(device_ids: Iterable[str], dirs: Iterable[Path]) -> dict[str, str]:
    """The env a container gets when the runtime injects `device_ids`."""
    dirs = list(dirs)
    ids = list(device_ids)
    for cdi_id in ids:
        if "=" not in cdi_id:
            raise CDIError(f"CDI device ID {cdi_id!r} is not fully qualified (want vendor/class=name)")
    specs = load_specs(dirs)
    known = {f"{spec['kind']}={dev['name']}" for spec in specs for dev in spec["devices"]}
    missing = next((cdi_id for cdi_id in ids if cdi_id not in known), None)
    if missing is not None:
        raise CDIError(f"CDI device {missing} not found in any spec under {', '.join(map(str, dirs))}")
    return fake_cdi.resolve_env(specs, ids)
