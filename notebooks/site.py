"""Build the course as a static JupyterLite site: `python notebooks/site.py` (or `make site`).

The site holds every notebook of the course, built from the same MyST sources as `notebooks/build.py`'s
learner copies (no forked copies), the `examples/` they read, and a landing page. It runs Python in the
browser with official Pyodide, from one of:

- ``--pyodide cdn`` (the default): Pyodide's official CDN (jsDelivr), the version of the npm core that
  `tools/pyodide-deps.sh` fetches. The site holds the kit's wheel and the pure-Python wheels the course
  needs, and a `pyodide-lock.json` that is the official one of that version (its packages pointed at the
  CDN) plus those wheels, so `import labkit` loads them with no `%pip`; numpy and matplotlib come from
  the CDN.
- ``--pyodide PATH``: a local official Pyodide distribution (its folder, as unpacked from
  pyodide-<version>.tar.bz2): its core and the packages the course loads are copied into the site, with
  the wheels added beside them: no request leaves the site's origin (a classroom with no network, a USB
  stick).
- ``--pyodide verified``: the official npm core of Pyodide 0.27.7 plus its numpy/matplotlib wheels, each
  checked against that release's official lock (`tools/pyodide_verified.py`, fetched by
  `tools/pyodide-deps.sh`): self-contained like PATH, for where neither the CDN nor an official tarball
  can be had (the browser test).

Every wheel in the site (the kit, its dependencies and, with a local distribution, its numpy, matplotlib ...)
carries bytecode for the modules a tab imports, compiled by the site's own Pyodide (`with_bytecode`), and so
does its standard library; a rewritten official wheel keeps every other file as published, and the site's
`pyodide-lock.json` gives its new sha256.

    python notebooks/site.py                       # -> build/site (no source maps)
    python notebooks/site.py --pyodide ~/pyodide-314.0.7 --out /media/usb/dra-course
    python -m http.server -d build/site -b 127.0.0.1 8000   # or: make site-serve

The site is built in a new folder beside ``--out`` (``<name>.building-*``, the same file system; not a hidden folder: JupyterLite leaves out hidden paths) and renamed
into place once it is whole: a failed build leaves the previous site as it was, and nothing of its own behind.
``--out`` is a new or empty folder, or an earlier site (it holds ``.labkit-site``); a folder that holds anything
else is refused with one line and left untouched.

Needs jupyterlite-core and jupyterlite-pyodide-kernel (0.8.6) in the Python that runs it, with the
widget extensions (jupyterlab_widgets, anywidget): `make site` makes that environment in the cache.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import html
import importlib.metadata
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
import build  # noqa: E402 - the learner copies of notebooks/build.py
import wheel_bytecode  # noqa: E402 - the compiler the site runs in Pyodide (its cache keys)

sys.path.insert(0, str(ROOT / "tools"))
from lessons import GROUPS, lessons  # noqa: E402 - each lesson's facts, from its front matter (tools/lessons.py)
from pyodide_verified import closure  # noqa: E402 - the lock's dependency closure (tools/pyodide_verified.py)

CACHE = Path(os.environ.get("LABKIT_CACHE", Path.home() / ".cache" / "dra-labkit")) / "pyodide"
#: the official npm core (its lock names the CDN's packages); --pyodide verified (tools/pyodide-deps.sh)
NPM_CORE = CACHE / "node_modules" / "pyodide"
VERIFIED = CACHE / "verified-0.27.7"
CDN = "https://cdn.jsdelivr.net/pyodide/v{version}/full/"
KERNEL_PLUGIN = "@jupyterlite/pyodide-kernel-extension:kernel"
#: the jupyterlite-pyodide-kernel series that runs on each Pyodide series (its piplite needs that micropip)
KERNEL_FOR_PYODIDE = {"0.27": "0.5", "314": "0.8"}
#: what each kernel series installs at start, one `piplite.install` after the other, unless the name is in
#: ``loadPyodideOptions.packages`` (its worker's initPackageManager/initKernel): micropip, then piplite from the
#: kernel's own wheel, then these. The site lists them all there, with the kit, so that Pyodide loads them in
#: one parallel `loadPackage` while it starts (the kernel's wheels are in the site's lock, KERNEL_WHEELS)
KERNEL_STARTS_WITH = {"0.5": ("micropip", "piplite", "ssl", "sqlite3", "ipykernel", "comm", "pyodide_kernel", "ipython"),
                      "0.8": ("micropip", "piplite", "ipykernel", "comm", "pyodide-kernel", "jedi", "ipython")}
#: the kernel's own wheels (piplite, pyodide_kernel, the ipykernel shim), shipped in its labextension
KERNEL_WHEELS = Path(sys.prefix) / "share" / "jupyter" / "labextensions" / "@jupyterlite" / "pyodide-kernel-extension" / "static" / "pypi"


def pyodide_version(folder: Path) -> str:
    """The version of the Pyodide distribution in ``folder``: its lock's (0.27), else its package.json's (npm)."""
    version = json.loads((folder / "pyodide-lock.json").read_text())["info"].get("version")
    if not version and (folder / "package.json").exists():
        version = json.loads((folder / "package.json").read_text()).get("version")
    return str(version or "")


def kernel_series() -> str:
    """The series (``0.5``, ``0.8``) of this Python's jupyterlite-pyodide-kernel."""
    return ".".join(importlib.metadata.version("jupyterlite-pyodide-kernel").split(".")[:2])


