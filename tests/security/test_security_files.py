"""Issue #41, point 4 (outputs): no folder the user did not name as an output is deleted or emptied, and every
file the kit writes is written whole or not at all (labkit/fileio.py: a temporary file beside it, then rename).

The site builder (notebooks/site.py) builds in a new folder beside ``--out`` and renames it into place; an
``--out`` that holds anything but an earlier site is refused, untouched. A command whose output fails midway
leaves the old file byte for byte and no temporary file: the failure here is a real one, the file-size limit of
the command's process (RLIMIT_FSIZE: its write fails with EFBIG, as on a full disk; Python ignores SIGXFSZ).
"""

from __future__ import annotations

import hashlib
import json
import os
import resource
import subprocess
import sys
import threading
import zipfile
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

from labkit.cluster import connect
from labkit.model.state import STATE_KINDS
from tests.cliserver import CliServer
from tests.paths import REPO

pytestmark = pytest.mark.slow  # heavy: `make check` leaves it out, `make test` runs it

ROOT = REPO
SITE = ROOT / "notebooks" / "site.py"
#: the largest file the limited commands may write: a picture or a snapshot is bigger, the old file smaller
LIMIT = 2048
OLD = b"the user's previous file\n"


def _labkit(*args: str, cwd: Path, limit: int | None = None) -> subprocess.CompletedProcess[str]:
    """`labkit ARGS` as typed, in a new process; ``limit``: its largest file, in bytes (RLIMIT_FSIZE)."""
    def limited() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    # a limited process writes no bytecode: Python keeps a .pyc cut short at the limit (its short write is not an
    # error), and every later process that imports that module dies of "EOFError: marshal data too short" (seen
    # with make test's shared PYTHONPYCACHEPREFIX once a module had changed since its .pyc was written)
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"} if limit is not None else None
    return subprocess.run([sys.executable, "-m", "labkit", *args], cwd=cwd, capture_output=True, text=True,
                          preexec_fn=limited if limit is not None else None, env=env, timeout=600)


def _one_line(err: str) -> str:
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err.strip()


