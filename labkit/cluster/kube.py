"""A small dict-in/dict-out REST client for one API server, built on the kubernetes client's
Configuration + connection pool. Kinds are resolved through the server's aggregated discovery,
so any built-in or CRD kind works by name ("Pod", "pods", "resourceclaim", "deviceclasses").

The kubernetes client is loaded by :func:`client` when a live cluster is connected, not when this
module is imported: the backends that import it (local, kind, kubeconfig) then load without it, so
the sim course, `labkit` on a pure-Python install and a browser tab (Pyodide) never need it.

Credentials are handled as kubectl (client-go) handles them: :func:`kubeconfig_configuration` reads
a kubeconfig through labkit's bounded YAML reader, reads a user's credentials only when the server
is https (over plain http none are sent), runs `exec` plugins (:class:`ExecPlugin`) and re-reads a
`tokenFile` (:class:`TokenFile`) as client-go does, and hands the rest to the kubernetes client's
KubeConfigLoader. Every request is bounded: :class:`Kube`'s `timeout` is both the connect timeout
and the longest wait for the next bytes of an answer; an exec plugin gets `EXEC_TIMEOUT`."""

from __future__ import annotations

import base64
import contextlib
import datetime as dt
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import IO, TYPE_CHECKING, Any
from urllib.parse import quote, urlencode, urlsplit

from labkit.api.load import LoadError, path_problem, read_documents
from labkit.cluster.base import ClusterError, ClusterInputError, MissingPackage
from labkit.errors import EngineError

if TYPE_CHECKING:
    from kubernetes import client as k8s


def client(backend: str = "kubeconfig") -> ModuleType:
    """`kubernetes.client`, or MissingPackage naming `backend` when the client is not installed."""
    try:
        from kubernetes import client as k8s_client
    except ModuleNotFoundError as exc:
        raise MissingPackage(backend, (exc.name or "kubernetes").split(".")[0]) from None
    return k8s_client


