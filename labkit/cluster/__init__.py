"""labkit.cluster: one Cluster interface over the sim, kubeconfig, local and kind backends.

    from labkit.cluster import connect
    with connect("sim", profile="workshop") as c:
        c.apply("pod.yaml"); c.wait(); print(c.placements())
"""

from labkit.cluster.backends import backend_class, backend_names, connect, register_backend
from labkit.cluster.base import (
    Cluster,
    ClusterError,
    ClusterInputError,
    NotFound,
    RefusedObjects,
)
from labkit.cluster.placements import Placement, PlacementTable, build_placements

__all__ = [
    "Cluster",
    "ClusterError",
    "ClusterInputError",
    "NotFound",
    "Placement",
    "PlacementTable",
    "RefusedObjects",
    "backend_class",
    "backend_names",
    "build_placements",
    "connect",
    "register_backend",
]
