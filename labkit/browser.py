"""Python in a browser tab (Pyodide, the course's JupyterLite site): a package of Pyodide's lock that is not
loaded yet is loaded when code first imports it.

Pyodide loads a cell's packages from the cell's own top-level imports (``import labkit`` loads the kit and
what its lock entry depends on). The drawing library (matplotlib with numpy, pillow, kiwisolver, contourpy,
fonttools: ~10 MB) is imported inside the kit's drawing functions only, so the site leaves it out of the
kit's lock entry (``notebooks/site.py``: ``ON_IMPORT``) and a lesson that never draws never loads it. This
finder, last on ``sys.meta_path``, loads it when a drawing function imports it: a blocking load, which
Pyodide allows in code that a cell runs (JavaScript Promise Integration, ``pyodide.ffi.run_sync``).

``install`` also keeps two messages that mean nothing in a tab out of the cells' output (see there).

Imported by ``labkit/__init__.py`` in Pyodide only (``sys.platform == "emscripten"``).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import logging
import sys
import warnings
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType

import pyodide_js  # type: ignore[import-not-found]  # Pyodide's JavaScript API (in Pyodide only)
from pyodide.ffi import can_run_sync, run_sync  # type: ignore[import-not-found]


def lock_imports() -> dict[str, str]:
    """Import name -> package, of the packages in Pyodide's lock (the site's ``pyodide-lock.json``)."""
    packages = pyodide_js._api.lockfile_packages.to_py()
    return {name: package for package, entry in packages.items() for name in entry.get("imports", [])}


class LoadOnImport(importlib.abc.MetaPathFinder):
    """Last on ``sys.meta_path``: a top-level import nothing else found that a package of the lock provides
    loads that package (with its dependencies), then is found where Pyodide put it."""

    def __init__(self, imports: dict[str, str]) -> None:
        self.imports = imports

    def find_spec(self, fullname: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> ModuleSpec | None:
        package = self.imports.get(fullname) if path is None else None
        if package is None or package in pyodide_js.loadedPackages.to_py():
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
        sys.meta_path.append(LoadOnImport(lock_imports()))
    # tqdm starts a monitor thread with its first bar (even a disabled one); a tab has no threads, so tqdm
    # goes on without it and says so in a TqdmMonitorWarning that would show under the cell. By its message,
    # so that tqdm need not be imported on every page.
    warnings.filterwarnings("ignore", message="tqdm:disabling monitor support")
    # a tab starts with an empty file system, so matplotlib builds its font list on each page (~0.3 s) and logs
    # "Matplotlib is building the font cache" under the first drawing of every lesson
    logging.getLogger("matplotlib.font_manager").addFilter(
        lambda record: not record.getMessage().startswith("Matplotlib is building the font cache"))
