"""Bytecode for the site's wheels, made by the Python that will import them (notebooks/site_bytecode.mjs).

Pyodide's CPython compiles every module it imports from source on each page load: its packages are
unpacked into an in-memory file system, so nothing it writes to ``__pycache__`` outlives the tab. On
this machine that is about half of the time from a started kernel to ``connect('sim')``.
``notebooks/site.py`` runs this file inside the site's own Pyodide under Node.js, so every ``.pyc``
carries exactly the magic number of the interpreter that will read it:

1. every wheel of the site is unpacked into one folder, and what a browser tab imports is imported from
   it: the kernel, the widgets, and every module of the kit's packages (``--import``, ``--import-all``);
2. each wheel to compile (``--compile``) is written again with bytecode for the modules that step 1
   imported (only those: compiling all of networkx and pygments would make the site ~10 MB bigger):
   - the kit's own packages (``--keep-source``) keep each ``.py`` and get
     ``__pycache__/<module>.<cache tag>.pyc`` beside it, so tracebacks and ``??`` still show the code;
   - the other wheels' modules become sourceless ``.pyc`` files (smaller than source and bytecode).
   Every ``.pyc`` is an *unchecked* hash-based one (PEP 552): the import system uses it without looking at
   the source, so the time a wheel was unpacked cannot make it stale. A module this interpreter cannot
   compile keeps its source only;
3. the YAML files under ``--yaml-twins`` folders (fake_gpus' catalog, which ``connect('sim')`` reads) get a
   JSON twin in their ``__pycache__`` (fake_gpus.catalog.loader.yaml_twin), for the same reason: Pyodide's
   PyYAML is pure Python, and parsing the GPU catalog was most of ``connect('sim')`` in a tab;
4. with ``--stdlib NAME``: the interpreter's standard-library zip (Pyodide's ``/lib/python312.zip``) is written
   to OUT_DIR/NAME with sourceless unchecked bytecode for each of its modules that steps 1-3 (and Pyodide's own start)
   imported. The site points ``loadPyodideOptions.stdLibURL`` at it.

With ``--cache DIR --salt TEXT`` (the site build's: ``TEXT`` names the compiler and the interpreter) each
wheel and the standard library is one entry of DIR, keyed on the salt, the part's content (`content_digest`),
how it is compiled and the modules of it that step 1 imported (`part_key`): a part whose entry is there is not
compiled again (a new commit of the kit compiles the kit's wheel only), a new one is stored there; each part
prints a ``cache hit|new KEY NAME`` line, and the caller takes the outputs from the entries.

Run by hand (any CPython, for its own magic number):
``python notebooks/wheel_bytecode.py OUT_DIR WHEEL... --compile NAME... [--keep-source PKG...]
[--import MOD...] [--import-all PKG...] [--yaml-twins FOLDER...] [--stdlib NAME]``
"""

from __future__ import annotations

import argparse
import atexit
import base64
import contextlib
import hashlib
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import io
import pkgutil
import shutil
import sys
import tempfile
import warnings
import zipfile
from collections.abc import Callable
from importlib._bootstrap_external import _code_to_hash_pyc  # what py_compile writes with
from pathlib import Path

#: the zlib level of what this writes: the most (the site is fetched by every learner, built once)
ZLIB_LEVEL = 9
#: a written member's date (wheels carry no meaningful one)
EPOCH = (1980, 1, 1, 0, 0, 0)


def _cached_beside(name: str) -> str:
    """The bytecode's name inside the wheel, ``pkg/__pycache__/mod.<cache tag>.pyc``, where the import
    system looks beside a kept source: not ``importlib.util.cache_from_source``, which follows
    PYTHONPYCACHEPREFIX (``sys.pycache_prefix``) to a folder outside the wheel."""
    folder, _, file = name.rpartition("/")
    return f"{folder + '/' if folder else ''}__pycache__/{file.removesuffix('.py')}.{sys.implementation.cache_tag}.pyc"


def _member(name: str, date_time: tuple[int, ...] = EPOCH) -> zipfile.ZipInfo:
    """A new member of a written wheel: a plain file, readable by all (mode 0644)."""
    info = zipfile.ZipInfo(name, date_time=date_time)
    info.external_attr = 0o644 << 16
    return info


class _Recorder(importlib.abc.MetaPathFinder):
    """Notes the file of every module the import system finds under ``root``: also the ones whose import then
    fails (``yaml.cyaml`` without libyaml): a tab compiles those too, each time a package tries them."""

    def __init__(self, root: Path) -> None:
        self.root, self.files = root, set()

    def find_spec(self, name, path=None, target=None):  # noqa: ANN001, ANN201 - the finder protocol
        spec = importlib.machinery.PathFinder.find_spec(name, path, target)
        if spec is not None and spec.origin and Path(spec.origin).is_relative_to(self.root):
            # a sourceless module of an earlier compiled wheel (--import-wheels): its source's name
            file = Path(spec.origin).relative_to(self.root).as_posix()
            self.files.add(file.removesuffix("c") if file.endswith(".pyc") else file)
        return spec


