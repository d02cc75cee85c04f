"""notebooks/wheel_bytecode.py in this interpreter (the site build runs it in Pyodide: tests/site/test_pyodide_node.py):
what it compiles, what it keeps as source, the RECORD, and that the import system uses the bytecode it writes;
and notebooks/site.py's legacy-font trim and unused-extension removal."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.cliserver import CliServer
from tests.paths import REPO

pytestmark = pytest.mark.slow  # heavy: `make check` leaves it out, `make test` runs it

ROOT = REPO
SCRIPT = ROOT / "notebooks" / "wheel_bytecode.py"
SITE_PY = ROOT / "notebooks" / "site.py"
TAG = sys.implementation.cache_tag

FILES = {
    "pkg/__init__.py": "from pkg.mod import VALUE\n",
    "pkg/mod.py": "VALUE = 1\n",
    "pkg/py2.py": 'print "a Python 2 relic"\n',
    "pkg/lazy.py": "LAZY = True\n",
    "pkg/doc.py": '"""The docstring."""\n\ndef f():\n    """The docstring of f."""\n',
    "pkg/tests/test_mod.py": "def test(): pass\n",
    "pkg/data.json": "{}\n",
    "pkg-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: pkg\nVersion: 1.0\n",
}


def _wheel(folder: Path, name: str = "pkg-1.0-py3-none-any.whl") -> Path:
    wheel = folder / name
    with zipfile.ZipFile(wheel, "w") as zf:
        for path, text in FILES.items():
            zf.writestr(path, text)
        zf.writestr("pkg-1.0.dist-info/RECORD", "".join(f"{p},,\n" for p in FILES) + "pkg-1.0.dist-info/RECORD,,\n")
    return wheel


def _run(tmp: Path, *args: str, pycache_prefix: Path | None = None) -> subprocess.CompletedProcess:
    out = tmp / "out"
    out.mkdir(exist_ok=True)
    # the kit of this checkout (--yaml-twins imports its catalog loader; a site build's comes from its own wheel)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("PYTHONPYCACHEPREFIX", None)
    if pycache_prefix is not None:  # a builder whose Python keeps its bytecode elsewhere (make test's lanes do)
        env["PYTHONPYCACHEPREFIX"] = str(pycache_prefix)
    done = subprocess.run([sys.executable, str(SCRIPT), str(out), *args], capture_output=True, text=True, cwd=tmp, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def _record_matches(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as zf:
        record = next(n for n in zf.namelist() if n.endswith(".dist-info/RECORD"))
        listed = {}
        for line in zf.read(record).decode().splitlines():
            name, digest, size = line.rsplit(",", 2)
            listed[name] = (digest, size)
        assert set(listed) == set(zf.namelist())
        for name in zf.namelist():
            if name == record:
                continue
            data = zf.read(name)
            want = "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            assert listed[name] == (want, str(len(data))), name


def _import_from(unpacked: Path, code: str) -> str:
    # as the tab's Python imports: from the wheel's own __pycache__ (a PYTHONPYCACHEPREFIX, which make test's
    # lanes set, would send the import system to that folder instead)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPYCACHEPREFIX"}
    done = subprocess.run([sys.executable, "-c", f"import sys; sys.path.insert(0, {str(unpacked)!r})\n{code}"],
                          capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_imported_modules_become_sourceless_bytecode_the_rest_stays_as_published(tmp_path: Path) -> None:
    wheel = _wheel(tmp_path)
    done = _run(tmp_path, str(wheel), "--compile", wheel.name, "--import", "pkg", "pkg.py2")
    assert done.stdout.strip() == f"{wheel.name}: 2 modules compiled for {TAG}, 1 left as source"
    out = tmp_path / "out" / wheel.name
    with zipfile.ZipFile(out) as zf:
        names = set(zf.namelist())
    assert {"pkg/__init__.pyc", "pkg/mod.pyc"} <= names and not {"pkg/__init__.py", "pkg/mod.py"} & names
    # not imported (lazy, the test suite) or not compilable here (py2): as published, no bytecode
    assert {"pkg/lazy.py", "pkg/tests/test_mod.py", "pkg/py2.py", "pkg/data.json"} <= names
    assert not any(n.startswith(("pkg/lazy.pyc", "pkg/py2.pyc", "pkg/tests/test_mod.pyc")) or "__pycache__" in n for n in names)
    _record_matches(out)
    zipfile.ZipFile(out).extractall(tmp_path / "site")
    loaded = _import_from(tmp_path / "site", "import pkg.mod, pkg.lazy\nprint(pkg.VALUE, type(pkg.mod.__spec__.loader).__name__, "
                                             "type(pkg.lazy.__spec__.loader).__name__)")
    assert loaded == "1 SourcelessFileLoader SourceFileLoader"


@pytest.mark.parametrize("prefix", [False, True], ids=["", "PYTHONPYCACHEPREFIX-set"])
def test_kept_source_gets_unchecked_bytecode_beside_it(tmp_path: Path, prefix: bool) -> None:
    wheel = _wheel(tmp_path)
    done = _run(tmp_path, str(wheel), "--compile", wheel.name, "--keep-source", "pkg", "--import-all", "pkg",
                pycache_prefix=tmp_path / "elsewhere" if prefix else None)
    # every module of the package is imported (pkg/tests has no __init__.py: not a package), the py2 one fails
    assert done.stdout.strip() == f"{wheel.name}: 4 modules compiled for {TAG} (source kept), 1 left as source"
    out = tmp_path / "out" / wheel.name
    with zipfile.ZipFile(out) as zf:
        names = set(zf.namelist())
    assert {"pkg/mod.py", f"pkg/__pycache__/mod.{TAG}.pyc", "pkg/lazy.py", f"pkg/__pycache__/lazy.{TAG}.pyc"} <= names
    _record_matches(out)
    site = tmp_path / "site"
    zipfile.ZipFile(out).extractall(site)
    # an unchecked .pyc: the import system takes it without looking at the source (a later edit is not seen)
    (site / "pkg" / "mod.py").write_text("VALUE = 2\n")
    assert _import_from(site, "import pkg\nprint(pkg.VALUE, pkg.mod.__file__.endswith('mod.py'))") == "1 True"


def test_a_snippet_run_compiles_what_it_imports_and_no_docstrings_compiles_as_python_OO(tmp_path: Path) -> None:
    """--run: what a tab does beyond imports (a drawing) compiles the modules it imports; --no-docstrings: those
    of the wheels it names are compiled as python -OO compiles (matplotlib in the site)."""
    wheel = _wheel(tmp_path)
    done = _run(tmp_path, str(wheel), "--compile", wheel.name, "--no-docstrings", wheel.name,
                "--run", "import pkg.doc", "raise ValueError('a failing snippet is skipped')")
    assert done.stdout.strip() == f"{wheel.name}: 3 modules compiled for {TAG} (no docstrings)"
    site = tmp_path / "site"
    zipfile.ZipFile(tmp_path / "out" / wheel.name).extractall(site)
    assert _import_from(site, "import pkg.doc\nprint(pkg.doc.__doc__, pkg.doc.f.__doc__, pkg.VALUE)") == "None None 1"
    # and without --no-docstrings the docstrings stay
    _run(tmp_path, str(wheel), "--compile", wheel.name, "--run", "import pkg.doc")
    zipfile.ZipFile(tmp_path / "out" / wheel.name).extractall(tmp_path / "site2")
    assert _import_from(tmp_path / "site2", "import pkg.doc\nprint(pkg.doc.f.__doc__)") == "The docstring of f."


def test_a_wheel_with_nothing_imported_is_not_rewritten(tmp_path: Path) -> None:
    wheel = _wheel(tmp_path)
    done = _run(tmp_path, str(wheel), "--compile", wheel.name, "--import", "json")
    assert done.stdout.strip() == f"{wheel.name}: 0 modules compiled for {TAG}"
    assert not (tmp_path / "out" / wheel.name).exists()


def test_the_site_leaves_out_legacy_copies_of_fonts_that_have_a_woff2(site_py: CliServer, tmp_path: Path) -> None:
    build = tmp_path / "site" / "build"
    build.mkdir(parents=True)
    for name in ("fa-solid.woff2", "fa-solid.eot", "fa-solid.ttf", "fa-solid.woff", "fa-solid.svg", "logo.svg",
                 "MathJax_Main.woff"):
        (build / name).write_bytes(b"x" * 10)
    code = ("import runpy, sys; from pathlib import Path\n"
            "print(runpy.run_path(sys.argv[1])['drop_legacy_fonts'](Path(sys.argv[2])))")
    done = site_py.python(code, str(SITE_PY), str(tmp_path / "site"))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == 40
    assert sorted(p.name for p in build.iterdir()) == ["MathJax_Main.woff", "fa-solid.woff2", "logo.svg"]


def test_the_landing_page_lists_every_lesson_with_its_time_and_link(site_py: CliServer) -> None:
    """The site's index.html: each lesson of the course (its front matter, tools/lessons.py) with a link into
    the lab, what it teaches and its minutes; the one that needs the full kit says so. (Its list was empty for
    days when the README table, which it read then, grew two columns.)"""
    code = ("import runpy, sys\n"
            "print(runpy.run_path(sys.argv[1])['landing_page']('<script id=\"jupyter-config-data\"></script>'))")
    done = site_py.python(code, str(SITE_PY))
    assert done.returncode == 0, done.stderr
    page = done.stdout
    told = subprocess.run([sys.executable, "tools/lessons.py", "json"], capture_output=True, text=True, cwd=ROOT)
    lessons = json.loads(told.stdout)
    assert len(lessons) == len(list((ROOT / "notebooks").glob("[0-9][0-9]_*.md"))) == page.count("<li>") > 10
    for x in lessons:  # the stable link, the lesson's number, its minutes (its title: tests/site/test_site_landing.py)
        assert f'<a href="lab/index.html?path=notebooks/{x["name"]}.ipynb"><span class="num">{x["number"]}</span>' in page
        line = next(li for li in page.split("<li>") if f'{x["name"]}.ipynb' in li)
        assert f'<p class="meta">{x["minutes"]} min' in line, line
        assert ("needs the full kit" in line) == (x["name"] == "11_the_real_thing"), line
        assert "`" not in line, line  # the front matter's Markdown code spans are <code> on the page
    assert '<script id="jupyter-config-data"></script>' in page


def test_catalog_yaml_gets_a_json_twin_that_the_loader_reads(tmp_path: Path) -> None:
    """--yaml-twins: each YAML file under the named folders gets __pycache__/<file>.json (the document and the
    file's sha256) in the loader's own format; a file JSON cannot hold, and YAML elsewhere, get none."""
    files = {"pkg/catalog/gpus.yaml": b"models:\n  a100: {memory: 40Gi, migs: [1g.5gb, 7g.40gb]}\n",
             # a key that is not a string: no JSON twin (a date is a string to go-yaml, so it gets one)
             "pkg/catalog/keyed.yaml": b"1: one\n",
             "pkg/other.yaml": b"a: 1\n"}
    FILES.update({k: v.decode() for k, v in files.items()})
    try:
        wheel = _wheel(tmp_path)
    finally:
        for k in files:
            del FILES[k]
    _run(tmp_path, str(wheel), "--compile", wheel.name, "--keep-source", "pkg", "--import-all", "pkg",
         "--yaml-twins", "pkg/catalog/")
    out = tmp_path / "out" / wheel.name
    with zipfile.ZipFile(out) as zf:
        twins = {n: zf.read(n) for n in zf.namelist() if n.endswith(".yaml.json")}
    assert list(twins) == ["pkg/catalog/__pycache__/gpus.yaml.json"]
    twin = json.loads(twins["pkg/catalog/__pycache__/gpus.yaml.json"])
    assert twin == {"sha256": hashlib.sha256(files["pkg/catalog/gpus.yaml"]).hexdigest(),
                    "document": {"models": {"a100": {"memory": "40Gi", "migs": ["1g.5gb", "7g.40gb"]}}}}
    _record_matches(out)


def test_the_standard_library_zip_gets_sourceless_bytecode_zipimport_takes(tmp_path: Path) -> None:
    """--stdlib: Pyodide's standard library is a zip on sys.path; the modules named get a sourceless unchecked
    .pyc in place of their .py, which zipimport loads without compiling; the rest stays as it was."""
    official = tmp_path / "python_stdlib.zip"
    with zipfile.ZipFile(official, "w") as zf:
        zf.writestr("fakemod.py", "VALUE = 'fakemod'\n")
        zf.writestr("fakepkg/__init__.py", "from fakepkg.sub import VALUE\n")
        zf.writestr("fakepkg/sub.py", "VALUE = 'sub'\n")
        zf.writestr("fakeother.py", "VALUE = 'other'\n")
        zf.writestr("fakedata.txt", "data\n")
    code = ("import runpy, sys; from pathlib import Path\n"
            "ns = runpy.run_path(sys.argv[1])\n"
            "print(ns['stdlib_with_bytecode'](Path(sys.argv[2]), {'fakemod.py', 'fakepkg/__init__.py', 'fakedata.txt'},"
            " Path(sys.argv[3])))")
    derived = tmp_path / "python_stdlib_pyc.zip"
    done = subprocess.run([sys.executable, "-c", code, str(SCRIPT), str(official), str(derived)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "2"  # a data file is not compiled, even when named
    with zipfile.ZipFile(derived) as zf:
        assert sorted(zf.namelist()) == ["fakedata.txt", "fakemod.pyc", "fakeother.py", "fakepkg/__init__.pyc",
                                         "fakepkg/sub.py"]
    loaded = _import_from(derived, "import fakemod, fakepkg, fakeother\n"
                                   "print(fakemod.VALUE, fakepkg.VALUE, fakeother.VALUE)\n"
                                   "print(*(m.__file__.rsplit('/', 1)[1] for m in (fakemod, fakepkg, fakeother)))")
    assert loaded.splitlines() == ["fakemod sub other", "fakemod.pyc __init__.pyc fakeother.py"]


def test_the_site_leaves_out_extensions_it_has_no_use_for(site_py: CliServer, tmp_path: Path) -> None:
    """jupytext's JupyterLab extension comes with the build's environment; the site holds .ipynb only: its
    folder, its jupyter-lite.json entry and its settings schema go, the other extensions stay."""
    site = tmp_path / "site"
    for name in ("jupyterlab-jupytext", "anywidget"):
        (site / "extensions" / name / "static").mkdir(parents=True)
        (site / "extensions" / name / "static" / "remoteEntry.js").write_bytes(b"x" * 100)
    (site / "build" / "schemas").mkdir(parents=True)
    (site / "build" / "schemas" / "all_federated.json").write_text(json.dumps(
        [{"id": "jupyterlab-jupytext:plugin"}, {"id": "@jupyter-widgets/jupyterlab-manager:plugin"}]))
    (site / "jupyter-lite.json").write_text(json.dumps({"jupyter-config-data": {"federated_extensions": [
        {"name": "jupyterlab-jupytext"}, {"name": "anywidget"}], "appName": "JupyterLite"}}))
    code = ("import runpy, sys; from pathlib import Path\n"
            "print(runpy.run_path(sys.argv[1])['drop_extensions'](Path(sys.argv[2])))")
    done = site_py.python(code, str(SITE_PY), str(site))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == 100
    assert sorted(p.name for p in (site / "extensions").iterdir()) == ["anywidget"]
    config = json.loads((site / "jupyter-lite.json").read_text())["jupyter-config-data"]
    assert config == {"federated_extensions": [{"name": "anywidget"}], "appName": "JupyterLite"}
    assert json.loads((site / "build" / "schemas" / "all_federated.json").read_text()) == [
        {"id": "@jupyter-widgets/jupyterlab-manager:plugin"}]
