"""The plugin under the faults tests/e2e/test_kind_faults.py injects on a real kubelet, in process:
the fault window (FAKE_GPUS_FAULT_DELAY_SECONDS) and an old plugin process stopping while its
replacement already serves on the same sockets."""

from __future__ import annotations

import json
import logging
import threading

from fake_gpus.plugin.claims import InMemoryClaimSource
from fake_gpus.plugin.server import FAULT_BEGIN, FAULT_DELAY_ENV, FAULT_END, fault_delay
from tests.fake_gpus.test_fake_gpus_plugin_support import (
    Kubelet,
    make_claim,
    prepare,
    short_tmpdir,
    start_plugin,
    unprepare,
)

UID = "0a1b2c3d-0000-4000-8000-0000000000f1"


def test_old_plugin_stopping_leaves_the_new_plugins_sockets():
    with short_tmpdir() as dirs:
        claims = InMemoryClaimSource([make_claim("a", UID, [("gpu", "gpu-0")])])
        old = start_plugin(dirs, claims)
        new = start_plugin(dirs, claims)  # the replacement pod binds the same paths
        try:
            old.stop()
            assert new.dra_socket.exists() and new.registration_socket.exists()
            kubelet = Kubelet(new.registration_socket)
            stub, pb2 = kubelet.dra()
            resp = prepare(stub, pb2, claims.get_claim("default", "a"))
            assert resp.claims[UID].error == ""
            assert [d.device_name for d in resp.claims[UID].devices] == ["gpu-0"]
            kubelet.close()
        finally:
            new.stop()
        assert not new.dra_socket.exists() and not new.registration_socket.exists()


def test_fault_delay_reads_the_environment(monkeypatch, caplog):
    monkeypatch.setenv(FAULT_DELAY_ENV, "0.25")
    assert fault_delay() == 0.25
    monkeypatch.setenv(FAULT_DELAY_ENV, "soon")
    with caplog.at_level(logging.WARNING, logger="fake_gpus.plugin"):
        assert fault_delay() == 0.0
    assert f"{FAULT_DELAY_ENV}='soon' is not a number of seconds" in caplog.text
    monkeypatch.delenv(FAULT_DELAY_ENV)
    assert fault_delay() == 0.0


def test_fault_window_lies_between_the_cdi_spec_and_the_checkpoint(monkeypatch, caplog):
    """A plugin killed inside the window leaves a CDI spec and no checkpoint entry: the state the
    kind fault test must recover from (the kubelet retries, the plugin prepares again)."""
    monkeypatch.setenv(FAULT_DELAY_ENV, "2")
    with short_tmpdir() as dirs, caplog.at_level(logging.INFO, logger="fake_gpus.plugin"):
        claim = make_claim("a", UID, [("gpu", "gpu-1")])
        server = start_plugin(dirs, InMemoryClaimSource([claim]))
        kubelet = Kubelet(server.registration_socket)
        stub, pb2 = kubelet.dra()
        ckpt = dirs.plugins / "gpu.nvidia.com" / "checkpoint.json"
        spec = dirs.cdi / f"k8s.gpu.nvidia.com-claim_{UID}.yaml"
        result: list = []
        t = threading.Thread(target=lambda: result.append(prepare(stub, pb2, claim)))
        t.start()
        while not spec.exists() and t.is_alive():
            threading.Event().wait(0.01)
        in_window_ckpt = json.loads(ckpt.read_text())["claims"] if ckpt.exists() else {}
        t.join()
        try:
            assert spec.exists() and UID not in in_window_ckpt
            assert UID in json.loads(ckpt.read_text())["claims"]
            assert result[0].claims[UID].error == ""
            assert unprepare(stub, pb2, claim).claims[UID].error == ""
        finally:
            kubelet.close()
            server.stop()
    lines = [r.getMessage() for r in caplog.records if "fault-window" in r.getMessage()]
    assert lines == [f"{FAULT_BEGIN} NodePrepareResources {UID}", f"{FAULT_END} NodePrepareResources {UID}",
                     f"{FAULT_BEGIN} NodeUnprepareResources {UID}", f"{FAULT_END} NodeUnprepareResources {UID}"]
