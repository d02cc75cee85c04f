"""Rack-scale NVLink (issue 27) on the sim: NVIDIA's ComputeDomain and Fabric Manager demos,
unchanged (tests/data/upstream/nvidia-computedomain, kubernetes-sigs/dra-driver-nvidia-gpu at
95932046), through `labkit simulate` as typed, with the outcome upstream's bats tests and docs
expect; the controller's objects, status and deletion through the cluster API a notebook uses.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fake_gpus.catalog import gpu_model, load_node_profile
from fake_gpus.slices import build_slices
from labkit.cli import main
from labkit.cluster.backends import connect
from tests.paths import TEST_DATA

UP = TEST_DATA / "upstream" / "nvidia-computedomain"
DRIVER_NS = "dra-driver-nvidia-gpu"
RACK_A = "5f0c9a3e-1d2b-4c6e-8a7f-3b9d2e1c0a01.1"


def simulate(capsys, profile: str, *files: Path | str) -> dict:
    rc = main(["simulate", "--profile", profile, "-o", "json", "-f", *map(str, files)])
    out, err = capsys.readouterr()
    assert rc == 0, err
    return json.loads(out)


def pods(rep: dict) -> dict[str, dict]:
    return {p["name"]: p for p in rep["pods"]}


def test_channel_injection_demo_runs_with_channel0_on_a_tray(capsys):
    """bats test_cd_imex_chan_inject 'IMEX channel injection (single)': the pod runs and lists channel0."""
    rep = simulate(capsys, "nvl72-rack", UP / "channel-injection.yaml")
    pod = pods(rep)["imex-channel-injection"]
    assert pod["phase"] == "Running" and pod["node"].startswith("rack-a-tray-")
    env = pod["containers"][0]["env"]
    assert env["FAKE_IMEX_CHANNELS"] == "channel0"
    assert env["FAKE_DRA_DRIVER"] == "compute-domain.nvidia.com"
    # the daemon the DaemonSet started on that node, with its own claim
    daemons = [p for p in rep["pods"] if p["namespace"] == DRIVER_NS]
    assert [d["node"] for d in daemons] == [pod["node"]] and daemons[0]["phase"] == "Running"
    assert "COMPUTE_DOMAIN_UUID" in daemons[0]["containers"][0]["env"]
    # before the daemon was Ready the plugin refused, in its words, and the kubelet retried
    msgs = [e["message"] for e in pod["events"] if e["type"] == "Warning"]
    assert any("current node not ready in ComputeDomain" in m for m in msgs)


def test_channel_injection_all_gives_all_2048_channels(capsys):
    """bats 'IMEX channel injection (all)': the pod's listing contains channel2047 and channel222."""
    rep = simulate(capsys, "nvl72-rack", UP / "channel-injection-all.yaml")
    pod = pods(rep)["imex-channel-injection-all"]
    assert pod["phase"] == "Running"
    channels = pod["containers"][0]["env"]["FAKE_IMEX_CHANNELS"].split(",")
    assert len(channels) == 2048 and {"channel2047", "channel222"} <= set(channels)


def test_nvbandwidth_mpijob_lands_two_workers_on_two_trays_of_one_rack(capsys):
    """demo/specs/imex nvbandwidth-test-job-1: numNodes 2, two workers with 2 GPUs each; channel-0 is one
    device per node, so the scheduler puts the workers on two trays; the launcher waits for them."""
    rep = simulate(capsys, "nvl72-rack", UP / "nvbandwidth-test-job-1.yaml")
    by = pods(rep)
    w0, w1 = by["nvbandwidth-test-1-worker-0"], by["nvbandwidth-test-1-worker-1"]
    assert w0["phase"] == w1["phase"] == "Running" and w0["node"] != w1["node"]
    for w in (w0, w1):
        env = w["containers"][0]["env"]
        assert env["FAKE_IMEX_CHANNELS"] == "channel0" and env["FAKE_GPU_COUNT"] == "2"
    (launcher,) = [p for n, p in by.items() if n.startswith("nvbandwidth-test-1-launcher-")]
    assert launcher["node"] == "control-plane" and launcher["phase"] == "Running"


