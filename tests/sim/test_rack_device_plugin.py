"""NVIDIA's supported GB200 set-up (issue 43 item 2): the GPUs through NVIDIA's device plugin
(`nvidia.com/gpu` in each tray's allocatable), NVIDIA's DRA driver with its GPU part off
(kubernetes-sigs/dra-driver-nvidia-gpu demo/specs/imex/README.sh installs the chart with
`--set resources.gpus.enabled=false`), ComputeDomains through DRA: the cluster profile
`nvl72-rack-device-plugin` (`gpuPlugin: device-plugin`) beside the all-DRA `nvl72-rack`. NVIDIA's demos
run unchanged (tests/data/upstream/nvidia-computedomain, dra-driver-nvidia-gpu at 95932046) through
`labkit simulate` as typed.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from fake_gpus.naming import gpu_uuid
from labkit.cli import main
from labkit.cluster.backends import connect
from tests.sim.test_rack_computedomain import DRIVER_NS, UP, pods, simulate

PROFILE = "nvl72-rack-device-plugin"


def test_nvbandwidth_demo_runs_with_device_plugin_gpus_and_a_dra_channel(capsys):
    """demo/specs/imex/nvbandwidth-test-job-1.yaml, unchanged: two workers, `limits: nvidia.com/gpu: 2` each
    and a channel claim; on NVIDIA's set-up the GPUs come from the device plugin (no GPU ResourceClaim,
    no extended-resource claim) and the channel from DRA. The device plugin's default strategies
    (NVIDIA/k8s-device-plugin cmd/nvidia-device-plugin/main.go: device-list-strategy envvar,
    device-id-strategy uuid) give each container NVIDIA_VISIBLE_DEVICES = its GPUs' UUIDs."""
    rep = simulate(capsys, PROFILE, UP / "nvbandwidth-test-job-1.yaml")
    by = pods(rep)
    w0, w1 = by["nvbandwidth-test-1-worker-0"], by["nvbandwidth-test-1-worker-1"]
    assert w0["phase"] == w1["phase"] == "Running"
    assert w0["node"] != w1["node"] and {w0["node"][:-2], w1["node"][:-2]} == {"rack-a-tray-"}
    for w in (w0, w1):
        env = w["containers"][0]["env"]
        assert env["FAKE_IMEX_CHANNELS"] == "channel0" and env["FAKE_GPU_COUNT"] == "2"
        assert env["NVIDIA_VISIBLE_DEVICES"] == ",".join(gpu_uuid(w["node"], m) for m in (0, 1))
        assert env["FAKE_GPU_DEVICES"] == "gpu-0,gpu-1"
    (launcher,) = [p for n, p in by.items() if n.startswith("nvbandwidth-test-1-launcher-")]
    assert launcher["node"] == "control-plane" and launcher["phase"] == "Running"
    # every claim is a compute-domain one (the workers' channels, the daemons'): none holds a GPU
    assert {r["driver"] for c in rep["claims"] for r in c["allocation"]["devices"]["results"]} == \
        {"compute-domain.nvidia.com"}
    assert len(rep["claims"]) == 4
    daemons = [p for p in rep["pods"] if p["namespace"] == DRIVER_NS]
    assert sorted(d["node"] for d in daemons) == sorted([w0["node"], w1["node"]])
    # the contrast the lesson draws: on the all-DRA nvl72-rack the DeviceClass gpu.nvidia.com
    # (extendedResourceName nvidia.com/gpu) serves the same workers' GPUs through a claim each
    dra = simulate(capsys, "nvl72-rack", UP / "nvbandwidth-test-job-1.yaml")
    assert len([c for c in dra["claims"] if any(r["driver"] == "gpu.nvidia.com"
                                                for r in c["allocation"]["devices"]["results"])]) == 2


@pytest.mark.parametrize("demo", ["channel-injection.yaml", "channel-injection-all.yaml"])
def test_channel_injection_demos_run_on_nvidias_set_up(capsys, demo):
    rep = simulate(capsys, PROFILE, UP / demo)
    (pod,) = [p for p in rep["pods"] if p["namespace"] == "default"]
    assert pod["phase"] == "Running" and pod["node"].startswith("rack-a-tray-")
    assert "channel0" in pod["containers"][0]["env"]["FAKE_IMEX_CHANNELS"].split(",")


