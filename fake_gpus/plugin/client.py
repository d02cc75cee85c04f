"""The kubelet's side of the plugin protocol, for node agents (LabKit's `local` backend) and tests.

    client = PluginClient(registration_socket)
    version = client.register()            # GetInfo + NotifyRegistrationStatus, like the kubelet
    results = client.prepare([claim])      # claim dicts or (namespace, name, uid) tuples
    client.unprepare([claim])
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc

from fake_gpus.errors import EngineError

from .gen import (
    dra_v1_pb2,
    dra_v1_pb2_grpc,
    dra_v1beta1_pb2,
    dra_v1beta1_pb2_grpc,
    pluginregistration_pb2,
    pluginregistration_pb2_grpc,
)

KUBELET_VERSIONS = ("v1.DRAPlugin", "v1beta1.DRAPlugin")  # what a 1.37 kubelet speaks
_DRA = {"v1.DRAPlugin": (dra_v1_pb2, dra_v1_pb2_grpc), "v1beta1.DRAPlugin": (dra_v1beta1_pb2, dra_v1beta1_pb2_grpc)}

ClaimRef = tuple[str, str, str]  # namespace, name, uid


class RegistrationError(EngineError, RuntimeError):
    pass


@dataclass(frozen=True)
class PluginInfo:
    type: str
    name: str
    endpoint: str
    supported_versions: list[str]


@dataclass
class PreparedDeviceResult:
    request_names: list[str]
    pool_name: str
    device_name: str
    cdi_device_ids: list[str]
    share_id: str | None = None


@dataclass
class ClaimResult:
    devices: list[PreparedDeviceResult] = field(default_factory=list)
    error: str = ""


def discover(registry_dir: str | Path) -> list[Path]:
    """Registration sockets in a kubelet plugin registry dir."""
    return sorted(p for p in Path(registry_dir).glob("*-reg.sock") if p.is_socket())


def _ref(c: dict[str, Any] | Sequence[str]) -> ClaimRef:
    if isinstance(c, dict):
        m = c.get("metadata") or {}
        return (m.get("namespace", "default"), m.get("name", ""), m.get("uid", ""))
    ns, name, uid = c
    return (ns, name, uid)


class PluginClient:
    def __init__(self, registration_socket: str | Path, *, timeout: float = 45.0):
        self.timeout = timeout  # the kubelet's default per-call timeout
        self._channels: list[grpc.Channel] = []
        self._registration = pluginregistration_pb2_grpc.RegistrationStub(self._channel(registration_socket))
        self.version: str | None = None
        self._dra: Any = None

    def _channel(self, path: str | Path) -> grpc.Channel:
        ch = grpc.insecure_channel(f"unix://{Path(path).absolute()}")
        self._channels.append(ch)
        return ch

    def info(self) -> PluginInfo:
        i = self._registration.GetInfo(pluginregistration_pb2.InfoRequest(), timeout=self.timeout)
        return PluginInfo(i.type, i.name, i.endpoint, list(i.supported_versions))

    def notify(self, registered: bool, error: str = "") -> None:
        self._registration.NotifyRegistrationStatus(
            pluginregistration_pb2.RegistrationStatus(plugin_registered=registered, error=error),
            timeout=self.timeout)

    def register(self, kubelet_versions: Iterable[str] = KUBELET_VERSIONS) -> str:
        """Pick the first service in the plugin's list that we speak, as the kubelet does,
        and report the outcome to the plugin. Returns the chosen version."""
        info = self.info()
        wanted = list(kubelet_versions)
        problem = ""
        if info.type != "DRAPlugin":
            problem = f"plugin type {info.type!r} is not DRAPlugin"
        elif not Path(info.endpoint).is_absolute():
            problem = f"endpoint {info.endpoint!r} is not an absolute path"
        chosen = next((v for v in info.supported_versions if v in wanted and v in _DRA), None)
        if not problem and chosen is None:
            problem = (f"none of services supported by the plugin {info.supported_versions} are supported "
                       f"by the kubelet {wanted}")
        if problem:
            self.notify(False, problem)
            raise RegistrationError(f"driver {info.name}: {problem}")
        pb2, grpc_mod = _DRA[chosen]
        self._dra = (pb2, grpc_mod.DRAPluginStub(self._channel(info.endpoint)))
        self.version = chosen
        self.notify(True)
        return chosen

    def _stub(self) -> tuple[Any, Any]:
        if self._dra is None:
            self.register()
        return self._dra

    def prepare(self, claims: Iterable[dict[str, Any] | Sequence[str]]) -> dict[str, ClaimResult]:
        """UID -> result. gRPC errors (e.g. INVALID_ARGUMENT) raise grpc.RpcError."""
        pb2, stub = self._stub()
        req = pb2.NodePrepareResourcesRequest(
            claims=[pb2.Claim(namespace=ns, name=n, uid=u) for ns, n, u in map(_ref, claims)])
        resp = stub.NodePrepareResources(req, timeout=self.timeout)
        out: dict[str, ClaimResult] = {}
        for uid, r in resp.claims.items():
            devs = [PreparedDeviceResult(list(d.request_names), d.pool_name, d.device_name, list(d.cdi_device_ids),
                                         d.share_id if "share_id" in d.DESCRIPTOR.fields_by_name
                                         and d.HasField("share_id") else None)
                    for d in r.devices]
            out[uid] = ClaimResult(devs, r.error)
        return out

    def unprepare(self, claims: Iterable[dict[str, Any] | Sequence[str]]) -> dict[str, str]:
        """UID -> error text ("" = success)."""
        pb2, stub = self._stub()
        req = pb2.NodeUnprepareResourcesRequest(
            claims=[pb2.Claim(namespace=ns, name=n, uid=u) for ns, n, u in map(_ref, claims)])
        resp = stub.NodeUnprepareResources(req, timeout=self.timeout)
        return {uid: r.error for uid, r in resp.claims.items()}

    def close(self) -> None:
        for ch in self._channels:
            ch.close()
        self._channels.clear()

    def __enter__(self) -> PluginClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
