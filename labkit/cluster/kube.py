"""A small dict-in/dict-out REST client for one API server, built on the kubernetes client's
Configuration + connection pool. Kinds are resolved through the server's aggregated discovery,
so any built-in or CRD kind works by name ("Pod", "pods", "resourceclaim", "deviceclasses").

The kubernetes client is loaded by :func:`client` when a live cluster is connected, not when this
module is imported: the backends that import it (local, kind, kubeconfig) then load without it, so
the sim course, `labkit` on a pure-Python install and a browser tab (Pyodide) never need it."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlencode

from labkit.cluster.base import MissingPackage
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


class Kube:
    """Talks to `server` with a bearer `token`, trusting `ca_cert`; or, with `configuration` (a
    kubernetes-client Configuration, e.g. from a kubeconfig), with whatever credentials it holds
    (token, client certificate, exec plugin)."""

    def __init__(self, server: str = "", token: str = "", ca_cert: str | None = None, *,
                 configuration: k8s.Configuration | None = None) -> None:
        k8s_client = client()
        cfg = configuration
        if cfg is None:
            cfg = k8s_client.Configuration()
            cfg.host = server
            cfg.ssl_ca_cert = ca_cert
            cfg.api_key = {"authorization": token}
            cfg.api_key_prefix = {"authorization": "Bearer"}
        self._cfg = cfg
        self.server = cfg.host.rstrip("/")
        self._auth = _bearer(cfg)
        self._api = k8s_client.ApiClient(cfg)
        self._pool = self._api.rest_client.pool_manager
        self._by_kind: dict[str, list[Resource]] = {}
        self._missed: dict[str, float] = {}  # kind -> when discovery last did not find it
        self._lock = threading.Lock()

    # -- raw ---------------------------------------------------------------------------------
    def request(self, method: str, path: str, body: Any = None, *, params: dict | None = None,
                content_type: str = "application/json", accept: str = "application/json",
                timeout: float = 30.0) -> Any:
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
        r = self._pool.request(method, url, body=data, headers=headers, timeout=timeout, retries=False)
        text = r.data.decode("utf-8", "replace") if r.data else ""
        if r.status >= 400:
            try:
                st = json.loads(text)
                raise ApiError(r.status, st.get("reason", ""), st.get("message", text))
            except (ValueError, AttributeError):
                raise ApiError(r.status, "", text.strip() or f"HTTP {r.status}") from None
        return json.loads(text) if text and text[0] in "{[" else text

    # -- discovery ---------------------------------------------------------------------------
    def discover(self) -> None:
        table: dict[str, list[Resource]] = {}
        for root in ("/api", "/apis"):
            doc = self.request("GET", root, accept=_DISCOVERY_ACCEPT)
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
        with self._lock:
            self._by_kind = table

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
        doc = self.request("GET", r.path(namespace), params=params or None)
        items = doc.get("items") or []
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