def kernel_mismatch(pyodide_version: str) -> str | None:
    """Why this Python's JupyterLite kernel cannot run Pyodide ``pyodide_version`` (None: it can)."""
    parts = pyodide_version.split(".")
    series = ".".join(parts[:2]) if parts[0] == "0" else parts[0]
    want = KERNEL_FOR_PYODIDE.get(series)
    have = importlib.metadata.version("jupyterlite-pyodide-kernel")
    if want is None or have.startswith(want + "."):
        return None
    venv = "site-venv-pyodide-0.27" if want == "0.5" else "site-venv"
    return (f"Pyodide {pyodide_version} runs with jupyterlite-pyodide-kernel {want}.x, this Python has {have}; "
            f"fix: run it with $LABKIT_CACHE/{venv}/bin/python (make site-venv makes it)")
KERNEL = {"display_name": "Python (Pyodide)", "language": "python", "name": "python"}
#: the notebooks that need a real cluster (kind/local): in the site, but the landing page says so
FULL_KIT_ONLY = {"11_the_real_thing"}


def _learner_notebook(name: str, solutions: bool = False) -> str:
    nb = build.learner(name, solutions=solutions)
    nb.metadata["kernelspec"] = dict(KERNEL)
    return json.dumps(nb, indent=1, ensure_ascii=False) + "\n"


def _pure_wheel_from_sdist(sdist: Path, out_dir: Path) -> Path:
    """PyYAML has no wasm wheel: its sdist's lib/<package> is pure Python; pack it as a py3-none-any wheel."""
    name, version = sdist.name.removesuffix(".tar.gz").rsplit("-", 1)
    dist = name.replace("-", "_")
    files: dict[str, bytes] = {}
    with tarfile.open(sdist) as tar:
        for member in tar.getmembers():
            parts = Path(member.name).parts
            if len(parts) > 2 and parts[1] == "lib" and member.isfile():
                files["/".join(parts[2:])] = tar.extractfile(member).read()  # type: ignore[union-attr]
    info = f"{dist}-{version}.dist-info"
    files[f"{info}/METADATA"] = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode()
    files[f"{info}/WHEEL"] = b"Wheel-Version: 1.0\nGenerator: dra-labkit site.py\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    files[f"{info}/RECORD"] = "".join(f"{p},,\n" for p in [*files, f"{info}/RECORD"]).encode()
    wheel = out_dir / f"{dist}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(files):
            zf.writestr(path, files[path])
    return wheel


def _kit_wheel(out_dir: Path) -> Path:
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(out_dir),
                    str(ROOT)], check=True)
    return next(out_dir.glob("dra_labkit-*.whl"))


def browser_markers(python: str) -> dict[str, str]:
    """The browser's environment markers: CPython ``python`` (the lock's ``info.python``) on emscripten."""
    return {"sys_platform": "emscripten", "platform_system": "Emscripten",
            "python_version": ".".join(python.split(".")[:2]), "python_full_version": python,
            "implementation_name": "cpython", "os_name": "posix", "platform_machine": "wasm32", "extra": ""}


def _depends(requires: list[str], markers: dict[str, str], extras: tuple[str, ...] = ("",)) -> list[str]:
    """A wheel's requirements that apply in the browser: the lock's ``depends`` (Pyodide loads them with the
    package when a cell imports it)."""
    out = []
    for text in requires:
        try:
            req = Requirement(text)
        except InvalidRequirement:
            continue
        if req.marker is None or any(req.marker.evaluate({**markers, "extra": e}) for e in extras):
            out.append(canonicalize_name(req.name))
    return sorted(set(out))


def _on_import() -> tuple[str, ...]:
    """The kit's requirements that a tab loads when the kit's code imports them, not with the kit (the drawing
    library): ``labkit.browser.ON_IMPORT``, read from its file (the kit's package needs more than this build
    environment has)."""
    spec = importlib.util.spec_from_file_location("labkit_browser", ROOT / "labkit" / "browser.py")
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module.ON_IMPORT


ON_IMPORT = _on_import()


def _metadata(zf: zipfile.ZipFile) -> tuple[dict[str, str], list[str]]:
    """A wheel's METADATA header: its fields (the last of each) and its Requires-Dist lines."""
    meta = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
    lines = zf.read(meta).decode().split("\n\n")[0].splitlines()
    fields = dict(line.split(": ", 1) for line in lines if ": " in line)
    return fields, [line.split(": ", 1)[1] for line in lines if line.startswith("Requires-Dist: ")]


def _wheel_name(wheel: Path) -> str:
    with zipfile.ZipFile(wheel) as zf:
        return canonicalize_name(_metadata(zf)[0]["Name"])


def _lock_entry(wheel: Path, markers: dict[str, str]) -> tuple[str, dict]:
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        fields, requires = _metadata(zf)
    imports = sorted({n.split("/")[0].removesuffix(".py") for n in names
                      if not n.split("/")[0].endswith((".dist-info", ".data")) and (n.endswith(".py") or "/" in n)})
    name = canonicalize_name(fields["Name"])
    # the kit: the course's `notebooks` extra too (ipywidgets, anywidget; a cell imports only labkit.widgets),
    # less what it loads on import (ON_IMPORT)
    extras = ("", "notebooks") if name == "dra-labkit" else ("",)
    depends = [d for d in _depends(requires, markers, extras) if name != "dra-labkit" or d not in ON_IMPORT]
    return name, {"name": name, "version": fields["Version"], "file_name": wheel.name, "install_dir": "site",
                  "sha256": hashlib.sha256(wheel.read_bytes()).hexdigest(), "package_type": "package",
                  "imports": imports, "depends": depends, "unvendored_tests": False, "shared_library": False}


