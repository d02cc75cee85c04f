"""The site's bytecode, compiled once per content (notebooks/site.py `with_bytecode`): compiling the wheels in
Pyodide under Node.js is most of a site build's CPU, and the site lane built the same site again on every
run. A build whose wheels (by content, not by their zip's file dates), Pyodide and compiler are those of an
earlier build takes that build's output from the cache; a changed wheel compiles again. Node.js is a stub
here (it records each run and writes what the real compiler writes: each wheel, the standard library, one
line per wheel); the real compile runs in the site lane (tests/site/test_browser_site.py)."""

from __future__ import annotations

import importlib.util
import sys
import zipfile
from functools import cache
from pathlib import Path

import pytest

from tests.paths import REPO

ROOT = REPO

#: a Node.js that records its runs in $STUB_RUNS: ``--version``, or site_bytecode.mjs CORE OUT WHEEL... --compile ...
STUB_NODE = """#!{python}
import os, shutil, sys
from pathlib import Path
args = sys.argv[1:]
if args == ["--version"]:
    print("v20.0.0-stub")
    sys.exit(0)
with open(os.environ["STUB_RUNS"], "a") as runs:
    runs.write("compile\\n")
core, out, *rest = args[1:]
wheels = rest[:rest.index("--compile")]
for w in wheels:
    shutil.copy(w, Path(out) / Path(w).name)
    print(f"{{Path(w).name}}: 2 modules compiled for cpython-312")
Path(out, "python_stdlib_pyc.zip").write_bytes(b"stdlib")
print("python_stdlib_pyc.zip: 3 modules compiled for cpython-312")
"""


@cache
def _site():
    """notebooks/site.py (a script beside the notebooks, not a package)."""
    spec = importlib.util.spec_from_file_location("labkit_notebooks_site_cache", ROOT / "notebooks" / "site.py")
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def _wheel(path: Path, body: str, date: tuple[int, ...] = (2020, 1, 1, 0, 0, 0)) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(zipfile.ZipInfo("kit/__init__.py", date), body)
        zf.writestr(zipfile.ZipInfo("kit-1.0.dist-info/METADATA", date), "Metadata-Version: 2.1\nName: kit\nVersion: 1.0\n")
    return path


@pytest.fixture
def stub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The stub Node.js on PATH, an empty cache, a Pyodide core; returns a function that builds once."""
    site = _site()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    node = bin_dir / "node"
    node.write_text(STUB_NODE.format(python=sys.executable))
    node.chmod(0o755)
    runs = tmp_path / "runs"
    runs.write_text("")
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    monkeypatch.setenv("STUB_RUNS", str(runs))
    monkeypatch.setattr(site, "BYTECODE_CACHE", tmp_path / "cache", raising=False)
    core = tmp_path / "core"
    core.mkdir()
    (core / "pyodide.mjs").write_text("// core 1")
    builds = iter(range(100))

    def build(wheels: list[Path]) -> tuple[dict[str, Path], Path | None, int]:
        """One build's compile: (compiled wheels, standard library, the compiler's runs so far)."""
        compiled, stdlib = site.with_bytecode(wheels, [], core, tmp_path / f"out{next(builds)}")
        return compiled, stdlib, len(runs.read_text().splitlines())

    return build, tmp_path, core


def test_a_second_build_of_the_same_wheels_takes_the_compiled_output_from_the_cache(stub, capsys) -> None:
    build, tmp, core = stub
    wheel = _wheel(tmp / "kit-1.0-py3-none-any.whl", "x = 1\n")
    compiled, stdlib, runs = build([wheel])
    assert runs == 1
    first = capsys.readouterr().out
    assert "site: bytecode compiled, kept for the next build in " in first
    assert "site: bytecode for 2 modules of 1 wheels and 3 of the standard library" in first
    # the same content in a wheel with other file dates (the kit's wheel, built from a fresh clone)
    again = _wheel(tmp / "kit-1.0-py3-none-any.whl", "x = 1\n", date=(2024, 6, 1, 12, 0, 0))
    compiled2, stdlib2, runs = build([again])
    assert runs == 1, "the compiler ran again for the same wheels"
    second = capsys.readouterr().out
    assert "site: bytecode of the same wheels, Pyodide and compiler, from " in second
    assert "site: bytecode for 2 modules of 1 wheels and 3 of the standard library" in second
    assert compiled2.keys() == compiled.keys() == {wheel.name}
    assert compiled2[wheel.name].read_bytes() == compiled[wheel.name].read_bytes()
    assert stdlib is not None and stdlib2 is not None and stdlib2.read_bytes() == stdlib.read_bytes() == b"stdlib"


def test_a_changed_wheel_or_pyodide_compiles_again(stub) -> None:
    build, tmp, core = stub
    assert build([_wheel(tmp / "kit-1.0-py3-none-any.whl", "x = 1\n")])[2] == 1
    assert build([_wheel(tmp / "kit-1.0-py3-none-any.whl", "x = 2\n")])[2] == 2  # a changed module
    (core / "pyodide.mjs").write_text("// core 2")
    assert build([_wheel(tmp / "kit-1.0-py3-none-any.whl", "x = 2\n")])[2] == 3  # another Pyodide


def test_the_cache_keeps_the_most_recently_used_outputs_only(stub) -> None:
    build, tmp, _ = stub
    site = _site()
    for i in range(site.BYTECODE_KEEP + 2):
        build([_wheel(tmp / "kit-1.0-py3-none-any.whl", f"x = {i}\n")])
    assert len([e for e in (tmp / "cache").iterdir() if e.is_dir()]) == site.BYTECODE_KEEP
