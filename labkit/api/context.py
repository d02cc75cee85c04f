"""What validation rules need to know besides the object: version, gates, the CEL checks."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from labkit.api.features import FEATURE_DEFAULTS, MATURITY

__all__ = ["CelChecks", "Context"]


@dataclass(frozen=True)
class CelChecks:
    """How validation checks a CEL selector. labkit.api sits below labkit.cel and cannot compile
    CEL itself, so whoever validates hands this in (``labkit.cel.validation.CEL_CHECKS``, which
    ``labkit.cel.validation.validate`` passes); without it only the length limit is checked.

    Both are called as ``f(expression, consumable_capacity=bool, list_type_attributes=bool)``.
    """

    #: compiles a new selector as the API server does; raises an exception whose class (or a
    #: base class) is named ``CelError``, with ``message`` and ``hint``, when it does not compile
    compile: Callable[..., Any]
    #: the selector's estimated worst-case cost (Kubernetes refuses new ones above 1,000,000)
    max_cost: Callable[..., int] | None = None


@dataclass
class Context:
    version: str
    gates: dict[str, bool]
    cel_compile: Callable[..., Any] | None = None
    #: a selector's estimated worst-case cost (Kubernetes refuses new ones above 1,000,000)
    cel_max_cost: Callable[..., int] | None = None
    #: namespaces present in the input, name -> labels (for the admin-access rule)
    namespaces: dict[str, dict[str, Any]] = field(default_factory=dict)

    @classmethod
    def build(cls, version: str, gates: dict[str, bool], cel: CelChecks | None) -> Context:
        return cls(version=version, gates=gates, cel_compile=cel.compile if cel else None,
                   cel_max_cost=cel.max_cost if cel else None)

    def minor(self) -> int:
        return int(self.version.split(".")[1])

    def at_least(self, version: str) -> bool:
        """The rules of Kubernetes ``version`` ("1.38") or newer apply."""
        return self.minor() >= int(version.split(".")[1])

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
