"""resource.k8s.io/v1 objects as plain dicts: load, dump, defaults (validation with CEL:
labkit.cel.validation.validate; the rules engine under it: labkit.api.validate.check_objects)."""

from labkit.api.defaults import with_defaults
from labkit.api.load import LoadError, dump, load, load_files
from labkit.api.problem import Problem
from labkit.api.quantity import Quantity, QuantityError, parse_quantity

__all__ = [
    "LoadError", "Problem", "Quantity", "QuantityError", "dump", "load", "load_files",
    "parse_quantity", "with_defaults",
]
