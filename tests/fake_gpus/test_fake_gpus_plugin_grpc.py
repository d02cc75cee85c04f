"""The plugin over real unix sockets, driven by a client speaking the kubelet's protos."""

from __future__ import annotations

import json
import threading
import uuid
from pathlib import Path

import grpc
import pytest
import yaml

from fake_gpus.plugin import cdi
from fake_gpus.plugin.claims import InMemoryClaimSource
from fake_gpus.plugin.paths import SocketPathError
from fake_gpus.plugin.server import PluginServer, RegistrationFailed
from fake_gpus.plugin.state import DriverState
from tests.fake_gpus.test_fake_gpus_plugin_support import (
    DRIVER,
    GPU0_UUID,
    GPU1_UUID,
    GPU2_UUID,
    MIG_UUID,
    NODE,
    Kubelet,
    claim_refs,
    make_claim,
    node_slices,
    prepare,
    short_tmpdir,
    start_plugin,
    unprepare,
)

UID_A = "0a1b2c3d-0000-4000-8000-00000000000a"
UID_B = "0a1b2c3d-0000-4000-8000-00000000000b"


@pytest.fixture
def env():
    with short_tmpdir() as dirs:
        claims = InMemoryClaimSource()
        server = start_plugin(dirs, claims)
        kubelet = Kubelet(server.registration_socket)
        try:
            yield dirs, claims, server, kubelet
        finally:
            kubelet.close()
            server.stop()


def spec_file(dirs, uid: str) -> Path:
    return dirs.cdi / f"k8s.{DRIVER}-claim_{uid}.yaml"


# --- registration ---------------------------------------------------------------------------

def test_sockets_at_kubelet_paths(env):
    dirs, _, server, _ = env
    assert server.registration_socket == dirs.registry / f"{DRIVER}-reg.sock"
    assert server.dra_socket == dirs.plugins / DRIVER / "dra.sock"
    assert server.registration_socket.is_socket() and server.dra_socket.is_socket()


def test_get_info(env):
    _, _, server, kubelet = env
    info = kubelet.info()
    assert info.type == "DRAPlugin"
    assert info.name == DRIVER
    assert info.endpoint == str(server.dra_socket) and Path(info.endpoint).is_absolute()
    assert list(info.supported_versions) == ["v1.DRAPlugin", "v1beta1.DRAPlugin"]


def test_registration_status_ok(env):
    _, _, server, kubelet = env
    assert server.wait_for_registration(0) is False
    kubelet.notify(True)
    assert server.wait_for_registration(5) is True
    assert server.registration.status == (True, "")


def test_registration_status_failure_raises(env, caplog):
    _, _, server, kubelet = env
    kubelet.notify(False, "none of services supported by the plugin are supported by the kubelet")
    with pytest.raises(RegistrationFailed, match="none of services supported"):
        server.wait_for_registration(5)
    assert any("refused to register" in r.message for r in caplog.records)


# --- prepare -------------------------------------------------------------------------------

def test_prepare_single_gpu(env):
    dirs, claims, _, kubelet = env
    claim = make_claim("c1", UID_A, [("gpu", "gpu-0")])
    claims.put(claim)
    stub, pb2 = kubelet.dra()
    resp = prepare(stub, pb2, claim)
    assert set(resp.claims) == {UID_A}
    r = resp.claims[UID_A]
    assert r.error == ""
    assert len(r.devices) == 1
    d = r.devices[0]
    assert (list(d.request_names), d.pool_name, d.device_name) == (["gpu"], NODE, "gpu-0")
    assert list(d.cdi_device_ids) == [f"k8s.{DRIVER}/claim={UID_A}-gpu-0"]
    assert not d.HasField("share_id")
    spec = yaml.safe_load(spec_file(dirs, UID_A).read_text())
    assert spec["kind"] == f"k8s.{DRIVER}/claim"
    assert [x["name"] for x in spec["devices"]] == [f"{UID_A}-gpu-0"]
    assert cdi.validate_spec(spec) == []
    env_all = dict(e.split("=", 1) for e in spec["containerEdits"]["env"] + spec["devices"][0]["containerEdits"]["env"])
    assert env_all["NVIDIA_VISIBLE_DEVICES"] == GPU0_UUID
    assert env_all["FAKE_GPU_0_UUID"] == GPU0_UUID
    assert env_all["FAKE_GPU_0_PRODUCT"] == "NVIDIA A100-SXM4-40GB"
    assert env_all["FAKE_GPU_0_MEMORY"] == "40Gi"
    assert env_all["FAKE_DRA_CLAIM"] == "default/c1"


