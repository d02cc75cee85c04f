"""Deterministic names and identifiers: device names (NVIDIA's scheme), UUIDs, slice names."""

from __future__ import annotations

import hashlib
import re
import uuid

# Namespace for our name-based (v5) UUIDs; any fixed value works, this one is ours.
_NAMESPACE = uuid.UUID("6f1c2a4e-0b7d-5e39-9a52-fa4e5c0d1b23")
_NAMESPACE_BYTES = _NAMESPACE.bytes

_DNS_SUBDOMAIN_MAX = 253


def _uuid(*parts: object) -> str:
    """str(uuid.uuid5(_NAMESPACE, "/".join(parts))), without the UUID object (a 100,000-GPU fleet
    makes 100,000 of these): SHA-1 of namespace and name, version 5 and RFC 4122 variant bits."""
    digest = bytearray(hashlib.sha1(_NAMESPACE_BYTES + "/".join([str(p) for p in parts]).encode()).digest()[:16])
    digest[6] = (digest[6] & 0x0F) | 0x50
    digest[8] = (digest[8] & 0x3F) | 0x80
    h = digest.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def gpu_uuid(node_name: str, minor: int) -> str:
    """`GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`, stable for (node, minor)."""
    return "GPU-" + _uuid("gpu", node_name, minor)


def mig_uuid(node_name: str, parent_minor: int, gi_profile_id: int, placement_start: int) -> str:
    """`MIG-xxxxxxxx-...`, stable for (node, parent GPU, GI profile, placement)."""
    return "MIG-" + _uuid("mig", node_name, parent_minor, gi_profile_id, placement_start)


def normalize_profile(profile: str) -> str:
    """MIG profile as used in device names: dots dropped, lower-cased, other characters outside
    [a-z0-9-] become '-' (`1g.5gb+me` -> `1g5gb-me`)."""
    s = profile.replace(".", "").lower()
    return re.sub(r"[^a-z0-9-]", "-", s)


def gpu_device_name(minor: int) -> str:
    return f"gpu-{minor}"


def mig_device_name(parent_minor: int, profile: str, gi_profile_id: int, placement_start: int) -> str:
    return f"gpu-{parent_minor}-mig-{normalize_profile(profile)}-{gi_profile_id}-{placement_start}"


def vfio_device_name(index: int) -> str:
    """NVIDIA's name for a GPU bound to vfio-pci: its position among all NVIDIA GPUs of the node
    in PCI address order (not the NVML minor, which such a GPU has not)."""
    return f"gpu-vfio-{index}"


def vfio_uuid(pci_bus_id: str) -> str:
    """A VFIO device's uuid as NVIDIA's driver makes it: a name-based SHA-1 UUID of the PCI
    address in the DNS namespace (no GPU- prefix), so it follows the address, not the node."""
    return str(uuid.uuid5(uuid.NAMESPACE_DNS, pci_bus_id))


def counter_set_name(minor: int) -> str:
    return f"gpu-{minor}-counter-set"


def nic_device_name(index: int) -> str:
    return f"nic-{index}"


def slice_name(node_name: str, driver: str, index: int) -> str:
    """`<node>-<driver>-<index>`, a valid DNS subdomain (long inputs are shortened with a hash)."""
    base = f"{node_name}-{driver}".lower()
    base = re.sub(r"[^a-z0-9.-]", "-", base)
    base = re.sub(r"\.-|-\.", "-", base).strip("-.")
    suffix = f"-{index}"
    if len(base) + len(suffix) > _DNS_SUBDOMAIN_MAX:
        digest = hashlib.sha256(base.encode()).hexdigest()[:10]
        base = base[: _DNS_SUBDOMAIN_MAX - len(suffix) - 11].rstrip("-.") + "-" + digest
    return base + suffix


def bounded(value: str, limit: int = 64) -> str:
    """Shorten a string attribute value to the API limit, keeping it unique via a hash."""
    if len(value) <= limit:
        return value
    digest = hashlib.sha256(value.encode()).hexdigest()[:8]
    return value[: limit - 9] + "-" + digest
