"""The `kind` backend: a real kind cluster (Docker or Podman) running the fake_gpus driver."""

from labkit.cluster.base import register_backend
from labkit.cluster.kind.backend import KindCluster

register_backend("kind", KindCluster)

__all__ = ["KindCluster"]
