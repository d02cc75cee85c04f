"""The regular-expression engine of labkit's CEL: google-re2 when installed, else :mod:`labkit.cel.re2_pure`.

Importing this module makes ``import re2`` work everywhere, cel-python's own (``celpy.evaluation``
imports ``re2`` at module level) included: where google-re2 cannot be imported (a browser: it has no
WebAssembly build) the pure-Python fallback is registered under that name first. Import it before
celpy. ``NATIVE`` says which engine is in use.
"""

from __future__ import annotations

import sys
from types import ModuleType

from labkit.cel import re2_pure

__all__ = ["NATIVE", "re2"]

re2: ModuleType
try:
    import re2 as _native
except ImportError:
    re2 = sys.modules.setdefault("re2", re2_pure)
    NATIVE = False
else:
    re2 = _native
    NATIVE = True
