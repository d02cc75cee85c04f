"""The site's bytecode, compiled once per part and content (notebooks/site.py `with_bytecode`, notebooks/
wheel_bytecode.py `part_key`): compiling the wheels and the standard library in Pyodide under Node.js is most of
a site build's CPU, and every commit changes the kit's wheel only. A build whose wheels (by content, not by their
zip's file dates), Pyodide and compiler are those of an earlier build runs no compiler; a build with one changed
wheel compiles that wheel only, and its output is what a build from nothing writes. Node.js is a stub here: it
runs notebooks/wheel_bytecode.py (the real compiler, in this CPython instead of Pyodide) with a stand-in standard
library zip, and records each run; the real compile in Pyodide runs in the site lane
(tests/site/test_browser_site.py)."""

from __future__ import annotations

import importlib.util
import sys
import zipfile
from functools import cache
from pathlib import Path

import pytest

from tests.paths import REPO

ROOT = REPO

#: a Node.js that records its runs in $STUB_RUNS: ``--version``, or site_bytecode.mjs CORE ARG...: runs
#: wheel_bytecode.py ARG... with CORE/python_stdlib.zip as its standard library's zip (-S: none of this venv's
#: packages, so the wheels' labkit and fake_gpus are the ones imported)
STUB_NODE = """#!{python} -S
import os, runpy, sys
args = sys.argv[1:]
if args == ["--version"]:
    print("v20.0.0-stub")
    sys.exit(0)
with open(os.environ["STUB_RUNS"], "a") as runs:
    runs.write("compile\\n")
_mjs, core, *rest = args
sys.path.insert(0, os.path.join(core, "python_stdlib.zip"))
sys.argv = ["wheel_bytecode.py", *rest]
runpy.run_path({script!r}, run_name="__main__")
"""


@cache
def _site():
    """notebooks/site.py (a script beside the notebooks, not a package)."""
    spec = importlib.util.spec_from_file_location("labkit_notebooks_site_cache", ROOT / "notebooks" / "site.py")
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def _wheel(folder: Path, package: str, body: str, date: tuple[int, ...] = (2020, 1, 1, 0, 0, 0)) -> Path:
    """``package``-1.0's wheel in ``folder``: ``package/mod.py`` is ``body`` (the site imports every module of the
    kit's packages)."""
    files = {f"{package}/__init__.py": "", f"{package}/mod.py": body,
             f"{package}-1.0.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {package}\nVersion: 1.0\n"}
    path = folder / f"{package}-1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        for name, text in files.items():
            zf.writestr(zipfile.ZipInfo(name, date), text)
        zf.writestr(zipfile.ZipInfo(f"{package}-1.0.dist-info/RECORD", date), "".join(f"{n},,\n" for n in files))
    return path


#: the stand-in standard library: two modules, of which the kit's wheels below import one or two
STDLIB = {"stdmod.py": "A = 1\n", "other.py": "B = 2\n"}


