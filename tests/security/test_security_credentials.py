"""Issue #41, point 1: credentials as client-go handles them, and a kubeconfig or a server that
misbehaves gives one line, in bounded time.

Real servers on 127.0.0.1 (a fake API server over http or https that records the Authorization
header it gets, one that answers HTML or garbage, one that accepts and never answers), kubeconfigs
in tmp_path, exec plugins as small scripts in tmp_path; driven through the CLI as a user types it
(`labkit explain pod ...`, `labkit snapshot ...`, through tests/cliserver.py) and through
`connect("kubeconfig", ...)`.

Upstream facts checked here:
- k8s.io/client-go tools/clientcmd/client_config.go (DirectClientConfig.ClientConfig): the user's
  auth info is read only `if restclient.IsConfigTransportTLS(...)`; rest/url_utils.go
  (DefaultServerURL): a server without a scheme is http when no TLS settings come with it.
- client-go tools/clientcmd/client_config.go (getUserIdentificationPartialConfig) reads tokenFile;
  transport/token_source.go trims it (strings.TrimSpace).
- client-go plugin/pkg/client/auth/exec/exec.go: KUBERNETES_EXEC_INFO, spec.interactive, the
  messages "exec: executable %s not found", "exec: executable %s failed with exit code %d",
  "decoding stdout", "exec plugin is configured to use API version %s, plugin returned version %s",
  "exec plugin didn't return a status field", "exec plugin cannot support interactive mode:
  standard input is not a terminal"; tools/clientcmd/validation.go: "interactiveMode must be
  specified for %v to use exec authentication plugin" (v1; v1beta1 defaults to IfAvailable,
  tools/clientcmd/api/v1/defaults.go); rest/exec.go (ConfigToExecCluster): spec.cluster carries
  certificate-authority-data read from the certificate-authority file; tools/clientcmd/loader.go
  (GetAuthInfoFileReferences): a relative exec command with a path separator is the kubeconfig's.
"""

from __future__ import annotations

import base64
import json
import socket
import ssl
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from labkit.cluster import connect
from labkit.cluster.backends.local import pki
from labkit.cluster.base import ClusterError, ClusterInputError
from tests.cliserver import CliServer

pytestmark = pytest.mark.slow  # heavy: `make check` leaves it out, `make test` runs it

V1 = "client.authentication.k8s.io/v1"
V1BETA1 = "client.authentication.k8s.io/v1beta1"
PLAIN_HTTP = "the server address is plain http, so the context's credentials were not sent"

_DISCOVERY = {
    "/api": {"items": [{"metadata": {"name": ""}, "versions": [{"version": "v1", "resources": [
        {"resource": "pods", "responseKind": {"kind": "Pod"}, "scope": "Namespaced"},
        {"resource": "nodes", "responseKind": {"kind": "Node"}, "scope": "Cluster"}]}]}]},
    "/apis": {"items": [{"metadata": {"name": "resource.k8s.io"}, "versions": [{"version": "v1", "resources": [
        {"resource": "resourceslices", "responseKind": {"kind": "ResourceSlice"}, "scope": "Cluster"}]}]}]},
    "/version": {"major": "1", "minor": "35", "gitVersion": "v1.35.0"},
    "/api/v1/nodes": {"kind": "NodeList", "items": []},
}