def test_controller_objects_status_and_deletion():
    c = connect("sim", "nvl72-rack", progress=False)
    c.apply(UP / "nvbandwidth-test-job-1.yaml")
    c.wait()
    cd = c.get("ComputeDomain", "nvbandwidth-test-compute-domain-1")
    uid = cd["metadata"]["uid"]
    assert cd["metadata"]["finalizers"] == ["resource.nvidia.com/computeDomain"]
    assert cd["status"]["status"] == "Ready"
    nodes = cd["status"]["nodes"]
    assert sorted(n["index"] for n in nodes) == [0, 1]
    assert {n["cliqueID"] for n in nodes} == {RACK_A} and {n["status"] for n in nodes} == {"Ready"}
    rct = c.get("ResourceClaimTemplate", "nvbandwidth-test-compute-domain-1-channel")
    assert rct["metadata"]["labels"] == {"resource.nvidia.com/computeDomain": uid,
                                         "resource.nvidia.com/computeDomainTarget": "Workload"}
    (req,) = rct["spec"]["spec"]["devices"]["requests"]
    assert req["exactly"]["deviceClassName"] == "compute-domain-default-channel.nvidia.com"
    params = rct["spec"]["spec"]["devices"]["config"][0]["opaque"]["parameters"]
    assert params == {"apiVersion": "resource.nvidia.com/v1beta1", "kind": "ComputeDomainChannelConfig",
                      "domainID": uid, "allocationMode": "Single"}
    c.get("ResourceClaimTemplate", f"computedomain-daemon-{uid}", DRIVER_NS)
    c.get("DaemonSet", f"computedomain-daemon-{uid}", DRIVER_NS)
    labelled = [n["metadata"]["name"] for n in c.list("Node")
                if n["metadata"]["labels"].get("resource.nvidia.com/computeDomain") == uid]
    assert sorted(labelled) == sorted(n["name"] for n in nodes)
    # `kubectl get computedomaincliques -n <driver ns>`: one clique (one rack), its daemons = status.nodes
    (clique,) = c.list("ComputeDomainClique", DRIVER_NS)
    assert clique["metadata"]["name"] == f"{uid}.{RACK_A}"
    assert clique["metadata"]["labels"] == {"resource.nvidia.com/computeDomain": uid,
                                            "resource.nvidia.com/computeDomain.cliqueID": RACK_A}
    assert [(d["nodeName"], d["ipAddress"], d["cliqueID"], d["index"], d["status"]) for d in clique["daemons"]] == \
        sorted((n["name"], n["ipAddress"], n["cliqueID"], n["index"], n["status"]) for n in nodes)
    # each daemon's container: its clique and its domain (NVIDIA's GetCDIContainerEditsCommon)
    for pod in c.list("Pod", DRIVER_NS):
        env = c.pod_env(pod["metadata"]["name"], DRIVER_NS)
        assert {k: env[k] for k in ("CLIQUE_ID", "COMPUTE_DOMAIN_UUID", "COMPUTE_DOMAIN_NAME",
                                    "COMPUTE_DOMAIN_NAMESPACE")} == {
            "CLIQUE_ID": RACK_A, "COMPUTE_DOMAIN_UUID": uid, "COMPUTE_DOMAIN_NAME": "nvbandwidth-test-compute-domain-1",
            "COMPUTE_DOMAIN_NAMESPACE": "default"}

    c.delete("MPIJob", "nvbandwidth-test-1")
    c.delete("ComputeDomain", "nvbandwidth-test-compute-domain-1")
    c.wait()
    assert c.list("ComputeDomain") == [] and c.list("DaemonSet", DRIVER_NS) == []
    assert c.list("ResourceClaimTemplate") == [] and c.list("Pod", DRIVER_NS) == []
    assert c.list("ComputeDomainClique") == []
    assert not [n for n in c.list("Node") if "resource.nvidia.com/computeDomain" in n["metadata"]["labels"]]