#: the official packages a site takes from a local distribution (with their dependencies): the drawing cells'
#: and what the JupyterLite kernel loads; the rest of the course's packages are the site's own wheels
ANY_DISTRIBUTION_NEEDS = ("matplotlib", "numpy", "micropip", "ssl", "sqlite3")


#: requirements of the kernel's IPython and of ipywidgets that a browser tab does not use, left out of the site
#: (and of every package's ``depends``): jedi and parso (IPython's completer works without them: 4.9 MB),
#: widgetsnbextension (the widgets' front end for the classic Notebook server: 2.2 MB; the site's JupyterLab
#: carries its own), pytz (Pyodide's lock lists it for matplotlib, whose code has not imported it since 3.x:
#: 0.5 MB that each drawing lesson fetched); and two of the kit's own that its sim path does not import: protobuf
#: (the native CEL engine's and the driver's gRPC) and rich (the CLI's tables). A site on the CDN took both
#: with the kit on every page, while the site the tests run had neither.
NOT_IN_BROWSER = ("jedi", "parso", "widgetsnbextension", "pytz", "protobuf", "rich")


#: JupyterLab settings of the site: every output stays in the page (the browser test reads cells below the
#: fold); no news, no update check, no announcement dialog (a learner offline gets no question to answer)
OVERRIDES = {
    "@jupyterlab/notebook-extension:tracker": {"windowingMode": "none"},
    "@jupyterlab/apputils-extension:notification": {"fetchNews": "false", "checkForUpdates": False},
}


#: what a browser tab imports from the site's wheels: the JupyterLite kernel (its start-up), the widgets, and
#: any module of the kit; their bytecode is compiled at build time (notebooks/wheel_bytecode.py)
TAB_IMPORTS = ("piplite", "pyodide_kernel", "ipykernel", "comm", "IPython", "IPython.core.ultratb", "ipywidgets",
               "anywidget")
KIT_PACKAGES = ("labkit", "fake_gpus")
#: packages whose bytecode the site compiles as ``python -OO`` does, without docstrings (their sourceless
#: bytecode with them grew matplotlib's wheel by 0.8 MB, and the site over 60 MB): matplotlib guards each use of
#: a docstring (it supports -OO). Not numpy: in an interpreter that is not -OO itself its add_docstring insists
#: on a str, and `import numpy` fails.
NO_DOCSTRINGS = ("matplotlib",)
#: what a lesson's drawing cell does in a tab beyond its imports (the kernel's inline backend draws the
#: picture as a PNG): run at build time, so that the modules it imports get bytecode too
TAB_RUNS = ("import io, matplotlib; matplotlib.use('module://matplotlib_inline.backend_inline'); "
            "import matplotlib.pyplot as plt; fig, ax = plt.subplots(); ax.step([0, 1], [1, 0], marker='o'); "
            "ax.bar([0], [1]); ax.legend(['a']); ax.set_title('t'); fig.savefig(io.BytesIO(), format='png')",
             # connect('sim') decodes each catalog file as utf-8-sig (fake_gpus/catalog/loader.py _read_yaml)
             "b'x'.decode('utf-8-sig')")
#: the kit's data files a tab parses on every connect('sim'): they ship with a JSON twin too (pure-Python YAML
#: in Pyodide took ~0.5 s for them)
CATALOG_TWINS = ("fake_gpus/catalog/",)


#: the site's standard library: the distribution's python_stdlib.zip with bytecode for what a tab imports
#: (wheel_bytecode.py --stdlib), loaded instead of it (loadPyodideOptions.stdLibURL)
STDLIB = "python_stdlib_pyc.zip"


#: the compiled wheels and standard library of earlier builds: compiling is most of a build's CPU (~33 s on one
#: core, Pyodide under Node.js), and a new commit of the kit changes the kit's wheel only. Each part (a wheel, the
#: standard library) is compiled once per content, compiler and set of modules a tab imports of it
#: (BYTECODE_CACHE/parts/<key>, wheel_bytecode.py `part_key`), and a build of the same wheels, Pyodide and
#: compiler as an earlier one (BYTECODE_CACHE/builds/<key>.json, key: `bytecode_key`) runs no compiler at all
BYTECODE_CACHE = CACHE / "bytecode"
#: how many builds' parts the cache keeps (the most recently used): the sites of the CDN and of --pyodide
#: verified, each of a commit or two; a part that none of them uses goes
BYTECODE_KEEP = 4
#: a build that compiles this many parts or fewer names them
NAMED_PARTS = 3
#: the files of a Pyodide distribution that make its interpreter and its standard library
CORE_FILES = ("pyodide.mjs", "pyodide.asm.js", "pyodide.asm.wasm", "python_stdlib.zip", "pyodide-lock.json")


def compiler_salt(node: str, core: Path) -> str:
    """What every compiled part depends on: the compiler (Node.js, site_bytecode.mjs, wheel_bytecode.py) and
    the Pyodide that runs it (`CORE_FILES` of ``core``)."""
    digest = hashlib.sha256(subprocess.run([node, "--version"], capture_output=True, text=True).stdout.encode())
    for f in (HERE / "site_bytecode.mjs", HERE / "wheel_bytecode.py", *(core / n for n in CORE_FILES)):
        digest.update(f.name.encode() + (hashlib.sha256(f.read_bytes()).digest() if f.is_file() else b"-"))
    return digest.hexdigest()[:32]