def test_nodes_slices_and_classes_as_the_chart_with_its_gpu_part_off():
    """deployments/helm/dra-driver-nvidia-gpu/templates/deviceclass-{gpu,mig,vfio-gpu}.yaml are rendered only
    with resources.gpus.enabled; the compute-domain classes with resources.computeDomains.enabled."""
    c = connect("sim", PROFILE, progress=False)
    tray = c.get("Node", "rack-a-tray-00")["status"]
    assert tray["capacity"]["nvidia.com/gpu"] == tray["allocatable"]["nvidia.com/gpu"] == "4"
    assert "nvidia.com/gpu" not in c.get("Node", "control-plane")["status"]["allocatable"]
    drivers = {s["spec"]["driver"] for s in c.list("ResourceSlice")}
    assert "gpu.nvidia.com" not in drivers and "compute-domain.nvidia.com" in drivers
    classes = {d["metadata"]["name"] for d in c.list("DeviceClass")}
    assert not classes & {"gpu.nvidia.com", "mig.nvidia.com", "vfio.gpu.nvidia.com"}
    assert {"compute-domain-default-channel.nvidia.com", "compute-domain-daemon.nvidia.com"} <= classes
    # the all-DRA rack keeps them
    dra = connect("sim", "nvl72-rack", progress=False)
    assert "nvidia.com/gpu" not in dra.get("Node", "rack-a-tray-00")["status"]["allocatable"]
    assert "gpu.nvidia.com" in {d["metadata"]["name"] for d in dra.list("DeviceClass")}


PINNED = """
apiVersion: v1
kind: Pod
metadata: {{name: {name}}}
spec:
  nodeSelector: {{kubernetes.io/hostname: rack-a-tray-03}}
  containers: [{{name: main, image: x, resources: {{limits: {{nvidia.com/gpu: {gpus}}}}}}}]
"""


def test_two_pods_on_one_tray_get_distinct_gpus_and_a_finished_pods_gpus_are_free_again(tmp_path):
    """pkg/kubelet/cm/devicemanager/manager.go (kubernetes/kubernetes): a device is given to one
    container at a time and is free again once its pod has finished or is gone."""
    c = connect("sim", PROFILE, progress=False)
    for name, gpus in (("a", 3), ("b", 1), ("c", 2)):
        f = tmp_path / f"{name}.yaml"
        f.write_text(PINNED.format(name=name, gpus=gpus))
        c.apply(f)
    c.wait()
    env = {p: c.pod_env(p) for p in ("a", "b")}
    seen = env["a"]["NVIDIA_VISIBLE_DEVICES"].split(",") + env["b"]["NVIDIA_VISIBLE_DEVICES"].split(",")
    assert sorted(seen) == sorted(gpu_uuid("rack-a-tray-03", m) for m in range(4))
    assert c.get("Pod", "c")["status"].get("phase", "Pending") == "Pending"
    assert "Insufficient nvidia.com/gpu" in c.explain("c")
    c.delete("Pod", "a")
    c.wait()
    assert c.get("Pod", "c")["status"]["phase"] == "Running"
    assert set(c.pod_env("c")["NVIDIA_VISIBLE_DEVICES"].split(",")) <= set(env["a"]["NVIDIA_VISIBLE_DEVICES"].split(","))