# -- the site builder: only the folder the user named, and only when it is a site --------------------------------
def test_site_builder_refuses_an_out_folder_that_holds_a_users_file(tmp_path: Path) -> None:
    """`python notebooks/site.py --out DIR`, DIR holding the user's notes: one line naming DIR and the fix, exit
    2, before anything is built; DIR and the folder around it are as they were (the old builder emptied DIR and
    a DIR-src beside it)."""
    out = tmp_path / "course"
    out.mkdir()
    (out / "notes.txt").write_bytes(OLD)
    (tmp_path / "course-src").mkdir()  # a folder beside it that the user did not name
    (tmp_path / "course-src" / "keep.txt").write_bytes(OLD)
    done = subprocess.run([sys.executable, str(SITE), "--out", str(out)], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 2, done.stdout + done.stderr
    assert _one_line(done.stderr) == (
        f"site: --out {out} holds files and is not a site this builder made (no .labkit-site, index.html and "
        f"jupyter-lite.json in it); fix: name a new or empty folder, or move {out} away yourself")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["course", "course-src"]
    assert [p.name for p in out.iterdir()] == ["notes.txt"] and (out / "notes.txt").read_bytes() == OLD
    assert (tmp_path / "course-src" / "keep.txt").read_bytes() == OLD


def test_site_builder_help_says_what_out_may_be() -> None:
    done = subprocess.run([sys.executable, str(SITE), "--help"], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    help_text = " ".join(done.stdout.split())
    assert "--out OUT the site folder (default build/site): new, empty or an earlier site" in help_text
    assert "(a folder that holds anything else is refused: .labkit-site)" in help_text


#: the site builder's folder handling (build_in_place) with a stub for the JupyterLite build: it writes a page
#: into the new site, then fails as argv[3] says (raise, exit 1) or succeeds (ok)
STUB = """
import json, runpy, sys
from pathlib import Path
ns = runpy.run_path(sys.argv[1])
def stub(lite_dir, site):
    lite_dir.mkdir(); site.mkdir()
    (site / "index.html").write_text("new site")
    (site / "jupyter-lite.json").write_text("{}")
    if sys.argv[3] == "raise":
        raise RuntimeError("the build broke midway")
    return 1 if sys.argv[3] == "exit 1" else 0
print(json.dumps(ns["build_in_place"](Path(sys.argv[2]), stub)))
"""


def _earlier_site(out: Path) -> dict[str, bytes]:
    (out / "static").mkdir(parents=True)
    files = {".labkit-site": b"made by notebooks/site.py\n", "index.html": b"old site", "jupyter-lite.json": b"{}",
             "static/app.js": b"old js"}
    for name, data in files.items():
        (out / name).write_bytes(data)
    return files


def _tree(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


@pytest.mark.parametrize("how", ["raise", "exit 1"])
def test_a_site_build_that_fails_midway_leaves_the_previous_site_and_no_temporary_folder(
        site_py: CliServer, tmp_path: Path, how: str) -> None:
    out = tmp_path / "site"
    before = _earlier_site(out)
    done = site_py.python(STUB, str(SITE), str(out), how)
    if how == "raise":
        assert done.returncode == 1 and "RuntimeError: the build broke midway" in done.stderr
    else:
        assert done.returncode == 0 and done.stdout.strip() == "1", done.stderr
    assert _tree(out) == before
    assert [p.name for p in tmp_path.iterdir()] == ["site"]  # no site.building-* left beside it


def test_a_site_build_replaces_an_earlier_site_whole(site_py: CliServer, tmp_path: Path) -> None:
    """A build into an earlier site (or a new folder): the new site, with its marker, and nothing of the old."""
    out = tmp_path / "site"
    _earlier_site(out)
    for target in (out, tmp_path / "new" / "site"):
        done = site_py.python(STUB, str(SITE), str(target), "ok")
        assert done.returncode == 0 and done.stdout.strip() == "0", done.stderr
        assert _tree(target) == {"index.html": b"new site", "jupyter-lite.json": b"{}", ".labkit-site":
                                 b"made by notebooks/site.py: the next build replaces this folder whole\n"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["new", "site"]
    assert [p.name for p in (tmp_path / "new").iterdir()] == ["site"]


def test_the_site_stub_is_refused_a_folder_that_is_not_a_site(site_py: CliServer, tmp_path: Path) -> None:
    """build_in_place itself refuses (exit 2, one line) before the build step runs: nothing is written."""
    out = tmp_path / "photos"
    out.mkdir()
    (out / "index.html").write_bytes(OLD)  # an index.html alone is not a site of this builder
    done = site_py.python(STUB, str(SITE), str(out), "ok")
    assert done.returncode == 0 and done.stdout.strip() == "2", done.stderr
    assert "site: --out" in _one_line(done.stderr) and "not a site this builder made" in done.stderr
    assert _tree(out) == {"index.html": OLD} and [p.name for p in tmp_path.iterdir()] == ["photos"]


def test_pyodide_verified_refuses_an_out_folder_that_is_not_a_distribution(tmp_path: Path) -> None:
    """tools/pyodide_verified.py CORE ARCHIVE OUT (tools/pyodide-deps.sh runs it) emptied OUT, and a OUT.partial
    beside it, whatever they held: now OUT holding the user's files is refused before anything is written, and
    an earlier distribution (it has a pyodide-lock.json) is replaced whole, with nothing left beside it."""
    core = tmp_path / "core"
    core.mkdir()
    six = "six-1.16.0-py2.py3-none-any.whl"
    (core / "pyodide-lock.json").write_text(json.dumps({"info": {"version": "0.27.7"}, "packages": {"six": {
        "name": "six", "file_name": six, "sha256": hashlib.sha256(b"six").hexdigest(), "depends": []}}}))
    (core / "pyodide.mjs").write_text("// core")
    with zipfile.ZipFile(tmp_path / "mirror.whl", "w") as zf:
        zf.writestr(f"mirror/{six}", b"six")
    out = tmp_path / "dist"
    out.mkdir()
    (out / "notes.txt").write_bytes(OLD)
    (tmp_path / "dist.partial").mkdir()
    (tmp_path / "dist.partial" / "keep.txt").write_bytes(OLD)

    def run() -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, str(ROOT / "tools" / "pyodide_verified.py"), str(core),
                               str(tmp_path / "mirror.whl"), str(out), "--packages", "six"], capture_output=True,
                              text=True)

    done = run()
    assert done.returncode == 1
    assert _one_line(done.stderr) == (
        f"pyodide_verified: {out} holds files and is not a Pyodide distribution (no pyodide-lock.json in it); "
        f"fix: name a new or empty folder, or move {out} away yourself")
    assert _tree(out) == {"notes.txt": OLD} and _tree(tmp_path / "dist.partial") == {"keep.txt": OLD}
    (out / "notes.txt").unlink()
    (out / "pyodide-lock.json").write_text("{}")  # an earlier distribution
    (out / "old.whl").write_bytes(OLD)
    assert run().returncode == 0
    assert _tree(out) == {**_tree(core), six: b"six"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["core", "dist", "dist.partial", "mirror.whl"]
    assert _tree(tmp_path / "dist.partial") == {"keep.txt": OLD}


# -- files: whole or not at all ------------------------------------------------------------------------------------
def test_topology_png_that_fails_midway_leaves_the_old_file_byte_for_byte(tmp_path: Path) -> None:
    picture = tmp_path / "node.png"
    done = _labkit("topology", "--profile", "dgx-a100", "--png", "node.png", cwd=tmp_path)  # the whole picture
    assert done.returncode == 0, done.stderr
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and picture.stat().st_size > LIMIT
    picture.write_bytes(OLD)
    done = _labkit("topology", "--profile", "dgx-a100", "--png", "node.png", cwd=tmp_path, limit=LIMIT)
    assert picture.read_bytes() == OLD
    assert [p.name for p in tmp_path.iterdir()] == ["node.png"]  # no temporary file beside it
    assert done.returncode == 2
    assert _one_line(done.stderr) == ("labkit topology: --png node.png: cannot write (File too large); "
                                      "fix: choose a writable path (a folder you may write to)")


def test_experiment_plot_that_fails_midway_leaves_the_old_file_byte_for_byte(tmp_path: Path) -> None:
    figure = tmp_path / "fig.png"
    figure.write_bytes(OLD)
    done = _labkit("experiment", "run", "--pods", "20", "--plot", "fig.png", "-o", "json", cwd=tmp_path, limit=LIMIT)
    assert figure.read_bytes() == OLD
    assert [p.name for p in tmp_path.iterdir()] == ["fig.png"]
    assert done.returncode == 2
    assert _one_line(done.stderr) == ("labkit experiment: --plot fig.png: cannot write (File too large); "
                                      "fix: choose a writable path (a folder you may write to)")


@pytest.mark.parametrize("where", ["a folder", "in no folder"])
def test_topology_png_where_it_cannot_be_written_is_one_line_and_leaves_nothing(tmp_path: Path, where: str) -> None:
    """--png naming a folder, or a file in a folder that does not exist: one line (it was an internal error,
    exit 70) and no stray temporary file. (A read-only folder gives the same line with Permission denied; the
    tests may run as root, whom a read-only folder does not stop.)"""
    (tmp_path / "pictures").mkdir()
    name = "pictures" if where == "a folder" else "missing/node.png"
    done = _labkit("topology", "--profile", "dgx-a100", "--png", name, cwd=tmp_path)
    why = "Is a directory" if where == "a folder" else "No such file or directory"
    assert done.returncode == 2
    assert _one_line(done.stderr) == (f"labkit topology: --png {name}: cannot write ({why}); "
                                      "fix: choose a writable path (a folder you may write to)")
    assert [p.name for p in tmp_path.iterdir()] == ["pictures"] and not any((tmp_path / "pictures").iterdir())


# -- labkit snapshot -o FILE, from an API server that serves a sim's objects -------------------------------------
#: (group, version, resource, kind, namespaced) the fake API server serves: the state kinds but DeviceTaintRule
#: (an optional kind, labkit.cluster.snapshot.OPTIONAL_KINDS: a server without it is fine)
RESOURCES = [("", "v1", "namespaces", "Namespace", False), ("", "v1", "nodes", "Node", False),
             ("", "v1", "pods", "Pod", True),
             ("resource.k8s.io", "v1", "deviceclasses", "DeviceClass", False),
             ("resource.k8s.io", "v1", "resourceslices", "ResourceSlice", False),
             ("resource.k8s.io", "v1", "resourceclaimtemplates", "ResourceClaimTemplate", True),
             ("resource.k8s.io", "v1", "resourceclaims", "ResourceClaim", True)]


def _discovery(core: bool) -> dict:
    """An aggregated discovery document of /api or /apis: an APIGroupDiscoveryList, whose items are groups
    (metadata.name), their versions and each version's resources (resource, responseKind, scope), as
    kubernetes/kubernetes staging/src/k8s.io/api/apidiscovery/v2/types.go defines it."""
    groups: dict[str, list[dict]] = {}
    for group, _, resource_, kind, namespaced in RESOURCES:
        if (group == "") == core:
            groups.setdefault(group, []).append({"resource": resource_, "responseKind": {"kind": kind},
                                                 "scope": "Namespaced" if namespaced else "Cluster"})
    return {"kind": "APIGroupDiscoveryList", "items": [
        {"metadata": {"name": g}, "versions": [{"version": "v1", "resources": rs}]} for g, rs in groups.items()]}


@pytest.fixture(scope="module")
def sim_server() -> Iterator[tuple[str, dict[str, list[dict]]]]:
    """A read-only API server on 127.0.0.1 that lists the objects of a workshop sim with a claim applied."""
    sim = connect("sim", "workshop", progress=False)
    sim.apply("""
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: gpu, namespace: default}
spec: {devices: {requests: [{name: g, exactly: {deviceClassName: gpu.nvidia.com}}]}}
""")
    state = {kind: sim.list(kind) for kind in STATE_KINDS if kind != "DeviceTaintRule"}
    by_path = {"/version": {"major": "1", "minor": "34", "gitVersion": "v1.34.0"},
               "/api": _discovery(True), "/apis": _discovery(False)}
    for group, version, resource_, kind, _ in RESOURCES:
        by_path[f"/apis/{group}/{version}/{resource_}" if group else f"/api/{version}/{resource_}"] = {
            "items": state[kind]}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            doc = by_path.get(self.path.split("?")[0])
            body = json.dumps(doc if doc is not None else {"kind": "Status", "reason": "NotFound",
                                                           "message": f"{self.path} not found"}).encode()
            self.send_response(200 if doc is not None else 404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_port}", state
    finally:
        httpd.shutdown()
        httpd.server_close()


def _kubeconfig(folder: Path, server: str) -> Path:
    path = folder / "kubeconfig"
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "sim",
        "clusters": [{"name": "sim", "cluster": {"server": server}}], "users": [{"name": "me", "user": {}}],
        "contexts": [{"name": "sim", "context": {"cluster": "sim", "user": "me"}}]}))
    return path