def bytecode_key(salt: str, args: list[str], digests: list[str]) -> str:
    """What a whole build's compile depends on: the compiler (``salt``), its options ``args`` and the content
    of each wheel (``digests``: which decides which modules of each part a tab imports)."""
    digest = hashlib.sha256()
    for part in (salt, *args, *digests):
        digest.update(part.encode() + b"\0")
    return digest.hexdigest()[:32]


def _evict(parts: Path, builds: Path) -> None:
    """Keep the BYTECODE_KEEP most recently used builds and the parts they use; drop the rest (and entries of
    the cache's earlier layout). A part newer than the oldest kept build is left: another build may be
    about to name it."""
    kept = sorted(builds.glob("*.json"), key=lambda f: f.stat().st_mtime, reverse=True)
    for old in kept[BYTECODE_KEEP:]:
        old.unlink(missing_ok=True)
    kept = kept[:BYTECODE_KEEP]
    used: set[str] = set()
    for f in kept:
        with contextlib.suppress(OSError, ValueError):
            used |= set(json.loads(f.read_text(encoding="utf-8"))["parts"].values())
    oldest = min((f.stat().st_mtime for f in kept), default=0.0)
    for entry in parts.iterdir():
        if entry.name not in used and not entry.name.startswith("new-") and entry.stat().st_mtime < oldest:
            shutil.rmtree(entry, ignore_errors=True)
    for entry in BYTECODE_CACHE.iterdir():
        if entry.is_dir() and entry not in (parts, builds) and not entry.name.startswith("new-"):
            shutil.rmtree(entry, ignore_errors=True)


def _earlier(parts: Path, builds: Path, salt: str, digests: dict[str, str]) -> dict[str, Path]:
    """The compiled wheels of the builds in the cache by the same compiler and Pyodide (``salt``: the same
    magic number) whose published wheel had the content ``digests`` names (file name -> the compiled wheel)."""
    found: dict[str, Path] = {}
    for f in sorted(builds.glob("*.json"), key=lambda f: f.stat().st_mtime):  # the newest last: it wins
        with contextlib.suppress(OSError, ValueError, KeyError, AttributeError):
            plan = json.loads(f.read_text(encoding="utf-8"))
            if plan.get("salt") != salt:
                continue
            for name, digest in plan.get("content", {}).items():
                part = parts / plan["parts"].get(name, "-") / "part"
                if digests.get(name) == digest and part.is_file():
                    found[name] = part
    return found


def _cached_compile(salt: str, build_key: str, digests: dict[str, str], out: Path,
                    compile_into: Callable[[list[str], dict[str, Path]], str]) -> str:
    """The compiled parts of the build ``build_key`` in ``out`` (file name as the part's) and what the compiler
    printed: a whole earlier build's from BYTECODE_CACHE, else ``compile_into(cache options, earlier)`` (one
    compiler run; it compiles the parts that are not in the cache, stores them there and prints a ``cache
    hit|new KEY NAME`` line each). ``digests``: each wheel's content (file name -> `content_digest`);
    ``earlier``: the compiled wheel of an earlier build of the same content, by file name (imported from
    instead of the published one: its bytecode spares the compiler most of its imports' time)."""
    parts, builds = BYTECODE_CACHE / "parts", BYTECODE_CACHE / "builds"
    parts.mkdir(parents=True, exist_ok=True)
    builds.mkdir(exist_ok=True)
    manifest = builds / f"{build_key}.json"
    plan = None
    with contextlib.suppress(OSError, ValueError):
        plan = json.loads(manifest.read_text(encoding="utf-8"))
        if not all((parts / key / "said").is_file() for key in plan["parts"].values()):
            plan = None
    if plan is None:
        stdout = compile_into(["--cache", str(parts), "--salt", salt], _earlier(parts, builds, salt, digests))
        found = [line.split() for line in stdout.splitlines() if line.startswith(("cache hit ", "cache new "))]
        plan = {"parts": {name: key for _, _, key, name in found}, "content": digests, "salt": salt,
                "stdout": "".join(f"{line}\n" for line in stdout.splitlines() if not line.startswith("cache "))}
        new = [name for _, how, _, name in found if how == "new"]
        fresh = manifest.with_name(f"new-{os.getpid()}-{manifest.name}")
        fresh.write_text(json.dumps(plan), encoding="utf-8")
        fresh.replace(manifest)
        named = f": {', '.join(new)}" if 0 < len(new) <= NAMED_PARTS else ""
        print(f"site: bytecode compiled for {len(new)} of {len(found)} parts{named}; {len(found) - len(new)} "
              f"from the cache in {parts}")
    else:
        print(f"site: bytecode of the same wheels, Pyodide and compiler: all {len(plan['parts'])} parts from the "
              f"cache in {parts}")
    out.mkdir(parents=True, exist_ok=True)
    for name, key in plan["parts"].items():
        os.utime(parts / key)  # the most recently used are kept
        if (parts / key / "part").is_file():  # none: nothing of it is imported, it stays as published
            shutil.copy2(parts / key / "part", out / name)
    os.utime(manifest)
    _evict(parts, builds)
    return plan["stdout"]