def test_prepare_multiple_claims_one_call(env):
    dirs, claims, _, kubelet = env
    a = make_claim("a", UID_A, [("gpu", "gpu-0")])
    b = make_claim("b", UID_B, [("gpus", "gpu-1"), ("mig", "gpu-2-mig-1g5gb-19-0")], namespace="team")
    claims.put(a)
    claims.put(b)
    stub, pb2 = kubelet.dra()
    resp = prepare(stub, pb2, a, b)
    assert set(resp.claims) == {UID_A, UID_B}
    assert [d.device_name for d in resp.claims[UID_B].devices] == ["gpu-1", "gpu-2-mig-1g5gb-19-0"]
    assert spec_file(dirs, UID_A).exists() and spec_file(dirs, UID_B).exists()


def test_prepare_mig_and_nic_env(env):
    dirs, claims, _, kubelet = env
    claim = make_claim("mix", UID_A, [("mig", "gpu-2-mig-1g5gb-19-0"), ("nic", "nic-0"), ("gpu", "gpu-1")])
    claims.put(claim)
    stub, pb2 = kubelet.dra()
    resp = prepare(stub, pb2, claim)
    assert resp.claims[UID_A].error == ""
    spec = yaml.safe_load(spec_file(dirs, UID_A).read_text())
    by_name = {d["name"]: dict(e.split("=", 1) for e in d["containerEdits"]["env"]) for d in spec["devices"]}
    m = by_name[f"{UID_A}-gpu-2-mig-1g5gb-19-0"]
    assert m["FAKE_GPU_2_MIG_1G5GB_19_0_TYPE"] == "mig"
    assert m["FAKE_GPU_2_MIG_1G5GB_19_0_MIG_PROFILE"] == "1g.5gb"
    assert m["FAKE_GPU_2_MIG_1G5GB_19_0_PARENT_UUID"] == GPU2_UUID
    assert m["FAKE_GPU_2_MIG_1G5GB_19_0_UUID"] == MIG_UUID
    n = by_name[f"{UID_A}-nic-0"]
    assert n["FAKE_NIC_0_NAME"] == "nic-0"
    assert n["FAKE_NIC_0_PCIE_ROOT"] == "pci0000:00"
    assert n["FAKE_NIC_0_INTERFACE"] == "ib0"
    g = by_name[f"{UID_A}-gpu-1"]
    assert g["FAKE_GPU_1_PCIE_ROOT"] == "pci0000:80"
    # the lists are the runtime hook's: one container that gets every device of the claim
    ids = [i for d in resp.claims[UID_A].devices for i in d.cdi_device_ids]
    whole = cdi.resolve_env([spec], ids)
    assert whole["NVIDIA_VISIBLE_DEVICES"] == f"{MIG_UUID},{GPU1_UUID}"
    assert whole["FAKE_GPU_DEVICES"] == "gpu-2-mig-1g5gb-19-0,gpu-1"
    assert whole["FAKE_NIC_DEVICES"] == "nic-0"
    assert whole["FAKE_GPU_COUNT"] == "2" and whole["FAKE_NIC_COUNT"] == "1"
    # a container that references only the "gpu" request sees gpu-1 alone
    only = cdi.resolve_env([spec], [i for d in resp.claims[UID_A].devices if "gpu" in d.request_names
                                    for i in d.cdi_device_ids])
    assert only["NVIDIA_VISIBLE_DEVICES"] == GPU1_UUID and "FAKE_GPU_2_MIG_1G5GB_19_0_NAME" not in only


def test_request_names_strip_subrequest_and_merge(env):
    _, claims, _, kubelet = env
    claim = make_claim("fa", UID_A, [("gpu/a100", "gpu-0"), ("other", "gpu-1")])
    claims.put(claim)
    stub, pb2 = kubelet.dra()
    devs = prepare(stub, pb2, claim).claims[UID_A].devices
    assert [list(d.request_names) for d in devs] == [["gpu"], ["other"]]


