"""DRAResourceHealth streams (v1, v1alpha1) over the plugin's real socket."""

from __future__ import annotations

import grpc
import pytest

from fake_gpus.plugin.claims import InMemoryClaimSource
from fake_gpus.plugin.gen import (
    dra_health_v1_pb2,
    dra_health_v1_pb2_grpc,
    dra_health_v1alpha1_pb2,
    dra_health_v1alpha1_pb2_grpc,
)
from fake_gpus.plugin.health import HealthBoard
from fake_gpus.plugin.server import PluginServer
from fake_gpus.plugin.state import DriverState
from tests.fake_gpus.test_fake_gpus_plugin_support import DRIVER, NODE, Kubelet, node_slices, short_tmpdir

VERSIONS = {"v1": (dra_health_v1_pb2, dra_health_v1_pb2_grpc),
            "v1alpha1": (dra_health_v1alpha1_pb2, dra_health_v1alpha1_pb2_grpc)}


def start(dirs, health: bool) -> PluginServer:
    state = DriverState(DRIVER, InMemoryClaimSource(), cdi_dir=dirs.cdi,
                        checkpoint_path=dirs.plugins / DRIVER / "checkpoint.json", slices=node_slices())
    server = PluginServer(state, registry_dir=dirs.registry, plugins_dir=dirs.plugins, health=health)
    server.start()
    return server


def as_dict(msg) -> dict[str, tuple[int, str]]:
    return {f"{d.device.pool_name}/{d.device.device_name}": (d.health, d.message) for d in msg.devices}


@pytest.mark.parametrize("version", ["v1", "v1alpha1"])
def test_health_stream(version):
    pb2, grpc_mod = VERSIONS[version]
    with short_tmpdir() as dirs:
        server = start(dirs, health=True)
        try:
            kubelet = Kubelet(server.registration_socket)
            info = kubelet.info()
            assert list(info.supported_versions) == ["v1.DRAPlugin", "v1beta1.DRAPlugin",
                                                     "v1.DRAResourceHealth", "v1alpha1.DRAResourceHealth"]
            ch = grpc.insecure_channel(f"unix://{info.endpoint}")
            stream = grpc_mod.DRAResourceHealthStub(ch).NodeWatchResources(pb2.NodeWatchResourcesRequest())
            first = next(stream)
            assert as_dict(first) == {f"{NODE}/{n}": (pb2.HEALTHY, "") for n in
                                      ["gpu-0", "gpu-1", "gpu-2-mig-1g5gb-19-0", "gpu-3", "nic-0"]}
            assert all(d.health_check_timeout_seconds == 60 and d.last_updated_time > 0 for d in first.devices)
            server.health.set(NODE, "gpu-1", "Unhealthy", "XID 79: GPU has fallen off the bus")
            second = as_dict(next(stream))
            assert second[f"{NODE}/gpu-1"] == (pb2.UNHEALTHY, "XID 79: GPU has fallen off the bus")
            assert second[f"{NODE}/gpu-0"] == (pb2.HEALTHY, "")
            server.stop()  # open streams end with the server (cleanly, or cancelled if slow)
            try:
                rest = list(stream)
            except grpc.RpcError as exc:
                assert exc.code() in (grpc.StatusCode.CANCELLED, grpc.StatusCode.UNAVAILABLE)
                rest = []
            assert rest == []
            ch.close()
            kubelet.close()
        finally:
            server.stop()


def test_health_off_by_default():
    with short_tmpdir() as dirs:
        server = start(dirs, health=False)
        try:
            kubelet = Kubelet(server.registration_socket)
            assert list(kubelet.info().supported_versions) == ["v1.DRAPlugin", "v1beta1.DRAPlugin"]
            ch = grpc.insecure_channel(f"unix://{server.dra_socket}")
            stub = dra_health_v1_pb2_grpc.DRAResourceHealthStub(ch)
            with pytest.raises(grpc.RpcError) as info:
                next(stub.NodeWatchResources(dra_health_v1_pb2.NodeWatchResourcesRequest(), timeout=10))
            assert info.value.code() == grpc.StatusCode.UNIMPLEMENTED
            ch.close()
            kubelet.close()
        finally:
            server.stop()


def test_health_board_errors():
    board = HealthBoard([("p", "d")])
    with pytest.raises(ValueError, match="must be one of"):
        board.set("p", "d", "Broken")
    with pytest.raises(KeyError, match="p/x"):
        board.set("p", "x", "Unhealthy")
    version, _ = board.snapshot()
    board.set("p", "d", "Unknown", "m" * 2000)
    assert board.wait_change(version, 0)
    _, health = board.snapshot()
    assert health[("p", "d")][:2] == ("Unknown", "m" * 1024)
