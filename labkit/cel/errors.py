"""Errors raised by :mod:`labkit.cel`.

Every error carries a one-line ``message`` (what Kubernetes would say) and an optional
``hint`` (how to fix the expression). ``str(err)`` joins both, so callers can print it as is.
"""

from __future__ import annotations

from labkit.errors import InputError

#: appended by Kubernetes 1.37 to "no such key" runtime errors
NO_SUCH_KEY_HINT = (
    ". consider using CEL optional chaining (.? followed by orValue()) or guarding the check "
    "with has() for optional fields"
)
#: Kubernetes' error when an evaluation passes the actual cost limit (1,000,000)
COST_LIMIT_TEXT = "operation cancelled: actual cost limit exceeded"


class CelError(InputError):
    """A CEL selector problem: ``message`` is what Kubernetes says, ``hint`` how to fix it.

    ``detail`` is Kubernetes' full (possibly multi-line) text where it differs from the
    one-line ``message``: compile errors carry cel-go's `` | source`` / `` | ...^`` lines.
    """

    def __init__(self, message: str, hint: str = "", detail: str | None = None) -> None:
        self.message = message
        self.hint = hint
        self.detail = detail if detail is not None else message
        super().__init__(message + (f" ({hint})" if hint and not hint.startswith(".") else hint))


class CelCompileError(CelError):
    """The expression does not compile (syntax, types, undeclared names, unsupported)."""


class CelRuntimeError(CelError):
    """Evaluation failed for this device (missing key, overflow, bad conversion, ...)."""
