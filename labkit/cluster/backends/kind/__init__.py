"""The `kind` backend: a real kind cluster (Docker or Podman) running the fake_gpus driver."""

from labkit.cluster.backends import register_backend
from labkit.cluster.backends.kind.backend import KindCluster

register_backend("kind", KindCluster)

__all__ = ["KindCluster"]
