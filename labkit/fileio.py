"""Files the kit writes, whole or not at all: a temporary file beside the target, then ``os.replace``.

A command whose output fails midway (a full disk, a figure that cannot be drawn, Ctrl-C) leaves the file the
user named as it was, byte for byte, and no temporary file beside it: ``open(path, "w")`` emptied the old file
before the first byte of the new one was known. The temporary file is in the target's folder, so the rename
stays on one file system and is atomic (POSIX rename(2)); a reader sees the old file or the new one.

The new file gets the mode of the file it replaces (a ``chmod 600`` the user made stays), else 0o666 less the
umask, as ``open`` gives it; secrets (kubeconfigs, keys) pass ``mode=0o600`` (client-go's clientcmd.WriteToFile
makes a kubeconfig 0600: tools/clientcmd/loader.go), which holds from the file's creation on (a chmod after
writing left a moment where others could read it). A symbolic link the user named stays a link: its target is
replaced. A device or a pipe (``-o /dev/stdout``) is written as ``open`` writes it.
This module is the lowest layer: it imports nothing from ``labkit``.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

__all__ = ["cannot_write", "replacing", "save_figure", "write_bytes", "write_text"]

StrPath = str | os.PathLike[str]


def _open_temporary(folder: Path, name: str, mode: int) -> tuple[int, Path]:
    """A new file ``.<name>.<random>.tmp`` in ``folder``, opened for writing (O_EXCL: never someone else's)."""
    while True:
        tmp = folder / f".{name[:64]}.{secrets.token_hex(4)}.tmp"
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), mode), tmp
        except FileExistsError:  # pragma: no cover - 32 random bits taken: draw again
            continue


@contextlib.contextmanager
def replacing(path: StrPath, *, binary: bool = False, mode: int | None = None, encoding: str = "utf-8",
              newline: str | None = None) -> Iterator[IO[Any]]:
    """Write ``path`` through the file this yields; it replaces ``path`` when the block ends without an error.

    On any error (an exception in the block, a failed write, flush or rename) the temporary file is removed and
    ``path`` is as it was; the error goes on (an ``OSError`` for the file system's). ``mode``: the new file's
    permissions (default: those of the file it replaces, else 0o666 less the umask)."""
    try:
        st: os.stat_result | None = os.stat(path)
    except OSError:
        st = None  # none yet (or not to be seen): the temporary file's creation says why, if it fails
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
    if st is not None and not stat.S_ISREG(st.st_mode):
        # a device or a pipe (/dev/null, /dev/stdout, a FIFO): nothing to replace, it is written as open() does
        with open(path, "wb" if binary else "w", encoding=None if binary else encoding,
                  newline=None if binary else newline) as fh:
            yield fh
        return
    target = Path(os.path.realpath(path))  # a symlink stays one: its target gets the new content
    keep = mode if mode is not None else stat.S_IMODE(st.st_mode) if st is not None else None
    # keep None: a new file, 0o666 less the umask as open() makes it; else exactly ``keep``, whatever the umask
    fd, tmp = _open_temporary(target.parent, target.name, 0o666 if keep is None else 0o600)
    try:
        if keep is not None:
            os.fchmod(fd, keep)
        fh = os.fdopen(fd, "wb" if binary else "w", encoding=None if binary else encoding,
                       newline=None if binary else newline)
    except BaseException:
        os.close(fd)
        tmp.unlink(missing_ok=True)
        raise
    try:
        with fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_text(path: StrPath, text: str, *, mode: int | None = None, encoding: str = "utf-8",
               newline: str | None = None) -> Path:
    """``Path.write_text``, atomically (see :func:`replacing`); returns ``path`` as a Path."""
    with replacing(path, mode=mode, encoding=encoding, newline=newline) as fh:
        fh.write(text)
    return Path(path)


def write_bytes(path: StrPath, data: bytes, *, mode: int | None = None) -> Path:
    """``Path.write_bytes``, atomically (see :func:`replacing`); returns ``path`` as a Path."""
    with replacing(path, binary=True, mode=mode) as fh:
        fh.write(data)
    return Path(path)


def save_figure(fig: Any, path: StrPath, **kwargs: Any) -> Path:
    """``fig.savefig(path, **kwargs)`` (a matplotlib Figure), atomically: a picture that fails midway leaves
    the old file. The format is the name's suffix (``.png``, ``.svg``, ``.pdf``), as savefig takes it; a name
    without one gets a PNG under the name given (savefig would add ``.png`` to it)."""
    suffix = Path(path).suffix.lstrip(".").lower()
    with replacing(path, binary=True) as fh:
        fig.savefig(fh, format=kwargs.pop("format", None) or suffix or "png", **kwargs)
    return Path(path)


def cannot_write(what: str, exc: OSError) -> str:
    """The one line for a file the user named that could not be written: ``what`` (``-o dump.yaml``,
    ``--png node.png``), the system's reason and the fix."""
    return f"{what}: cannot write ({exc.strerror or exc}); fix: choose a writable path (a folder you may write to)"
