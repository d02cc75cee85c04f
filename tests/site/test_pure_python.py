"""The kit on the sim path without its native extensions, as in a browser (Pyodide has no wasm build of
them): each test runs the CLI or a notebook in a fresh CPython where cel-expr-python, google-re2, the
kubernetes client, grpcio, cryptography and pydantic cannot be imported, and compares with the full
install. CEL then runs on cel-python with labkit's pure-Python RE2 (labkit.cel.re2_pure), structure
checks on the schema as data (labkit/api/schema_<version>.json)."""

from __future__ import annotations

import json
import subprocess
import sys

import jupytext
import pytest

from tests.paths import REPO

pytestmark = pytest.mark.slow  # heavy: `make check` leaves it out, `make test` runs it

ROOT = REPO
NATIVE = ("cel_expr_python", "re2", "kubernetes", "grpc", "cryptography", "pydantic", "pydantic_core",
          "_multiprocessing")  # Pyodide's CPython has no _multiprocessing (concurrent.futures.process needs it)

# a finder in front of all others: `import re2` (and the rest) fail as when the package is absent
BLOCK = f"""
import importlib.abc, sys
class _Absent(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {NATIVE!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
sys.meta_path.insert(0, _Absent())
"""
CLI = "import sys\nfrom labkit.__main__ import entry\nsys.argv[0] = 'labkit'\nrc = entry()\n"
LOADED = "\nprint('LOADED', sorted({m.split('.')[0] for m in sys.modules} & set(%r)), sys.modules['re2'].__name__)\n"


def _run(code: str, *args: str, pure: bool) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", (BLOCK if pure else "") + code, *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)


def _cli(*args: str, pure: bool) -> tuple[int, str, str]:
    out = _run(CLI + LOADED % (NATIVE,) + "sys.exit(rc)", *args, pure=pure)
    stdout, _, loaded = out.stdout.rpartition("LOADED ")
    # google-re2 logs each refused pattern to stderr (absl): not part of what labkit says
    stderr = "".join(line for line in out.stderr.splitlines(keepends=True)
                     if not line.startswith(("WARNING: All log messages", "E0000 ")))
    return out.returncode, stdout + stderr, loaded.strip()


def test_simulate_places_the_same_pods_without_native_modules() -> None:
    args = ("simulate", "-f", "examples/integer-gpus", "--profile", "workshop", "-o", "json")
    rc, pure, loaded = _cli(*args, pure=True)
    assert rc == 0, pure
    assert loaded == "['re2'] labkit.cel.re2_pure"  # re2 is the pure fallback; nothing else native loaded
    rc_full, full, _ = _cli(*args, pure=False)
    assert rc_full == 0

    def placements(text: str) -> list[tuple[str, str, str, list[str]]]:
        return sorted((p["name"], p["node"], p["phase"],
                       sorted(v for c in p["containers"] for k, v in c["env"].items() if k.endswith("_NAME")))
                      for p in json.loads(text)["pods"])

    assert placements(pure) == placements(full)
    assert all(node and phase == "Running" for _, node, phase, _ in placements(pure))


def test_cel_selector_results_and_regex_errors_match_the_native_engines() -> None:
    slices = "examples/policies/vgpu-pool.yaml"
    for expr in (
        r"device.driver.matches('^vgpu\\.(labkit)\\.dev$')",
        r"device.driver.matches('(a)\\1')",            # a backreference: RE2 refuses it
        r"device.driver.matches('x(?=y)')",            # lookahead: refused too
    ):
        rc, pure, _ = _cli("cel", expr, "-f", slices, pure=True)
        rc_full, full, _ = _cli("cel", expr, "-f", slices, pure=False)
        assert (rc, pure) == (rc_full, full), expr
    rc, pure, _ = _cli("cel", r"device.driver.matches('(a)\\1')", "-f", slices, pure=True)
    assert rc == 2 and "invalid escape sequence" in pure and "Traceback" not in pure


def test_validate_reports_structure_problems_without_the_kubernetes_client() -> None:
    for path in ("tests/data/nasty/yes-no.yaml", "examples/integer-gpus/pods.yaml"):
        rc, pure, loaded = _cli("validate", "-f", path, pure=True)
        rc_full, full, _ = _cli("validate", "-f", path, pure=False)
        assert (rc, pure) == (rc_full, full), path
        assert "kubernetes" not in loaded and "pydantic" not in loaded
    assert "must be a string, not true" in _cli("validate", "-f", "tests/data/nasty/yes-no.yaml", pure=True)[1]


