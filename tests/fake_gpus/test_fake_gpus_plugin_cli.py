"""`python -m fake_gpus plugin` as a real process: sockets up, prepare works, SIGTERM cleans up."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.fake_gpus.test_fake_gpus_plugin_support import (
    DRIVER,
    NODE,
    Kubelet,
    make_claim,
    node_slices,
    prepare,
    short_tmpdir,
    unprepare,
)

UID = "5e1f0000-0000-4000-8000-000000000001"


def plugin_cmd() -> list[str]:
    """The plugin as the DaemonSet starts it: `python -m fake_gpus plugin`."""
    return [sys.executable, "-m", "fake_gpus", "plugin"]


def start(dirs, *extra: str) -> subprocess.Popen:
    args = plugin_cmd() + ["--node", NODE, "--no-publish", "--registry-dir", str(dirs.registry),
                           "--plugins-dir", str(dirs.plugins), "--cdi-dir", str(dirs.cdi), *extra]
    return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})


def wait_for_socket(proc: subprocess.Popen, path: Path) -> None:
    # polls until the socket appears or the process dies (safety limit only, not a timing check)
    for _ in range(600):
        if path.is_socket():
            return
        if proc.poll() is not None:
            raise AssertionError(f"plugin exited with {proc.returncode}: {proc.stderr.read()}")
        time.sleep(0.05)
    proc.kill()
    raise AssertionError("plugin socket never appeared")


def stop(proc: subprocess.Popen) -> tuple[int, str]:
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    return proc.returncode, err


def test_subprocess_serves_and_cleans_up_on_sigterm():
    with short_tmpdir() as dirs:
        dirs.root.joinpath("slices.yaml").write_text(yaml.safe_dump_all(node_slices()))
        claim = make_claim("c1", UID, [("gpu", "gpu-0"), ("nic", "nic-0")])
        dirs.root.joinpath("claims.yaml").write_text(yaml.safe_dump(claim))
        proc = start(dirs, "--slices", str(dirs.root / "slices.yaml"), "--claims", str(dirs.root / "claims.yaml"))
        reg = dirs.registry / f"{DRIVER}-reg.sock"
        dra = dirs.plugins / DRIVER / "dra.sock"
        try:
            wait_for_socket(proc, reg)
            kubelet = Kubelet(reg)
            info = kubelet.info()
            assert (info.type, info.name, info.endpoint) == ("DRAPlugin", DRIVER, str(dra))
            kubelet.notify(True)
            stub, pb2 = kubelet.dra()
            resp = prepare(stub, pb2, claim)
            assert resp.claims[UID].error == ""
            assert [d.device_name for d in resp.claims[UID].devices] == ["gpu-0", "nic-0"]
            assert (dirs.cdi / f"k8s.{DRIVER}-claim_{UID}.yaml").exists()
            assert unprepare(stub, pb2, claim).claims[UID].error == ""
            assert prepare(stub, pb2, claim).claims[UID].error == ""
            kubelet.close()
        finally:
            code, err = stop(proc)
        assert code == 0, err
        assert not reg.exists() and not dra.exists()
        assert (dirs.plugins / DRIVER / "checkpoint.json").exists()  # prepared claim survives a restart
        assert "ready: driver gpu.nvidia.com" in err and "shutting down" in err
        assert "Traceback" not in err


def test_subprocess_with_profile_serves_gpu_and_nic_drivers():
    from fake_gpus.slices import NIC_DRIVER, build_slices

    slices = build_slices("mig-a100", NODE, mig_mode="static")
    mig_dev = next(d["name"] for s in slices if s["spec"]["driver"] == DRIVER for d in s["spec"]["devices"])
    nic_dev = next(d["name"] for s in slices if s["spec"]["driver"] == NIC_DRIVER for d in s["spec"]["devices"])
    with short_tmpdir() as dirs:
        gpu_claim = make_claim("g", UID, [("mig", mig_dev)])
        nic_uid = UID[:-1] + "2"
        nic_claim = make_claim("n", nic_uid, [("nic", nic_dev)], driver=NIC_DRIVER)
        dirs.root.joinpath("claims.yaml").write_text(yaml.safe_dump_all([gpu_claim, nic_claim]))
        proc = start(dirs, "--profile", "mig-a100", "--mig", "static", "--claims", str(dirs.root / "claims.yaml"))
        try:
            for driver, claim, uid, dev, var in ((DRIVER, gpu_claim, UID, mig_dev, "FAKE_GPU_0_MIG_1G5GB_19_0_MIG_PROFILE"),
                                                 (NIC_DRIVER, nic_claim, nic_uid, nic_dev, "FAKE_NIC_0_LINK_TYPE")):
                reg = dirs.registry / f"{driver}-reg.sock"
                wait_for_socket(proc, reg)
                kubelet = Kubelet(reg)
                stub, pb2 = kubelet.dra()
                r = prepare(stub, pb2, claim).claims[uid]
                assert r.error == "" and [d.device_name for d in r.devices] == [dev]
                spec = yaml.safe_load((dirs.cdi / f"k8s.{driver}-claim_{uid}.yaml").read_text())
                env = dict(e.split("=", 1) for e in spec["devices"][0]["containerEdits"]["env"])
                assert var in env
                kubelet.close()
        finally:
            code, err = stop(proc)
        assert code == 0, err
        assert list(dirs.registry.iterdir()) == []


def test_bad_input_is_one_line_error():
    with short_tmpdir() as dirs:
        proc = start(dirs, "--slices", str(dirs.root / "missing.yaml"), "--claims", str(dirs.root / "c.yaml"))
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 2
        assert "--slices" in err and "missing.yaml" in err and "Traceback" not in err
        assert len(err.strip().splitlines()) == 1, err
        dirs.root.joinpath("slices.yaml").write_text(yaml.safe_dump_all(node_slices()))
        proc = start(dirs, "--slices", str(dirs.root / "slices.yaml"), "--claims", str(dirs.root / "c.yaml"),
                     "--plugins-dir", str(dirs.root / ("p" * 110)))
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 2
        assert "--plugins-dir" in err and "Traceback" not in err
        assert len(err.strip().splitlines()) == 1, err


def test_subprocess_publishes_through_kubeconfig_and_deletes_on_sigterm():
    from tests.fake_gpus.test_fake_gpus_plugin_support import SLICES, serve_fake_api, write_kubeconfig

    with short_tmpdir() as dirs, serve_fake_api() as (fake, url):
        fake.add("/api/v1/nodes", {"metadata": {"name": NODE, "uid": "node-uid"}})
        claim = make_claim("c1", UID, [("gpu", "gpu-1")], namespace="team")
        fake.claims[("team", "c1")] = claim
        dirs.root.joinpath("slices.yaml").write_text(yaml.safe_dump_all(node_slices()))
        kubeconfig = write_kubeconfig(dirs.root / "kubeconfig", url)
        args = plugin_cmd() + ["--node", NODE, "--slices", str(dirs.root / "slices.yaml"),
                               "--kubeconfig", str(kubeconfig), "--registry-dir", str(dirs.registry),
                               "--plugins-dir", str(dirs.plugins), "--cdi-dir", str(dirs.cdi)]
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            reg = dirs.registry / f"{DRIVER}-reg.sock"
            wait_for_socket(proc, reg)
            for _ in range(600):  # slices are published right after the sockets are up
                if fake.objects[SLICES] or proc.poll() is not None:
                    break
                time.sleep(0.05)
            (obj,) = fake.objects[SLICES].values()
            assert obj["metadata"]["ownerReferences"][0]["uid"] == "node-uid"
            kubelet = Kubelet(reg)
            stub, pb2 = kubelet.dra()
            r = prepare(stub, pb2, claim).claims[UID]
            assert r.error == "" and r.devices[0].device_name == "gpu-1"
            kubelet.close()
        finally:
            code, err = stop(proc)
        assert code == 0, err
        assert fake.objects[SLICES] == {}  # deleted on shutdown
        assert "published 1 ResourceSlice(s)" in err and "deleted 1 ResourceSlice(s)" in err


def test_main_in_a_thread_stops_on_event():
    import threading

    from fake_gpus.plugin import main

    with short_tmpdir() as dirs:
        dirs.root.joinpath("slices.yaml").write_text(yaml.safe_dump_all(node_slices()))
        dirs.root.joinpath("claims.yaml").write_text("")
        stop_event = threading.Event()
        codes = []
        t = threading.Thread(target=lambda: codes.append(main(
            ["--node", NODE, "--no-publish", "--slices", str(dirs.root / "slices.yaml"),
             "--claims", str(dirs.root / "claims.yaml"), "--registry-dir", str(dirs.registry),
             "--plugins-dir", str(dirs.plugins), "--cdi-dir", str(dirs.cdi)], stop_event)))
        t.start()
        reg = dirs.registry / f"{DRIVER}-reg.sock"
        for _ in range(600):
            if reg.is_socket() or not t.is_alive():
                break
            time.sleep(0.05)
        kubelet = Kubelet(reg)
        assert kubelet.info().name == DRIVER
        kubelet.close()
        stop_event.set()
        t.join()
        assert codes == [0] and not reg.exists()


def test_load_slices_profile_and_empty_mig_means_profile_default():
    import argparse

    from fake_gpus.plugin.cli import UsageError, add_arguments, load_slices
    from fake_gpus.slices import build_slices

    p = argparse.ArgumentParser()
    add_arguments(p)
    got = load_slices(p.parse_args(["--node", NODE, "--profile", "mig-a100", "--mig", ""]))
    assert got == build_slices("mig-a100", NODE)
    with pytest.raises(UsageError, match="mig_mode 'bogus'"):
        load_slices(p.parse_args(["--node", NODE, "--profile", "mig-a100", "--mig", "bogus"]))
    with pytest.raises(UsageError, match="no-such-profile"):
        load_slices(p.parse_args(["--node", NODE, "--profile", "no-such-profile"]))
    with pytest.raises(UsageError, match="one of --profile or --slices"):
        load_slices(p.parse_args(["--node", NODE]))