@pytest.fixture
def stub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The stub Node.js on PATH, an empty cache, a Pyodide core; returns a function that builds once."""
    site = _site()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    node = bin_dir / "node"
    node.write_text(STUB_NODE.format(python=sys.executable, script=str(ROOT / "notebooks" / "wheel_bytecode.py")))
    node.chmod(0o755)
    runs = tmp_path / "runs"
    runs.write_text("")
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    monkeypatch.delenv("PYTHONPATH", raising=False)
    monkeypatch.setenv("STUB_RUNS", str(runs))
    monkeypatch.setattr(site, "BYTECODE_CACHE", tmp_path / "cache", raising=False)
    core = tmp_path / "core"
    core.mkdir()
    (core / "pyodide.mjs").write_text("// core 1")
    with zipfile.ZipFile(core / "python_stdlib.zip", "w") as zf:
        for name, text in STDLIB.items():
            zf.writestr(name, text)
    builds = iter(range(100))

    def build(wheels: list[Path]) -> tuple[dict[str, Path], Path | None, int]:
        """One build's compile: (compiled wheels, standard library, the compiler's runs so far)."""
        compiled, stdlib = site.with_bytecode(wheels, [], core, tmp_path / f"out{next(builds)}")
        return compiled, stdlib, len(runs.read_text().splitlines())

    return build, tmp_path, core


def _members(zip_file: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(zip_file) as zf:
        return {name: zf.read(name) for name in zf.namelist()}


def test_a_second_build_of_the_same_wheels_takes_the_compiled_output_from_the_cache(stub, capsys) -> None:
    build, tmp, core = stub
    wheels = [_wheel(tmp, "labkit", "import stdmod\nx = 1\n"), _wheel(tmp, "fake_gpus", "y = 1\n")]
    compiled, stdlib, runs = build(wheels)
    assert runs == 1
    first = capsys.readouterr().out
    assert "site: bytecode compiled for 3 of 3 parts: labkit-1.0-py3-none-any.whl, fake_gpus-1.0-py3-none-any.whl, " \
           "python_stdlib_pyc.zip; 0 from the cache in " in first
    assert "site: bytecode for 4 modules of 2 wheels and 1 of the standard library" in first
    # the same content in wheels with other file dates (the kit's wheel, built from a fresh clone)
    again = [_wheel(tmp, "labkit", "import stdmod\nx = 1\n", date=(2024, 6, 1, 12, 0, 0)),
             _wheel(tmp, "fake_gpus", "y = 1\n", date=(2024, 6, 1, 12, 0, 0))]
    compiled2, stdlib2, runs = build(again)
    assert runs == 1, "the compiler ran again for the same wheels"
    second = capsys.readouterr().out
    assert "site: bytecode of the same wheels, Pyodide and compiler: all 3 parts from the cache in " in second
    assert "site: bytecode for 4 modules of 2 wheels and 1 of the standard library" in second
    assert compiled2.keys() == compiled.keys() == {w.name for w in wheels}
    for name in compiled:
        assert compiled2[name].read_bytes() == compiled[name].read_bytes()
    assert stdlib is not None and stdlib2 is not None and stdlib2.read_bytes() == stdlib.read_bytes()
    assert set(_members(stdlib)) == {"stdmod.pyc", "other.py"}  # what the kit imports, as bytecode


def test_a_build_after_a_change_to_one_wheel_compiles_that_wheel_only(stub, capsys, tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    build, tmp, _ = stub
    # fake_gpus keeps its source (a kit package), dep becomes sourceless bytecode: the second build imports
    # from both as the first one compiled them
    build([_wheel(tmp, "labkit", "import stdmod, dep.mod\nx = 1\n"), _wheel(tmp, "fake_gpus", "y = 1\n"),
           _wheel(tmp, "dep", "z = 1\n")])
    capsys.readouterr()
    changed = [_wheel(tmp, "labkit", "import stdmod, dep.mod\nx = 2\n"), _wheel(tmp, "fake_gpus", "y = 1\n"),
               _wheel(tmp, "dep", "z = 1\n")]
    compiled, stdlib, runs = build(changed)
    assert runs == 2  # one compiler run for what is new
    said = capsys.readouterr().out
    assert "site: bytecode compiled for 1 of 4 parts: labkit-1.0-py3-none-any.whl; 3 from the cache in " in said
    assert "site: bytecode for 6 modules of 3 wheels and 1 of the standard library" in said
    assert "dep/mod.pyc" in _members(compiled["dep-1.0-py3-none-any.whl"])
    # what a build from nothing writes for the same wheels: the same members, the same bytes
    monkeypatch.setattr(_site(), "BYTECODE_CACHE", tmp_path / "fresh-cache")
    scratch, scratch_stdlib, runs = build(changed)
    assert "site: bytecode compiled for 4 of 4 parts" in capsys.readouterr().out
    assert scratch.keys() == compiled.keys()
    for name in compiled:
        assert _members(scratch[name]) == _members(compiled[name])
    assert stdlib is not None and scratch_stdlib is not None
    assert _members(scratch_stdlib) == _members(stdlib)


def test_a_wheel_that_imports_more_of_the_standard_library_compiles_it_again(stub, capsys) -> None:
    build, tmp, _ = stub
    build([_wheel(tmp, "labkit", "import stdmod\n")])
    capsys.readouterr()
    _, stdlib, _ = build([_wheel(tmp, "labkit", "import stdmod, other\n")])
    assert "site: bytecode compiled for 2 of 2 parts: labkit-1.0-py3-none-any.whl, python_stdlib_pyc.zip; " \
           in capsys.readouterr().out
    assert stdlib is not None and set(_members(stdlib)) == {"stdmod.pyc", "other.pyc"}


def test_a_changed_wheel_or_pyodide_compiles_again(stub) -> None:
    build, tmp, core = stub
    assert build([_wheel(tmp, "labkit", "x = 1\n")])[2] == 1
    assert build([_wheel(tmp, "labkit", "x = 2\n")])[2] == 2  # a changed module
    (core / "pyodide.mjs").write_text("// core 2")
    assert build([_wheel(tmp, "labkit", "x = 2\n")])[2] == 3  # another Pyodide


def test_the_cache_keeps_the_parts_of_the_most_recently_used_builds_only(stub) -> None:
    build, tmp, _ = stub
    site = _site()
    for i in range(site.BYTECODE_KEEP + 2):
        build([_wheel(tmp, "labkit", f"import stdmod\nx = {i}\n"), _wheel(tmp, "fake_gpus", "y = 1\n")])
    assert len(list((tmp / "cache" / "builds").glob("*.json"))) == site.BYTECODE_KEEP
    # the kit's wheel of each kept build, and the unchanged wheel and standard library they share
    assert len([e for e in (tmp / "cache" / "parts").iterdir() if e.is_dir()]) == site.BYTECODE_KEEP + 2
