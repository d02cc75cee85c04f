"""The kit in real WebAssembly CPython: Pyodide (npm ``pyodide``, the official core) under Node.js runs
connect -> apply -> wait -> placements of the sim backend from the kit's built wheel and the pure-Python
wheels of its dependencies, with no native module (there is no wasm build of cel-expr-python, google-re2,
the kubernetes client). tools/pyodide-deps.sh fetches Pyodide and the wheels once into the cache."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.paths import REPO

pytestmark = pytest.mark.slow  # heavy: `make check` leaves it out, `make test` runs it

ROOT = REPO
NODE = shutil.which("node")


@pytest.fixture(scope="module")
def pyodide_cache() -> Path:
    out = subprocess.run(["bash", "tools/pyodide-deps.sh"], cwd=ROOT, capture_output=True, text=True,
                         env={**os.environ, "PYTHON": sys.executable}, timeout=900)
    assert out.returncode == 0, out.stderr[-2000:]
    return Path(out.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def kit_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    dist = tmp_path_factory.mktemp("wheel")
    out = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                          "-w", str(dist), str(ROOT)], capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-2000:]
    (wheel,) = dist.glob("dra_labkit-*.whl")
    return wheel


@pytest.mark.skipif(NODE is None, reason="needs Node.js (apt-get install nodejs npm)")
def test_sim_path_runs_in_pyodide_under_node(pyodide_cache: Path, kit_wheel: Path) -> None:
    deps = sorted((pyodide_cache / "dist").iterdir())
    out = subprocess.run([str(NODE), str(ROOT / "tests/pyodide/run_sim.mjs"), str(pyodide_cache / "node_modules/pyodide"),
                          str(kit_wheel), *map(str, deps)], capture_output=True, text=True, timeout=900)
    lines = out.stdout.splitlines()
    assert out.returncode == 0, (out.stdout + out.stderr)[-3000:]
    assert lines[0] == "emscripten"  # real wasm CPython, not this interpreter
    assert lines[1] == "native modules loaded: []"
    placement = next(line for line in lines if "'pod': 'trainer'" in line)
    assert "'node': 'dgx-a100-0'" in placement and "'device': 'gpu-" in placement
    assert any(line.startswith("local | no | a browser tab") for line in lines)
    assert any(line.startswith("kind | no | a browser tab") for line in lines)
    assert "on stderr: ''" in lines, [line for line in lines if line.startswith("on stderr")]  # labkit.browser
    assert lines[-1].startswith("OK ")
    # wheels as PyPI publishes them: the tab compiles each module it imports (what the site's bytecode saves)
    compiled = next(line for line in lines if line.startswith("compiled from source in site-packages: "))
    assert int(compiled.split(": ")[1].split()[0]) > 100, compiled
    stdlib = next(line for line in lines if line.startswith("compiled from source in the standard library: "))
    assert int(stdlib.split(": ")[1].split()[0]) > 10, stdlib
    twins = next(line for line in lines if line.startswith("catalog files read from a JSON twin: "))
    assert twins.startswith("catalog files read from a JSON twin: 0 of ") and not twins.endswith(" 0"), twins


#: notebooks/site.py's bytecode step, run as the site build runs it (a script beside the notebooks, not a package)
WITH_BYTECODE = """
import json, sys, runpy
from pathlib import Path
site = runpy.run_path(sys.argv[1])
core, out, files = Path(sys.argv[2]), Path(sys.argv[3]), [Path(p) for p in sys.argv[4:]]
site["with_bytecode"].__globals__["BYTECODE_CACHE"] = out.parent / "bytecode-cache"  # compiled here, not taken
wheels = [f if f.suffix == ".whl" else site["_pure_wheel_from_sdist"](f, out.parent) for f in files]
compiled, stdlib = site["with_bytecode"](wheels, [], core, out)
print(json.dumps([str(stdlib), *(str(compiled.get(w.name, w)) for w in wheels)]))
"""


@pytest.mark.skipif(NODE is None, reason="needs Node.js (apt-get install nodejs npm)")
def test_site_wheels_carry_bytecode_so_the_tab_compiles_nothing(pyodide_cache: Path, kit_wheel: Path,
                                                                  tmp_path: Path) -> None:
    """The site's wheels carry bytecode made by the site's own Pyodide: the kit keeps its source beside an
    unchecked .pyc, a dependency's imported modules become sourceless .pyc; in Pyodide the sim path then
    compiles no module of site-packages, and gives the same placements."""
    core = pyodide_cache / "node_modules/pyodide"
    build = subprocess.run([sys.executable, "-c", WITH_BYTECODE, str(ROOT / "notebooks/site.py"), str(core),
                            str(tmp_path / "bytecode"), str(kit_wheel), *map(str, sorted((pyodide_cache / "dist").iterdir()))],
                           capture_output=True, text=True, timeout=900)
    assert build.returncode == 0, (build.stdout + build.stderr)[-3000:]
    assert "site: bytecode for " in build.stdout, build.stdout
    stdlib, *wheels = [Path(p) for p in json.loads(build.stdout.splitlines()[-1])]
    python = json.loads((core / "pyodide-lock.json").read_text())["info"]["python"]
    tag = "cpython-" + "".join(python.split(".")[:2])
    kit = next(w for w in wheels if w.name.startswith("dra_labkit-"))
    yaml = next(w for w in wheels if w.name.lower().startswith("pyyaml-"))
    assert kit.parent == yaml.parent == tmp_path / "bytecode"
    with zipfile.ZipFile(kit) as zf:
        names = set(zf.namelist())
        record = zf.read(next(n for n in names if n.endswith(".dist-info/RECORD"))).decode()
    assert {"labkit/cluster/base.py", f"labkit/cluster/__pycache__/base.{tag}.pyc"} <= names
    assert f"labkit/cluster/__pycache__/base.{tag}.pyc,sha256=" in record
    assert {"fake_gpus/catalog/__pycache__/gpus.yaml.json", "fake_gpus/catalog/profiles/__pycache__/dgx-a100.yaml.json"} <= names
    with zipfile.ZipFile(yaml) as zf:
        names = set(zf.namelist())
    assert "yaml/__init__.pyc" in names and "yaml/__init__.py" not in names
    # the standard library: the distribution's zip, each module a tab imports as sourceless unchecked bytecode
    with zipfile.ZipFile(stdlib) as zf, zipfile.ZipFile(core / "python_stdlib.zip") as official:
        names, published = set(zf.namelist()), set(official.namelist())
    assert stdlib.name == "python_stdlib_pyc.zip" and "dataclasses.pyc" in names and "dataclasses.py" not in names
    assert {n.removesuffix("c") for n in names} == published  # nothing left out, nothing added
    out = subprocess.run([str(NODE), str(ROOT / "tests/pyodide/run_sim.mjs"), str(core), "--stdlib", str(stdlib),
                          *map(str, wheels)], capture_output=True, text=True, timeout=900)
    lines = out.stdout.splitlines()
    assert out.returncode == 0, (out.stdout + out.stderr)[-3000:]
    placement = next(line for line in lines if "'pod': 'trainer'" in line)
    assert "'node': 'dgx-a100-0'" in placement and "'device': 'gpu-" in placement
    assert "compiled from source in site-packages: 0 []" in lines, lines[-4:]
    assert "compiled from source in the standard library: 0 []" in lines, lines[-4:]
    # and the GPU catalog comes from the JSON twins the site ships, not from pure-Python YAML
    twins = next(line for line in lines if line.startswith("catalog files read from a JSON twin: "))
    found, total = map(int, twins.split(": ")[1].split(" of "))
    assert found == total > 0, twins
