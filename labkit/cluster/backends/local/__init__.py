"""The ``local`` cluster backend: real control-plane binaries as local processes.

Binaries come from ``tools/build-controlplane.sh`` (built from the Go module proxy into
``$LABKIT_CACHE/controlplane/<minor>/bin``). See `LocalCluster`.
"""

from labkit.cluster.backends import register_backend
from labkit.cluster.backends.local.cluster import LocalCluster

register_backend("local", LocalCluster)

__all__ = ["LocalCluster"]
