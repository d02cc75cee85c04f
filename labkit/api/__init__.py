"""resource.k8s.io/v1 objects as plain dicts: load, validate, dump."""

from labkit.api.defaults import with_defaults
from labkit.api.load import LoadError, dump, load, load_files
from labkit.api.problem import Problem
from labkit.api.quantity import Quantity, QuantityError, parse_quantity
from labkit.api.validate import validate

__all__ = [
    "LoadError", "Problem", "Quantity", "QuantityError", "dump", "load", "load_files",
    "parse_quantity", "validate", "with_defaults",
]
