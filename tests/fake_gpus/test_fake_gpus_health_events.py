"""GPU health events on the fake kubelet plugin, as a lab on kind uses them (issue 43 item 3): the plugin runs
as the DaemonSet runs it (`python -m fake_gpus plugin`, a process, publishing through a kubeconfig to the
support module's fake API server); `python -m fake_gpus inject-health` drops an event into its spool
(<plugins-dir>/<driver>/health-events/) and prints the plugin's answer. With NVIDIA's NVMLDeviceHealthCheck gate
the plugin re-publishes the device with NVIDIA's taint (fake_gpus/health_events.py, from
kubernetes-sigs/dra-driver-nvidia-gpu cmd/gpu-kubelet-plugin/device_health.go) and reports it Unhealthy on the
kubelet's DRAResourceHealth stream (kubernetes/kubernetes pkg/kubelet/cm/dra/plugin: the kubelet's
NodeWatchResources client, which writes allocatedResourcesStatus from it). Taints live in the plugin's memory:
a restarted plugin publishes its devices untainted, as NVIDIA's driver, which re-reads NVML at start."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import grpc
import yaml

from fake_gpus.plugin.gen import dra_health_v1_pb2, dra_health_v1_pb2_grpc
from tests.fake_gpus.test_fake_gpus_plugin_cli import stop, wait_for_socket
from tests.fake_gpus.test_fake_gpus_plugin_support import (
    DRIVER,
    NODE,
    SLICES,
    Dirs,
    FakeApi,
    node_slices,
    serve_fake_api,
    short_tmpdir,
    write_kubeconfig,
)

GATE_ON = ["--feature-gates", "NVMLDeviceHealthCheck=true"]
XID79 = {"key": "gpu.nvidia.com/xid", "value": "79", "effect": "NoSchedule"}


@contextmanager
def plugin(dirs: Dirs, fake: FakeApi, url: str, *extra: str) -> Iterator[subprocess.Popen]:
    """The plugin process with --health, publishing to the fake API; stopped (SIGTERM) at the end,
    its log then in ``proc.log``."""
    dirs.root.joinpath("slices.yaml").write_text(yaml.safe_dump_all(node_slices()))
    dirs.root.joinpath("claims.yaml").write_text("")
    kubeconfig = write_kubeconfig(dirs.root / "kubeconfig", url)
    args = [sys.executable, "-m", "fake_gpus", "plugin", "--node", NODE, "--slices", str(dirs.root / "slices.yaml"),
            "--claims", str(dirs.root / "claims.yaml"), "--kubeconfig", str(kubeconfig), "--keep-slices",
            "--registry-dir", str(dirs.registry), "--plugins-dir", str(dirs.plugins), "--cdi-dir", str(dirs.cdi),
            "--health", *extra]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        wait_for_socket(proc, dirs.registry / f"{DRIVER}-reg.sock")
        for _ in range(600):  # published right after the sockets are up (a safety limit, not a timing check)
            if fake.objects[SLICES] or proc.poll() is not None:
                break
            time.sleep(0.05)
        yield proc
    finally:
        code, proc.log = stop(proc)  # type: ignore[attr-defined]
        assert code == 0, proc.log  # type: ignore[attr-defined]


def inject(dirs: Dirs, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "fake_gpus", "inject-health", "--plugins-dir", str(dirs.plugins),
                           *args], capture_output=True, text=True, timeout=120)


def device(fake: FakeApi, name: str) -> dict[str, Any]:
    (obj,) = fake.objects[SLICES].values()
    return next(d for d in obj["spec"]["devices"] if d["name"] == name)


def health_stream(dirs: Dirs) -> Iterator[dict[str, tuple[int, str]]]:
    """The kubelet's view: each NodeWatchResources message as {device: (health, message)}."""
    ch = grpc.insecure_channel(f"unix://{dirs.plugins / DRIVER / 'dra.sock'}")
    stream = dra_health_v1_pb2_grpc.DRAResourceHealthStub(ch).NodeWatchResources(
        dra_health_v1_pb2.NodeWatchResourcesRequest())
    try:
        for msg in stream:
            yield {d.device.device_name: (d.health, d.message) for d in msg.devices}
    except grpc.RpcError:
        return
    finally:
        ch.close()