class ApiError(EngineError):
    """A non-2xx answer from the API server: `.status`, `.reason`, `.message`."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.status, self.reason, self.message = status, reason, message


class BadAnswer(ApiError):
    """A 2xx answer that no API server gives (HTML, text, broken JSON): the address is not one."""

    def __init__(self, path: str, what: str) -> None:
        super().__init__(200, "BadAnswer", f"{path}: the answer is {what}, not what a Kubernetes API server "
                         "sends; check the server address")


def snippet(text: str, limit: int = 80) -> str:
    """The first line of `text`, cut to `limit` characters (what an error may quote of an answer)."""
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    return first if len(first) <= limit else first[:limit] + "..."


# -- credentials, as client-go handles them ----------------------------------------------------
#: seconds an exec credential plugin may run before it is stopped (client-go has no bound; a
#: plugin that opens a browser for a login still gets time for a person to finish it)
EXEC_TIMEOUT = 120.0
#: bytes of an exec plugin's stdout or of a tokenFile read at most (an ExecCredential is small)
MAX_CREDENTIAL_BYTES = 1 << 20
#: seconds a tokenFile's token is used before the file is read again (client-go's cached file
#: token source, transport/token_source.go: projected tokens rotate)
TOKEN_FILE_PERIOD = 60.0
EXEC_API_VERSIONS = ("client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1")
EXEC_INFO_ENV = "KUBERNETES_EXEC_INFO"
PLUGIN_DOCS = "https://kubernetes.io/docs/reference/access-authn-authz/authentication/#client-go-credential-plugins"
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def server_url(server: str, *, tls: bool = False) -> str:
    """`server` with a scheme, as client-go's rest.DefaultServerURL gives it: a host or host:port
    without one is https only when TLS settings come with it (`tls`), else http."""
    parts = urlsplit(server)
    if parts.scheme and parts.netloc:
        return server.rstrip("/")
    return ("https://" if tls else "http://") + server.rstrip("/")


def is_tls(server: str) -> bool:
    """Whether credentials may be sent to `server` (client-go's rest.IsConfigTransportTLS)."""
    return urlsplit(server).scheme == "https"


def withhold_credentials(cfg: k8s.Configuration) -> None:
    """Drop every credential a Configuration holds: client-go reads a kubeconfig user only when the
    server is https (tools/clientcmd/client_config.go), so a token, basic auth, a client
    certificate or an exec plugin is never sent over plain http."""
    cfg.api_key, cfg.api_key_prefix = {}, {}
    cfg.refresh_api_key_hook = None
    cfg.username = cfg.password = None
    cfg.cert_file = cfg.key_file = None


def _read_bounded(path: Path, what: str) -> bytes:
    """A small credential file (a FIFO or a device would block or never end: refused by path_problem)."""
    problem = path_problem(path, what)
    if problem:
        raise ValueError(problem)
    with open(path, "rb") as fh:
        data = fh.read(MAX_CREDENTIAL_BYTES + 1)
    if len(data) > MAX_CREDENTIAL_BYTES:
        raise ValueError(f"larger than {MAX_CREDENTIAL_BYTES} bytes")
    return data


class TokenFile:
    """A user's `tokenFile`: read (trimmed) when first needed and again every `TOKEN_FILE_PERIOD`
    seconds, as client-go's cached file token source; a failed re-read keeps the last token."""

    def __init__(self, path: Path, who: str) -> None:
        self.path, self.who = path, who
        self._token, self._read_at = "", -TOKEN_FILE_PERIOD

    def token(self) -> str:
        if time.monotonic() - self._read_at < TOKEN_FILE_PERIOD:
            return self._token
        try:
            token = _read_bounded(self.path, "users[].user.tokenFile as the file holding the token").decode(
                "utf-8", "replace").strip()
            if not token:  # client-go's file token source (transport/token_source.go) refuses it too
                raise ValueError("read empty token from file")
            self._token = token
        except (OSError, ValueError) as exc:
            if not self._token:
                raise ClusterInputError(f"{self.who}: tokenFile {self.path}: "
                                        f"{getattr(exc, 'strerror', None) or exc}") from None
        self._read_at = time.monotonic()
        return self._token


def _stdin_is_terminal() -> bool:
    try:
        return sys.stdin is not None and os.isatty(sys.stdin.fileno())
    except (OSError, ValueError, AttributeError):  # no stdin, or one without a descriptor (a notebook)
        return False


def _parse_time(value: Any) -> dt.datetime:
    when = dt.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    return when if when.tzinfo else when.replace(tzinfo=dt.UTC)


class ExecPlugin:
    """A kubeconfig user's `exec` credential plugin, run as client-go runs it
    (plugin/pkg/client/auth/exec/exec.go): the environment plus the user's `env` plus
    KUBERNETES_EXEC_INFO (an ExecCredential: apiVersion, `spec.interactive`, `spec.cluster` with
    provideClusterInfo); stdin is the terminal only when interactive (interactiveMode Never,
    IfAvailable: when stdin is a terminal, Always: it must be); stdout is parsed as an
    ExecCredential of the same apiVersion, whose `status` gives a token or a client certificate
    and key, kept until `expirationTimestamp`. Failures are worded as kubectl words them. What
    client-go lacks: the plugin is stopped after `timeout` seconds, its stdout is bounded, and its
    stderr is passed on line by line to sys.stderr when not interactive (a notebook shows it)."""

    def __init__(self, spec: dict, *, who: str, base: Path, cluster: dict | None,
                 timeout: float = EXEC_TIMEOUT) -> None:
        self.who, self.timeout = who, timeout
        problems = []
        command = spec.get("command")
        if not isinstance(command, str) or not command:
            problems.append("command must be specified to use exec authentication plugin")
            command = ""
        self.api_version = spec.get("apiVersion")
        if not self.api_version:
            problems.append("apiVersion must be specified to use exec authentication plugin")
        elif self.api_version not in EXEC_API_VERSIONS:
            problems.append(f"exec plugin: invalid apiVersion {self.api_version!r} (use one of: "
                            f"{', '.join(EXEC_API_VERSIONS)})")
        mode = spec.get("interactiveMode") or (
            "IfAvailable" if self.api_version == "client.authentication.k8s.io/v1beta1" else "")
        if not mode:
            problems.append("interactiveMode must be specified to use exec authentication plugin "
                            "(Never, IfAvailable or Always)")
        elif mode not in ("Never", "IfAvailable", "Always"):
            problems.append(f"invalid interactiveMode: {mode!r} (Never, IfAvailable or Always)")
        self.mode = mode
        args, env = spec.get("args") or [], spec.get("env") or []
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            problems.append("exec: args must be a list of strings")
            args = []
        self.env: dict[str, str] = {}
        for item in env if isinstance(env, list) else [None]:
            if not isinstance(item, dict) or not item.get("name"):
                problems.append("env variable name must be specified to use exec authentication plugin")
            else:
                self.env[str(item["name"])] = str(item.get("value") or "")
        if problems:
            raise ClusterInputError(f"{who}: {problems[0]}", fix="fix users[].user.exec in the kubeconfig")
        # a relative path is the kubeconfig's (client-go's ResolveLocalPaths); a bare name is looked up in PATH
        if os.sep in command and not os.path.isabs(command):
            command = str(base / command)
        self.command, self.args = os.path.normpath(command) if os.sep in command else command, list(args)
        hint = spec.get("installHint") or ""
        self.install_hint = " ".join(_ANSI.sub("", str(hint)).split())
        self.cluster = cluster  # spec.cluster, given with provideClusterInfo
        self._status: dict | None = None
        self._expiry: dt.datetime | None = None
        self._lock = threading.Lock()

    def credential(self) -> dict:
        """The plugin's `status` (token, or clientCertificateData + clientKeyData), run again once expired."""
        with self._lock:
            if self._status is None or (self._expiry is not None and dt.datetime.now(dt.UTC) >= self._expiry):
                self._status = self._run()
            return self._status

    def token(self) -> str:
        return str(self.credential().get("token") or "")

    def _fail(self, message: str, *, fix: str | None = None, cls: type[ClusterError] = ClusterError) -> ClusterError:
        return cls(f"{self.who}: getting credentials: {message}", fix=fix)

    def _interactive(self) -> bool:
        if self.mode == "Never":
            return False
        if self.mode == "Always" and not _stdin_is_terminal():
            raise self._fail("exec plugin cannot support interactive mode: standard input is not a terminal",
                             fix="run it from a terminal, or set users[].user.exec.interactiveMode to IfAvailable "
                             "or Never", cls=ClusterInputError)
        return _stdin_is_terminal()

    def _executable(self) -> str:
        if os.sep in self.command:
            return self.command
        found = shutil.which(self.command)
        if found is None:
            raise self._fail(f"exec: executable {self.command} not found",
                             fix=self.install_hint or f"install it (see {PLUGIN_DOCS}) or fix "
                             "users[].user.exec.command in the kubeconfig", cls=ClusterInputError)
        return found

    def _run(self) -> dict:
        interactive = self._interactive()
        spec: dict[str, Any] = {"interactive": interactive}
        if self.cluster is not None:
            spec["cluster"] = self.cluster
        info = {"kind": "ExecCredential", "apiVersion": self.api_version, "spec": spec}
        env = {**os.environ, **self.env, EXEC_INFO_ENV: json.dumps(info)}
        try:
            proc = subprocess.Popen([self._executable(), *self.args], env=env,
                                    stdin=None if interactive else subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=None if interactive else subprocess.PIPE,
                                    start_new_session=not interactive)
        except OSError as exc:
            raise self._fail(f"exec: fork/exec {self.command}: {(exc.strerror or str(exc)).lower()}",
                             fix="fix users[].user.exec.command in the kubeconfig", cls=ClusterInputError) from None
        except ValueError as exc:  # a NUL byte in an argument or the environment, '=' in a variable's name
            raise self._fail(f"exec: fork/exec {self.command}: invalid argument ({exc})",
                             fix="fix users[].user.exec.args and env in the kubeconfig", cls=ClusterInputError) from None
        out: list[bytes] = []
        readers = [threading.Thread(target=_read_capped, args=(proc.stdout, out), daemon=True)]
        if proc.stderr is not None:
            readers.append(threading.Thread(target=_pass_on, args=(proc.stderr,), daemon=True))
        for reader in readers:
            reader.start()
        deadline = time.monotonic() + self.timeout
        try:
            for reader in readers:  # its output ends when it (and whatever it started) is done
                reader.join(max(0.0, deadline - time.monotonic()))
            if any(reader.is_alive() for reader in readers):
                raise subprocess.TimeoutExpired(self.command, self.timeout)
            proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            _stop(proc, group=not interactive)
            raise self._fail(f"exec: executable {self.command} did not finish within {self.timeout:g} s and was "
                             "stopped", fix="check that the plugin can reach its identity provider, or log in "
                             "with it first") from None
        if proc.returncode != 0:
            how = (f"failed with exit code {proc.returncode}" if proc.returncode > 0
                   else f"was killed by signal {-proc.returncode}")
            raise self._fail(f"exec: executable {self.command} {how}")
        return self._status_of(b"".join(out))

    def _status_of(self, data: bytes) -> dict:
        """The `status` of the ExecCredential on the plugin's stdout (client-go's checks and words)."""
        if len(data) > MAX_CREDENTIAL_BYTES:
            raise self._fail(f"decoding stdout: more than {MAX_CREDENTIAL_BYTES} bytes (an ExecCredential is a "
                             "small JSON object)")
        try:
            cred = json.loads(data.decode("utf-8"))
        except (ValueError, RecursionError) as exc:
            raise self._fail(f"decoding stdout: not an ExecCredential JSON object ({exc}; it starts "
                             f"{snippet(data.decode('utf-8', 'replace'), 40)!r})") from None
        if not isinstance(cred, dict) or cred.get("kind") != "ExecCredential":
            kind = cred.get("kind") if isinstance(cred, dict) else type(cred).__name__
            raise self._fail(f"decoding stdout: kind {kind!r}, not ExecCredential")
        if cred.get("apiVersion") != self.api_version:
            raise self._fail(f"exec plugin is configured to use API version {self.api_version}, plugin returned "
                             f"version {cred.get('apiVersion')}")
        status = cred.get("status")
        if not isinstance(status, dict):
            raise self._fail("exec plugin didn't return a status field")
        fields = ("token", "clientCertificateData", "clientKeyData")
        if any(not isinstance(status.get(f) or "", str) for f in fields):
            raise self._fail("decoding stdout: status.token, clientCertificateData and clientKeyData are strings")
        token, cert, key = (status.get(f) or "" for f in fields)
        if not (token or cert or key):
            raise self._fail("exec plugin didn't return a token or cert/key pair")
        if bool(cert) != bool(key):
            raise self._fail("exec plugin returned only certificate or key, not both")
        self._expiry = None
        if status.get("expirationTimestamp"):
            try:
                self._expiry = _parse_time(status["expirationTimestamp"])
            except (ValueError, TypeError):
                raise self._fail(f"decoding stdout: status.expirationTimestamp {status['expirationTimestamp']!r} "
                                 "is not an RFC 3339 time") from None
        return {"token": token, "clientCertificateData": cert, "clientKeyData": key}


def _read_capped(stream: IO[bytes], out: list[bytes]) -> None:
    """Read `stream` to its end, keeping at most MAX_CREDENTIAL_BYTES + 1 bytes (the plugin is never blocked)."""
    kept = 0
    for chunk in iter(lambda: stream.read(65536), b""):
        if kept <= MAX_CREDENTIAL_BYTES:
            out.append(chunk[:MAX_CREDENTIAL_BYTES + 1 - kept])
            kept += len(out[-1])
    stream.close()


def _pass_on(stream: IO[bytes]) -> None:
    """A plugin's stderr, line by line to sys.stderr (where kubectl lets it write: its prompts, a login URL)."""
    for line in iter(stream.readline, b""):
        with contextlib.suppress(Exception):  # a closed sys.stderr: nothing more to show
            sys.stderr.write(line[:4096].decode("utf-8", "replace"))
            sys.stderr.flush()
    stream.close()


def _stop(proc: subprocess.Popen, *, group: bool) -> None:
    """Kill a plugin not yet waited for (its pid, and so its group's id, cannot have been reused)."""
    with contextlib.suppress(OSError):
        if group:  # the plugin runs in its own session: stop what it started too
            os.killpg(proc.pid, signal.SIGKILL)
        else:
            proc.kill()
    proc.wait()


def _named(doc: dict, section: str, name: str, origin: str) -> dict | None:
    """The `section` entry called `name` (its inner mapping), None when there is none."""
    entries = doc.get(section) or []
    if not isinstance(entries, list):
        raise ClusterInputError(f"{origin}: {section}: must be a list of {{name, {section[:-1]}}} entries")
    for entry in entries:
        if isinstance(entry, dict) and entry.get("name") == name:
            inner = entry.get(section[:-1])
            if inner is not None and not isinstance(inner, dict):
                raise ClusterInputError(f"{origin}: {section}[name={name}].{section[:-1]}: must be a mapping")
            return inner or {}
    return None


def _cluster_info(cluster: dict, base: Path, origin: str) -> dict:
    """The `spec.cluster` an exec plugin with provideClusterInfo gets (client-go's rest.ConfigToExecCluster)."""
    info: dict[str, Any] = {"server": cluster.get("server", "")}
    for key in ("tls-server-name", "insecure-skip-tls-verify", "proxy-url", "disable-compression"):
        if cluster.get(key):
            info[key] = cluster[key]
    if cluster.get("certificate-authority-data"):
        info["certificate-authority-data"] = cluster["certificate-authority-data"]
    elif cluster.get("certificate-authority"):
        path = base / str(cluster["certificate-authority"])
        try:
            info["certificate-authority-data"] = base64.b64encode(_read_bounded(path, "a CA file")).decode()
        except (OSError, ValueError) as exc:
            raise ClusterInputError(f"{origin}: failed to load CA bundle for execProvider: certificate-authority "
                                    f"{path}: {getattr(exc, 'strerror', None) or exc}") from None
    extensions = cluster.get("extensions") or []
    if not isinstance(extensions, list):
        raise ClusterInputError(f"{origin}: clusters[].cluster.extensions: must be a list of {{name, extension}} "
                                "entries", fix="fix the cluster's extensions")
    for ext in extensions:
        if isinstance(ext, dict) and ext.get("name") == "client.authentication.k8s.io/exec":
            info["config"] = ext.get("extension")
    return info


def kubeconfig_configuration(path: Path, context: str | None = None, *,
                             exec_timeout: float = EXEC_TIMEOUT) -> tuple[k8s.Configuration, str]:
    """The kubernetes-client Configuration for `context` (None: the current-context) of the
    kubeconfig at `path`, and the context's name. The file is read by labkit's bounded reader
    (alias bombs, duplicate keys: one line); the user's credentials are read only for an https
    server (a server without a scheme is http, as in kubectl); a tokenFile and an exec plugin are
    ours (`TokenFile`, `ExecPlugin`), the rest (client certificates, CA, auth-provider, proxy) is the
    kubernetes client's KubeConfigLoader. Every problem is one ClusterInputError/ClusterError line."""
    k8s_client = client()
    from kubernetes.config.config_exception import ConfigException
    from kubernetes.config.kube_config import KubeConfigLoader

    origin = f"kubeconfig {path}"
    try:
        docs = read_documents(path)
    except LoadError as exc:
        raise ClusterInputError("\n".join(f"kubeconfig {p}" for p in exc.problems)) from None
    doc = docs[0] if docs else None  # client-go reads the first YAML document
    if doc is None:
        doc = {}
    if not isinstance(doc, dict):
        raise ClusterInputError(f"{origin}: not a kubeconfig (a {type(doc).__name__}, not a mapping)",
                                fix="give a kubeconfig file (kind: Config)")
    contexts = doc.get("contexts") or []
    names = [str(c.get("name")) for c in contexts if isinstance(c, dict)] if isinstance(contexts, list) else []
    if context is None:
        context = doc.get("current-context") or None
        if context is None:
            raise ClusterInputError(f"{origin}: no current-context; pass context=NAME (--context), one of: "
                                    f"{', '.join(names) or '(none)'}")
        if str(context) not in names:
            raise ClusterInputError(f"{origin}: current-context {context!r} is not one of its contexts; pass "
                                    f"context=NAME (--context), one of: {', '.join(names) or '(none)'}")
    elif context not in names:
        raise ClusterInputError(f"{origin}: no context {context!r}; use one of: {', '.join(names) or '(none)'}")
    context = str(context)
    entry = _named(doc, "contexts", context, origin) or {}
    cluster_name, user_name = entry.get("cluster"), entry.get("user")
    cluster = _named(doc, "clusters", str(cluster_name), origin) if cluster_name else None
    if cluster is None:
        what = f"cluster {cluster_name!r} was not found" if cluster_name else "cluster was not specified"
        raise ClusterInputError(f"{origin}: {what} for context {context!r}", fix="fix the context's cluster entry")
    if not isinstance(cluster.get("server"), str) or not cluster["server"]:
        raise ClusterInputError(f"{origin}: no server found for cluster {cluster_name!r}",
                                fix="set clusters[].cluster.server to the API server's https:// address")
    base = path.resolve().parent
    try:
        server = server_url(cluster["server"])
    except ValueError as exc:  # "https://[::1": client-go's url.Parse refuses it too (rest.DefaultServerURL)
        raise ClusterInputError(f"{origin}: cluster {cluster_name!r}: server {cluster['server']!r}: {exc}",
                                fix="set clusters[].cluster.server to the API server's https:// address") from None
    config = {**doc, "clusters": [{"name": cluster_name, "cluster": {**cluster, "server": server}}],
              "contexts": [{"name": context, "context": {k: v for k, v in entry.items() if k != "user"}}],
              "users": []}
    source: TokenFile | ExecPlugin | None = None
    if user_name and is_tls(config["clusters"][0]["cluster"]["server"]):
        user = _named(doc, "users", str(user_name), origin)
        if user is None:
            raise ClusterInputError(f"{origin}: user {user_name!r} was not found for context {context!r}",
                                    fix="fix the context's user entry")
        who = f"{origin}, user {user_name!r}"
        user = dict(user)
        # an exec plugin is ours to run, bounded (the client's loader would run it without a time limit)
        spec = user.pop("exec", None)
        if spec is not None and user.get("auth-provider"):  # client-go's rest/transport.go
            raise ClusterInputError(f"{who}: execProvider and authProvider cannot be used in combination",
                                    fix="keep one of users[].user.exec and users[].user.auth-provider")
        if not user.get("token") and user.get("tokenFile") and not user.get("auth-provider"):
            source = TokenFile(base / str(user.pop("tokenFile")), who)
            user["token"] = source.token()
        elif spec is not None and not user.get("token"):  # `exec: {}` is a plugin without a command
            if not isinstance(spec, dict):
                raise ClusterInputError(f"{who}: exec: must be a mapping", fix="fix users[].user.exec")
            plugin = ExecPlugin(spec, who=who, base=base, timeout=exec_timeout,
                                cluster=_cluster_info(cluster, base, origin) if spec.get("provideClusterInfo") else None)
            status = plugin.credential()
            if status["token"]:
                source, user["token"] = plugin, status["token"]
            else:  # the kubernetes client writes *-data to files for the TLS connection (not renewed on expiry)
                user["client-certificate-data"] = base64.b64encode(status["clientCertificateData"].encode()).decode()
                user["client-key-data"] = base64.b64encode(status["clientKeyData"].encode()).decode()
        config["users"] = [{"name": user_name, "user": user}]
        config["contexts"][0]["context"]["user"] = user_name
    cfg = k8s_client.Configuration()
    try:
        KubeConfigLoader(config_dict=config, active_context=context, config_base_path=str(base)).load_and_set(cfg)
    except (ConfigException, ValueError, TypeError, AttributeError, KeyError, OSError) as exc:
        # the client's loader, fed what the user wrote, fails in its own ways: each is one line here
        raise ClusterInputError(f"{origin}, context {context}: {exc}", fix="fix the context's cluster/user entries") \
            from None
    if source is not None:  # a token that changes: the loader's hook would put back the first one
        def refresh(c: k8s.Configuration, tokens: TokenFile | ExecPlugin = source) -> None:
            token = tokens.token()
            if token:
                c.api_key["BearerToken"] = f"Bearer {token}"
            else:
                c.api_key.pop("BearerToken", None)
        cfg.refresh_api_key_hook = refresh
    return cfg, context


@dataclass(frozen=True)
class Resource:
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(self, namespace: str | None = None, name: str | None = None, sub: str | None = None) -> str:
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{quote(namespace)}"
        base += f"/{self.plural}"
        if name:
            base += f"/{quote(name)}"
        if sub:
            base += f"/{sub}"
        return base


#: seconds a kind the server did not serve is taken as still not served (polls that list it, such
#: as explain's snapshot of an optional alpha kind, would otherwise rediscover every API group each time)
MISS_TTL = 30.0

_DISCOVERY_ACCEPT = ("application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,"
                     "application/json")


def _bearer(cfg: k8s.Configuration) -> str | None:
    """The Authorization header value a Configuration carries (a token; None with client certificates)."""
    setting = cfg.auth_settings().get("BearerToken") or {}
    return setting.get("value") or None


#: seconds to connect, and to wait for the next bytes of an answer, unless a request says otherwise
REQUEST_TIMEOUT = 30.0


class Kube:
    """Talks to `server` with a bearer `token`, trusting `ca_cert`; or, with `configuration` (a
    kubernetes-client Configuration, e.g. from :func:`kubeconfig_configuration`), with whatever
    credentials it holds (token, client certificate, exec plugin). Credentials go only to an https
    server (`plain_http`: none are sent, as client-go sends none). `timeout` bounds each request."""

    def __init__(self, server: str = "", token: str = "", ca_cert: str | None = None, *,
                 configuration: k8s.Configuration | None = None, timeout: float = REQUEST_TIMEOUT) -> None:
        k8s_client = client()
        cfg = configuration
        if cfg is None:
            cfg = k8s_client.Configuration()
            cfg.host = server
            cfg.ssl_ca_cert = ca_cert
            cfg.api_key = {"authorization": token}
            cfg.api_key_prefix = {"authorization": "Bearer"}
        cfg.host = server_url(cfg.host or "localhost", tls=bool(cfg.ssl_ca_cert or cfg.cert_file or not cfg.verify_ssl))
        self.plain_http = not is_tls(cfg.host)
        if self.plain_http:
            withhold_credentials(cfg)
        self._cfg = cfg
        self.server = cfg.host
        self.timeout = timeout
        self._auth = _bearer(cfg)
        self._api = k8s_client.ApiClient(cfg)
        self._pool = self._api.rest_client.pool_manager
        self._by_kind: dict[str, list[Resource]] = {}
        self._missed: dict[str, float] = {}  # kind -> when discovery last did not find it
        self._lock = threading.Lock()

    # -- raw ---------------------------------------------------------------------------------
    def request(self, method: str, path: str, body: Any = None, *, params: dict | None = None,
                content_type: str = "application/json", accept: str = "application/json",
                timeout: float | None = None) -> Any:
        """One request; the answer's JSON (text when `accept` is not JSON). A non-2xx answer is an
        ApiError, a 2xx answer that is not JSON where JSON was asked for a BadAnswer."""
        url = self.server + path + (("?" + urlencode(params)) if params else "")
        if self._cfg.refresh_api_key_hook is not None:  # exec/OIDC credentials from a kubeconfig
            self._cfg.refresh_api_key_hook(self._cfg)
            self._auth = _bearer(self._cfg)
        headers = {"Accept": accept}
        if self._auth:
            headers["Authorization"] = self._auth
        data = None
        if body is not None:
            headers["Content-Type"] = content_type
            data = body if isinstance(body, (str, bytes)) else json.dumps(body)
        r = self._pool.request(method, url, body=data, headers=headers, retries=False,
                               timeout=self.timeout if timeout is None else timeout)
        text = r.data.decode("utf-8", "replace") if r.data else ""
        if r.status >= 400:
            try:
                st = json.loads(text)
                raise ApiError(r.status, str(st.get("reason", "")), str(st.get("message", text)))
            except (ValueError, AttributeError, RecursionError):  # not a Status: quote its first line
                raise ApiError(r.status, "", f"HTTP {r.status}" + (f": {snippet(text)}" if text.strip() else "")
                               ) from None
        if not text or not accept.startswith("application/json"):
            return text
        try:
            return json.loads(text)
        except (ValueError, RecursionError):
            raise BadAnswer(path, f"not JSON ({r.headers.get('Content-Type') or 'no Content-Type'}: "
                            f"{snippet(text)!r})") from None

    def watch(self, kind: str, namespace: str | None = None, *, timeout: float = 60.0) -> Iterator[tuple[str, dict]]:
        """(event type, object) of `kind` as the API server's watch sends them (``?watch=1``, one JSON
        event a line: ADDED, MODIFIED, DELETED; no resourceVersion, so first an ADDED for every object
        there is), until the server ends the watch after `timeout` seconds (``timeoutSeconds``). An
        ERROR event is the ApiError of its Status."""
        r = self.resource(kind)
        params = {"watch": "1", "timeoutSeconds": str(max(1, int(timeout)))}
        url = self.server + r.path(namespace) + "?" + urlencode(params)
        if self._cfg.refresh_api_key_hook is not None:
            self._cfg.refresh_api_key_hook(self._cfg)
            self._auth = _bearer(self._cfg)
        headers = {"Accept": "application/json", **({"Authorization": self._auth} if self._auth else {})}
        answer = self._pool.request("GET", url, headers=headers, retries=False, preload_content=False,
                                    timeout=timeout + self.timeout)  # the server ends it after `timeout`
        try:
            if answer.status >= 400:
                text = answer.read().decode("utf-8", "replace")
                try:
                    st = json.loads(text)
                    raise ApiError(answer.status, str(st.get("reason", "")), str(st.get("message", text)))
                except (ValueError, AttributeError):
                    raise ApiError(answer.status, "", f"HTTP {answer.status}: {snippet(text)}") from None
            for line in answer:
                if not line.strip():
                    continue
                event = json.loads(line)
                obj = event.get("object") or {}
                if event.get("type") == "ERROR":
                    raise ApiError(int(obj.get("code") or 500), str(obj.get("reason", "")), str(obj.get("message", "")))
                if event.get("type") == "BOOKMARK":
                    continue
                obj.setdefault("apiVersion", r.api_version)
                obj.setdefault("kind", r.kind)
                yield str(event.get("type")), obj
        finally:
            answer.release_conn()

    def _document(self, path: str, **kw: Any) -> dict:
        """A GET whose answer must be a JSON object (a list, discovery): else a BadAnswer."""
        doc = self.request("GET", path, **kw)
        if not isinstance(doc, dict):
            raise BadAnswer(path, "empty" if doc == "" else f"a JSON {type(doc).__name__}, not an object")
        return doc

    # -- discovery ---------------------------------------------------------------------------
    def discover(self) -> None:
        table: dict[str, list[Resource]] = {}
        for root in ("/api", "/apis"):
            doc = self._document(root, accept=_DISCOVERY_ACCEPT)
            try:
                self._discovered(doc, table)
            except (KeyError, TypeError, AttributeError):
                raise BadAnswer(root, "not an aggregated discovery document (APIGroupDiscoveryList)") from None
        with self._lock:
            self._by_kind = table

    @staticmethod
    def _discovered(doc: dict, table: dict[str, list[Resource]]) -> None:
        for group in doc.get("items") or []:
            gname = (group.get("metadata") or {}).get("name", "")
            for ver in group.get("versions") or []:  # preferred version first
                for res in ver.get("resources") or []:
                    kind = (res.get("responseKind") or {}).get("kind") or ""
                    r = Resource(gname, ver["version"], res["resource"], kind, res.get("scope") == "Namespaced")
                    keys = {kind.lower(), res["resource"], res.get("singularResource", "")}
                    keys |= set(res.get("shortNames") or [])
                    for k in filter(None, keys):
                        table.setdefault(k.lower(), []).append(r)

    def resource(self, kind: str, api_version: str | None = None) -> Resource:
        """The resource for `kind` (preferring `api_version`, else the group's preferred version)."""
        key = kind.lower()
        if key not in self._by_kind and time.monotonic() - self._missed.get(key, -MISS_TTL) >= MISS_TTL:
            self.discover()
            if key not in self._by_kind:
                self._missed[key] = time.monotonic()
        found = self._by_kind.get(key) or []
        if api_version:
            exact = [r for r in found if r.api_version == api_version]
            if exact:
                return exact[0]
            if found:
                raise ApiError(404, "NotFound", f"{kind}: apiVersion {api_version} is not served by this "
                               f"cluster; use {found[0].api_version}")
        if not found:
            raise ApiError(404, "NotFound", f"kind {kind!r} is not served by this cluster "
                           "(check the spelling; alpha/beta APIs are served only when the cluster profile's "
                           "featureGates turn their gate on)")
        return found[0]

    # -- objects -----------------------------------------------------------------------------
    def get(self, kind: str, name: str, namespace: str | None = None) -> dict:
        r = self.resource(kind)
        return self.request("GET", r.path(namespace or "default", name))

    def list(self, kind: str, namespace: str | None = None, **params: str) -> list[dict]:
        r = self.resource(kind)
        doc = self._document(r.path(namespace), params=params or None)
        items = doc.get("items") or []
        if not isinstance(items, list) or not all(isinstance(it, dict) for it in items):
            raise BadAnswer(r.path(namespace), "a list whose items are not objects")
        for it in items:  # list items carry no apiVersion/kind; add them so they round-trip
            it.setdefault("apiVersion", r.api_version)
            it.setdefault("kind", r.kind)
        return items

    def create(self, obj: dict, namespace: str | None = None) -> dict:
        r = self.resource(obj["kind"], obj.get("apiVersion"))
        ns = namespace or (obj.get("metadata") or {}).get("namespace") or "default"
        return self.request("POST", r.path(ns), body=obj)

    def apply(self, obj: dict, *, manager: str = "labkit", namespace: str = "default") -> dict:
        """Server-side apply (create or update) of one object."""
        r = self.resource(obj["kind"], obj.get("apiVersion"))
        meta = obj.get("metadata") or {}
        name = meta.get("name")
        if not name:
            if meta.get("generateName"):
                return self.request("POST", r.path(meta.get("namespace") or namespace), body=obj)
            raise ApiError(422, "Invalid", f"{obj['kind']}: metadata.name: required; give the object a name")
        ns = meta.get("namespace") or namespace
        return self.request("PATCH", r.path(ns, name), body=json.dumps(obj),
                            params={"fieldManager": manager, "force": "true"},
                            content_type="application/apply-patch+yaml")

    def patch_status(self, kind: str, name: str, namespace: str | None, patch: dict) -> dict:
        r = self.resource(kind)
        return self.request("PATCH", r.path(namespace, name, "status"), body=patch,
                            content_type="application/merge-patch+json")

    def patch(self, kind: str, name: str, namespace: str | None, patch: dict) -> dict:
        r = self.resource(kind)
        return self.request("PATCH", r.path(namespace, name), body=patch,
                            content_type="application/merge-patch+json")

    def delete(self, kind: str, name: str, namespace: str | None = None, *, grace: int | None = None) -> dict:
        r = self.resource(kind)
        # dependents go in the background, as with kubectl (a Job's API default would orphan its pods)
        body = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"}
        if grace is not None:
            body["gracePeriodSeconds"] = grace
        return self.request("DELETE", r.path(namespace or "default", name), body=body)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._pool.clear()