def test_shared_device_share_id(env):
    dirs, claims, _, kubelet = env
    s1, s2 = str(uuid.UUID(int=1)), str(uuid.UUID(int=2))
    a = make_claim("a", UID_A, [("r1", "gpu-3", s1), ("r2", "gpu-3", s2)])
    b = make_claim("b", UID_B, [("r", "gpu-3", s1)])
    claims.put(a)
    claims.put(b)
    stub, pb2 = kubelet.dra()
    resp = prepare(stub, pb2, a, b)
    devs = resp.claims[UID_A].devices
    assert [(d.device_name, d.share_id, list(d.request_names)) for d in devs] == [
        ("gpu-3", s1, ["r1"]), ("gpu-3", s2, ["r2"])]
    assert list(devs[0].cdi_device_ids) == [f"k8s.{DRIVER}/claim={UID_A}-gpu-3-{s1}"]
    ids = [i for c in resp.claims.values() for d in c.devices for i in d.cdi_device_ids]
    assert len(ids) == len(set(ids)) == 3
    spec = yaml.safe_load(spec_file(dirs, UID_A).read_text())
    assert cdi.validate_spec(spec) == []
    per_dev = [dict(e.split("=", 1) for e in d["containerEdits"]["env"]) for d in spec["devices"]]
    assert [e["FAKE_GPU_3_SHARE_ID"] for e in per_dev] == [s1, s2]
    whole = cdi.resolve_env([spec], [i for d in devs for i in d.cdi_device_ids])
    assert whole["NVIDIA_VISIBLE_DEVICES"] == "GPU-00000000-1111-2222-3333-000000000003"


def test_v1beta1_has_no_share_id_but_same_devices(env):
    _, claims, _, kubelet = env
    claim = make_claim("a", UID_A, [("r1", "gpu-3", str(uuid.UUID(int=7))), ("g", "gpu-0")])
    claims.put(claim)
    stub, pb2 = kubelet.dra("v1beta1")
    assert "share_id" not in pb2.Device.DESCRIPTOR.fields_by_name
    resp = prepare(stub, pb2, claim)
    assert resp.claims[UID_A].error == ""
    assert [d.device_name for d in resp.claims[UID_A].devices] == ["gpu-3", "gpu-0"]
    ures = unprepare(stub, pb2, claim)
    assert ures.claims[UID_A].error == ""


def test_results_of_other_drivers_are_ignored(env):
    dirs, claims, _, kubelet = env
    claim = make_claim("a", UID_A, [("gpu", "gpu-0")])
    claim["status"]["allocation"]["devices"]["results"].append(
        {"request": "net", "driver": "nic.example.com", "pool": NODE, "device": "eth9"})
    claims.put(claim)
    stub, pb2 = kubelet.dra()
    devs = prepare(stub, pb2, claim).claims[UID_A].devices
    assert [d.device_name for d in devs] == ["gpu-0"]
    only_other = make_claim("o", UID_B, [("net", "eth9")], driver="nic.example.com")
    claims.put(only_other)
    r = prepare(stub, pb2, only_other).claims[UID_B]
    assert r.error == "" and len(r.devices) == 0
    assert not spec_file(dirs, UID_B).exists()


# --- unprepare, idempotency, restart --------------------------------------------------------

def test_unprepare_removes_spec_and_checkpoint(env):
    dirs, claims, server, kubelet = env
    claim = make_claim("c", UID_A, [("gpu", "gpu-0")])
    claims.put(claim)
    stub, pb2 = kubelet.dra()
    prepare(stub, pb2, claim)
    cp = dirs.plugins / DRIVER / "checkpoint.json"
    assert UID_A in json.loads(cp.read_text())["claims"]
    resp = unprepare(stub, pb2, claim)
    assert set(resp.claims) == {UID_A} and resp.claims[UID_A].error == ""
    assert not spec_file(dirs, UID_A).exists()
    assert json.loads(cp.read_text())["claims"] == {}
    # unpreparing again (kubelet retry) is fine
    assert unprepare(stub, pb2, claim).claims[UID_A].error == ""