def test_xid_79_taints_the_published_device_and_the_kubelet_sees_it_unhealthy():
    with short_tmpdir() as dirs, serve_fake_api() as (fake, url), plugin(dirs, fake, url, *GATE_ON) as proc:
        watch = health_stream(dirs)
        assert next(watch)["gpu-1"] == (dra_health_v1_pb2.HEALTHY, "")
        out = inject(dirs, "--device", "gpu-1", "--xid", "79")
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == (f"device gpu-1 on node {NODE}: XID 79 (GPU has fallen off the bus): "
                                      "taint gpu.nvidia.com/xid=79:NoSchedule; health Unhealthy")
        assert device(fake, "gpu-1")["taints"] == [XID79]
        assert "taints" not in device(fake, "gpu-0")
        seen = next(h for h in watch if h["gpu-1"][0] != dra_health_v1_pb2.HEALTHY)
        assert seen["gpu-1"] == (dra_health_v1_pb2.UNHEALTHY, "XID 79 (GPU has fallen off the bus)")
        assert seen["gpu-0"] == (dra_health_v1_pb2.HEALTHY, "")
        # the API server stamps timeAdded; a later event of another device keeps it (no re-stamp)
        (obj,) = fake.objects[SLICES].values()
        next(d for d in obj["spec"]["devices"] if d["name"] == "gpu-1")["taints"][0]["timeAdded"] = \
            "2026-01-01T00:00:00Z"
        # an application XID: NVIDIA's effect None, the GPU stays Healthy
        out = inject(dirs, "--device", "gpu-0", "--xid", "13")
        assert out.returncode == 0 and "taint gpu.nvidia.com/xid=13:None; health Healthy" in out.stdout, out
        assert device(fake, "gpu-0")["taints"] == [{"key": "gpu.nvidia.com/xid", "value": "13", "effect": "None"}]
        assert device(fake, "gpu-1")["taints"] == [{**XID79, "timeAdded": "2026-01-01T00:00:00Z"}]
        out = inject(dirs, "--device", "gpu-3", "--gpu-lost")
        assert out.returncode == 0 and device(fake, "gpu-3")["taints"] == [
            {"key": "gpu.nvidia.com/gpu-lost", "effect": "NoSchedule"}], out
        # the lab's repair: the health taints go, Healthy again
        out = inject(dirs, "--device", "gpu-1", "--repair")
        assert out.returncode == 0 and out.stdout.strip().endswith("repaired; health Healthy"), out
        assert "taints" not in device(fake, "gpu-1")
        assert next(h for h in watch if h["gpu-1"][0] == dra_health_v1_pb2.HEALTHY)["gpu-1"][1] == ""
    assert "health event: device gpu-1 on node node-a: XID 79" in proc.log


