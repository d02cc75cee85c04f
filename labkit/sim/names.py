"""Names the way Kubernetes makes them: generateName suffixes, claim names, pod-template hashes.

Kubernetes draws random suffixes from a 27-character alphabet without vowels (so no words) and
without easily confused characters. The sim draws from the same alphabet with a seeded RNG, so
names look real and are the same on every run.
"""

from __future__ import annotations

import json
import random

#: alphabet of k8s.io/apimachinery/pkg/util/rand (no vowels, no 0/1/3)
ALPHANUMS = "bcdfghjklmnpqrstvwxz2456789"
#: names are DNS labels of at most 63 characters; the API server keeps 5 for the suffix
MAX_NAME_LEN = 63
RANDOM_LEN = 5
MAX_GENERATED_BASE = MAX_NAME_LEN - RANDOM_LEN


def rand_string(rng: random.Random, n: int = RANDOM_LEN) -> str:
    return "".join(rng.choice(ALPHANUMS) for _ in range(n))


def generated_name(rng: random.Random, generate_name: str) -> str:
    """What the API server makes of metadata.generateName."""
    return generate_name[:MAX_GENERATED_BASE] + rand_string(rng)


def claim_generate_name(pod_name: str, pod_claim_name: str) -> str:
    """generateName of a template claim, as kube-controller-manager's resourceclaim controller sets it.

    `<pod>-<podClaimName>-`; when that is longer than 57 characters both parts are cut in
    proportion to their length (and the trailing hyphen is dropped).
    """
    base = f"{pod_name}-{pod_claim_name}-"
    max_base = 57
    if len(base) > max_base:
        n = len(base)
        base = pod_name[: len(pod_name) * max_base // n] + "-" + pod_claim_name[: len(pod_claim_name) * max_base // n]
    return base


def safe_encode(s: str) -> str:
    """Map each character onto ALPHANUMS (Kubernetes' SafeEncodeString)."""
    return "".join(ALPHANUMS[ord(c) % len(ALPHANUMS)] for c in s)


def fnv32a(data: bytes) -> int:
    h = 0x811C9DC5
    for b in data:
        h ^= b
        h = (h * 0x01000193) & 0xFFFFFFFF
    return h


def pod_template_hash(template: dict, collision_count: int = 0) -> str:
    """ReplicaSet suffix for a Deployment's pod template.

    Kubernetes hashes the Go-printed template with FNV-32a and safe-encodes the decimal; we hash
    canonical JSON instead, so the shape (e.g. `7d4b9c8f5`) matches but the value differs.
    """
    data = json.dumps(template, sort_keys=True, separators=(",", ":")).encode()
    if collision_count:
        data += str(collision_count).encode()
    return safe_encode(str(fnv32a(data)))


def new_uid(rng: random.Random) -> str:
    """A version-4 UUID from 128 bits of `rng`: what str(uuid.UUID(int=bits, version=4)) gives,
    written directly (the sim makes one for every object it stores)."""
    n = rng.getrandbits(128)
    n = (n & ~(0xC000 << 48)) | (0x8000 << 48)  # the RFC 4122 variant
    n = (n & ~(0xF000 << 64)) | (4 << 76)  # version 4
    h = f"{n:032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
