"""Shared helpers for the fake_gpus plugin tests (no tests here)."""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

from fake_gpus.plugin.claims import InMemoryClaimSource
from fake_gpus.plugin.gen import (
    dra_v1_pb2,
    dra_v1_pb2_grpc,
    dra_v1beta1_pb2,
    dra_v1beta1_pb2_grpc,
    pluginregistration_pb2,
    pluginregistration_pb2_grpc,
)
from fake_gpus.plugin.server import PluginServer
from fake_gpus.plugin.state import DriverState

DRIVER = "gpu.nvidia.com"
NODE = "node-a"


def _s(v: str) -> dict[str, str]:
    return {"string": v}


def gpu(name: str, uuid: str, root: str = "pci0000:00", product: str = "NVIDIA A100-SXM4-40GB",
        shared: bool = False) -> dict[str, Any]:
    dev: dict[str, Any] = {
        "name": name,
        "attributes": {"type": _s("gpu"), "uuid": _s(uuid), "productName": _s(product),
                       "architecture": _s("Ampere"), "cudaComputeCapability": {"version": "8.0.0"},
                       "resource.kubernetes.io/pcieRoot": _s(root),
                       "resource.kubernetes.io/pciBusID": _s("0000:07:00.0")},
        "capacity": {"memory": {"value": "40Gi"}},
    }
    if shared:
        dev["allowMultipleAllocations"] = True
    return dev


def mig(name: str, uuid: str, parent: str, profile: str = "1g.5gb") -> dict[str, Any]:
    return {"name": name,
            "attributes": {"gpu.nvidia.com/type": _s("mig"), "uuid": _s(uuid), "parentUUID": _s(parent),
                           "profile": _s(profile), "productName": _s("NVIDIA A100-SXM4-40GB"),
                           "resource.kubernetes.io/pcieRoot": _s("pci0000:00")},
            "capacity": {"memory": {"value": "4864Mi"}, "multiprocessors": {"value": "14"}}}


def nic(name: str, root: str = "pci0000:00") -> dict[str, Any]:
    return {"name": name,
            "attributes": {"type": _s("nic"), "productName": _s("MT2910 Family [ConnectX-7]"),
                           "interfaceName": _s("ib0"), "resource.kubernetes.io/pcieRoot": _s(root)},
            "capacity": {"bandwidth": {"value": "400G"}}}


GPU0_UUID = "GPU-00000000-1111-2222-3333-000000000000"
GPU1_UUID = "GPU-00000000-1111-2222-3333-000000000001"
GPU2_UUID = "GPU-00000000-1111-2222-3333-000000000002"
GPU3_UUID = "GPU-00000000-1111-2222-3333-000000000003"
MIG_UUID = "MIG-00000000-aaaa-bbbb-cccc-000000000000"


def node_slices(node: str = NODE, driver: str = DRIVER) -> list[dict[str, Any]]:
    """A hand-built node: 2 GPUs, a MIG-partitioned GPU (one MIG device), a shareable GPU, a NIC."""
    devices = [gpu("gpu-0", GPU0_UUID), gpu("gpu-1", GPU1_UUID, root="pci0000:80"),
               mig("gpu-2-mig-1g5gb-19-0", MIG_UUID, GPU2_UUID),
               gpu("gpu-3", GPU3_UUID, shared=True), nic("nic-0")]
    return [{"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
             "metadata": {"name": f"{node}-{driver}-0"},
             "spec": {"driver": driver, "nodeName": node,
                      "pool": {"name": node, "generation": 0, "resourceSliceCount": 1},
                      "devices": devices}}]


def make_claim(name: str, uid: str, results: list[tuple[str, str] | tuple[str, str, str]], *,
               namespace: str = "default", driver: str = DRIVER, pool: str = NODE,
               allocated: bool = True) -> dict[str, Any]:
    """results: (request, device) or (request, device, shareID)."""
    claim: dict[str, Any] = {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": namespace, "uid": uid},
        "spec": {"devices": {"requests": []}},
    }
    if allocated:
        res = []
        for r in results:
            entry = {"request": r[0], "driver": driver, "pool": pool, "device": r[1]}
            if len(r) > 2:
                entry["shareID"] = r[2]
            res.append(entry)
        claim["status"] = {"allocation": {"devices": {"results": res}}}
    return claim


@dataclass
class Dirs:
    root: Path
    registry: Path
    plugins: Path
    cdi: Path


@contextlib.contextmanager
def short_tmpdir() -> Iterator[Dirs]:
    """Temp dirs under /tmp (pytest's tmp_path can exceed the 107-byte socket path limit)."""
    with tempfile.TemporaryDirectory(prefix="fgp-", dir="/tmp") as d:
        root = Path(d)
        yield Dirs(root, root / "reg", root / "plugins", root / "cdi")


def start_plugin(dirs: Dirs, claims: InMemoryClaimSource, slices: list[dict[str, Any]] | None = None,
                 driver: str = DRIVER) -> PluginServer:
    state = DriverState(driver, claims, cdi_dir=dirs.cdi,
                        checkpoint_path=dirs.plugins / driver / "checkpoint.json",
                        slices=node_slices(driver=driver) if slices is None else slices)
    server = PluginServer(state, registry_dir=dirs.registry, plugins_dir=dirs.plugins)
    server.start()
    return server


class Kubelet:
    """The kubelet's side of the protocol: a client on the plugin's sockets."""

    def __init__(self, registration_socket: Path):
        self._reg_channel = grpc.insecure_channel(f"unix://{registration_socket}")
        self.registration = pluginregistration_pb2_grpc.RegistrationStub(self._reg_channel)
        self._channels = [self._reg_channel]

    def info(self) -> Any:
        return self.registration.GetInfo(pluginregistration_pb2.InfoRequest(), timeout=10)

    def notify(self, ok: bool, error: str = "") -> None:
        self.registration.NotifyRegistrationStatus(
            pluginregistration_pb2.RegistrationStatus(plugin_registered=ok, error=error), timeout=10)

    def dra(self, version: str = "v1") -> tuple[Any, Any]:
        """(stub, pb2 module) for the DRA service at the endpoint GetInfo returned."""
        endpoint = self.info().endpoint
        ch = grpc.insecure_channel(f"unix://{endpoint}")
        self._channels.append(ch)
        if version == "v1":
            return dra_v1_pb2_grpc.DRAPluginStub(ch), dra_v1_pb2
        return dra_v1beta1_pb2_grpc.DRAPluginStub(ch), dra_v1beta1_pb2

    def close(self) -> None:
        for ch in self._channels:
            ch.close()


def claim_refs(pb2: Any, *claims: dict[str, Any]) -> list[Any]:
    return [pb2.Claim(namespace=c["metadata"]["namespace"], name=c["metadata"]["name"],
                      uid=c["metadata"]["uid"]) for c in claims]


def prepare(stub: Any, pb2: Any, *claims: dict[str, Any]) -> Any:
    return stub.NodePrepareResources(pb2.NodePrepareResourcesRequest(claims=claim_refs(pb2, *claims)),
                                     timeout=30)


def unprepare(stub: Any, pb2: Any, *claims: dict[str, Any]) -> Any:
    return stub.NodeUnprepareResources(pb2.NodeUnprepareResourcesRequest(claims=claim_refs(pb2, *claims)),
                                       timeout=30)
