"""A file written whole or not at all: a temporary file in the target's folder, then ``os.replace``.

fake_gpus imports nothing from labkit, so it keeps this tiny twin of ``labkit.fileio``. A crash or an error
while writing leaves the old file (or none) and removes the temporary one; a reader (the kubelet, the
container runtime, the next plugin start) sees the old file or the new one, never half of one. No fsync:
the plugin's files live in /var/run and are rebuilt after a power loss (see plugin/checkpoint.py)."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO


@contextlib.contextmanager
def replacing(path: Path, *, prefix: str = ".tmp-", suffix: str = ".tmp") -> Iterator[TextIO]:
    """Write ``path`` (text) through the file this yields; it replaces ``path`` when the block ends without an
    error, else it is removed. The temporary file is ``<prefix><random><suffix>`` (mode 0600) beside ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=prefix, suffix=suffix)
    try:
        with os.fdopen(fd, "w") as fh:
            yield fh
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
