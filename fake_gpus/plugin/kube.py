"""A thin JSON-over-REST layer on the ``kubernetes`` client's ApiClient.

The generated API classes validate bodies against the client's own models, which reject
fields newer than the client; plain dicts sent as JSON avoid that version skew.
"""

from __future__ import annotations

import json
from typing import Any

from fake_gpus.errors import EngineError


class KubeError(EngineError, RuntimeError):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


def _message(data: Any, reason: str) -> str:
    if isinstance(data, dict) and data.get("message"):
        return str(data["message"])
    return reason or "no details"


class KubeRest:
    def __init__(self, api_client: Any):
        self.api_client = api_client

    def request(self, method: str, path: str, *, body: dict[str, Any] | None = None,
                query: dict[str, str] | None = None) -> tuple[int, Any]:
        """(HTTP status, decoded JSON body or None). Raises KubeError only for transport errors.
        A PATCH is a JSON merge patch."""
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = "application/merge-patch+json" if method == "PATCH" else "application/json"
        try:
            m, url, hdrs, data, _ = self.api_client.param_serialize(
                method, path, query_params=query or None, header_params=headers,
                body=body, auth_settings=["BearerToken"])
            resp = self.api_client.call_api(m, url, hdrs, data, _request_timeout=30)
            raw = resp.read()
        except Exception as exc:
            raise KubeError(0, f"{method} {path}: cannot reach the API server: {exc}") from exc
        try:
            decoded = json.loads(raw) if raw else None
        except ValueError:
            decoded = None
        return resp.status, decoded

    def call(self, method: str, path: str, *, body: dict[str, Any] | None = None,
             query: dict[str, str] | None = None, ok: tuple[int, ...] = (200, 201)) -> Any:
        """Like request(), but any status outside ``ok`` raises KubeError with the server's message."""
        status, data = self.request(method, path, body=body, query=query)
        if status not in ok:
            raise KubeError(status, f"{method} {path}: HTTP {status}: {_message(data, '')}")
        return data
