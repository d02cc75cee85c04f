"""The ``local`` cluster backend: real control-plane binaries as local processes.

Binaries come from ``tools/build-controlplane.sh`` (built from the Go module proxy into
``$LABKIT_CACHE/controlplane/<minor>/bin``). See `LocalCluster`.
"""

from labkit.cluster.base import register_backend
from labkit.cluster.local.cluster import LocalCluster

register_backend("local", LocalCluster)

__all__ = ["LocalCluster"]
