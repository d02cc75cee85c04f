"""Notebook 00: what this machine has, and which cluster backends can run on it."""

from __future__ import annotations

import platform
import sys
from importlib import metadata

from labkit.cluster.backends import backend_class
from labkit.cluster.base import FULL_KIT, MissingPackage
from labkit.cluster.kube import client as kube_client

PACKAGES = ("dra-labkit", "kubernetes", "cel-expr-python", "networkx", "jupyterlab", "ipywidgets", "anywidget",
            "matplotlib")


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def environment_table() -> list[tuple[str, str]]:
    """(component, version) rows: Python and the packages the course uses."""
    return [("python", platform.python_version())] + [(p, _version(p)) for p in PACKAGES]


#: why a browser tab (JupyterLite, Pyodide) cannot run the backend, and what to do instead
IN_BROWSER = {
    "local": "a browser tab cannot start the control plane's processes: install the full kit "
             "(README: make lab) to run local",
    "kind": "a browser tab has no Docker or Podman: install the full kit (README: make lab) and a "
            "container engine to run kind",
}


def in_browser() -> bool:
    """Python runs in a browser (Pyodide: JupyterLite, or Node.js)."""
    return sys.platform == "emscripten"


def _status(name: str, minor: str) -> tuple[bool, str]:
    if in_browser():
        return False, IN_BROWSER[name]
    try:
        kube_client(name)
        return backend_class(name).available(minor)
    except MissingPackage as exc:  # a pure-Python install: the backend's client libraries are absent
        return False, f"needs the Python package {exc.name} (not installed here): {FULL_KIT}"
    except ImportError as exc:
        return False, f"needs the Python package {exc.name or 'of the full kit'} (not installed here): {FULL_KIT}"


def backend_table(minor: str = "1.37") -> list[tuple[str, str, str]]:
    """(backend, can run here, why) for sim, local and kind."""
    ok, why = backend_class("sim").available(minor)
    rows = [("sim", "yes" if ok else "no", why)]
    for name in ("local", "kind"):
        ok, why = _status(name, minor)
        rows.append((name, "yes" if ok else "no", why))
    return rows
