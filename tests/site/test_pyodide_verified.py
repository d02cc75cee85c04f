"""tools/pyodide_verified.py, as tools/pyodide-deps.sh runs it: a wheel is taken from a third-party archive
only when its sha256 is the one the official Pyodide lock gives; one mismatch or missing file refuses the
whole distribution (nothing written)."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import zipfile
from pathlib import Path

from tests.paths import REPO

ROOT = REPO
WHEEL = b"the official bytes"


def _core(tmp: Path) -> Path:
    core = tmp / "core"
    core.mkdir()
    (core / "pyodide.mjs").write_text("// core")
    (core / "pyodide.mjs.map").write_text("{}")
    lock = {"info": {"version": "0.27.7", "python": "3.12.7"}, "packages": {
        "numpy": {"name": "numpy", "file_name": "numpy-2.0.2-cp312-cp312-pyodide_2024_0_wasm32.whl",
                  "sha256": hashlib.sha256(WHEEL).hexdigest(), "depends": ["six"]},
        "six": {"name": "six", "file_name": "six-1.16.0-py2.py3-none-any.whl",
                "sha256": hashlib.sha256(b"six").hexdigest(), "depends": []}}}
    (core / "pyodide-lock.json").write_text(json.dumps(lock))
    return core


def _archive(tmp: Path, numpy: bytes, six: bytes | None = b"six") -> Path:
    path = tmp / "mirror-1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("mirror/assets/pyodide/numpy-2.0.2-cp312-cp312-pyodide_2024_0_wasm32.whl", numpy)
        if six is not None:
            zf.writestr("mirror/assets/pyodide/six-1.16.0-py2.py3-none-any.whl", six)
    return path


def _run(*args: Path | str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "tools" / "pyodide_verified.py"), *map(str, args)],
                          capture_output=True, text=True)


def test_takes_the_wheels_whose_bytes_the_official_lock_names(tmp_path: Path) -> None:
    out = tmp_path / "dist"
    run = _run(_core(tmp_path), _archive(tmp_path, WHEEL), out, "--packages", "numpy")
    assert run.returncode == 0, run.stderr
    assert sorted(p.name for p in out.iterdir()) == [
        "numpy-2.0.2-cp312-cp312-pyodide_2024_0_wasm32.whl", "pyodide-lock.json", "pyodide.mjs",
        "six-1.16.0-py2.py3-none-any.whl"]  # numpy's dependency too; no source map
    assert (out / "numpy-2.0.2-cp312-cp312-pyodide_2024_0_wasm32.whl").read_bytes() == WHEEL
    assert "six-1.16.0-py2.py3-none-any.whl sha256 " in run.stdout


def test_refuses_a_wheel_that_differs_from_the_official_lock(tmp_path: Path) -> None:
    out = tmp_path / "dist"
    run = _run(_core(tmp_path), _archive(tmp_path, b"other bytes"), out, "--packages", "numpy")
    assert run.returncode == 1
    assert run.stderr.strip().startswith("pyodide_verified: numpy-2.0.2-cp312-cp312-pyodide_2024_0_wasm32.whl in "
                                         "mirror-1.0-py3-none-any.whl has sha256 ")
    assert run.stderr.strip().endswith("; refused") and "Traceback" not in run.stderr
    assert not out.exists() and not (tmp_path / "dist.partial").exists()


def test_refuses_a_missing_wheel_and_an_unknown_package(tmp_path: Path) -> None:
    core, out = _core(tmp_path), tmp_path / "dist"
    run = _run(core, _archive(tmp_path, WHEEL, six=None), out, "--packages", "numpy")
    assert (run.returncode, run.stderr.strip()) == (
        1, "pyodide_verified: mirror-1.0-py3-none-any.whl has no six-1.16.0-py2.py3-none-any.whl (six); refused")
    run = _run(core, _archive(tmp_path, WHEEL), out, "--packages", "scipy")
    assert (run.returncode, run.stderr.strip()) == (
        1, "pyodide_verified: 'scipy' is not in the official lock (Pyodide 0.27.7)")
    assert not out.exists()
