"""labkit.browser, the part that runs in CPython: which packages of Pyodide's lock a tab loads when the kit's
code imports them (the drawing library and what it depends on, nothing else). The finder itself runs in the
browser lane (tests/site/test_browser_site.py: the drawing lessons show their pictures, and no page asks for a
package it does not use)."""

from __future__ import annotations

import runpy

from labkit import browser
from tests.paths import REPO

#: a lock as Pyodide's spells it: a depends may spell a name otherwise than the package's key
LOCK = {
    "matplotlib": {"imports": ["matplotlib", "mpl_toolkits"], "depends": ["numpy", "Pillow", "python_dateutil"]},
    "numpy": {"imports": ["numpy"], "depends": []},
    "pillow": {"imports": ["PIL"], "depends": []},
    "python-dateutil": {"imports": ["dateutil"], "depends": ["six"]},
    "six": {"imports": ["six"], "depends": []},
    # optional imports of the kit's libraries (lark: regex, atomicwrites; pillow: cffi) and a big package
    "regex": {"imports": ["regex"], "depends": []},
    "atomicwrites": {"imports": ["atomicwrites"], "depends": []},
    "cffi": {"imports": ["cffi", "_cffi_backend"], "depends": ["pycparser"]},
    "pycparser": {"imports": ["pycparser"], "depends": []},
    "scipy": {"imports": ["scipy"], "depends": ["numpy"]},
}


def test_the_drawing_library_and_its_dependencies_load_on_import_and_nothing_else() -> None:
    assert browser.ON_IMPORT == ("matplotlib",)
    assert browser.lock_imports(LOCK) == {
        "matplotlib": "matplotlib", "mpl_toolkits": "matplotlib", "numpy": "numpy", "PIL": "pillow",
        "dateutil": "python-dateutil", "six": "six"}


def test_a_lock_without_the_drawing_library_loads_nothing_on_import() -> None:
    assert browser.lock_imports({k: v for k, v in LOCK.items() if k != "matplotlib"}) == {}


def test_the_site_leaves_out_of_the_kit_what_the_kit_loads_on_import() -> None:
    """notebooks/site.py reads ON_IMPORT from labkit/browser.py (one home), without the kit's package."""
    site = runpy.run_path(str(REPO / "notebooks" / "site.py"), run_name="site")
    assert site["ON_IMPORT"] == browser.ON_IMPORT
