"""Every refused object reported (issue #41, point 8), as `kubectl apply` reports them.

kubectl apply goes on past an object the API server refuses, creates the valid ones and returns
every error, one per refused object (kubernetes/kubernetes
staging/src/k8s.io/kubectl/pkg/cmd/apply/apply.go, ApplyOptions.Run: `errs = append(errs, err)`
per object, then `utilerrors.NewAggregate(errs)`), exit 1. LabKit does the same on every backend
(`Cluster.apply`: the valid objects stored, one RefusedObjects naming every problem of every
refused object, exit 2 as all bad input). `labkit simulate` and `kubectl dra what-if` then print
every refusal and no report: a what-if answers for its whole input or not at all. Nothing is cut
to the first problem and "(and N more)".
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from labkit.cluster import ClusterError, connect
from labkit.cluster.backends.kind.runner import RecordingRunner
from labkit.cluster.snapshot import cluster_state
from tests.cliserver import CliServer
from tests.cluster.test_cluster_kind import _attached
from tests.paths import REPO

ROOT = REPO
BIN = Path(sys.executable).parent


def claim(name: str, request: str = "gpu", **exactly: Any) -> dict:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": name},
            "spec": {"devices": {"requests": [{"name": request, "exactly": {"deviceClassName": "gpu.nvidia.com",
                                                                          **exactly}}]}}}


#: three valid claims and three invalid ones, interleaved; what the API server says of each invalid one
MIXED = [claim("good-1"), claim("bad-1", count=-1), claim("good-2"), claim("bad-2", allocationMode="Sometimes"),
         claim("good-3"), claim("bad-3", request="GPU_0")]
REFUSED = [
    "ResourceClaim/bad-1: spec.devices.requests[0].exactly.count: Invalid value: -1: must be greater than zero",
    'ResourceClaim/bad-2: spec.devices.requests[0].exactly.allocationMode: Unsupported value: "Sometimes": '
    'supported values: "All", "ExactCount"',
    'ResourceClaim/bad-3: spec.devices.requests[0].name: Invalid value: "GPU_0": must be a DNS label: lowercase '
    "letters, digits and '-', starting and ending with a letter or digit (e.g. 'gpu-0')",
]


def write(path: Path, objs: list[dict]) -> Path:
    path.write_text(yaml.safe_dump_all(objs, sort_keys=False))
    return path


@pytest.fixture(scope="module")
def server() -> Iterator[CliServer]:
    srv = CliServer()
    yield srv
    srv.close()


def test_simulate_lists_every_refused_object_and_prints_no_report(server, tmp_path):
    f = write(tmp_path / "mixed.yaml", MIXED)
    rc, out, err = server.run("labkit", ["simulate", "--profile", "tiny", "-f", str(f), "-o", "json"])
    assert rc == 2, err
    assert out == ""  # a what-if answers for its whole input or not at all
    assert err.splitlines() == [f"labkit simulate: {line}" for line in REFUSED]


def test_with_several_files_each_line_names_its_file(server, tmp_path):
    a = write(tmp_path / "a.yaml", MIXED[:2])
    b = write(tmp_path / "b.yaml", MIXED[2:])
    rc, out, err = server.run("labkit", ["simulate", "--profile", "tiny", "-f", str(a), "-f", str(b)])
    assert rc == 2 and out == ""
    assert err.splitlines() == [f"labkit simulate: {a}: {REFUSED[0]}",
                                *(f"labkit simulate: {b}: {line}" for line in REFUSED[1:])]


def test_a_file_of_500_invalid_claims_lists_500(server, tmp_path):
    f = write(tmp_path / "many.yaml", [claim(f"bad-{i:03d}", count=-1) for i in range(500)])
    rc, out, err = server.run("labkit", ["simulate", "--profile", "tiny", "-f", str(f)])
    assert rc == 2 and out == ""
    lines = err.splitlines()
    assert len(lines) == 500, err[-500:]
    assert lines[0] == ("labkit simulate: ResourceClaim/bad-000: spec.devices.requests[0].exactly.count: "
                        "Invalid value: -1: must be greater than zero")
    assert [ln.split("/")[1].split(":")[0] for ln in lines] == [f"bad-{i:03d}" for i in range(500)]
    assert "more" not in err


def test_the_sim_stores_the_valid_objects_as_kubectl_apply_creates_them():
    c = connect("sim", "tiny", progress=False)
    with pytest.raises(ClusterError) as refused:
        c.apply(MIXED)
    assert refused.value.problems == REFUSED  # type: ignore[attr-defined]
    assert sorted(o["metadata"]["name"] for o in c.list("ResourceClaim")) == ["good-1", "good-2", "good-3"]
    # a refusal by the store (no such namespace) is one more line, and the rest is still stored
    with pytest.raises(ClusterError) as refused:
        c.apply([{**claim("elsewhere"), "metadata": {"name": "elsewhere", "namespace": "team-a"}}, claim("good-4")])
    assert refused.value.problems == [  # type: ignore[attr-defined]
        'ResourceClaim/elsewhere: metadata.namespace: namespace "team-a" not found; apply a Namespace named team-a first']
    assert "good-4" in [o["metadata"]["name"] for o in c.list("ResourceClaim")]


# -- a real API server's refusals (kubeconfig backend, kubectl dra what-if) --------------------
PLURALS = {"Namespace": ("", "namespaces", False), "Node": ("", "nodes", False), "Pod": ("", "pods", True),
           "DeviceClass": ("resource.k8s.io", "deviceclasses", False),
           "ResourceSlice": ("resource.k8s.io", "resourceslices", False),
           "DeviceTaintRule": ("resource.k8s.io", "devicetaintrules", False),
           "ResourceClaimTemplate": ("resource.k8s.io", "resourceclaimtemplates", True),
           "ResourceClaim": ("resource.k8s.io", "resourceclaims", True)}


class FakeApiServer:
    """An API server on 127.0.0.1 (plain http, no credentials) holding a sim cluster's objects: it
    answers /version, discovery and lists, and server-side apply, refusing each claim named bad-*
    with 422 Invalid as kube-apiserver words it."""

    def __init__(self, objs: list[dict]) -> None:
        self.lists: dict[str, list[dict]] = {}
        for o in objs:
            self.lists.setdefault(PLURALS[o["kind"]][1], []).append(o)
        self.applied: list[str] = []
        groups: dict[str, list[dict]] = {}
        for kind, (group, plural, namespaced) in PLURALS.items():
            groups.setdefault(group, []).append({"resource": plural, "responseKind": {"kind": kind},
                                                 "scope": "Namespaced" if namespaced else "Cluster"})
        self.docs = {"/version": {"major": "1", "minor": "37", "gitVersion": "v1.37.0"},
                     "/api": {"items": [{"metadata": {"name": ""}, "versions": [{"version": "v1", "resources": groups[""]}]}]},
                     "/apis": {"items": [{"metadata": {"name": "resource.k8s.io"},
                                          "versions": [{"version": "v1", "resources": groups["resource.k8s.io"]}]}]}}
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def _send(self, code: int, doc: Any) -> None:
                body = json.dumps(doc).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                path = self.path.split("?")[0]
                if path in fake.docs:
                    return self._send(200, fake.docs[path])
                return self._send(200, {"items": fake.lists.get(path.rsplit("/", 1)[-1], [])})

            def do_PATCH(self) -> None:  # noqa: N802
                obj = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                name = obj["metadata"]["name"]
                if name.startswith("bad-"):
                    message = next(line for line in REFUSED if line.startswith(f"ResourceClaim/{name}:"))
                    return self._send(422, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 422,
                                            "reason": "Invalid", "message": f'ResourceClaim.resource.k8s.io "{name}" '
                                            f'is invalid: {message.split(": ", 1)[1]}'})
                fake.applied.append(name)
                return self._send(200, obj)

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def kubeconfig(self, path: Path) -> Path:
        path.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": "lab",
            "clusters": [{"name": "lab", "cluster": {"server": f"http://127.0.0.1:{self.httpd.server_port}"}}],
            "contexts": [{"name": "lab", "context": {"cluster": "lab"}}], "users": []}))
        return path


@pytest.fixture(scope="module")
def api() -> Iterator[FakeApiServer]:
    fake = FakeApiServer(cluster_state(connect("sim", "tiny", progress=False)))
    yield fake
    fake.httpd.shutdown()


def test_kubectl_dra_what_if_lists_every_refused_object(api, tmp_path):
    f = write(tmp_path / "mixed.yaml", MIXED)
    env = {**os.environ, "HOME": str(tmp_path), "KUBECONFIG": str(api.kubeconfig(tmp_path / "kubeconfig"))}
    out = subprocess.run([str(BIN / "kubectl-dra"), "what-if", "-f", str(f)], capture_output=True, text=True,
                         env=env, cwd=tmp_path)
    assert out.returncode == 2, out.stderr
    assert out.stdout == ""
    assert out.stderr.splitlines() == [f"labkit simulate: {line}" for line in REFUSED]


def test_the_kubeconfig_backend_applies_the_valid_objects_and_names_every_refused_one(api, tmp_path):
    api.applied.clear()
    c = connect("kubeconfig", kubeconfig=api.kubeconfig(tmp_path / "kubeconfig"), read_only=False, progress=False)
    with pytest.raises(ClusterError) as refused:
        c.apply(MIXED)
    c.down()
    assert api.applied == ["good-1", "good-2", "good-3"]
    where = f"context lab (http://127.0.0.1:{api.httpd.server_port})"
    assert refused.value.problems == [  # type: ignore[attr-defined]
        f'{where}: apply ResourceClaim {line.split("/")[1].split(":")[0]}: ResourceClaim.resource.k8s.io '
        f'"{line.split("/")[1].split(":")[0]}" is invalid: {line.split(": ", 1)[1]}' for line in REFUSED]


class _KubectlRefusing(RecordingRunner):
    """kubectl apply against a server that refuses the bad-* claims: it applies the others, prints
    nothing on stdout (-o json prints only after the last object, when all went) and, as kubectl's
    checkErr words them (kubernetes/kubernetes staging/src/k8s.io/kubectl/pkg/cmd/util/helpers.go),
    one `Error from server (Invalid)` line per refused object, or for one refused object with two
    causes `The Kind "name" is invalid: ` and a `* ` line per cause; `get -f -` shows what is stored."""

    def run(self, cmd, *, input=None, check=True, env=None):  # noqa: A002 - the Runner interface
        joined = " ".join(cmd)
        if " apply -o json -f -" in joined or " get -o json --ignore-not-found -f -" in joined:
            self.commands.append(list(cmd))
            self.inputs.append(input)
            docs = list(yaml.safe_load_all(input))
            good = [d for d in docs if not d["metadata"]["name"].startswith("bad-")]
            if " get " in joined:
                return subprocess.CompletedProcess(list(cmd), 0, json.dumps({"kind": "List", "items": good}), "")
            bad = [d["metadata"]["name"] for d in docs if d not in good]
            said = "".join(f'Error from server (Invalid): error when creating "STDIN": ResourceClaim.resource.k8s.io '
                           f'"{name}" is invalid: spec.devices.requests[0].exactly.count: Invalid value\n' for name in bad)
            if len(bad) == 1:
                said = (f'The ResourceClaim "{bad[0]}" is invalid: \n* spec.devices.requests[0].name: Invalid value\n'
                        "* spec.devices.requests[0].exactly.count: Invalid value\n")
            return subprocess.CompletedProcess(list(cmd), 1, "", said)
        return super().run(cmd, input=input, check=check, env=env)


def test_the_kind_backend_reports_every_line_kubectl_printed(tmp_path, monkeypatch):
    monkeypatch.setenv("LABKIT_RUN_DIR", str(tmp_path / "run"))
    c = _attached(tmp_path, _KubectlRefusing())
    with pytest.raises(ClusterError) as refused:
        c.apply(MIXED)
    assert refused.value.problems == [  # type: ignore[attr-defined]
        f'Error from server (Invalid): error when creating "STDIN": ResourceClaim.resource.k8s.io "bad-{i}" is '
        "invalid: spec.devices.requests[0].exactly.count: Invalid value" for i in (1, 2, 3)]
    assert [o["metadata"]["name"] for o in refused.value.stored] == ["good-1", "good-2", "good-3"]  # type: ignore[attr-defined]
    with pytest.raises(ClusterError) as refused:
        c.apply(MIXED[:2])
    assert refused.value.problems == [  # type: ignore[attr-defined]
        f'The ResourceClaim "bad-1" is invalid: spec.devices.requests[0].{field}: Invalid value'
        for field in ("name", "exactly.count")]
