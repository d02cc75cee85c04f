"""Shared helpers for the fake_gpus plugin tests (no tests here)."""

from __future__ import annotations

import contextlib
import copy
import json
import tempfile
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import grpc
import yaml

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
                 driver: str = DRIVER, health: bool = False) -> PluginServer:
    state = DriverState(driver, claims, cdi_dir=dirs.cdi,
                        checkpoint_path=dirs.plugins / driver / "checkpoint.json",
                        slices=node_slices(driver=driver) if slices is None else slices)
    server = PluginServer(state, registry_dir=dirs.registry, plugins_dir=dirs.plugins, health=health)
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


# --- a fake API server: just enough REST (GET/POST/PUT/DELETE, resourceVersion conflicts, the
# spec.driver field selector) to run the real `kubernetes` client against ----------------------

SLICES = "/apis/resource.k8s.io/v1/resourceslices"
CLASSES = "/apis/resource.k8s.io/v1/deviceclasses"


class FakeApi:
    def __init__(self):
        self.objects: dict[str, dict[str, dict]] = {SLICES: {}, CLASSES: {}, "/api/v1/nodes": {}}
        self.claims: dict[tuple[str, str], dict] = {}
        self.rv = 0
        self.lock = threading.Lock()
        self.log: list[tuple[str, str]] = []
        self.fail_with: int | None = None

    def _next_rv(self) -> str:
        self.rv += 1
        return str(self.rv)

    def add(self, coll: str, obj: dict) -> None:
        obj = copy.deepcopy(obj)
        obj.setdefault("metadata", {})["resourceVersion"] = self._next_rv()
        obj["metadata"].setdefault("uid", str(uuid.uuid4()))
        self.objects[coll][obj["metadata"]["name"]] = obj

    def handle(self, method: str, path: str, query: dict, body: dict | None) -> tuple[int, dict]:
        with self.lock:
            self.log.append((method, path))
            if self.fail_with:
                return self.fail_with, {"kind": "Status", "message": "injected failure"}
            if path.startswith("/apis/resource.k8s.io/v1/namespaces/"):
                parts = path.split("/")
                claim = self.claims.get((parts[5], parts[7]))
                return (200, claim) if claim else (404, {"kind": "Status", "message": "not found"})
            for coll, items in self.objects.items():
                if path == coll:
                    if method == "GET":
                        sel = query.get("fieldSelector", [""])[0]
                        out = list(items.values())
                        if sel.startswith("spec.driver="):
                            out = [o for o in out if o["spec"].get("driver") == sel.split("=", 1)[1]]
                        return 200, {"kind": "List", "items": copy.deepcopy(out)}
                    if method == "POST":
                        name = body["metadata"]["name"]
                        if name in items:
                            return 409, {"kind": "Status", "message": f"{name} already exists"}
                        self.add(coll, body)
                        return 201, items[name]
                if path.startswith(coll + "/"):
                    name = path[len(coll) + 1:]
                    cur = items.get(name)
                    if cur is None:
                        return 404, {"kind": "Status", "message": f"{name} not found"}
                    if method == "GET":
                        return 200, copy.deepcopy(cur)
                    if method == "DELETE":
                        del items[name]
                        return 200, {"kind": "Status"}
                    if method == "PUT":
                        if body["metadata"].get("resourceVersion") != cur["metadata"]["resourceVersion"]:
                            return 409, {"kind": "Status", "message": "conflict"}
                        body = copy.deepcopy(body)
                        body["metadata"]["uid"] = cur["metadata"]["uid"]
                        body["metadata"]["resourceVersion"] = self._next_rv()
                        items[name] = body
                        return 200, body
            return 404, {"kind": "Status", "message": "unknown path"}


@contextlib.contextmanager
def serve_fake_api() -> Iterator[tuple[FakeApi, str]]:
    """(FakeApi, base URL) served over HTTP on 127.0.0.1 for the duration."""
    fake = FakeApi()

    class Handler(BaseHTTPRequestHandler):
        def _do(self) -> None:
            u = urlparse(self.path)
            n = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(n)) if n else None
            status, out = fake.handle(self.command, u.path, parse_qs(u.query), body)
            data = json.dumps(out).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_PUT = do_DELETE = _do

        def log_message(self, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    t = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    t.start()
    try:
        yield fake, f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


def write_kubeconfig(path: Path, url: str) -> Path:
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "fake",
        "clusters": [{"name": "fake", "cluster": {"server": url}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "u"}}]}))
    return path