def imported_modules(wheels: list[Path], modules: list[str], packages: list[str], run: list[str] = ()) -> set[str]:
    """Unpack ``wheels`` into one folder, import ``modules`` and every module of ``packages`` from it
    (failures and ``__main__`` modules skipped), run the snippets ``run`` (what a tab does that imports more:
    drawing a picture), and return the files of the modules that were found there (relative to the folder)."""
    root = Path(tempfile.mkdtemp(prefix="site-packages-"))
    atexit.register(shutil.rmtree, root, ignore_errors=True)  # imported from until this process ends
    for wheel in wheels:
        with zipfile.ZipFile(wheel) as zf:
            zf.extractall(root)
    sys.path.insert(0, str(root))
    recorder = _Recorder(root)
    sys.meta_path.insert(0, recorder)
    importlib.invalidate_caches()
    names, argv = list(modules), sys.argv
    sys.argv = [""]  # IPython's and the kernel's option parsers read it at import
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        for name in packages:
            spec = importlib.util.find_spec(name)
            if spec is not None and spec.submodule_search_locations:
                names += [m.name for m in pkgutil.walk_packages(spec.submodule_search_locations, name + ".",
                                                                onerror=lambda _: None)]
        for name in names:
            if name.rsplit(".", 1)[-1] == "__main__":
                continue
            try:
                importlib.import_module(name)
            except BaseException:  # noqa: BLE001 - a module a browser tab cannot import is simply not compiled
                continue
        for code in run:
            try:
                exec(code, {"__name__": "__bytecode__"})  # noqa: S102 - the site build's own snippets
            except BaseException:  # noqa: BLE001 - what fails here is compiled as far as it got
                continue
    sys.argv = argv
    sys.meta_path.remove(recorder)
    return recorder.files


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}\n"


def _compile(name: str, source: bytes, filename: str | None = None, optimize: int = 0) -> bytes | None:
    try:
        with warnings.catch_warnings():  # a package's invalid escape sequences are its own business
            warnings.simplefilter("ignore")
            code = compile(source, filename or name, "exec", dont_inherit=True, optimize=optimize)
    except (SyntaxError, ValueError):
        return None
    return bytes(_code_to_hash_pyc(code, importlib.util.source_hash(source), checked=False))


#: (member name, its bytes) -> (name, bytes) of a member to add beside it, or None
Twin = Callable[[str, bytes], tuple[str, bytes] | None]


def add_bytecode(source: Path, target: Path, modules: set[str], keep_source: bool,
                 twin: Twin | None = None, optimize: int = 0) -> tuple[int, int]:
    """Write ``target``: the wheel ``source`` with bytecode for its members named in ``modules`` (sourceless
    unless ``keep_source``; ``optimize`` 2: as ``python -OO`` compiles, without docstrings and asserts), the
    members ``twin`` makes of its data files, and a RECORD that lists what it
    holds; nothing when none of its modules is compiled. Returns (modules compiled, modules left as source)."""
    compiled = skipped = 0
    members: dict[str, tuple[zipfile.ZipInfo, bytes]] = {}
    record = None
    with zipfile.ZipFile(source) as zin:
        for info in zin.infolist():
            if info.is_dir():
                continue
            name, data = info.filename, zin.read(info)
            if name.endswith(".dist-info/RECORD"):
                record = name
                continue
            pyc = _compile(name, data, optimize=optimize) if name in modules and name.endswith(".py") else None
            if name in modules and name.endswith(".py") and pyc is None:
                skipped += 1
            if pyc is None or keep_source:
                members[name] = (info, data)
            made = twin(name, data) if twin is not None and pyc is None else None
            if made is not None:
                members[made[0]] = (_member(made[0], info.date_time), made[1])
            if pyc is not None:
                pyc_name = _cached_beside(name) if keep_source else name + "c"
                members[pyc_name] = (_member(pyc_name, info.date_time), pyc)
                compiled += 1
    if record is None:
        raise ValueError(f"{source}: not a wheel (no .dist-info/RECORD)")
    if not compiled:  # nothing of it is imported: the wheel stays as it was published
        return compiled, skipped
    lines = [_record_line(name, data) for name, (_, data) in members.items()] + [f"{record},,\n"]
    members[record] = (_member(record), "".join(lines).encode())
    with zipfile.ZipFile(target, "w") as zout:
        for info, data in members.values():  # the source's order, RECORD last (as wheel tools write it)
            zout.writestr(info, data, compress_type=zipfile.ZIP_DEFLATED, compresslevel=ZLIB_LEVEL)
    return compiled, skipped


