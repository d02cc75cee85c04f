"""labkit.cluster: one Cluster interface over the sim, kubeconfig, local and kind backends.

    from labkit.cluster import connect
    with connect("sim", profile="workshop") as c:
        c.apply("pod.yaml"); c.wait(); print(c.placements())
"""

from labkit.cluster import backends  # the registry package, callable: backends() -> names
from labkit.cluster.backends import backend_class, connect, register_backend
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
    "backends",
    "build_placements",
    "connect",
    "register_backend",
]