class FakeApiServer:
    """An API server on 127.0.0.1 (http, or https with `tls`) serving what `connect` reads, answering
    401 unless the request carries `Bearer <token>`; `.auth` lists the Authorization headers it got.
    `answer` (content type, body) replaces every answer (an HTML page, garbage)."""

    def __init__(self, token: str | None = None, tls: pki.Pki | None = None,
                 answer: tuple[str, bytes] | None = None) -> None:
        self.auth: list[str | None] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                server.auth.append(self.headers.get("Authorization"))
                path = self.path.split("?")[0]
                if answer is not None:
                    self._send(200, answer[0], answer[1])
                elif token is not None and self.headers.get("Authorization") != f"Bearer {token}":
                    self._status(401, "Unauthorized", "Unauthorized")
                elif path in _DISCOVERY:
                    self._send(200, "application/json", json.dumps(_DISCOVERY[path]).encode())
                else:
                    self._status(404, "NotFound", f"{path} not found")

            def _status(self, code: int, reason: str, message: str) -> None:
                body = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": reason,
                        "message": message, "code": code}
                self._send(code, "application/json", json.dumps(body).encode())

            def _send(self, code: int, ctype: str, body: bytes) -> None:
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        if tls is not None:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(str(tls.serving_cert), str(tls.serving_key))
            self.httpd.socket = ctx.wrap_socket(self.httpd.socket, server_side=True)
        self.url = f"{'https' if tls else 'http'}://127.0.0.1:{self.httpd.server_port}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class SilentServer:
    """Accepts TCP connections and never says anything."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.held: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                self.held.append(self.sock.accept()[0])
            except OSError:  # closed: the test is over
                return

    def close(self) -> None:
        self.sock.close()
        for conn in self.held:
            conn.close()


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> pki.Pki:
    return pki.generate(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def cli() -> Iterator[CliServer]:
    server = CliServer()
    yield server
    server.close()


@pytest.fixture
def servers() -> Iterator[list[Any]]:
    started: list[Any] = []
    yield started
    for server in started:
        server.close()


def kubeconfig(tmp_path: Path, server: str, user: dict | None, *, cluster: dict | None = None,
               name: str = "kubeconfig", **top: Any) -> Path:
    path = tmp_path / name
    doc = {"apiVersion": "v1", "kind": "Config", "current-context": "lab",
           "clusters": [{"name": "lab", "cluster": {"server": server, **(cluster or {})}}],
           "contexts": [{"name": "lab", "context": {"cluster": "lab", "user": "me"}}],
           "users": [{"name": "me", "user": user or {}}], **top}
    path.write_text(yaml.safe_dump(doc))
    return path


def plugin(tmp_path: Path, body: str, name: str = "plugin.py") -> Path:
    """An executable Python script in tmp_path; `body` runs with json, os, sys, time imported."""
    path = tmp_path / name
    path.write_text(f"#!{sys.executable}\nimport json, os, sys, time\n{body}\n")
    path.chmod(0o755)
    return path


def credential(api_version: str, **status: Any) -> str:
    return json.dumps({"apiVersion": api_version, "kind": "ExecCredential", "status": status})


def explain(cli: CliServer, kc: Path) -> tuple[int, str, str]:
    return cli.run("labkit", ["explain", "pod", "x", "--kubeconfig", str(kc), "--context", "lab"])


def last_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert lines and "Traceback" not in err, err
    return lines[-1]


# -- no credentials over plain http --------------------------------------------------------------
@pytest.mark.parametrize("user, scheme", [
    ({"token": "secret"}, "http://"),
    ({"token": "secret"}, ""),  # no scheme: http, as kubectl reads it
    ({"username": "me", "password": "secret"}, "http://"),
    ({"tokenFile": "token.txt"}, "http://"),
    ({"exec": {"apiVersion": V1, "command": "./plugin.py", "interactiveMode": "Never"}}, "http://"),
], ids=["token", "token-no-scheme", "basic-auth", "tokenFile", "exec"])
def test_no_credentials_go_to_a_plain_http_server(tmp_path, cli, servers, user, scheme):
    api = FakeApiServer(token="secret")
    servers.append(api)
    (tmp_path / "token.txt").write_text("secret\n")
    ran = tmp_path / "ran"
    plugin(tmp_path, f"open({str(ran)!r}, 'w').close()\nprint({credential(V1, token='secret')!r})")
    kc = kubeconfig(tmp_path, scheme + api.url.removeprefix("http://"), user)

    rc, _, err = explain(cli, kc)
    assert rc == 2 and err.count("\n") == 1, err
    assert f"context lab ({api.url}): /version: Unauthorized: {PLAIN_HTTP} (kubectl sends them only over https)" in err
    with pytest.raises(ClusterInputError, match=PLAIN_HTTP):
        connect("kubeconfig", kubeconfig=kc, context="lab", progress=False)
    assert api.auth and not any(api.auth), api.auth  # it was asked, and never got a credential
    assert not ran.exists()  # the exec plugin was not even run


# -- over https: tokenFile and exec plugins as client-go reads and runs them ------------------------
def test_a_token_file_is_read_trimmed_and_sent_over_https(tmp_path, cli, servers, certs):
    api = FakeApiServer(token="abc", tls=certs)
    servers.append(api)
    (tmp_path / "token").write_text("abc\n")
    kc = kubeconfig(tmp_path, api.url, {"tokenFile": "token"}, cluster={"certificate-authority": str(certs.ca_cert)})

    rc, _, err = explain(cli, kc)
    assert (rc, last_line(err)) == (3, 'labkit explain: Pod "x" not found in namespace default'), err
    c = connect("kubeconfig", kubeconfig=kc, progress=False)
    assert c.server_version == "v1.35.0"
    c.down()
    assert set(api.auth) == {"Bearer abc"}


@pytest.mark.parametrize("api_version, mode", [(V1, "Never"), (V1BETA1, None)])
def test_an_exec_plugin_runs_as_kubectl_runs_it(tmp_path, cli, servers, certs, api_version, mode):
    api = FakeApiServer(token="from-plugin", tls=certs)
    servers.append(api)
    record = tmp_path / "runs.jsonl"
    (tmp_path / "bin").mkdir()
    plugin(tmp_path / "bin", f"""
