"""What validation rules need to know besides the object: version, gates, the CEL compiler."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from labkit.api.features import FEATURE_DEFAULTS, MATURITY

__all__ = ["Context", "load_cel_compiler", "load_cel_cost_estimator"]


def load_cel_compiler() -> Callable[..., Any] | None:
    """``labkit.cel.compile_new_selector`` (the API server's view of a new selector) if that module
    is there, else None (CEL checks skipped)."""
    try:
        module = importlib.import_module("labkit.cel")
    except ImportError:
        return None
    return getattr(module, "compile_new_selector", None) or getattr(module, "compile_selector", None)


def load_cel_cost_estimator() -> Callable[..., int] | None:
    """``labkit.cel.estimate_max_cost`` if available, else None (estimated-cost check skipped)."""
    try:
        module = importlib.import_module("labkit.cel")
    except ImportError:
        return None
    return getattr(module, "estimate_max_cost", None)


@dataclass
class Context:
    version: str
    gates: dict[str, bool]
    cel_compile: Callable[..., Any] | None = None
    #: a selector's estimated worst-case cost (Kubernetes refuses new ones above 1,000,000)
    cel_max_cost: Callable[..., int] | None = None
    #: namespaces present in the input, name -> labels (for the admin-access rule)
    namespaces: dict[str, dict] = field(default_factory=dict)

    def minor(self) -> int:
        return int(self.version.split(".")[1])

    def on(self, gate: str) -> bool:
        return bool(self.gates.get(gate, False))

    def gate_message(self, gate: str) -> str | None:
        """None if ``gate`` is on, else why the field is refused and how to fix it."""
        if self.on(gate):
            return None
        if gate not in FEATURE_DEFAULTS[self.version]:
            later = [v for v in FEATURE_DEFAULTS if gate in FEATURE_DEFAULTS[v]]
            since = f"; it appears in Kubernetes {later[0]}" if later else ""
            return (f"Forbidden: needs feature gate {gate}, which does not exist in Kubernetes "
                    f"{self.version}{since} (use --kubernetes-version)")
        maturity = MATURITY[self.version][gate]
        if FEATURE_DEFAULTS[self.version][gate]:
            return (f"Forbidden: needs feature gate {gate} ({maturity}, on by default in Kubernetes "
                    f"{self.version} but turned off by --feature-gates); drop {gate}=false")
        default_on = [v for v in FEATURE_DEFAULTS if FEATURE_DEFAULTS[v].get(gate)]
        when = f"; on by default from Kubernetes {default_on[0]}" if default_on else ""
        return (f"Forbidden: needs feature gate {gate} ({maturity}, off in Kubernetes "
                f"{self.version}{when}); set --feature-gates {gate}=true, otherwise the API "
                "server drops this field")
