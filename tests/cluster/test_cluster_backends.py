"""Issue 44 item 1: the backends side by side (labkit/cluster/backends/{sim,kubeconfig,local,kind}),
the Kubernetes-API verbs and the API-error mapping written once (backends/kubeapi.py: KubeCluster).

A fake API server on 127.0.0.1 answers what the test sets (a Status of 404, 409, 403, 422 or 500);
the kubeconfig, local and kind backends, each connected to it as it connects to a real one, must
turn the same answer into the same kind of error (exit code), through the one `_call`.

Upstream facts: the Status reasons and codes are k8s.io/apimachinery pkg/api/errors/errors.go
(NewNotFound 404, NewConflict 409, NewForbidden 403, NewInvalid 422); kubectl prints a refused
object's Status as `Error from server (<Reason>): ...` (kubectl pkg/cmd/util/helpers.go, checkErr).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

import labkit.cluster
from labkit.cluster import ClusterError, NotFound, RefusedObjects, connect
from labkit.cluster.backends import availability, backend_class
from labkit.cluster.backends.kind import KindCluster
from labkit.cluster.backends.kind.runner import SubprocessRunner
from labkit.cluster.backends.kubeapi import KubeCluster
from labkit.cluster.backends.kubeconfig import KubeconfigCluster
from labkit.cluster.backends.local import LocalCluster
from labkit.cluster.kube import Kube
from labkit.errors import EXIT_ENGINE, EXIT_INPUT, EXIT_NOT_FOUND, exit_code

_DISCOVERY = {
    "/api": {"items": [{"metadata": {"name": ""}, "versions": [{"version": "v1", "resources": [
        {"resource": "pods", "responseKind": {"kind": "Pod"}, "scope": "Namespaced"},
        {"resource": "configmaps", "responseKind": {"kind": "ConfigMap"}, "scope": "Namespaced"},
        {"resource": "nodes", "responseKind": {"kind": "Node"}, "scope": "Cluster"}]}]}]},
    "/apis": {"items": [{"metadata": {"name": "resource.k8s.io"}, "versions": [{"version": "v1", "resources": [
        {"resource": "resourceslices", "responseKind": {"kind": "ResourceSlice"}, "scope": "Cluster"}]}]}]},
    "/version": {"major": "1", "minor": "37", "gitVersion": "v1.37.0"},
    "/api/v1/nodes": {"kind": "NodeList", "items": []},
}

#: what the server says for each status the test sets (apimachinery's reasons)
REASONS = {404: "NotFound", 409: "Conflict", 403: "Forbidden", 422: "Invalid", 500: "InternalError"}


class FakeApi:
    """An API server on 127.0.0.1 (plain http: no credentials are sent or needed) serving discovery,
    and for every other request the Status `self.status` (its reason, and a message naming it)."""

    def __init__(self) -> None:
        self.status = 404
        self.requests: list[tuple[str, str]] = []
        api = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                path = self.path.split("?")[0]
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    self.rfile.read(length)
                if path in _DISCOVERY:
                    return self._send(200, _DISCOVERY[path])
                api.requests.append((self.command, path))
                code = api.status
                self._send(code, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code,
                                  "reason": REASONS[code], "message": f"the fake server says {REASONS[code]}"})

            do_GET = do_PATCH = do_DELETE = do_POST = _answer  # noqa: N815 - http.server's names

            def _send(self, code: int, doc: dict) -> None:
                body = json.dumps(doc).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_port}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def kubeconfig(self, path: Path) -> Path:
        path.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": "fake",
            "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
            "users": [{"name": "nobody", "user": {}}],
            "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "nobody"}}]}))
        return path


@pytest.fixture
def api() -> Iterator[FakeApi]:
    server = FakeApi()
    yield server
    server.httpd.shutdown()
    server.httpd.server_close()


def _connected(backend: str, api: FakeApi, tmp_path: Path) -> Any:
    """The backend connected to the fake server the way it connects to a real one."""
    if backend == "kubeconfig":
        return connect("kubeconfig", kubeconfig=api.kubeconfig(tmp_path / "kc"), read_only=False, progress=False)
    if backend == "local":  # as LocalCluster._attach: a client on the recorded server
        c = LocalCluster(progress=False)
        c.kube = Kube(api.url, "", None)
        return c
    c = KindCluster(state_dir=tmp_path, runner=SubprocessRunner(), progress=False)  # a live runner:
    api.kubeconfig(c.kubeconfig)  # its kubeconfig, as `kind get kubeconfig` writes it
    return c


def test_the_registry_has_four_backends_side_by_side_each_saying_whether_it_runs_here():
    assert labkit.cluster.backend_names() == ["kind", "kubeconfig", "local", "sim"]
    for name in labkit.cluster.backend_names():
        cls = backend_class(name)
        assert cls.backend == name and cls.__module__.startswith(f"labkit.cluster.backends.{name}")
        ok, why = availability(name)
        assert isinstance(ok, bool) and why.strip()
    assert availability("sim") == (True, backend_class("sim").available()[1])


def test_local_kind_and_kubeconfig_write_no_verb_of_their_own():
    """The verbs and the error mapping live once, in KubeCluster; the backends add a lifecycle."""
    verbs = {"apply", "get", "list", "delete", "_call"}
    for cls in (KubeconfigCluster, LocalCluster, KindCluster):
        assert issubclass(cls, KubeCluster)
        assert not verbs & set(vars(cls)), f"{cls.__name__} defines {sorted(verbs & set(vars(cls)))}"
    assert verbs <= set(vars(KubeCluster))


@pytest.mark.parametrize("backend", ["kubeconfig", "local", "kind"])
@pytest.mark.parametrize(("status", "code"), [(404, EXIT_NOT_FOUND), (403, EXIT_INPUT), (500, EXIT_ENGINE)])
def test_an_api_error_is_the_same_kit_error_on_every_real_backend(api, tmp_path, backend, status, code):
    c = _connected(backend, api, tmp_path)
    api.status = status
    with pytest.raises(ClusterError) as err:
        c.get("Pod", "p1")
    assert exit_code(err.value) == code and "\n" not in str(err.value)
    assert isinstance(err.value, NotFound) == (status == 404)
    if status != 404:
        assert "get pods p1" in str(err.value)
    if status == 403:  # plain http: the credentials were withheld, as client-go withholds them
        assert "Forbidden: the server address is plain http" in str(err.value)
    assert api.requests[-1] == ("GET", "/api/v1/namespaces/default/pods/p1")  # the API, not kubectl
    with pytest.raises(ClusterError) as err:
        c.delete("Pod", "p1")
    assert exit_code(err.value) == code
    assert api.requests[-1] == ("DELETE", "/api/v1/namespaces/default/pods/p1")


@pytest.mark.parametrize("backend", ["kubeconfig", "local"])
@pytest.mark.parametrize("status", [409, 422, 403, 404])
def test_an_object_the_server_refuses_is_a_refused_object_on_every_backend_that_writes_through_the_api(
        api, tmp_path, backend, status):
    c = _connected(backend, api, tmp_path)
    api.status = status
    with pytest.raises(RefusedObjects) as err:
        c.apply({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm", "namespace": "default"}})
    assert exit_code(err.value) == EXIT_INPUT
    said = {"kubeconfig": "apply ConfigMap cm: ", "local": "ConfigMap/cm: "}[backend]  # each backend's words, kept
    assert len(err.value.problems) == 1 and said in err.value.problems[0]
    assert api.requests[-1] == ("PATCH", "/api/v1/namespaces/default/configmaps/cm")


# -- watch: kubectl get --watch's events (apimachinery pkg/watch/watch.go: ADDED, MODIFIED, DELETED, ERROR);
# a watch without a resourceVersion starts with an ADDED for every object there is ----------------------------
def _pod(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]}}


def _seen(events: list[tuple[str, dict]], name: str) -> list[str]:
    return [t for t, o in events if o["metadata"]["name"] == name]


def test_watch_on_the_sim_yields_what_is_there_then_what_changes():
    c = connect("sim", "workshop", progress=False)
    c.apply(_pod("before"))
    c.wait()
    events = c.watch("Pod", "default", timeout=30)
    first = next(events)
    assert first[0] == "ADDED" and first[1]["metadata"]["name"] == "before" and first[1]["kind"] == "Pod"
    c.delete("Pod", "before")
    c.apply(_pod("after"))
    rest = list(events)  # the sim runs until nothing more happens within 30 sim seconds
    assert _seen(rest, "before")[-1] == "DELETED"
    assert _seen(rest, "after")[0] == "ADDED" and "DELETED" not in _seen(rest, "after")
    assert {o["kind"] for _, o in rest} == {"Pod"}


@pytest.mark.local
def test_watch_on_a_local_cluster_yields_the_api_servers_events(local_workshop):
    """On the local lane's workshop cluster (tests/conftest.py)."""
    c = local_workshop
    c.apply({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "w1", "namespace": "default"}})
    events = c.watch("ConfigMap", "default", timeout=5)
    first = []
    for event_type, obj in events:  # what is there: w1, and kube-root-ca.crt when its controller made it
        first.append((event_type, obj["metadata"]["name"]))
        if obj["metadata"]["name"] == "w1":
            break
    assert first[-1] == ("ADDED", "w1") and {t for t, _ in first} == {"ADDED"}
    c.delete("ConfigMap", "w1")
    rest = list(events)  # the server ends the watch after timeoutSeconds
    assert "DELETED" in _seen(rest, "w1")
    assert all(o["kind"] == "ConfigMap" for _, o in rest)