with open({str(record)!r}, "a") as fh:
    fh.write(json.dumps({{"info": json.loads(os.environ["KUBERNETES_EXEC_INFO"]),
                          "env": os.environ.get("FROM_KUBECONFIG"), "stdin": sys.stdin.read()}}) + "\\n")
print({credential(api_version, token="from-plugin", expirationTimestamp="2999-01-01T00:00:00Z")!r})""")
    exec_spec = {"apiVersion": api_version, "command": "./bin/plugin.py", "provideClusterInfo": True,
                 "env": [{"name": "FROM_KUBECONFIG", "value": "yes"}]}
    if mode:
        exec_spec["interactiveMode"] = mode
    extension = {"audience": "lab"}
    kc = kubeconfig(tmp_path, api.url, {"exec": exec_spec}, cluster={
        "certificate-authority": str(certs.ca_cert),
        "extensions": [{"name": "client.authentication.k8s.io/exec", "extension": extension}]})

    rc, _, err = explain(cli, kc)  # run from the repository: the command is the kubeconfig's ./bin/plugin.py
    assert (rc, last_line(err)) == (3, 'labkit explain: Pod "x" not found in namespace default'), err
    assert set(api.auth) == {"Bearer from-plugin"} and len(api.auth) >= 4
    runs = [json.loads(line) for line in record.read_text().splitlines()]
    assert len(runs) == 1  # one run for all requests: the credential had not expired
    info = runs[0]["info"]
    assert info["apiVersion"] == api_version and info["kind"] == "ExecCredential"
    assert info["spec"]["interactive"] is False  # stdin is not a terminal
    assert info["spec"]["cluster"] == {
        "server": api.url, "certificate-authority-data": base64.b64encode(certs.ca_cert.read_bytes()).decode(),
        "config": extension}
    assert runs[0]["env"] == "yes" and runs[0]["stdin"] == ""


@pytest.mark.parametrize("exec_spec, body, code, says", [
    ({"command": "labkit-no-such-plugin", "installHint": "install it with:\n  \x1b[1mbrew install lab\x1b[0m"}, "", 2,
     "exec: executable labkit-no-such-plugin not found; fix: install it with: brew install lab"),
    ({}, "print('token expired: run lab-login', file=sys.stderr); sys.exit(3)", 1,
     "exec: executable {plugin} failed with exit code 3"),
    ({}, "print('<html>login</html>')", 1, "decoding stdout: not an ExecCredential JSON object"),
    ({}, f"print({credential(V1BETA1, token='t')!r})", 1,
     f"exec plugin is configured to use API version {V1}, plugin returned version {V1BETA1}"),
    ({}, "print(json.dumps({'apiVersion': '" + V1 + "', 'kind': 'ExecCredential'}))", 1,
     "exec plugin didn't return a status field"),
    ({}, f"print({credential(V1)!r})", 1, "exec plugin didn't return a token or cert/key pair"),
    ({"interactiveMode": None}, "", 2, "interactiveMode must be specified to use exec authentication plugin"),
    ({"interactiveMode": "Always"}, "", 2,
     "exec plugin cannot support interactive mode: standard input is not a terminal"),
], ids=["missing", "exit-code", "not-json", "other-version", "no-status", "no-token", "no-interactive-mode",
        "always-without-terminal"])
def test_exec_plugin_failures_are_one_line_in_kubectls_words(tmp_path, cli, servers, certs, exec_spec, body, code,
                                                             says):
    api = FakeApiServer(token="t", tls=certs)
    servers.append(api)
    script = plugin(tmp_path, body)
    spec = {"apiVersion": V1, "command": str(script), "interactiveMode": "Never", **exec_spec}
    kc = kubeconfig(tmp_path, api.url, {"exec": {k: v for k, v in spec.items() if v is not None}},
                    cluster={"certificate-authority": str(certs.ca_cert)})

    rc, _, err = explain(cli, kc)
    assert rc == code, err
    assert last_line(err).startswith(f"labkit explain: kubeconfig {kc}, user 'me': " + (
        "getting credentials: " if "interactiveMode must" not in says else "") + says.format(plugin=script)), err
    if "exit code" in says:  # the plugin's own stderr comes first, as with kubectl
        assert err.splitlines()[0] == "token expired: run lab-login"
    else:
        assert err.count("\n") == 1, err
    assert not any(api.auth)


def test_an_exec_plugin_that_never_finishes_is_stopped(tmp_path, servers, certs):
    api = FakeApiServer(token="t", tls=certs)
    servers.append(api)
    script = plugin(tmp_path, "time.sleep(3600)")
    kc = kubeconfig(tmp_path, api.url, {"exec": {"apiVersion": V1, "command": str(script), "interactiveMode": "Never"}},
                    cluster={"certificate-authority": str(certs.ca_cert)})
    with pytest.raises(ClusterError, match=rf"^kubeconfig {kc}, user 'me': getting credentials: exec: executable "
                                           rf"{script} did not finish within 0\.5 s and was stopped"):
        connect("kubeconfig", kubeconfig=kc, progress=False, exec_timeout=0.5)
    assert not api.auth


# -- a kubeconfig that is wrong: one line naming the thing ---------------------------------------
def test_a_missing_token_file_is_one_line(tmp_path, cli, certs):
    kc = kubeconfig(tmp_path, "https://127.0.0.1:1", {"tokenFile": "gone/token"},
                    cluster={"certificate-authority": str(certs.ca_cert)})
    rc, _, err = cli.run("labkit", ["snapshot", "-o", "-", "--kubeconfig", str(kc)])
    assert rc == 2 and err.count("\n") == 1, err
    assert err.strip() == (f"labkit snapshot: kubeconfig {kc}, user 'me': tokenFile {tmp_path}/gone/token: no such "
                           "file; give users[].user.tokenFile as the file holding the token")


def test_a_current_context_that_is_not_there_is_one_line(tmp_path, cli):
    kc = kubeconfig(tmp_path, "https://127.0.0.1:1", {"token": "t"}, **{"current-context": "gone"})
    rc, _, err = cli.run("labkit", ["snapshot", "-o", "-", "--kubeconfig", str(kc)])
    assert rc == 2 and err.count("\n") == 1, err
    assert f"kubeconfig {kc}: current-context 'gone' is not one of its contexts; pass context=NAME (--context), " \
           "one of: lab" in err


def test_a_kubeconfig_alias_bomb_is_refused_by_the_bounded_reader(tmp_path, cli):
    kc = kubeconfig(tmp_path, "https://127.0.0.1:1", {"token": "t"})
    levels = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    levels += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 9)]
    kc.write_text(kc.read_text() + "preferences:\n" + "".join(f"  {line}\n" for line in levels))
    rc, _, err = cli.run("labkit", ["snapshot", "-o", "-", "--kubeconfig", str(kc)])
    assert rc == 2 and err.count("\n") == 1, err
    assert f"labkit snapshot: kubeconfig {kc}:doc 1: document contains excessive aliasing" in err


# -- a server that is not an API server, or says nothing: one line, bounded ----------------------
@pytest.mark.parametrize("answer, says", [
    (("text/html", b"<html><body>Sign in to the proxy</body></html>"),
     "the answer is not JSON (text/html: '<html><body>Sign in to the proxy</body></html>')"),
    (("application/json", b"{not json at all"), "the answer is not JSON (application/json: '{not json at all')"),
], ids=["html", "garbage"])
def test_a_server_that_answers_html_or_garbage_is_one_line(tmp_path, cli, servers, answer, says):
    api = FakeApiServer(answer=answer)
    servers.append(api)
    kc = kubeconfig(tmp_path, api.url, None)
    rc, _, err = explain(cli, kc)
    assert rc == 1 and err.count("\n") == 1, err
    assert err.strip() == (f"labkit explain: context lab ({api.url}): /version: /version: {says}, not what a "
                           "Kubernetes API server sends; check the server address")


@pytest.mark.parametrize("scheme", ["http", "https"])
def test_a_server_that_never_answers_is_one_line_within_the_request_timeout(tmp_path, servers, scheme):
    silent = SilentServer()
    servers.append(silent)
    url = f"{scheme}://127.0.0.1:{silent.port}"
    kc = kubeconfig(tmp_path, url, {"token": "t"}, cluster={"insecure-skip-tls-verify": True})
    with pytest.raises(ClusterError) as caught:
        connect("kubeconfig", kubeconfig=kc, progress=False, request_timeout=0.5)
    assert str(caught.value) == (f"cannot reach the API server of context lab ({url}): /version: no answer within "
                                 "0.5 s (request_timeout); check the server address in the kubeconfig and that the "
                                 "cluster is running")
