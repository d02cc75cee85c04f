"""The DRA CEL environment (``k8s.io/dynamic-resource-allocation/cel``) behind one facade.

>>> prog = compile_selector('device.driver == "gpu.nvidia.com"')
>>> prog.evaluate(device_input("gpu.nvidia.com", {"name": "gpu-0"}))
True

Importing the package imports ``labkit.cel.regex`` (through the facade), which registers the
pure-Python ``re2`` where google-re2 is absent, before cel-python (which imports ``re2`` itself)
can be loaded.
"""

from labkit.cel.device import DeviceInput, device_input
from labkit.cel.errors import CelCompileError, CelError, CelRuntimeError
from labkit.cel.facade import (
    COST_LIMIT,
    DEFAULT_ENGINE,
    ENGINE_LIMITS,
    ENGINES,
    Program,
    compile_new_selector,
    compile_selector,
    estimate_max_cost,
)
from labkit.cel.regex import NATIVE as NATIVE_REGEX
from labkit.cel.semver import Semver, SemverError, parse_semver
from labkit.cel.slices import DeviceMatch, evaluate_slices

__all__ = [
    "COST_LIMIT",
    "DEFAULT_ENGINE",
    "ENGINE_LIMITS",
    "ENGINES",
    "NATIVE_REGEX",
    "CelCompileError",
    "CelError",
    "CelRuntimeError",
    "DeviceInput",
    "DeviceMatch",
    "Program",
    "Semver",
    "SemverError",
    "compile_new_selector",
    "compile_selector",
    "device_input",
    "estimate_max_cost",
    "evaluate_slices",
    "parse_semver",
]