def with_bytecode(wheels: list[Path], official: list[Path], core: Path, out: Path) -> tuple[dict[str, Path], Path | None]:
    """The site's ``wheels`` and a local distribution's ``official`` wheels (file name -> compiled wheel in
    ``out``) with bytecode for what a tab imports, compiled by the site's Pyodide (``core``) under Node.js
    (notebooks/site_bytecode.mjs), and that Pyodide's standard library with bytecode for the same
    (``out/STDLIB``); each part that an earlier build compiled the same way from BYTECODE_CACHE. Without
    Node.js: ``({}, None)`` (the wheels and the standard library as they are: each import then compiles in the
    tab)."""
    node = shutil.which("node")
    if node is None:
        print("site: no Node.js here: the wheels go without bytecode (the tab compiles each module it imports, "
              "a slower start); fix: apt-get install nodejs", file=sys.stderr)
        return {}, None
    args = ["--compile", *(w.name for w in (*wheels, *official)), "--keep-source", *KIT_PACKAGES,
            "--no-docstrings", *(w.name for w in official if _wheel_name(w) in NO_DOCSTRINGS),
            "--import", *TAB_IMPORTS, "--import-all", *KIT_PACKAGES, "--run", *TAB_RUNS,
            "--yaml-twins", *CATALOG_TWINS, "--stdlib", STDLIB]

    def compile_into(cache_args: list[str], earlier: dict[str, Path]) -> str:
        imports = [str(earlier.get(w.name, w).resolve()) for w in (*wheels, *official)]
        with tempfile.TemporaryDirectory() as folder:  # the compiler writes into the cache, not here
            # absolute: the ones the driver mounts
            paths = [str(p.resolve()) for p in (core, Path(folder), *wheels, *official)]
            done = subprocess.run([node, str(HERE / "site_bytecode.mjs"), *paths, *args, *cache_args,
                                   "--import-wheels", *imports], capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(f"site: compiling the wheels' bytecode in Pyodide failed:\n{(done.stdout + done.stderr)[-3000:]}")
        return done.stdout

    salt = compiler_salt(node, core)
    digests = {w.name: wheel_bytecode.content_digest(w) for w in (*wheels, *official)}
    stdout = _cached_compile(salt, bytecode_key(salt, args, list(digests.values())), digests, out, compile_into)
    compiled = {w.name: out / w.name for w in (*wheels, *official) if (out / w.name).exists()}
    said = {line.split(": ")[0]: int(line.split(": ")[1].split()[0]) for line in stdout.splitlines()
            if " modules compiled" in line}
    stdlib = out / STDLIB
    stdlib_modules = sum(n for name, n in said.items() if not name.endswith(".whl"))
    print(f"site: bytecode for {sum(n for name, n in said.items() if name.endswith('.whl'))} modules of "
          f"{len(compiled)} wheels and {stdlib_modules} of the standard library, compiled by the Pyodide in {core}")
    return compiled, stdlib if stdlib.is_file() else None


def stage(lite_dir: Path, pyodide: Path | None, *, solutions: bool = False) -> dict:
    """The JupyterLite sources: files/ (notebooks, examples, clusters), and the wheels + lock beside a local Pyodide
    (static/pyodide, ``pyodide`` a distribution's folder) or for the CDN (static/labkit, ``pyodide`` None).
    Returns the kernel's settings (``litePluginSettings``), to merge into the built site's jupyter-lite.json."""
    files = lite_dir / "files"
    (files / "notebooks").mkdir(parents=True)
    for name in build.names():
        (files / "notebooks" / f"{name}.ipynb").write_text(_learner_notebook(name, solutions), encoding="utf-8")
    shutil.copytree(ROOT / "examples", files / "examples")
    shutil.copytree(ROOT / "clusters", files / "clusters")  # the cluster profiles, to open and copy (the kit reads its own)
    official = json.loads(((pyodide or NPM_CORE) / "pyodide-lock.json").read_text())
    version = pyodide_version(pyodide or NPM_CORE)
    if pyodide is None:
        target = lite_dir / "static" / "labkit"
        target.mkdir(parents=True)
        lock = official
        for entry in lock["packages"].values():  # the official packages: from the CDN of the same version
            entry["file_name"] = CDN.format(version=version) + entry["file_name"]
        have = set(official["packages"])
    else:
        target = lite_dir / "static" / "pyodide"
        # of a full release's packages only those the course and the kernel load (a few MB of its ~300)
        keep = {official["packages"][n]["file_name"] for n in closure(official, [
            n for n in ANY_DISTRIBUTION_NEEDS if n in official["packages"]]) if n not in NOT_IN_BROWSER}
        packages = {e["file_name"] for e in official["packages"].values()} - keep

        def ignore(folder: str, names: list[str]) -> set[str]:
            return {n for n in names if n in packages or n.endswith((".map", ".d.ts"))
                    or n in ("package.json", "README.md")}

        shutil.copytree(pyodide, target, ignore=ignore)
        lock = official
        have = {n for n, e in lock["packages"].items() if (target / e["file_name"]).exists()}
    markers = browser_markers(official["info"]["python"])
    with tempfile.TemporaryDirectory() as tmp:
        wheels = [_kit_wheel(Path(tmp))]
        for folder in (CACHE / "dist", CACHE / "site"):
            for f in sorted(folder.iterdir()):
                wheels.append(f if f.suffix == ".whl" else _pure_wheel_from_sdist(f, Path(tmp)))
        # the kernel's own (its widgetsnbextension shims: not in the browser, NOT_IN_BROWSER)
        wheels += [w for w in sorted(KERNEL_WHEELS.glob("*.whl")) if not w.name.startswith("widgetsnbextension")]
        added: dict[str, Path] = {}
        for wheel in wheels:
            name = _wheel_name(wheel)
            # a name in the official lock keeps its entry (and its files) when the distribution has the file
            if name not in have and name not in NOT_IN_BROWSER and name not in added:
                added[name] = wheel
        official_wheels = [w for w in (target / lock["packages"][n]["file_name"] for n in sorted(have))
                           if w.suffix == ".whl" and w.is_file()]  # a local distribution's (the CDN's: none)
        compiled, stdlib = with_bytecode(list(added.values()), official_wheels, pyodide or NPM_CORE,
                                         Path(tmp) / "bytecode")
        # the distribution's numpy, matplotlib ... : the official wheel's files, the modules a tab imports as
        # bytecode (as the site's own wheels), and the site's lock says the new sha256
        by_file = {e["file_name"]: e for e in lock["packages"].values()}
        for wheel in official_wheels:
            if wheel.name in compiled:
                shutil.copy2(compiled[wheel.name], wheel)
                by_file[wheel.name]["sha256"] = hashlib.sha256(wheel.read_bytes()).hexdigest()
        if stdlib is not None:  # Pyodide loads it instead of the distribution's (stdLibURL below)
            shutil.copy2(stdlib, target / STDLIB)
            (target / "python_stdlib.zip").unlink(missing_ok=True)  # a local distribution's: no tab loads it
        for name, wheel in added.items():
            wheel = compiled.get(wheel.name, wheel)
            shutil.copy2(wheel, target / wheel.name)
            lock["packages"][name] = _lock_entry(wheel, markers)[1]
            have.add(name)
    # a requirement this distribution does not have (google-re2: no wasm build) is left out, or loading the
    # package would fail on it; so is one a tab does not use (NOT_IN_BROWSER), whatever the distribution
    for entry in lock["packages"].values():
        entry["depends"] = [d for d in entry["depends"] if d in have and d not in NOT_IN_BROWSER]
    (target / "pyodide-lock.json").write_text(json.dumps(lock, separators=(",", ":")))
    (lite_dir / "overrides.json").write_text(json.dumps(OVERRIDES, indent=1))
    # Pyodide loads the kernel's packages and the kit's in one parallel loadPackage while it starts, instead
    # of the kernel's one-by-one installs and the first cell's load of the kit
    options: dict = {"packages": [n for n in (*KERNEL_STARTS_WITH[kernel_series()], "dra-labkit")
                                  if canonicalize_name(n) in have]}
    plugin: dict = {"loadPyodideOptions": options}
    if (target / STDLIB).is_file():  # the kernel resolves each *URL option against the site's address
        options["stdLibURL"] = f"./{target.relative_to(lite_dir).as_posix()}/{STDLIB}"
    if pyodide is None:  # the kernel: Pyodide from the CDN, with the site's lock (its wheels: from the site)
        plugin["pyodideUrl"] = CDN.format(version=version) + "pyodide.mjs"
        options["lockFileURL"] = "./static/labkit/pyodide-lock.json"
    (lite_dir / "jupyter-lite.json").write_text(json.dumps({
        "jupyter-lite-schema-version": 0, "jupyter-config-data": {"litePluginSettings": {KERNEL_PLUGIN: plugin}}},
        indent=1))
    return plugin


#: the site's own static files (the landing page's stylesheet, the lab's run-when-ready script): copied to
#: SITE_STATIC_DIR of the site
SITE_STATIC = HERE / "site_static"
SITE_STATIC_DIR = "labkit-site"
#: the lab pages that load the run-when-ready script (a cell run before the kernel is up runs once it is)
LAB_PAGES = ("lab/index.html", "notebooks/index.html")


def lesson_link(name: str) -> str:
    """A lesson's stable address in the site, relative to its root: it opens the notebook in the lab."""
    return f"lab/index.html?path=notebooks/{name}.ipynb"


def _inline_markdown(text: str) -> str:
    """The front matter's Markdown (`code` only) as HTML."""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(text))