def test_snapshot_writes_the_file_whole_or_not_at_all(tmp_path: Path, sim_server) -> None:
    """`labkit snapshot -o dump.yaml` writes the sim's objects (over an older dump, whose mode stays); when its
    write fails midway, the older dump is left byte for byte, and no temporary file (open("w") had emptied it)."""
    server, state = sim_server
    kc = _kubeconfig(tmp_path, server)
    dump = tmp_path / "dump.yaml"
    dump.write_bytes(OLD)
    dump.chmod(0o640)
    done = _labkit("snapshot", "--kubeconfig", str(kc), "-o", "dump.yaml", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    docs = list(yaml.safe_load_all(dump.read_text()))
    want = sorted((kind, o["metadata"].get("namespace", ""), o["metadata"]["name"])
                  for kind, objs in state.items() for o in objs)
    assert sorted((d["kind"], d["metadata"].get("namespace", ""), d["metadata"]["name"]) for d in docs) == want
    assert ("ResourceClaim", "default", "gpu") in want and len(want) > 10 and dump.stat().st_size > LIMIT
    assert dump.stat().st_mode & 0o777 == 0o640

    dump.write_bytes(OLD)
    done = _labkit("snapshot", "--kubeconfig", str(kc), "-o", "dump.yaml", cwd=tmp_path, limit=LIMIT)
    assert dump.read_bytes() == OLD
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dump.yaml", "kubeconfig"]  # no temporary file
    assert done.returncode == 2
    assert _one_line(done.stderr) == ("labkit snapshot: -o dump.yaml: cannot write (File too large); "
                                      "fix: choose a writable path (a folder you may write to)")
