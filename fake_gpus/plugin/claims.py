"""Where the plugin reads ResourceClaims from: the API server, or memory (tests, sim)."""

from __future__ import annotations

import json
import threading
from typing import Any, Protocol

from fake_gpus.errors import EngineError

from .kube import KubeError, KubeRest


class ClaimSourceError(EngineError, RuntimeError):
    """The claim could not be read (other than "not found")."""


class ClaimSource(Protocol):
    def get_claim(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The ResourceClaim as a plain dict (API JSON shape), or None if it does not exist."""
        ...


class InMemoryClaimSource:
    """A dict of claims keyed by (namespace, name); callers may update it at any time."""

    def __init__(self, claims: list[dict[str, Any]] | None = None):
        self._lock = threading.Lock()
        self._claims: dict[tuple[str, str], dict[str, Any]] = {}
        for c in claims or []:
            self.put(c)

    def put(self, claim: dict[str, Any]) -> None:
        meta = claim.get("metadata") or {}
        with self._lock:
            self._claims[(meta.get("namespace", "default"), meta["name"])] = claim

    def delete(self, namespace: str, name: str) -> None:
        with self._lock:
            self._claims.pop((namespace, name), None)

    def get_claim(self, namespace: str, name: str) -> dict[str, Any] | None:
        with self._lock:
            claim = self._claims.get((namespace, name))
        return json.loads(json.dumps(claim)) if claim is not None else None


class KubeClaimSource:
    """GETs resource.k8s.io/v1 ResourceClaims from the API server."""

    def __init__(self, api_client: Any):
        self._rest = KubeRest(api_client)

    def get_claim(self, namespace: str, name: str) -> dict[str, Any] | None:
        path = f"/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims/{name}"
        try:
            status, data = self._rest.request("GET", path)
        except KubeError as exc:
            raise ClaimSourceError(str(exc)) from exc
        if status == 404:
            return None
        if status != 200 or not isinstance(data, dict):
            detail = data.get("message") if isinstance(data, dict) else ""
            raise ClaimSourceError(f"reading ResourceClaim {namespace}/{name}: HTTP {status} {detail}".rstrip())
        return data


def kube_api_client(kubeconfig: str | None = None) -> Any:
    """An ApiClient from a kubeconfig file, else in-cluster config, else ~/.kube/config."""
    from kubernetes import client, config

    if kubeconfig:
        return config.new_client_from_config(config_file=kubeconfig)
    try:
        config.load_incluster_config()
        return client.ApiClient()
    except config.ConfigException:
        return config.new_client_from_config()