def landing_page(config_script: str) -> str:
    """The site's index.html: the lessons by group (tools/lessons.py GROUPS), each with its title, what it
    teaches and its minutes, linked by its stable address. ``config_script``: JupyterLite's own
    ``jupyter-config-data`` element of the index.html it built, kept (the lab reads the settings of every
    parent folder's index.html)."""
    items = lessons()
    sections = []
    for group, heading in GROUPS.items():
        mine = [x for x in items if x["group"] == group]
        if not mine:
            continue
        rows = []
        for x in mine:
            note = ' · <span class="note">needs the full kit for kind and local</span>' if x["name"] in FULL_KIT_ONLY else ""
            rows.append(f'<li><a href="{html.escape(lesson_link(str(x["name"])))}"><span class="num">{x["number"]}</span>'
                        f'{html.escape(str(x["title"]))}</a>\n<p class="learn">{_inline_markdown(str(x["learn"]))}</p>\n'
                        f'<p class="meta">{x["minutes"]} min{note}</p></li>')
        sections.append(f'<section aria-labelledby="{group}">\n<h2 id="{group}">{heading}</h2>\n<ol class="lessons">\n'
                        + "\n".join(rows) + "\n</ol>\n</section>")
    minutes = sum(int(x["minutes"]) for x in items)  # type: ignore[call-overload]
    return f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>DRA LabKit: Kubernetes Dynamic Resource Allocation for GPUs, in your browser</title>
{config_script}
<link rel="stylesheet" href="{SITE_STATIC_DIR}/landing.css">
</head>
<body>
<header>
<h1>DRA LabKit</h1>
<p class="tagline">Kubernetes Dynamic Resource Allocation (<code>resource.k8s.io/v1</code>) for GPUs, hands on.</p>
<p class="intro">Every lesson runs in this tab on simulated NVIDIA GPUs (JupyterLite and Pyodide with the
embedded <code>sim</code> cluster): nothing to install, no account, no GPU. Open a lesson and run it from the top;
your edits stay in this browser.</p>
<p class="total">{len(items)} lessons, about {round(minutes / 60)} hours in all.
<a href="lab/index.html">Open the lab</a> with every notebook, <code>examples/</code> and the cluster profiles in <code>clusters/</code>.</p>
</header>
<main>
{chr(10).join(sections)}
</main>
<footer>
<h2>The full kit</h2>
<p>The <code>local</code> and <code>kind</code> backends (a real control plane, a real kind cluster) and the fast
native engines need an install: <code>git clone</code> the DRA LabKit repository, then <code>make lab</code>
(Python 3.11 or later and <code>make</code>; kind also needs Docker or Podman).</p>
</footer>
</body>
</html>
"""


def add_site_static(site: Path) -> None:
    """The site's own static files (SITE_STATIC) into the built ``site``, the lab's settings that let the
    run-when-ready script reach the lab (``exposeAppInBrowser``: JupyterLite sets ``window.jupyterapp``), and
    that script in each lab page."""
    shutil.copytree(SITE_STATIC, site / SITE_STATIC_DIR)
    config = site / "jupyter-lite.json"
    data = json.loads(config.read_text())
    data["jupyter-config-data"]["exposeAppInBrowser"] = "true"  # JupyterLite compares the string
    config.write_text(json.dumps(data, indent=1))
    for page in LAB_PAGES:
        path = site / page
        if path.is_file():
            text = path.read_text(encoding="utf-8")
            tag = f'<script src="../{SITE_STATIC_DIR}/run-when-ready.js"></script>\n'
            path.write_text(text.replace("</head>", tag + "</head>", 1), encoding="utf-8")


#: font formats that only browsers without WebAssembly (so without Pyodide) need: JupyterLab's icon fonts come in
#: each of them, beside a .woff2 that every browser able to run the site takes first
LEGACY_FONTS = (".eot", ".ttf", ".woff", ".svg")


def drop_legacy_fonts(site: Path) -> int:
    """Remove the legacy copies of each font that has a .woff2 beside it; returns the bytes removed."""
    removed = 0
    for woff2 in site.rglob("*.woff2"):
        for legacy in (woff2.with_suffix(s) for s in LEGACY_FONTS):
            if legacy.is_file():
                removed += legacy.stat().st_size
                legacy.unlink()
    return removed


#: JupyterLab extensions of the build's environment that the site has no use for: jupytext's (site.py reads the
#: MyST sources with jupytext; the site itself holds .ipynb notebooks only)
NOT_IN_SITE = ("jupyterlab-jupytext",)


def drop_extensions(site: Path, names: tuple[str, ...] = NOT_IN_SITE) -> int:
    """Remove the federated extensions ``names`` from a built site: their folder, their entry in
    jupyter-lite.json (what the page loads) and their settings schemas. Returns the bytes removed."""
    removed = 0
    for name in names:
        folder = site / "extensions" / name
        if folder.is_dir():
            removed += sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())
            shutil.rmtree(folder)
    config = site / "jupyter-lite.json"
    data = json.loads(config.read_text())
    listed = data["jupyter-config-data"].get("federated_extensions", [])
    data["jupyter-config-data"]["federated_extensions"] = [e for e in listed if e.get("name") not in names]
    config.write_text(json.dumps(data, indent=1))
    schemas = site / "build" / "schemas" / "all_federated.json"
    if schemas.is_file():
        kept = [s for s in json.loads(schemas.read_text()) if str(s.get("id", "")).split(":")[0] not in names]
        schemas.write_text(json.dumps(kept))
    return removed


#: the file each site this builder makes holds (with its index.html and jupyter-lite.json): an --out folder
#: that has them is an earlier site, which a new build replaces; one that holds anything else is refused
SITE_MARKER = ".labkit-site"


def out_problem(out: Path) -> str | None:
    """Why the site may not go to ``out`` (None: it may): a folder that is missing, empty or an earlier site
    (SITE_MARKER, index.html, jupyter-lite.json) may be (re)built; anything else is the user's, never touched."""
    if not out.exists() and not out.is_symlink():
        return None
    if not out.is_dir():
        return f"--out {out} is not a folder; fix: name a new or empty folder for the site"
    if any(out.iterdir()) and not all((out / f).is_file() for f in (SITE_MARKER, "index.html", "jupyter-lite.json")):
        return (f"--out {out} holds files and is not a site this builder made (no {SITE_MARKER}, index.html and "
                f"jupyter-lite.json in it); fix: name a new or empty folder, or move {out} away yourself")
    return None