def test_prepare_is_idempotent_and_uses_checkpoint(env):
    dirs, claims, _, kubelet = env
    claim = make_claim("c", UID_A, [("gpu", "gpu-0")])
    claims.put(claim)
    stub, pb2 = kubelet.dra()
    first = prepare(stub, pb2, claim)
    claims.delete("default", "c")  # a retry must not need the API server
    second = prepare(stub, pb2, claim)
    assert first == second
    spec_file(dirs, UID_A).unlink()  # lost spec is rewritten on the next prepare
    assert prepare(stub, pb2, claim) == first
    assert spec_file(dirs, UID_A).exists()


def test_restart_keeps_prepared_claims():
    with short_tmpdir() as dirs:
        claims = InMemoryClaimSource()
        a = make_claim("a", UID_A, [("gpu", "gpu-0")])
        b = make_claim("b", UID_B, [("gpu", "gpu-1")])
        claims.put(a)
        claims.put(b)
        server = start_plugin(dirs, claims)
        kubelet = Kubelet(server.registration_socket)
        stub, pb2 = kubelet.dra()
        before = prepare(stub, pb2, a, b)
        kubelet.close()
        server.stop()
        assert not server.dra_socket.exists() and not server.registration_socket.exists()

        fresh = InMemoryClaimSource()  # API server knows nothing: the checkpoint must carry it
        server2 = start_plugin(dirs, fresh)
        try:
            assert set(server2.state.prepared()) == {UID_A, UID_B}
            kubelet = Kubelet(server2.registration_socket)
            stub, pb2 = kubelet.dra()
            assert prepare(stub, pb2, a, b) == before
            assert unprepare(stub, pb2, a).claims[UID_A].error == ""
            assert not spec_file(dirs, UID_A).exists() and spec_file(dirs, UID_B).exists()
            assert set(server2.state.prepared()) == {UID_B}
            kubelet.close()
        finally:
            server2.stop()


def test_concurrent_prepares(env):
    dirs, claims, server, kubelet = env
    uids = [f"0a1b2c3d-0000-4000-8000-{i:012d}" for i in range(24)]
    devices = ["gpu-0", "gpu-1", "gpu-2-mig-1g5gb-19-0", "nic-0"]
    all_claims = [make_claim(f"c{i}", u, [("r", devices[i % 4])]) for i, u in enumerate(uids)]
    for c in all_claims:
        claims.put(c)
    stub, pb2 = kubelet.dra()
    errors: list[BaseException] = []
    results: dict[int, object] = {}

    def worker(i: int) -> None:
        try:
            # every claim twice, from different threads, to race on the same uid too
            results[i] = prepare(stub, pb2, all_claims[i % len(all_claims)])
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(2 * len(all_claims))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    for i, resp in results.items():
        uid = uids[i % len(uids)]
        assert resp.claims[uid].error == ""
        assert resp.claims[uid].devices[0].device_name == devices[(i % len(uids)) % 4]
    assert set(server.state.prepared()) == set(uids)
    assert set(json.loads((dirs.plugins / DRIVER / "checkpoint.json").read_text())["claims"]) == set(uids)
    assert len(list(dirs.cdi.glob("*.yaml"))) == len(uids)


# --- errors ----------------------------------------------------------------------------------

def test_missing_claim_error_text(env):
    _, _, _, kubelet = env
    stub, pb2 = kubelet.dra()
    ghost = make_claim("ghost", UID_A, [])
    r = prepare(stub, pb2, ghost).claims[UID_A]
    assert "claim default/ghost not found" in r.error
    assert len(r.devices) == 0


def test_replaced_claim_error_text(env):
    _, claims, _, kubelet = env
    claims.put(make_claim("c", UID_B, [("gpu", "gpu-0")]))
    stub, pb2 = kubelet.dra()
    r = prepare(stub, pb2, make_claim("c", UID_A, [])).claims[UID_A]
    assert "claim default/c got replaced" in r.error and UID_B in r.error


def test_unallocated_claim_error_text(env):
    _, claims, _, kubelet = env
    claim = make_claim("c", UID_A, [], allocated=False)
    claims.put(claim)
    stub, pb2 = kubelet.dra()
    r = prepare(stub, pb2, claim).claims[UID_A]
    assert "not allocated" in r.error and "status.allocation" in r.error


def test_unknown_device_error_text(env):
    dirs, claims, _, kubelet = env
    claim = make_claim("c", UID_A, [("gpu", "gpu-0"), ("gpu", "gpu-99")])
    claims.put(claim)
    stub, pb2 = kubelet.dra()
    r = prepare(stub, pb2, claim).claims[UID_A]
    assert "node-a/gpu-99" in r.error and "results[1]" in r.error
    assert not spec_file(dirs, UID_A).exists()