def stdlib_zip() -> Path | None:
    """The standard library's zip on sys.path (Pyodide's /lib/python312.zip), or None (CPython's is a folder)."""
    return next((Path(p) for p in sys.path if p.endswith(".zip") and Path(p).is_file()), None)


def imported_from(folder: Path) -> set[str]:
    """The files (relative to ``folder``) of the modules this interpreter has imported from ``folder``."""
    prefix = f"{folder}/"
    return {f[len(prefix):] for f in (getattr(m, "__file__", None) for m in list(sys.modules.values()))
            if isinstance(f, str) and f.startswith(prefix)}


def stdlib_with_bytecode(stdlib: Path, modules: set[str], target: Path) -> int:
    """Write ``target``: the standard library's zip ``stdlib`` with each module named in ``modules`` as a
    sourceless, unchecked ``.pyc`` in place of its ``.py`` (zipimport looks for ``mod.pyc`` before ``mod.py``,
    and takes an unchecked one as it is); every other member as it was. The bytecode is what ``python -OO``
    makes (no docstrings, no asserts: a mode CPython supports and tests its standard library in), sourceless
    as the dependencies' modules are: bytecode compresses worse than source, and this keeps the zip ~0.7 MB
    over the official one instead of ~1.1 MB. Returns the number of modules compiled."""
    compiled = 0
    with zipfile.ZipFile(stdlib) as zin, zipfile.ZipFile(target, "w") as zout:
        for info in zin.infolist():
            data = zin.read(info)
            named = info.filename in modules and info.filename.endswith(".py")
            pyc = _compile(info.filename, data, f"{stdlib}/{info.filename}", optimize=2) if named else None
            if pyc is None:
                zout.writestr(info, data, compress_type=info.compress_type, compresslevel=ZLIB_LEVEL)
            else:
                zout.writestr(_member(info.filename + "c", info.date_time), pyc, compress_type=zipfile.ZIP_DEFLATED,
                              compresslevel=ZLIB_LEVEL)
                compiled += 1
    return compiled


def content_digest(wheel: Path) -> str:
    """A zip's content: each member's name, size and CRC-32 (not the zip's bytes: the kit's wheel, built from
    a fresh clone, carries the checkout's file dates, which no compiled output depends on)."""
    with zipfile.ZipFile(wheel) as zf:
        members = sorted((i.filename, i.file_size, i.CRC) for i in zf.infolist())
    return hashlib.sha256(repr(members).encode()).hexdigest()


def part_key(salt: str, part: Path, modules: set[str], *how: str) -> str:
    """The cache key of one compiled part (a wheel, the standard library): what its output depends on."""
    with zipfile.ZipFile(part) as zf:
        names = set(zf.namelist())
    digest = hashlib.sha256()
    for piece in (salt, content_digest(part), *how, *sorted(modules & names)):
        digest.update(piece.encode() + b"\0")
    return digest.hexdigest()[:32]


def cached(cache: Path | None, key: str, name: str, out: Path, make: Callable[[Path], str]) -> str:
    """``make(target)`` (writes ``target``, or nothing; returns what it did, one line) for the part ``name``:
    into ``out/name`` without a cache; else into the cache entry ``key`` unless that is there already."""
    if cache is None:
        return make(out / name)
    entry = cache / key
    if (entry / "said").is_file():
        print(f"cache hit {key} {name}")
        return (entry / "said").read_text(encoding="utf-8")
    fresh = Path(tempfile.mkdtemp(prefix="new-", dir=cache))
    try:
        (fresh / "said").write_text(make(fresh / "part"), encoding="utf-8")  # the last: the entry is whole
        with contextlib.suppress(OSError):  # another build stored the same key meanwhile: the same content
            fresh.rename(entry)
    finally:
        shutil.rmtree(fresh, ignore_errors=True)
    print(f"cache new {key} {name}")
    return (entry / "said").read_text(encoding="utf-8")


def _top_level(wheel: Path) -> set[str]:
    with zipfile.ZipFile(wheel) as zf:
        return {n.split("/")[0].removesuffix(".py") for n in zf.namelist() if not n.split("/")[0].endswith(".dist-info")}


