"""The package as users install it: build the wheel from the tracked files, install it into a
fresh venv outside the repository (dependencies from PyPI, through uv's cache as `make setup`
installs, else pip's), and use it from a directory that is not the repository:
connect("sim", "workshop"), `labkit simulate`, `labkit topology` and one course notebook (nbclient).

Slow (a venv and an install); marked slow like the other install-heavy tests."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.paths import REPO

pytestmark = pytest.mark.slow

NOTEBOOK = "09_why_is_my_pod_pending.ipynb"
#: the installer `make setup` puts beside the dev venv's python (the Makefile's INSTALL)
UV = Path(sys.executable).parent / "uv"


def _run(argv: list[str], cwd: Path, **kw) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "LABKIT_CLUSTERS_PATH")}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    res = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, **kw)
    assert res.returncode == 0, f"{' '.join(argv)} failed ({res.returncode}):\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}"
    return res


#: tracked files inside the packages that are for developers, not read at run time
DEV_ONLY = {"fake_gpus/plugin/gen.sh", "fake_gpus/plugin/interop/go.mod", "fake_gpus/plugin/interop/go.sum",
            "fake_gpus/plugin/interop/main.go", "labkit/cel/README.md", "labkit/experiments/README.md"}


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> tuple[Path, Path, Path, Path]:
    """(venv python, a working directory outside the repository, the wheel, the source it was built from)."""
    base = tmp_path_factory.mktemp("wheel")
    src = base / "src"
    # only what git tracks or would track (no .venv, build outputs or caches), as a fresh clone of the next
    # commit would have it
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                           capture_output=True, check=True).stdout.split(b"\0")
    for f in filter(None, files):
        rel = Path(f.decode())
        if not (REPO / rel).is_file():
            continue  # deleted in the work tree
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / rel, src / rel)
    dist = base / "dist"
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(dist), str(src)],
         cwd=base)
    wheels = list(dist.glob("dra_labkit-*.whl"))
    assert len(wheels) == 1, wheels
    venv = base / "venv"
    _run([sys.executable, "-m", "venv", str(venv)], cwd=base)
    py = venv / "bin" / "python"
    install = [str(wheels[0]), "nbclient", "nbformat", "ipykernel"]
    if UV.is_file():  # as `make setup` installs: uv, a sixth of pip's CPU; pip where there is no uv
        _run([str(UV), "pip", "install", "-q", "--python", str(py), *install], cwd=base)
    else:
        _run([str(py), "-m", "pip", "install", "-q", *install], cwd=base)
    work = base / "work"
    work.mkdir()
    return py, work, wheels[0], src


def test_wheel_holds_the_runtime_data(installed):
    import zipfile

    py, work, wheel, src = installed
    names = set(zipfile.ZipFile(wheel).namelist())
    tracked = [p.relative_to(src).as_posix() for top in ("labkit", "fake_gpus") for p in (src / top).rglob("*")
               if p.is_file()]
    missing = [f for f in tracked if f not in names and f not in DEV_ONLY]
    assert missing == [], "package data not in the wheel: add it to [tool.setuptools.package-data]"
    res = _run([str(py), "-c", "import labkit, fake_gpus, pathlib; print(pathlib.Path(labkit.__file__).parent); "
                "print(pathlib.Path(fake_gpus.__file__).parent)"], cwd=work)
    pkg, fg = (Path(line) for line in res.stdout.split())
    assert REPO not in pkg.parents and REPO not in fg.parents  # the installed copy, not the clone
    # the cluster profiles live in the top-level clusters/ folder; the build copies them into the package (setup.py)
    profiles = sorted(p.name for p in (src / "clusters").glob("*.yaml"))
    assert "workshop.yaml" in profiles
    assert [f for f in profiles if f"labkit/model/clusters/{f}" not in names] == []
    assert sorted(p.name for p in (pkg / "model" / "clusters").glob("*.yaml")) == profiles
    assert not [n for n in names if n.startswith("clusters/")]  # inside the package only
    assert (fg / "deploy" / "05-daemonset.yaml").is_file()
    assert (fg / "deploy" / "helm" / "fake-gpus" / "templates" / "_helpers.tpl").is_file()
    assert list((fg / "catalog" / "profiles").glob("*.yaml"))


def test_connect_sim_workshop(installed):
    py, work, *_ = installed
    res = _run([str(py), "-c", "from labkit.cluster import connect\n"
                "c = connect('sim', 'workshop', progress=False)\n"
                "print(sorted(n['metadata']['name'] for n in c.list('Node')))\n"
                "from labkit.model.profiles import profile_names; print(profile_names())"], cwd=work)
    nodes, names = res.stdout.splitlines()
    assert nodes == "['dgx-a100-0', 't4-0', 't4-1']"
    assert "workshop" in names and "mig-lab" in names


def test_labkit_finds_the_shipped_profiles_and_yours_in_dot_clusters(installed, tmp_path):
    """From a directory with no clusters/, `labkit cluster up` finds the wheel's profiles; a ./clusters of the
    working directory adds to them and overrides one of the same name."""
    py, work, _, src = installed
    labkit = py.parent / "labkit"
    up = _run([str(labkit), "cluster", "up", "--profile", "workshop"], cwd=work)
    assert up.stdout.startswith("profile workshop: 3 node(s), Kubernetes ")
    res = subprocess.run([str(labkit), "cluster", "up", "--profile", "no-such"], cwd=work, capture_output=True,
                         text=True)
    assert res.returncode == 3
    assert f"known profiles: {', '.join(sorted(p.stem for p in (src / 'clusters').glob('*.yaml')))} (" in res.stderr
    mine = tmp_path / "clusters"
    mine.mkdir()
    (mine / "workshop.yaml").write_text("nodes: [{name: box-0, nodeProfile: t4-inference}]\n")
    up = _run([str(labkit), "cluster", "up", "--profile", "workshop"], cwd=tmp_path)
    assert up.stdout.startswith("profile workshop: 1 node(s), Kubernetes ") and "box-0" in up.stdout


def test_user_profiles_on_the_search_path(installed, tmp_path):
    py, work, *_ = installed
    mine = tmp_path / "profiles"
    mine.mkdir()
    (mine / "my-box.yaml").write_text("nodes: [{name: box-0, nodeProfile: t4-inference}]\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["LABKIT_CLUSTERS_PATH"] = str(mine)
    res = subprocess.run([str(py), "-c", "from labkit.cluster import connect\n"
                          "print([n['metadata']['name'] for n in connect('sim', 'my-box', progress=False).list('Node')])"],
                         cwd=work, env=env, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "['box-0']"


def test_labkit_simulate_and_topology(installed):
    py, work, *_ = installed
    labkit = py.parent / "labkit"
    (work / "pod.yaml").write_text((REPO / "tests" / "data" / "scenarios" / "gpu-40gi.yaml").read_text())
    rep = json.loads(_run([str(labkit), "simulate", "-f", "pod.yaml", "-o", "json"], cwd=work).stdout)
    assert rep["pods"] and all(p["node"] == "dgx-a100-0" for p in rep["pods"])
    topo = json.loads(_run([str(labkit), "topology", "--profile", "workshop", "--json"], cwd=work).stdout)
    assert topo["name"] == "dgx-a100-0" and topo["kinds"]["gpu"] == 8


def test_tab_completion_comes_with_the_kit(installed):
    """`labkit completion bash` of the installed wheel, sourced by bash, completes with that labkit."""
    py, work, *_ = installed
    script = ('source <(labkit completion bash) && COMP_LINE="labkit simulate --profile works" && '
              'COMP_POINT=${#COMP_LINE} && COMP_WORDS=(labkit simulate --profile works) && COMP_CWORD=3 && '
              '_python_argcomplete labkit works --profile && printf "%s\\n" "${COMPREPLY[@]}"')
    env = {**os.environ, "PATH": f"{py.parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    res = subprocess.run(["bash", "-c", script], capture_output=True, text=True, cwd=work, env=env)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["workshop"]


def test_the_kubectl_plugin_is_installed_with_the_kit(installed, tmp_path):
    """`kubectl-dra` beside `labkit` (kubectl finds it on PATH); its validate is labkit's."""
    py, work, *_ = installed
    plugin = py.parent / "kubectl-dra"
    assert plugin.is_file() and os.access(plugin, os.X_OK)
    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: c}\n"
                   "spec: {devices: {requests: [{name: GPU, exactly: {deviceClassName: gpu.nvidia.com}}]}}\n")
    got = subprocess.run([str(plugin), "validate", "-f", str(bad)], cwd=work, capture_output=True, text=True)
    want = subprocess.run([str(py.parent / "labkit"), "validate", "-f", str(bad)], cwd=work, capture_output=True,
                          text=True)
    assert (got.returncode, got.stdout) == (want.returncode, want.stdout) == (1, want.stdout)
    assert want.stdout.startswith('ResourceClaim/c: spec.devices.requests[0].name: Invalid value: "GPU"')


def test_a_course_notebook_runs(installed):
    py, work, *_ = installed
    # the course's own files beside the notebook (its manifests in ../examples), no labkit source:
    # the library comes from the installed wheel
    (work / "notebooks").mkdir(exist_ok=True)
    shutil.copy(REPO / "notebooks" / NOTEBOOK, work / "notebooks" / NOTEBOOK)
    shutil.copytree(REPO / "examples", work / "examples", dirs_exist_ok=True)
    work = work / "notebooks"
    code = ("import nbformat, nbclient\n"
            f"nb = nbformat.read('{NOTEBOOK}', as_version=4)\n"
            "nbclient.NotebookClient(nb, kernel_name='python3', timeout=600).execute()\n"
            "errors = [o for c in nb.cells if c.cell_type == 'code' for o in c.outputs if o.output_type == 'error']\n"
            "print(len([c for c in nb.cells if c.cell_type == 'code']), len(errors))\n")
    res = _run([str(py), "-c", code], cwd=work)
    cells, errors = res.stdout.split()
    assert int(cells) > 5 and errors == "0"