def test_one_bad_claim_does_not_fail_the_others(env):
    _, claims, _, kubelet = env
    good = make_claim("good", UID_A, [("gpu", "gpu-0")])
    claims.put(good)
    stub, pb2 = kubelet.dra()
    resp = prepare(stub, pb2, good, make_claim("ghost", UID_B, []))
    assert resp.claims[UID_A].error == "" and len(resp.claims[UID_A].devices) == 1
    assert "not found" in resp.claims[UID_B].error


@pytest.mark.parametrize("field", ["namespace", "name", "uid"])
def test_empty_claim_identity_is_invalid_argument(env, field):
    _, _, _, kubelet = env
    stub, pb2 = kubelet.dra()
    ref = claim_refs(pb2, make_claim("c", UID_A, []))[0]
    setattr(ref, field, "")
    for call, req in ((stub.NodePrepareResources, pb2.NodePrepareResourcesRequest(claims=[ref])),
                      (stub.NodeUnprepareResources, pb2.NodeUnprepareResourcesRequest(claims=[ref]))):
        with pytest.raises(grpc.RpcError) as info:
            call(req, timeout=10)
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert f"{field} must not be empty" in info.value.details()


def test_socket_path_too_long_is_a_clear_error():
    with short_tmpdir() as dirs:
        state = DriverState(DRIVER, InMemoryClaimSource(), cdi_dir=dirs.cdi,
                            checkpoint_path=dirs.root / "cp.json", slices=node_slices())
        long_dir = dirs.root / ("x" * 100)
        with pytest.raises(SocketPathError, match="--plugins-dir"):
            PluginServer(state, registry_dir=dirs.registry, plugins_dir=long_dir)
        with pytest.raises(SocketPathError, match="--registry-dir"):
            PluginServer(state, registry_dir=long_dir, plugins_dir=dirs.plugins)


def test_stale_socket_files_are_replaced():
    with short_tmpdir() as dirs:
        (dirs.registry).mkdir(parents=True)
        (dirs.registry / f"{DRIVER}-reg.sock").write_text("stale")
        server = start_plugin(dirs, InMemoryClaimSource())
        try:
            kubelet = Kubelet(server.registration_socket)
            assert kubelet.info().name == DRIVER
            kubelet.close()
        finally:
            server.stop()


def test_checkpoint_write_failure_is_internal_error_and_retry_works(env, monkeypatch):
    dirs, claims, server, kubelet = env
    claim = make_claim("c", UID_A, [("gpu", "gpu-0")])
    claims.put(claim)
    stub, pb2 = kubelet.dra()
    cp = server.state.checkpoint
    real = cp._save_locked

    def broken() -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(cp, "_save_locked", broken)
    with pytest.raises(grpc.RpcError) as info:
        prepare(stub, pb2, claim)
    assert info.value.code() == grpc.StatusCode.INTERNAL
    assert "checkpoint" in info.value.details() and "No space left" in info.value.details()
    monkeypatch.setattr(cp, "_save_locked", real)
    assert prepare(stub, pb2, claim).claims[UID_A].error == ""  # the kubelet's retry
    assert UID_A in json.loads((dirs.plugins / DRIVER / "checkpoint.json").read_text())["claims"]


def test_one_checkpoint_write_per_call(env, monkeypatch):
    _, claims, server, kubelet = env
    batch = [make_claim(f"c{i}", f"0a1b2c3d-0000-4000-8000-1000000000{i:02d}", [("r", "gpu-3", f"s{i}")])
             for i in range(10)]
    for c in batch:
        claims.put(c)
    stub, pb2 = kubelet.dra()
    cp = server.state.checkpoint
    writes = []
    real = cp._save_locked
    monkeypatch.setattr(cp, "_save_locked", lambda: (writes.append(1), real()))
    resp = prepare(stub, pb2, *batch)
    assert all(r.error == "" for r in resp.claims.values()) and len(resp.claims) == 10
    assert len(writes) == 1
    unprepare(stub, pb2, *batch)
    assert len(writes) == 2 and server.state.prepared() == {}
