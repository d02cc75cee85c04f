"""The kit in real WebAssembly CPython: Pyodide (npm ``pyodide``, the official core) under Node.js runs
connect -> apply -> wait -> placements of the sim backend from the kit's built wheel and the pure-Python
wheels of its dependencies, with no native module (there is no wasm build of cel-expr-python, google-re2,
the kubernetes client). tools/pyodide-deps.sh fetches Pyodide and the wheels once into the cache."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
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
    assert lines[-1].startswith("OK ")