def _catalog_twin(folders: tuple[str, ...]) -> Twin | None:
    """A catalog YAML file's JSON twin, in the format of the unpacked kit that reads it (imported_modules put
    it first on sys.path): pure-Python PyYAML, which is all a tab has, then parses none of them. None when
    the kit cannot be imported here: PyYAML is then the distribution's own (the CDN's, with libyaml)."""
    try:
        from fake_gpus.catalog.loader import twin_path, yaml_twin
    except ImportError as e:
        print(f"no JSON twins for {', '.join(folders)}: {e}")
        return None

    def twin(name: str, data: bytes) -> tuple[str, bytes] | None:
        if not name.startswith(folders) or not name.endswith((".yaml", ".yml")):
            return None
        made = yaml_twin(data)
        return None if made is None else (twin_path(name).as_posix(), made)

    return twin


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="the folder the compiled wheels are written to (same file names)")
    parser.add_argument("wheels", type=Path, nargs="+", help="every wheel of the site (what a tab can import)")
    parser.add_argument("--compile", nargs="+", default=[], metavar="FILE", help="the wheels (file names) to compile")
    parser.add_argument("--no-docstrings", nargs="*", default=[], metavar="FILE",
                        help="wheels (file names) compiled as python -OO compiles: no docstrings, no asserts")
    parser.add_argument("--keep-source", nargs="*", default=[], metavar="PKG",
                        help="top-level packages that keep their .py files beside the bytecode")
    parser.add_argument("--import", dest="modules", nargs="*", default=[], metavar="MOD", help="modules a tab imports")
    parser.add_argument("--import-all", nargs="*", default=[], metavar="PKG", help="packages a tab imports any module of")
    parser.add_argument("--run", nargs="*", default=[], metavar="CODE",
                        help="Python snippets that do what a tab does (a drawing), for the modules they import")
    parser.add_argument("--yaml-twins", nargs="*", default=[], metavar="FOLDER",
                        help="folders (in a wheel) whose YAML files get a JSON twin (fake_gpus' catalog)")
    parser.add_argument("--stdlib", metavar="NAME",
                        help="write the standard library's zip, with bytecode for what was imported from it, to OUT/NAME")
    parser.add_argument("--cache", type=Path, metavar="DIR",
                        help="compiled parts of earlier runs, by part_key: take them, store the new ones here")
    parser.add_argument("--salt", default="", help="what the output depends on beyond the parts (the compiler)")
    parser.add_argument("--import-wheels", nargs="*", type=Path, metavar="WHEEL",
                        help="what to import from, one for each wheel (in order): the wheel, or an earlier compiled "
                             "wheel of the same content (its bytecode makes the imports faster, not different)")
    args = parser.parse_args(argv)
    if args.import_wheels and len(args.import_wheels) != len(args.wheels):
        parser.error("--import-wheels: one for each wheel")
    files = imported_modules(args.import_wheels or args.wheels, args.modules, args.import_all, args.run)
    twin = _catalog_twin(tuple(args.yaml_twins)) if args.yaml_twins else None
    stdlib = stdlib_zip() if args.stdlib else None
    # what the imports took from the standard library, before any compile (a compile may take more: a part
    # taken from the cache must not change what the standard library's own part compiles)
    stdlib_modules = imported_from(stdlib) if stdlib is not None else set()
    loader = getattr(sys.modules.get("fake_gpus.catalog.loader"), "__file__", None)  # what makes the twins
    twin_source = hashlib.sha256(Path(loader).read_bytes()).hexdigest() if twin is not None and loader else ""
    by_name = {w.name: w for w in args.wheels}
    tag = sys.implementation.cache_tag
    for name in args.compile:
        wheel = by_name[name]
        keep = bool(_top_level(wheel) & set(args.keep_source))
        bare = name in args.no_docstrings
        with zipfile.ZipFile(wheel) as zf:  # the twins of its data files: made by the kit's loader
            twinned = twin is not None and any(n.startswith(tuple(args.yaml_twins)) for n in zf.namelist())

        def make(target: Path, wheel: Path = wheel, keep: bool = keep, bare: bool = bare) -> str:
            compiled, skipped = add_bytecode(wheel, target, files, keep, twin, optimize=2 if bare else 0)
            return (f"{compiled} modules compiled for {tag}{' (source kept)' if keep else ''}"
                    f"{' (no docstrings)' if bare else ''}{f', {skipped} left as source' if skipped else ''}")

        key = part_key(args.salt, wheel, files, "wheel", f"keep={keep}", f"optimize={2 if bare else 0}",
                       f"twin={twin_source if twinned else ''}", *args.yaml_twins)
        print(f"{name}: {cached(args.cache, key, name, args.out, make)}")
    if args.stdlib:
        if stdlib is None:
            print("the standard library here is not a zip: nothing to compile")
        else:
            def make_stdlib(target: Path, stdlib: Path = stdlib) -> str:
                return f"{stdlib_with_bytecode(stdlib, stdlib_modules, target)} modules compiled for {tag}"

            key = part_key(args.salt, stdlib, stdlib_modules, "stdlib", str(stdlib))
            print(f"{stdlib.name}: {cached(args.cache, key, args.stdlib, args.out, make_stdlib)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