def build_in_place(out: Path, build_site: Callable[[Path, Path], int]) -> int:
    """Run ``build_site(lite_dir, site)`` in a new folder beside ``out`` (the same file system) and, when it
    returns 0, rename its site into place of ``out`` (an earlier site there goes then, not before). Anything
    else (an error, a non-zero return, Ctrl-C) removes that folder and leaves ``out`` as it was: a failed build
    keeps the previous site. ``out`` is refused (exit 2, one line) where :func:`out_problem` says so."""
    out = out.absolute()
    if why := out_problem(out):
        print(f"site: {why}", file=sys.stderr)
        return 2
    out.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f"{out.name}.building-", dir=out.parent))
    try:
        site = work / "site"
        rc = build_site(work / "src", site)
        if rc != 0:
            return rc
        (site / SITE_MARKER).write_text("made by notebooks/site.py: the next build replaces this folder whole\n")
        if why := out_problem(out):  # it changed while the site was built
            print(f"site: {why}", file=sys.stderr)
            return 2
        if out.exists() or out.is_symlink():
            os.rename(out, work / "previous")  # an earlier site (or an empty folder): it goes with ``work``
            try:
                os.rename(site, out)
            except BaseException:
                os.rename(work / "previous", out)
                raise
        else:
            os.rename(site, out)
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


