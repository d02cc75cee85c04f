"""The API server's validation with CEL: :func:`labkit.api.validate.check_objects` given labkit.cel's checks.

labkit.api sits below labkit.cel, so it cannot compile a selector; it takes the checks as an
argument (:class:`labkit.api.context.CelChecks`). Everything at this layer or above that
validates objects as the API server would (``labkit validate``, ``labkit allocate``,
``labkit cel``, the sim cluster's ``apply``, the course checks) uses :func:`validate` here.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from labkit.api import features
from labkit.api.context import CelChecks
from labkit.api.problem import Problem
from labkit.api.validate import check_objects
from labkit.cel.facade import compile_new_selector, estimate_max_cost

__all__ = ["CEL_CHECKS", "validate"]

#: new selectors compiled as the API server compiles them, and Kubernetes' estimated cost
CEL_CHECKS = CelChecks(compile=compile_new_selector, max_cost=estimate_max_cost)


def validate(objs: dict[str, Any] | Iterable[dict[str, Any]], *,
             kubernetes_version: str = features.DEFAULT_VERSION, feature_gates: dict[str, bool] | None = None,
             existing: Iterable[dict[str, Any]] = ()) -> list[Problem]:
    """The API server's validation (structure and rules) with CEL selectors compiled and their
    cost estimated: the one ``validate`` callers use."""
    return check_objects(objs, kubernetes_version=kubernetes_version, feature_gates=feature_gates,
                         existing=existing, cel=CEL_CHECKS)
