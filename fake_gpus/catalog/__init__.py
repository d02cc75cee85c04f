"""Hardware catalog of the fake GPU driver: GPU and NIC models, MIG geometry, node profiles.

    node_profiles() -> list[str]                  # packaged + $FAKE_GPUS_PROFILE_PATH dirs
    load_node_profile(name_or_path) -> NodeProfile
    gpu_model(name) -> GpuModel ; nic_model(name) -> NicModel
    published_figures() -> dict                   # public NVIDIA numbers the tests compare against

Users add profiles by dropping `<name>.yaml` files into a directory listed in
FAKE_GPUS_PROFILE_PATH (os.pathsep-separated) or by passing a file path.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import yaml

from fake_gpus.catalog.loader import (
    CATALOG_DIR,
    MIG_MODES,
    PROFILE_PATH_ENV,
    CatalogError,
    catalog_defaults,
    gpu_model,
    gpu_models,
    load_node_profile,
    nic_model,
    nic_models,
    node_profiles,
    parse_node_profile,
)
from fake_gpus.catalog.models import (
    GpuModel,
    GpuSlot,
    MigPlacement,
    MigProfile,
    NicModel,
    NicSlot,
    NodeProfile,
)


@cache
def _published() -> dict[str, Any]:
    return yaml.safe_load((CATALOG_DIR / "published_figures.yaml").read_text())


def published_figures() -> dict[str, Any]:
    """The public NVIDIA figures (a fresh copy) that the catalog is checked against."""
    import copy

    return copy.deepcopy(_published())


__all__ = [
    "MIG_MODES", "PROFILE_PATH_ENV", "CatalogError", "GpuModel", "GpuSlot", "MigPlacement", "MigProfile",
    "NicModel", "NicSlot", "NodeProfile", "catalog_defaults", "gpu_model", "gpu_models", "load_node_profile",
    "nic_model", "nic_models", "node_profiles", "parse_node_profile", "published_figures",
]