def build_site(lite_dir: Path, out: Path, pyodide: Path | None, *, sourcemaps: bool, solutions: bool) -> int:
    """Stage the JupyterLite sources in ``lite_dir`` and build the site into ``out`` (both new folders)."""
    kernel = stage(lite_dir, pyodide.resolve() if pyodide else None, solutions=solutions)
    cmd = [sys.executable, "-m", "jupyter", "lite", "build", "--lite-dir", str(lite_dir), "--output-dir", str(out)]
    if not sourcemaps:
        cmd.append("--no-sourcemaps")
    if (rc := subprocess.run(cmd, cwd=lite_dir).returncode) != 0:
        print(f"site: `jupyter lite build` failed (exit {rc}): see its output above", file=sys.stderr)
        return 1
    if pyodide is None:  # the build copies static/pyodide only: the CDN site's wheels and lock, by hand
        shutil.copytree(lite_dir / "static" / "labkit", out / "static" / "labkit")
    # the build keeps the pyodideUrl and pipliteUrls it writes, not always the lite dir's other settings
    built_json = json.loads((out / "jupyter-lite.json").read_text())
    plugin = built_json["jupyter-config-data"].setdefault("litePluginSettings", {}).setdefault(KERNEL_PLUGIN, {})
    plugin.update({k: v for k, v in kernel.items() if k not in plugin})
    plugin["loadPyodideOptions"] = {**plugin.get("loadPyodideOptions", {}), **kernel["loadPyodideOptions"]}
    (out / "jupyter-lite.json").write_text(json.dumps(built_json, indent=1))
    want = CDN.split("{")[0] if pyodide is None else "static/pyodide"
    if want not in str(plugin.get("pyodideUrl", "")):
        print(f"site: the build did not point the kernel at {want} but at {plugin.get('pyodideUrl')!r}", file=sys.stderr)
        return 1
    built = (out / "index.html").read_text(encoding="utf-8")
    start = built.find('<script id="jupyter-config-data"')
    config_script = built[start:built.index("</script>", start) + len("</script>")] if start >= 0 else ""
    (out / "index.html").write_text(landing_page(config_script), encoding="utf-8")
    add_site_static(out)
    (out / ".nojekyll").write_text("")  # GitHub Pages: serve _-prefixed folders as they are
    left_out = drop_legacy_fonts(out) + drop_extensions(out)
    size = sum(f.stat().st_size for f in out.rglob("*") if f.is_file())
    print(f"site: {size / 1e6:.1f} MB, {len(build.names())} notebooks; {left_out / 1e6:.1f} MB of legacy "
          f"font files and unused extensions left out")
    return 0


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "site",
                        help="the site folder (default build/site): new, empty or an earlier site, which the new one "
                             f"replaces once it is built (a folder that holds anything else is refused: {SITE_MARKER})")
    parser.add_argument("--pyodide", default="cdn", metavar="cdn|verified|PATH",
                        help="where Pyodide comes from: the official CDN (default), the verified local copy of "
                             "tools/pyodide-deps.sh, or the folder of a local official Pyodide distribution")
    parser.add_argument("--sourcemaps", action="store_true", help="keep the JavaScript source maps (bigger)")
    parser.add_argument("--solutions", action="store_true",
                        help="the instructor's copy: each exercise followed by its solution")
    args = parser.parse_args(argv)
    if why := out_problem(args.out.absolute()):  # before anything is built: the user's folder is never touched
        print(f"site: {why}", file=sys.stderr)
        return 2
    pyodide = None if args.pyodide == "cdn" else VERIFIED if args.pyodide == "verified" else Path(args.pyodide)
    lock = (pyodide or NPM_CORE) / "pyodide-lock.json"
    if not lock.exists():
        what = f"--pyodide {args.pyodide}: no Pyodide distribution in {pyodide}" if pyodide else "no Pyodide lock for the CDN"
        print(f"site: {what} (no {lock.name}); fix: bash tools/pyodide-deps.sh, "
              "or --pyodide <folder of an official Pyodide release>", file=sys.stderr)
        return 2
    if why := kernel_mismatch(pyodide_version(lock.parent)):
        print(f"site: {why}", file=sys.stderr)
        return 2
    # always a clean build, in a new folder beside --out: an incremental one once dropped the local Pyodide
    # setting (back to the CDN)
    rc = build_in_place(args.out, lambda lite_dir, site: build_site(lite_dir, site, pyodide, sourcemaps=args.sourcemaps,
                                                                     solutions=args.solutions))
    if rc == 0:
        print(f"site: {args.out}; serve: make site-serve")
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