def test_a_bad_event_is_refused_in_the_plugin_log_and_the_commands_output():
    with short_tmpdir() as dirs, serve_fake_api() as (fake, url), plugin(dirs, fake, url, *GATE_ON) as proc:
        out = inject(dirs, "--device", "gpu-9", "--xid", "79")
        assert out.returncode == 2 and out.stdout == ""
        assert out.stderr == (f"fake_gpus inject-health: health event refused: device 'gpu-9' is not published "
                              f"by driver {DRIVER} on node {NODE}; its devices: gpu-0, gpu-1, "
                              "gpu-2-mig-1g5gb-19-0, gpu-3, nic-0\n")
        # refused before it reaches the plugin
        out = inject(dirs, "--device", "gpu-0", "--xid", "-3")
        assert (out.returncode, out.stderr) == (2, "fake_gpus inject-health: xid -3: an XID is a positive integer "
                                                   "(for example 79 or 48)\n")
        # a file written by hand: not JSON, too big, unknown field: each answered, none taints anything
        spool = dirs.plugins / DRIVER / "health-events"
        answers = {}
        for name, text in {"a": "{not json", "b": json.dumps({"device": "gpu-0", "kind": "xid", "xid": 79,
                                                                "pad": "x" * 5000}),
                           "c": json.dumps({"device": "gpu-0", "kind": "xid", "xid": 79, "effect": "NoExecute"}),
                           "d": json.dumps({"device": "gpu-0", "kind": "reboot"})}.items():
            spool.joinpath(f".{name}").write_text(text)
            spool.joinpath(f".{name}").rename(spool / f"{name}.event.json")
        for name in "abcd":
            for _ in range(600):  # safety limit only
                if (spool / f"{name}.result.json").exists():
                    break
                time.sleep(0.05)
            answers[name] = json.loads((spool / f"{name}.result.json").read_text())
        assert {k: a["ok"] for k, a in answers.items()} == dict.fromkeys("abcd", False)
        assert answers["a"]["message"].startswith("health event refused: not JSON")
        assert answers["b"]["message"] == "health event refused: event file of more than 4096 bytes"
        assert answers["c"]["message"] == ("health event refused: unknown field(s) 'effect': an event has "
                                           "device, kind, xid")
        assert answers["d"]["message"] == ("health event refused: health event kind 'reboot': use one of xid, "
                                           "gpu-lost, unmonitored, repair")
        assert all("taints" not in d for d in next(iter(fake.objects[SLICES].values()))["spec"]["devices"])
    assert "health event refused: device 'gpu-9' is not published" in proc.log


def test_without_nvmldevicehealthcheck_events_are_refused():
    """NVIDIA's driver watches no device health unless its NVMLDeviceHealthCheck gate is on (off by default)."""
    with short_tmpdir() as dirs, serve_fake_api() as (fake, url), plugin(dirs, fake, url):
        out = inject(dirs, "--device", "gpu-1", "--xid", "79")
        assert (out.returncode, out.stderr) == (2, "fake_gpus inject-health: health event refused: feature gate "
                                                   "NVMLDeviceHealthCheck is off: the driver watches no device "
                                                   "health; start the plugin with --feature-gates "
                                                   "NVMLDeviceHealthCheck=true\n")
        assert "taints" not in device(fake, "gpu-1")


def test_a_restarted_plugin_publishes_its_devices_untainted():
    """The taints are not kept across a restart: NVIDIA's driver derives device health from NVML at start, and
    NVML does not replay past XIDs (NVIDIA's NVMLDeviceHealthCheck docs: restart the driver to bring a recovered
    GPU back). An event spooled while no plugin runs is handled when one starts."""
    with short_tmpdir() as dirs, serve_fake_api() as (fake, url):
        with plugin(dirs, fake, url, *GATE_ON):
            assert inject(dirs, "--device", "gpu-1", "--xid", "79").returncode == 0
            assert device(fake, "gpu-1")["taints"] == [XID79]
        assert device(fake, "gpu-1")["taints"] == [XID79]  # --keep-slices: left as it was
        spool = dirs.plugins / DRIVER / "health-events"
        spool.joinpath(".e").write_text(json.dumps({"device": "gpu-0", "kind": "gpu-lost"}))
        spool.joinpath(".e").rename(spool / "e.event.json")
        with plugin(dirs, fake, url, *GATE_ON):
            for _ in range(600):  # safety limit only
                if (spool / "e.result.json").exists():
                    break
                time.sleep(0.05)
            assert json.loads((spool / "e.result.json").read_text())["ok"] is True
            assert "taints" not in device(fake, "gpu-1")
            assert device(fake, "gpu-0")["taints"] == [{"key": "gpu.nvidia.com/gpu-lost", "effect": "NoSchedule"}]
