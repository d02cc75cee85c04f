"""resource.k8s.io/v1 objects as plain dicts: load, validate, dump."""

from labkit.api.quantity import Quantity, QuantityError, parse_quantity

__all__ = ["Quantity", "QuantityError", "parse_quantity"]