def test_numnodes_beyond_one_rack_stays_notready_and_the_scheduler_says_why(capsys, tmp_path):
    """19 pods pinned to one rack's clique, 4 GPUs each: 18 trays take 18; the 19th is Pending in
    kube-scheduler's words and the ComputeDomain (numNodes 19) never gets Ready."""
    f = tmp_path / "too-big.yaml"
    f.write_text(f"""
apiVersion: resource.nvidia.com/v1beta1
kind: ComputeDomain
metadata: {{name: big}}
spec: {{numNodes: 19, channel: {{resourceClaimTemplate: {{name: big-channel}}}}}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: trainer}}
spec:
  replicas: 19
  selector: {{matchLabels: {{app: trainer}}}}
  template:
    metadata: {{labels: {{app: trainer}}}}
    spec:
      nodeSelector: {{nvidia.com/gpu.clique: "{RACK_A}"}}
      containers:
      - name: c
        image: x
        resources:
          limits: {{nvidia.com/gpu: 4}}
          claims: [{{name: channel}}]
      resourceClaims: [{{name: channel, resourceClaimTemplateName: big-channel}}]
""")
    rep = simulate(capsys, "nvl72-two-racks", f)
    trainers = [p for p in rep["pods"] if p["name"].startswith("trainer-")]
    assert sorted(p["phase"] for p in trainers) == ["Pending"] + ["Running"] * 18
    assert {p["node"] for p in trainers if p["node"]} == {f"rack-a-tray-{i:02d}" for i in range(18)}
    (pending,) = [p for p in trainers if p["phase"] == "Pending"]
    msg = next(e["message"] for e in pending["events"] if e["reason"] == "FailedScheduling")
    assert msg.startswith("0/37 nodes are available:"), msg
    assert "19 node(s) didn't match Pod's node affinity/selector" in msg, msg
    c = connect("sim", "nvl72-two-racks", progress=False)
    c.apply(f)
    c.wait()
    assert c.get("ComputeDomain", "big")["status"]["status"] == "NotReady"


def test_a_claim_from_another_namespace_is_refused_as_the_plugin_does(capsys, tmp_path):
    f = tmp_path / "other-ns.yaml"
    f.write_text((UP / "channel-injection.yaml").read_text() + """
---
apiVersion: v1
kind: Namespace
metadata: {name: other}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: stolen, namespace: other}
spec:
  devices:
    requests: [{name: channel, exactly: {deviceClassName: compute-domain-default-channel.nvidia.com}}]
    config:
    - requests: [channel]
      opaque:
        driver: compute-domain.nvidia.com
        parameters: {apiVersion: resource.nvidia.com/v1beta1, kind: ComputeDomainChannelConfig, domainID: nope}
---
apiVersion: v1
kind: Pod
metadata: {name: thief, namespace: other}
spec:
  containers: [{name: c, image: x, resources: {claims: [{name: ch}]}}]
  resourceClaims: [{name: ch, resourceClaimName: stolen}]
""")
    rep = simulate(capsys, "nvl72-rack", f)
    thief = pods(rep)["thief"]
    assert thief["phase"] == "Pending" and thief["node"]
    msgs = [e["message"] for e in thief["events"] if e["reason"] == "FailedPrepareDynamicResources"]
    assert msgs and "ComputeDomain not found: nope" in msgs[0]


def test_fabric_manager_demo_keeps_two_gpus_in_one_size2_partition(capsys):
    """demo/specs/fabric-manager-partitioning: matchAttribute gpu.nvidia.com/partition2 over vfio GPUs."""
    d = UP / "fabric-manager-partitioning"
    rep = simulate(capsys, "fm-partitions", d / "resourceClaimTemplates.yaml", d / "pod.yaml")
    pod = pods(rep)["fm-partition-pod"]
    assert pod["phase"] == "Running" and pod["node"] == "hgx-h100-0"
    (claim,) = rep["claims"]
    devs = [r["device"] for r in claim["allocation"]["devices"]["results"]]
    slices = build_slices("hgx-h100-fm", "hgx-h100-0")
    attrs = {d["name"]: d["attributes"] for s in slices for d in s["spec"]["devices"]}
    assert len(devs) == 2 and len({attrs[d]["partition2"]["int"] for d in devs}) == 1