def test_notebook_00_says_what_runs_here_without_an_import_error() -> None:
    nb = jupytext.read(ROOT / "notebooks" / "00_setup_and_backends.md")
    cells = [c.source for c in nb.cells if c.cell_type == "code" and "exercise" not in c.metadata.get("tags", [])]
    code = "import os\nos.chdir('notebooks')\n" + "\n".join(cells[:4])
    out = _run(code, pure=True)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "Traceback" not in out.stdout + out.stderr
    rows = {line.split()[0]: line for line in out.stdout.splitlines() if line.split()[:1] in (["local"], ["kind"])}
    for name in ("local", "kind"):
        assert "no" in rows[name].split() and "needs the Python package kubernetes" in rows[name], rows
    assert "sim cluster up" in out.stdout


def test_cel_playground_defaults_to_the_engine_that_is_there() -> None:
    """In a browser (no cel-expr-python) the CEL playground opens on cel-python and shows matches, not the
    "not installed" compile error (found by tests/site/test_browser_site.py); a full install keeps cel-expr-python."""
    code = ("from labkit.cluster import connect\nfrom labkit.widgets import CelPlayground\n"
            "c = connect('sim', 'workshop', progress=False)\np = CelPlayground(c)\n"
            "print(p.engine.value, '|', p.summary.value, '|', 'not installed' in p.table.value)\nc.down()\n")
    pure, full = _run(code, pure=True), _run(code, pure=False)
    assert pure.returncode == 0 and full.returncode == 0, pure.stderr[-2000:] + full.stderr[-2000:]
    engine, summary, error = pure.stdout.strip().splitlines()[-1].split(" | ")
    assert (engine, error) == ("cel-python", "False") and " match" in summary, pure.stdout
    assert full.stdout.strip().splitlines()[-1].startswith("cel-expr-python | ")


def _notebook_modules() -> list[str]:
    """Every labkit / fake_gpus module a notebook of the course imports (its code cells, as written)."""
    found: set[str] = set()
    for md in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.md")):
        for cell in jupytext.read(md).cells:
            if cell.cell_type != "code":
                continue
            for line in cell.source.splitlines():
                words = line.split()
                if words[:1] in (["from"], ["import"]) and len(words) > 1 \
                        and words[1].split(".")[0] in ("labkit", "fake_gpus"):
                    found.add(words[1].rstrip(","))
    return sorted(found)


def test_every_module_the_notebooks_import_loads_without_native_modules() -> None:
    modules = _notebook_modules()
    assert {"labkit.cluster.backends.kind", "labkit.cluster.backends.kind.config", "labkit.widgets", "labkit.topology"} <= set(modules)
    code = "import importlib\n" + "".join(f"importlib.import_module({m!r})\n" for m in modules) \
        + LOADED % (NATIVE,)
    out = _run(code, pure=True)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip().splitlines()[-1] == "LOADED ['re2'] labkit.cel.re2_pure", out.stdout[-2000:]


def test_notebook_11_runs_on_sim_and_live_backends_say_they_need_the_full_kit() -> None:
    """Notebook 11's cells (kind config, the kind plan, kubectl, print-env, Helm values, migration) on sim
    without the kubernetes client, as in a browser tab; then connect('kind'/'local') answers in one line."""
    nb = jupytext.read(ROOT / "notebooks" / "11_the_real_thing.md")
    cells = [c.source for c in nb.cells if c.cell_type == "code" and "exercise" not in c.metadata.get("tags", [])]
    live = ("from labkit.cluster import ClusterError\n"
            "for name in ('kind', 'local'):\n"
            "    try:\n        connect(name, 'workshop', progress=False)\n"
            "    except ClusterError as exc:\n        print('LIVE', name, exc)\n")
    out = _run("import os\nos.chdir('notebooks')\nfrom labkit.course import checks\n" + "\n".join(cells) + "\n" + live,
               pure=True)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "Traceback" not in out.stdout + out.stderr
    for expected in ("sim cluster up", "kind create cluster", "(not run: BACKEND is sim)", "FAKE_GPU_0_NAME",
                     "helm install fake-gpus", "resource.k8s.io/v1alpha2", "✅"):
        assert expected in out.stdout, (expected, out.stdout[-3000:])
    live_lines = {line.split()[1]: line for line in out.stdout.splitlines() if line.startswith("LIVE ")}
    assert "needs the Python package kubernetes" in live_lines["kind"] and "make lab" in live_lines["kind"]
    assert "needs the Python package" in live_lines["local"] and "make lab" in live_lines["local"]
