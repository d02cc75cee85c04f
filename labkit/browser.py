"""Python in a browser tab (Pyodide, the course's JupyterLite site): the kit's drawing library is loaded when
the kit's code first imports it.

Pyodide loads a cell's packages from the cell's own top-level imports (``import labkit`` loads the kit and
what its lock entry depends on). The drawing library (matplotlib with numpy, pillow, kiwisolver, contourpy,
fonttools: ~10 MB) is imported inside the kit's drawing functions only, so the site leaves it out of the
kit's lock entry (``ON_IMPORT``, read by ``notebooks/site.py``) and a lesson that never draws never loads it.
This finder, last on ``sys.meta_path``, loads it when a drawing function imports it: a blocking load, which
Pyodide allows in code that a cell runs (JavaScript Promise Integration, ``pyodide.ffi.run_sync``).

Only ``ON_IMPORT`` and what it depends on: other packages of Pyodide's lock stay unloaded, as they are not
installed beside the kit anywhere else. A library's optional import (lark tries ``regex`` and
``atomicwrites``, pillow ``cffi``) then fails as it does in CPython, instead of fetching a package nobody
uses (from the CDN, on the site a user builds).

``install`` also keeps two messages that mean nothing in a tab out of the cells' output (see there).

Imported by ``labkit/__init__.py`` in Pyodide only (``sys.platform == "emscripten"``); it imports Pyodide's
modules when it runs, so that the site's build can read ``ON_IMPORT`` from this file in CPython.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import logging
import re
import sys
import warnings
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType

#: the kit's requirements that a tab loads when the kit's code imports them, not with the kit: the drawing
#: library, in the lessons that draw, when they draw. ``notebooks/site.py`` leaves them out of the kit's lock
#: entry.
ON_IMPORT = ("matplotlib",)


def lock_imports(packages: dict[str, dict]) -> dict[str, str]:
    """Import name -> package, for ``ON_IMPORT`` and every package it depends on (``packages``: the lock's
    entries, the site's ``pyodide-lock.json``)."""
    key = {_canonical(name): name for name in packages}  # a lock's depends may spell a name otherwise
    wanted: set[str] = set()
    todo = list(ON_IMPORT)
    while todo:
        package = key.get(_canonical(todo.pop()))
        if package is not None and package not in wanted:
            wanted.add(package)
            todo += packages[package].get("depends", [])
    return {name: package for package in wanted for name in packages[package].get("imports", [])}


def _canonical(name: str) -> str:
    """A package name as PyPA compares names (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


class LoadOnImport(importlib.abc.MetaPathFinder):
    """Last on ``sys.meta_path``: a top-level import that nothing else found and that the drawing library
    provides (``lock_imports``) loads that package (with its dependencies), then is found where Pyodide put it."""

    def __init__(self, imports: dict[str, str]) -> None:
        self.imports = imports

    def find_spec(self, fullname: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> ModuleSpec | None:
        package = self.imports.get(fullname) if path is None else None
        if package is None:
            return None
        import pyodide_js  # type: ignore[import-not-found]  # Pyodide's JavaScript API (in Pyodide only)
        from pyodide.ffi import can_run_sync, run_sync  # type: ignore[import-not-found]  # Pyodide's own (in Pyodide only)

        if package in pyodide_js.loadedPackages.to_py():
            return None
        if not can_run_sync():
            raise ImportError(f"{fullname}: in a browser tab the package {package} is loaded when a cell imports "
                              f"it; fix: run `import {fullname}` in a cell first", name=fullname)
        run_sync(pyodide_js.loadPackage(package))
        importlib.invalidate_caches()
        return importlib.machinery.PathFinder.find_spec(fullname, path, target)


def install() -> None:
    """Put the finder last on ``sys.meta_path`` (once), and keep tqdm's thread warning out of the learner's
    output."""
    if not any(isinstance(f, LoadOnImport) for f in sys.meta_path):
        import pyodide_js  # type: ignore[import-not-found]  # Pyodide's JavaScript API (in Pyodide only)

        sys.meta_path.append(LoadOnImport(lock_imports(pyodide_js._api.lockfile_packages.to_py())))
    # tqdm starts a monitor thread with its first bar (even a disabled one); a tab has no threads, so tqdm
    # goes on without it and says so in a TqdmMonitorWarning that would show under the cell. By its message,
    # so that tqdm need not be imported on every page.
    warnings.filterwarnings("ignore", message="tqdm:disabling monitor support")
    # a tab starts with an empty file system, so matplotlib builds its font list on each page (~0.3 s) and logs
    # "Matplotlib is building the font cache" under the first drawing of every lesson
    logging.getLogger("matplotlib.font_manager").addFilter(
        lambda record: not record.getMessage().startswith("Matplotlib is building the font cache"))