def test_init_containers_gpus_are_reused_and_the_kubelet_rejects_what_it_cannot_give(capsys, tmp_path):
    """A pod bound by hand (spec.nodeName) skips the scheduler; the kubelet's device manager then
    refuses what the node does not have: pkg/kubelet/cm/devicemanager/manager.go ("requested number of
    devices unavailable for ..."), pkg/kubelet/cm/admission/errors.go ("Allocate failed due to ..., which
    is unexpected", UnexpectedAdmissionError), pkg/kubelet/kubelet.go rejectPod ("Pod was rejected: ")."""
    f = tmp_path / "bound.yaml"
    f.write_text("""
apiVersion: v1
kind: Pod
metadata: {name: first}
spec:
  nodeName: rack-a-tray-05
  initContainers: [{name: warmup, image: x, resources: {limits: {nvidia.com/gpu: 3}}}]
  containers:
  - {name: left, image: x, resources: {limits: {nvidia.com/gpu: 2}}}
  - {name: right, image: x, resources: {limits: {nvidia.com/gpu: 2}}}
---
apiVersion: v1
kind: Pod
metadata: {name: second}
spec:
  nodeName: rack-a-tray-05
  containers: [{name: main, image: x, resources: {limits: {nvidia.com/gpu: 1}}}]
""")
    rep = simulate(capsys, PROFILE, f)
    by = pods(rep)
    first = {c["name"]: c["env"]["FAKE_GPU_DEVICES"] for c in by["first"]["containers"]}
    assert by["first"]["phase"] == "Running"
    assert first == {"warmup": "gpu-0,gpu-1,gpu-2", "left": "gpu-0,gpu-1", "right": "gpu-2,gpu-3"}
    late = by["second"]
    assert late["phase"] == "Failed" and late["reason"] == "UnexpectedAdmissionError"
    msg = ("Allocate failed due to requested number of devices unavailable for nvidia.com/gpu. "
           "Requested: 1, Available: 0, which is unexpected")
    assert [(e["type"], e["reason"], e["message"]) for e in late["events"]] == \
        [("Warning", "UnexpectedAdmissionError", msg)]
    c = connect("sim", PROFILE, progress=False)
    c.apply(f)
    c.wait()
    assert c.get("Pod", "second")["status"]["message"] == f"Pod was rejected: {msg}"


@pytest.mark.parametrize(("line", "node_extra", "expected"), [
    ("gpuPlugin: device-plugins", "", "gpuPlugin: must be dra (NVIDIA's DRA driver serves the GPUs, the default) "
                                      "or device-plugin"),
    ("gpuPlugin: device-plugin", "migMode: static", "nodes[0].migMode: gpuPlugin: device-plugin serves whole GPUs"),
    ("gpuPlugin: device-plugin", "allocatable: {nvidia.com/gpu: '8'}",
     "nodes[0].allocatable.nvidia.com/gpu: under gpuPlugin: device-plugin the device plugin registers it"),
])
def test_a_bad_gpu_plugin_profile_is_refused_in_one_line(tmp_path, line, node_extra, expected):
    prof = tmp_path / "mine.yaml"
    prof.write_text(f"{line}\nnodes:\n  - name: n0\n    nodeProfile: dgx-a100\n" +
                    (f"    {node_extra}\n" if node_extra else ""))
    res = subprocess.run([sys.executable, "-m", "labkit", "simulate", "--profile", str(prof), "-f",
                          str(UP / "channel-injection.yaml")], capture_output=True, text=True)
    assert res.returncode == 2, res.stderr
    assert expected in res.stderr and "Traceback" not in res.stderr
    assert str(prof) in res.stderr


def test_the_profile_is_listed_and_says_which_set_up_it_is(capsys):
    from labkit.model.profiles import load_profile, profile_names

    assert {"nvl72-rack", PROFILE} <= set(profile_names())
    prof = load_profile(PROFILE)
    assert "NVIDIA's supported GB200 set-up" in prof.description
    assert "GPUs: NVIDIA device plugin (nvidia.com/gpu in node allocatable)" in prof.summary()
    assert "device plugin" not in load_profile("nvl72-rack").summary()
    # its hardware drawing: the same trays as the all-DRA rack
    assert main(["topology", "--profile", PROFILE, "--node", "rack-a-tray-00", "-o", "json"]) == 0
    ours = capsys.readouterr().out
    assert main(["topology", "--profile", "nvl72-rack", "--node", "rack-a-tray-00", "-o", "json"]) == 0
    assert ours == capsys.readouterr().out


@pytest.mark.parametrize("backend", ["local", "kind"])
def test_the_real_backends_refuse_the_device_plugin_set_up_in_one_line(backend):
    """`labkit cluster up` as typed: the real backends run the fake DRA driver, which would publish the GPUs through
    DRA; the device-plugin set-up is the sim's, said before anything starts (exit 2, the fix named)."""
    out = subprocess.run([sys.executable, "-m", "labkit", "cluster", "up", "--backend", backend, "--profile",
                          "nvl72-rack-device-plugin"], capture_output=True, text=True, timeout=None, check=False)
    assert out.returncode == 2, out.stderr
    assert out.stderr.strip().splitlines() == [
        f"labkit cluster: cluster profile nvl72-rack-device-plugin: gpuPlugin: device-plugin (GPUs through NVIDIA's "
        f"device plugin) is modelled on the sim backend only; the {backend} backend runs the fake DRA driver; fix: "
        "use --backend sim for this profile"]
