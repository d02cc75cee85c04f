"""DriverState and Checkpoint without gRPC, and the kubelet-side PluginClient."""

from __future__ import annotations

import json
import threading

import grpc
import pytest

from fake_gpus.plugin import cdi
from fake_gpus.plugin.checkpoint import Checkpoint, CheckpointError, PreparedClaim, PreparedDevice
from fake_gpus.plugin.claims import InMemoryClaimSource
from fake_gpus.plugin.client import PluginClient, RegistrationError, discover
from fake_gpus.plugin.devices import ClaimError
from fake_gpus.plugin.state import DriverState
from tests.fake_gpus.test_fake_gpus_plugin_support import (
    DRIVER,
    make_claim,
    node_slices,
    short_tmpdir,
    start_plugin,
)

UID = "7c000000-0000-4000-8000-000000000001"


def new_state(tmp_path, claims=None) -> DriverState:
    return DriverState(DRIVER, claims or InMemoryClaimSource(), cdi_dir=tmp_path / "cdi",
                       checkpoint_path=tmp_path / "plugins" / DRIVER / "checkpoint.json", slices=node_slices())


def test_checkpoint_round_trip_and_atomic_files(tmp_path):
    cp = Checkpoint(tmp_path / "cp.json", DRIVER)
    pc = PreparedClaim("ns", "c", UID, [PreparedDevice(["r"], "node-a", "gpu-0", ["x/y=z"], "s1")], {"kind": "a/b"})
    cp.put(pc)
    assert Checkpoint(tmp_path / "cp.json", DRIVER).get(UID) == pc
    assert [p.name for p in tmp_path.iterdir()] == ["cp.json"]  # no temp files left behind
    assert cp.remove(UID) is True and cp.remove(UID) is False
    assert Checkpoint(tmp_path / "cp.json", DRIVER).all() == {}


def test_leftover_temp_file_is_ignored(tmp_path):
    cp = Checkpoint(tmp_path / "cp.json", DRIVER)
    cp.put(PreparedClaim("ns", "c", UID))
    (tmp_path / ".checkpoint-crash.tmp").write_text("{torn")  # a crash between write and rename
    assert set(Checkpoint(tmp_path / "cp.json", DRIVER).all()) == {UID}


@pytest.mark.parametrize("content, needle", [
    ("{not json", "unreadable"),
    (json.dumps({"version": 99, "claims": {}}), "unsupported version 99"),
    (json.dumps({"version": 1, "driver": "other.example.com", "claims": {}}), "belongs to driver"),
])
def test_bad_checkpoint_is_a_clear_error(tmp_path, content, needle):
    (tmp_path / "cp.json").write_text(content)
    with pytest.raises(CheckpointError, match=needle) as info:
        Checkpoint(tmp_path / "cp.json", DRIVER)
    assert "move it away" in str(info.value)


def test_restart_rewrites_lost_cdi_specs(tmp_path):
    claims = InMemoryClaimSource([make_claim("c", UID, [("gpu", "gpu-0")])])
    state = new_state(tmp_path, claims)
    state.prepare("default", "c", UID)
    path = cdi.spec_path(tmp_path / "cdi", DRIVER, UID)
    content = path.read_text()
    path.unlink()
    new_state(tmp_path)  # e.g. after a reboot emptied /var/run/cdi
    assert path.read_text() == content


def test_claim_replaced_after_prepare_still_unprepares(tmp_path):
    claims = InMemoryClaimSource([make_claim("c", UID, [("gpu", "gpu-0")])])
    state = new_state(tmp_path, claims)
    state.prepare("default", "c", UID)
    claims.put(make_claim("c", "other-uid", [("gpu", "gpu-1")]))
    with pytest.raises(ClaimError, match="got replaced"):
        state.prepare("default", "c", "other-uid-2")
    state.unprepare("default", "c", UID)
    assert state.prepared() == {}


def test_same_uid_is_serialised(tmp_path, monkeypatch):
    """Two threads preparing one claim: the API server is asked once, one spec is written."""
    claims = InMemoryClaimSource([make_claim("c", UID, [("gpu", "gpu-0")])])
    state = new_state(tmp_path, claims)
    calls = []
    gate = threading.Event()
    real = claims.get_claim

    def slow_get(ns, name):
        calls.append(name)
        gate.wait(5)
        return real(ns, name)

    monkeypatch.setattr(claims, "get_claim", slow_get)
    out = []
    threads = [threading.Thread(target=lambda: out.append(state.prepare("default", "c", UID))) for _ in range(4)]
    for t in threads:
        t.start()
    gate.set()
    for t in threads:
        t.join()
    assert calls == ["c"]
    assert len(out) == 4 and all(o == out[0] for o in out)


# --- PluginClient (the kubelet side, reused by the local backend's node agent) ----------------

def test_plugin_client_register_prepare_unprepare():
    with short_tmpdir() as dirs:
        claims = InMemoryClaimSource([make_claim("c", UID, [("gpu/sub", "gpu-3", "share-1")])])
        server = start_plugin(dirs, claims)
        try:
            assert discover(dirs.registry) == [server.registration_socket]
            with PluginClient(server.registration_socket) as client:
                assert client.register() == "v1.DRAPlugin"
                assert server.wait_for_registration(5)
                res = client.prepare([("default", "c", UID)])[UID]
                assert res.error == ""
                assert [(d.device_name, d.request_names, d.share_id) for d in res.devices] == [
                    ("gpu-3", ["gpu"], "share-1")]
                assert client.unprepare([("default", "c", UID)]) == {UID: ""}
                with pytest.raises(grpc.RpcError):
                    client.prepare([("default", "", UID)])
            with PluginClient(server.registration_socket) as old:
                assert old.register(["v1beta1.DRAPlugin"]) == "v1beta1.DRAPlugin"
                res = old.prepare([("default", "c", UID)])[UID]
                assert res.devices[0].share_id is None  # v1beta1 has no share_id
        finally:
            server.stop()


def test_plugin_client_refuses_unknown_versions():
    with short_tmpdir() as dirs:
        server = start_plugin(dirs, InMemoryClaimSource())
        try:
            with PluginClient(server.registration_socket) as client, \
                    pytest.raises(RegistrationError, match="none of services"):
                client.register(["v1alpha4.DRAPlugin"])
            with pytest.raises(Exception, match="none of services"):
                server.wait_for_registration(5)
        finally:
            server.stop()
