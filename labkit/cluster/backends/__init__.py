"""The backends, side by side, and their registry: one package per runtime, as kwok's runtimes.

    sim/         the embedded simulator (in-process, no binaries)
    kubeconfig/  an existing cluster reached through a kubeconfig
    local/       the real control-plane binaries as local processes
    kind/        a kind cluster (Docker or Podman)
    kubeapi.py   what every backend with a real API server shares (`KubeCluster`): the verbs
                 (apply, get, list, delete, watch), the API-error mapping, wait, placements, explain

Each backend is a `labkit.cluster.base.Cluster` subclass with one question about this machine,
`available()` -> (ok, why), and registers itself when its package is imported. `backend_class`
imports that package only when the name is first asked for (`MODULES`), so ``local`` and ``kind``
cost nothing until then; `connect` is ``backend_class(name)(**kw).up(profile)``.
"""

from __future__ import annotations

import importlib
from typing import Any

from labkit.cluster.base import Cluster, ClusterError, MissingPackage, cluster_error
from labkit.model.profiles import ProfileError

#: registry name -> the package that registers it on import
MODULES: dict[str, str] = {
    "sim": "labkit.cluster.backends.sim",
    "kubeconfig": "labkit.cluster.backends.kubeconfig",
    "local": "labkit.cluster.backends.local",
    "kind": "labkit.cluster.backends.kind",
}

_BACKENDS: dict[str, type[Cluster]] = {}


def register_backend(name: str, cls: type[Cluster]) -> None:
    """Make `cls` available as ``connect(backend=name)``. Re-registering replaces the class."""
    if not (isinstance(cls, type) and issubclass(cls, Cluster)):
        raise TypeError(f"backend {name!r}: {cls!r} is not a Cluster subclass")
    _BACKENDS[name] = cls


def backend_class(name: str) -> type[Cluster]:
    """The class registered for `name`, importing its package first if needed."""
    if name not in _BACKENDS and name in MODULES:
        try:
            importlib.import_module(MODULES[name])
        except ModuleNotFoundError as exc:
            if exc.name and exc.name.split(".")[0] not in ("labkit", "fake_gpus"):
                raise MissingPackage(name, exc.name.split(".")[0]) from None
            if exc.name != MODULES[name]:
                raise
    if name not in _BACKENDS:
        known = sorted(set(_BACKENDS) | set(MODULES))
        hint = "" if name not in MODULES else f" ({MODULES[name]} is not available yet)"
        raise ClusterError(f"backend {name!r} is not available{hint}; choose one of: {', '.join(known)}")
    return _BACKENDS[name]


def backend_names() -> list[str]:
    """Names `connect` accepts (registered or importable on first use)."""
    return sorted(set(_BACKENDS) | set(MODULES))


def availability(name: str, kubernetes_version: str | None = None) -> tuple[bool, str]:
    """Can backend `name` run here? (yes or no, and why): its class's `available()`, or the Python
    package it lacks (a pure-Python install)."""
    try:
        cls = backend_class(name)
    except MissingPackage as exc:
        return False, str(exc)
    return cls.available() if kubernetes_version is None else cls.available(kubernetes_version)


def connect(backend: str = "sim", profile: Any = "workshop", **kw: Any) -> Cluster:
    """A cluster of `profile` on `backend`, already up."""
    try:
        return backend_class(backend)(**kw).up(profile)
    except ProfileError as exc:
        raise cluster_error(exc) from None