def test_fabric_manager_attributes_as_the_gate_publishes_them():
    slices = build_slices("hgx-b200-fm", "n")
    devs = {d["name"]: d["attributes"] for s in slices for d in s["spec"]["devices"]}
    a = devs["gpu-5"]
    assert a["gpuModuleID"] == {"int": 6}
    assert {k: v["int"] for k, v in a.items() if k.startswith("partition")} == {
        "partition8": 0, "partition4": 2, "partition2": 5, "partition1": 12}
    # without Fabric Manager partitions (every other profile) nothing of this is published
    assert not any(k.startswith(("partition", "gpuModuleID")) for s in build_slices("hgx-h200", "n")
                   for d in s["spec"]["devices"] for k in d["attributes"])


def test_nvl72_trays_publish_compute_domain_devices_and_blackwell_gpus():
    slices = build_slices("gb200-nvl72-tray", "t")
    by_driver = {s["spec"]["driver"]: s["spec"]["devices"] for s in slices}
    assert [d["name"] for d in by_driver["compute-domain.nvidia.com"]] == ["channel-0", "daemon-0"]
    gpus = by_driver["gpu.nvidia.com"]
    assert len(gpus) == 4 and {g["attributes"]["addressingMode"]["string"] for g in gpus} == {"ATS"}
    assert {g["attributes"]["productName"]["string"] for g in gpus} == {"NVIDIA GB200"}
    prof = load_node_profile("gb200-nvl72-tray")
    assert len(prof.sockets) == 2 and prof.nvlink_domains[0]["bandwidthGBps"] == 1800
    assert "compute-domain.nvidia.com" not in {s["spec"]["driver"] for s in build_slices("dgx-h100", "d")}


@pytest.mark.parametrize(("model", "gb", "sms", "cc"), [("GB200", 186, 148, "10.0"), ("GB300", 288, 160, "10.3"),
                                                       ("B200", 180, 148, "10.0")])
def test_blackwell_models_match_the_datasheets(model, gb, sms, cc):
    m = gpu_model(model)
    assert round(m.memory_bytes / 1e9) == gb and m.multiprocessors == sms and m.cuda_compute_capability == cc


def test_bats_unknown_field_in_the_channel_config_fails_prepare_in_nvidias_words(capsys, tmp_path):
    """bats test_cd_misc 'CDs: reject unknown field in opaque cfg in CD chan ResourceClaim': the spec
    template rendered as tests/bats/setup_suite.bash does for resource.k8s.io/v1 (envsubst); the pod
    stays in ContainerCreating with a FailedPrepareDynamicResources event that says "error preparing
    devices" and 'strict decoding error: unknown field "unexpectedField"'."""
    tmpl = (UP.parent / "nvidia-bats" / "rc-opaque-cfg-unknown-field.yaml.tmpl").read_text()
    spec = tmp_path / "rc-opaque-cfg-unknown-field.yaml"
    spec.write_text(tmpl.replace("${TEST_K8S_RESOURCE_API_VERSION}", "v1").replace(
        "${TEST_DEVCLASSNAME_CD_CHANNEL}", "exactly: {deviceClassName: compute-domain-default-channel.nvidia.com}"))
    rep = simulate(capsys, "nvl72-two-trays", spec)
    (pod,) = rep["pods"]
    assert pod["name"].startswith("batssuite-pod-boc-") and pod["phase"] == "Pending"
    assert pod["reason"] == "ContainerCreating"
    (event,) = [e for e in pod["events"] if e["reason"] == "FailedPrepareDynamicResources"]
    assert "error preparing devices" in event["message"]
    assert 'strict decoding error: unknown field "unexpectedField"' in event["message"]
