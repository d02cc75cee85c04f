"""The kind backend, tested without Docker: configs, preflight, the exact commands, manifests."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest
import yaml

import labkit.cluster.backends.kind.backend as backend_module
from labkit.cluster import runstate
from labkit.cluster.backends import backend_class
from labkit.cluster.backends.kind.backend import KindCluster, normalize_image
from labkit.cluster.backends.kind.config import CDI_PATCH, MIG_LABEL, OOM_PATCH, PROFILE_LABEL, kind_config
from labkit.cluster.backends.kind.driver import driver_manifests
from labkit.cluster.backends.kind.images import NODE_IMAGES, node_image, parse_kind_version
from labkit.cluster.backends.kind.preflight import HostFacts, readiness, run_preflight
from labkit.cluster.backends.kind.runner import CommandError, RecordingRunner
from labkit.cluster.base import ClusterError
from labkit.model.profiles import load_profile
from tests.paths import REPO

pytestmark = pytest.mark.slow  # heavy: `make check` leaves it out, `make test` runs it

ALL_TOOLS = {"docker": "docker", "podman": None, "kind": "kind", "kubectl": "kubectl"}
KUBECTL_137 = json.dumps({"clientVersion": {"major": "1", "minor": "37", "gitVersion": "v1.37.1"}})
NET_ID = "f00dfeed" * 8  # kind's network as the engine names it (a test value)
HEALTHY = {"docker info": (0, "28.2.2\n"), "kind version": (0, "kind v0.33.0 go1.25.1 linux/amd64\n"),
           "kubectl version --client": (0, KUBECTL_137),
           "docker exec": (0, "[plugins]\n  enable_cdi = true\n")}


@pytest.fixture(autouse=True)
def _run_dir(tmp_path_factory, monkeypatch):
    """Run state of these tests never touches the user's ~/.cache/dra-labkit/run."""
    monkeypatch.setenv("LABKIT_RUN_DIR", str(tmp_path_factory.mktemp("run")))
    for var in ("LABKIT_KIND_NODE_IMAGE", "LABKIT_KIND_SWAP_IMAGES", "LABKIT_FAKE_GPUS_IMAGE",
                "LABKIT_KIND_WORKLOAD_IMAGE", "KIND_EXPERIMENTAL_PROVIDER"):
        monkeypatch.delenv(var, raising=False)


def test_node_images_are_pinned_by_digest():
    for minor, image in NODE_IMAGES.items():
        assert image.startswith(f"kindest/node:v{minor}.")
        assert "@sha256:" in image and len(image.split("@sha256:")[1]) == 64
    assert node_image("v1.37.2") == NODE_IMAGES["1.37"]
    with pytest.raises(ValueError, match="known versions: 1.34, 1.35, 1.36, 1.37"):
        node_image("1.30")


def test_workshop_config_has_one_labelled_worker_per_profile_node():
    cfg = kind_config("workshop")
    assert cfg["apiVersion"] == "kind.x-k8s.io/v1alpha4" and cfg["kind"] == "Cluster"
    roles = [n["role"] for n in cfg["nodes"]]
    assert roles == ["control-plane", "worker", "worker", "worker"]
    workers = cfg["nodes"][1:]
    assert [w["labels"][PROFILE_LABEL] for w in workers] == ["dgx-a100", "t4-inference", "t4-inference"]
    assert [w["labels"]["labkit.dev/profile-node"] for w in workers] == ["dgx-a100-0", "t4-0", "t4-1"]
    # each worker registers under its profile node's name, so kubernetes.io/hostname pins work as on sim
    joins = [yaml.safe_load(w["kubeadmConfigPatches"][0]) for w in workers]
    assert [j["nodeRegistration"] for j in joins] == [{"name": "dgx-a100-0"}, {"name": "t4-0"}, {"name": "t4-1"}]
    assert all(j["kind"] == "JoinConfiguration" for j in joins)
    # ... and the API server reaches those kubelets by IP, not by a node name no DNS knows
    api, init, join, kubelet = [yaml.safe_load(p) for p in cfg["kubeadmConfigPatches"]]
    assert api["kind"] == "ClusterConfiguration"
    assert kubelet == {"kind": "KubeletConfiguration", "syncFrequency": "10s"}
    # kubeadm's own waits are longer than its defaults, so a busy machine does not fail the create
    assert (init["kind"], init["apiVersion"]) == ("InitConfiguration", "kubeadm.k8s.io/v1beta4")
    assert init["timeouts"]["controlPlaneComponentHealthCheck"] == "10m0s"
    assert join["kind"] == "JoinConfiguration" and join["timeouts"]["tlsBootstrap"] == "10m0s"
    assert {"name": "kubelet-preferred-address-types", "value": "InternalIP,Hostname"} in api["apiServer"]["extraArgs"]
    assert {"name": "runtime-config", "value": ""} in api["apiServer"]["extraArgs"]
    assert all(n["image"] == NODE_IMAGES["1.37"] for n in cfg["nodes"])
    assert cfg["containerdConfigPatches"] == [CDI_PATCH]
    assert "enable_cdi = true" in CDI_PATCH
    # 1.37 needs no gates or alpha APIs for core DRA
    assert "featureGates" not in cfg and "runtimeConfig" not in cfg


def test_node_image_override_and_oom_patch(monkeypatch):
    monkeypatch.setenv("LABKIT_KIND_NODE_IMAGE", "labkit/kind-node:v1.37.1-abc")
    cfg = kind_config("tiny", restrict_oom_score_adj=True)
    assert {n["image"] for n in cfg["nodes"]} == {"labkit/kind-node:v1.37.1-abc"}
    assert cfg["containerdConfigPatches"] == [CDI_PATCH, OOM_PATCH]
    assert "restrict_oom_score_adj = true" in OOM_PATCH


def test_gates_runtime_config_taints_and_cgroup_v1_patch():
    profile = {
        "name": "p", "kubernetesVersion": "1.35",
        "featureGates": {"DRADeviceTaintRules": True, "DRAConsumableCapacity": True},
        "nodes": [{"name": "n0", "nodeProfile": "mig-a100", "migMode": "static",
                   "taints": [{"key": "gpu", "value": "t4", "effect": "NoSchedule"}]}],
    }
    cfg = kind_config(profile, allow_cgroup_v1=True)
    assert cfg["featureGates"] == {"DRAConsumableCapacity": True, "DRADeviceTaintRules": True}
    assert cfg["runtimeConfig"] == {"resource.k8s.io/v1alpha3": "true"}
    worker = cfg["nodes"][1]
    assert worker["image"] == NODE_IMAGES["1.35"]
    assert worker["labels"][MIG_LABEL] == "static"
    patches = [yaml.safe_load(p) for p in worker["kubeadmConfigPatches"]]
    assert patches[0] == {"kind": "JoinConfiguration", "nodeRegistration": {
        "name": "n0", "taints": [{"key": "gpu", "value": "t4", "effect": "NoSchedule"}]}}
    assert {"kind": "KubeletConfiguration", "failCgroupV1": False} in patches
    api = yaml.safe_load(cfg["kubeadmConfigPatches"][0])
    args = {a["name"]: a["value"] for a in api["apiServer"]["extraArgs"]}
    # the merge patch replaces kind's list: the gates and runtime config must be repeated in it
    assert args["runtime-config"] == "resource.k8s.io/v1alpha3=true"
    assert args["feature-gates"] == "DRAConsumableCapacity=true,DRADeviceTaintRules=true"


def test_parse_kind_version():
    assert parse_kind_version("kind v0.33.0 go1.25.1 linux/amd64") == (0, 33, 0)
    assert parse_kind_version("kind v0.20.0-alpha+abc go1.20") == (0, 20, 0)
    assert parse_kind_version("garbage") is None


def _failures(checks):
    return {c.name: c for c in checks if not c.ok}


def test_preflight_all_good():
    checks = run_preflight(RecordingRunner(responses=HEALTHY), HostFacts(dict(ALL_TOOLS), cgroup_v2=True))
    assert _failures(checks) == {}
    ok, why = readiness(checks)
    assert ok and why == "container engine docker 28.2.2"


def test_preflight_no_engine_no_kind_no_kubectl():
    facts = HostFacts({"docker": None, "podman": None, "kind": None, "kubectl": None})
    fails = _failures(run_preflight(RecordingRunner(), facts))
    assert set(fails) == {"container engine", "kind", "kubectl"}
    assert "sudo apt-get install -y docker.io" in fails["container engine"].fix
    assert "backend='local'" in fails["container engine"].fix
    assert "sigs.k8s.io/kind@v0.33.0" in fails["kind"].fix or "kind.sigs.k8s.io/dl/v0.33.0" in fails["kind"].fix
    assert "stable-1.37.txt" in fails["kubectl"].fix and "linux/amd64/kubectl" in fails["kubectl"].fix
    ok, why = readiness(run_preflight(RecordingRunner(), facts))
    assert not ok and "neither docker nor podman is installed — fix: sudo apt-get install" in why


def test_preflight_mac_fixes():
    facts = HostFacts({"docker": "docker", "podman": None, "kind": None, "kubectl": None}, system="Darwin",
                      machine="arm64")
    runner = RecordingRunner(responses={"docker info": (1, "Cannot connect to the Docker daemon")})
    fails = _failures(run_preflight(runner, facts))
    assert fails["container engine"].fix == "open -a Docker"
    assert "darwin/arm64/kubectl" in fails["kubectl"].fix


def test_preflight_daemon_down_old_kind_old_kubectl_cgroup_v1():
    old_kubectl = json.dumps({"clientVersion": {"major": "1", "minor": "32", "gitVersion": "v1.32.4"}})
    runner = RecordingRunner(responses={"docker info": (1, "Cannot connect to the Docker daemon at unix:///x. "
                                                           "Is the docker daemon running?"),
                                        "kind version": (0, "kind v0.29.0 go1.24 linux/amd64"),
                                        "kubectl version": (0, old_kubectl)})
    checks = run_preflight(runner, HostFacts(dict(ALL_TOOLS), cgroup_v2=False), "1.37")
    fails = _failures(checks)
    assert "does not answer" in fails["container engine"].detail
    assert fails["container engine"].fix.startswith("sudo systemctl start docker")
    assert "older than v0.33.0" in fails["kind"].detail
    assert "kubectl 1.32 (kubectl) is too far from Kubernetes 1.37" in fails["kubectl"].detail
    # cgroup v1 runs (labkit sets failCgroupV1: false), with a warning and the permanent fix
    (cg,) = [c for c in checks if c.name == "cgroups"]
    assert cg.ok and cg.warning and "failCgroupV1: false" in cg.detail
    assert "systemd.unified_cgroup_hierarchy=1" in cg.fix
    assert str(cg).startswith("[warn] cgroups:")


def test_preflight_permission_denied_says_docker_group():
    runner = RecordingRunner(responses={
        "docker info": (1, "permission denied while trying to connect to the Docker daemon socket"),
        **{k: v for k, v in HEALTHY.items() if k != "docker info"}})
    fails = _failures(run_preflight(runner, HostFacts(dict(ALL_TOOLS))))
    assert fails["container engine"].fix.startswith("sudo usermod -aG docker $USER")


def test_preflight_missing_cap_sys_resource_is_a_warning():
    checks = run_preflight(RecordingRunner(responses=HEALTHY), HostFacts(dict(ALL_TOOLS), cap_sys_resource=False))
    assert _failures(checks) == {}
    (cap,) = [c for c in checks if c.name == "capabilities"]
    assert cap.warning and "CAP_SYS_RESOURCE" in cap.detail
    ok, why = readiness(checks)
    assert ok and "CAP_SYS_RESOURCE" in why


def test_podman_is_used_when_docker_is_absent():
    runner = RecordingRunner(responses={"podman info": (0, "5.0\n"), "kind version": (0, "kind v0.33.0"),
                                        "kubectl version": (0, KUBECTL_137)})
    facts = HostFacts({"docker": None, "podman": "/usr/bin/podman", "kind": "kind", "kubectl": "kubectl"})
    assert _failures(run_preflight(runner, facts)) == {}
    assert ["podman", "info", "--format", "{{.ServerVersion}}"] in runner.commands


def test_cluster_up_cli_names_what_is_missing_and_the_fix(tmp_path):
    """`labkit cluster up --backend kind` as typed, on a machine with no engine, kind or kubectl."""
    env = {"PATH": str(tmp_path), "HOME": str(tmp_path), "LABKIT_KIND_BIN_DIR": str(tmp_path / "none"),
           "LABKIT_RUN_DIR": str(tmp_path / "run")}
    out = subprocess.run([sys.executable, "-m", "labkit", "cluster", "up", "--backend", "kind", "--profile", "tiny"],
                         capture_output=True, text=True, env=env, cwd=REPO)
    assert out.returncode == 1, out.stderr  # the machine cannot do it: an engine error, not bad input
    assert "[FAIL] container engine: neither docker nor podman is installed" in out.stderr
    assert "fix: sudo apt-get install -y docker.io" in out.stderr
    assert "[FAIL] kind: kind is not installed" in out.stderr
    assert "[FAIL] kubectl: kubectl is not installed" in out.stderr
    assert out.stderr.strip().endswith("labkit cluster: kind cannot run on this machine yet: 3 check(s) failed (fixes above)")
    assert "Traceback" not in out.stderr


@pytest.fixture
def deploy_dir(tmp_path: Path) -> Path:
    deploy = tmp_path / "deploy"
    deploy.mkdir()
    (deploy / "rbac.yaml").write_text(textwrap.dedent("""\
        apiVersion: v1
        kind: Namespace
        metadata: {name: fake-gpus}
        """))
    (deploy / "daemonset.yaml").write_text(textwrap.dedent("""\
        apiVersion: apps/v1
        kind: DaemonSet
        metadata: {name: fake-gpus-kubelet-plugin, namespace: fake-gpus}
        spec:
          selector: {matchLabels: {app: x}}
          template:
            metadata: {labels: {app: x}}
            spec:
              containers:
              - name: plugin
                image: placeholder
                args: [--profile, $(NODE_PROFILE), --node, $(NODE_NAME)]
        """))
    (deploy / "kustomization.yaml").write_text("resources: [rbac.yaml, daemonset.yaml]\n")
    return deploy


def test_driver_manifests_one_daemonset_per_hardware(deploy_dir: Path):
    objs = driver_manifests(load_profile("workshop"), "labkit/fake-gpus:dev", deploy_dir=deploy_dir)
    kinds = [o["kind"] for o in objs]
    assert kinds == ["Namespace", "DaemonSet", "DaemonSet"]
    ds = {o["metadata"]["name"]: o for o in objs if o["kind"] == "DaemonSet"}
    assert set(ds) == {"fake-gpus-kubelet-plugin-dgx-a100", "fake-gpus-kubelet-plugin-t4-inference"}
    t4 = ds["fake-gpus-kubelet-plugin-t4-inference"]["spec"]
    assert t4["template"]["spec"]["nodeSelector"] == {PROFILE_LABEL: "t4-inference"}
    container = t4["template"]["spec"]["containers"][0]
    assert container["image"] == "labkit/fake-gpus:dev" and container["imagePullPolicy"] == "IfNotPresent"
    assert container["args"] == ["--node", "$(NODE_NAME)", "--profile", "t4-inference"]
    assert t4["selector"]["matchLabels"].items() <= t4["template"]["metadata"]["labels"].items()


def test_one_driver_per_node_when_a_hardware_runs_with_and_without_mig():
    """mig-lab has dgx-a100 nodes with and without MIG: each node must match exactly one DaemonSet."""
    profile = load_profile("mig-lab")
    dss = [o for o in driver_manifests(profile, "img") if o["kind"] == "DaemonSet"]
    cfg = kind_config(profile)

    def matches(ds: dict, labels: dict) -> bool:
        spec = ds["spec"]["template"]["spec"]
        if any(labels.get(k) != v for k, v in spec["nodeSelector"].items()):
            return False
        terms = (spec.get("affinity") or {}).get("nodeAffinity", {}).get(
            "requiredDuringSchedulingIgnoredDuringExecution", {}).get("nodeSelectorTerms", [])
        return all(e["key"] not in labels for t in terms for e in t["matchExpressions"] if e["operator"] == "DoesNotExist")

    for worker in cfg["nodes"][1:]:
        assert len([d for d in dss if matches(d, worker["labels"])]) == 1, worker["labels"]


def _slices_json(profile: str) -> str:
    """What `kubectl get resourceslices -o json` prints once every driver pod has published."""
    from fake_gpus.catalog import load_node_profile
    from fake_gpus.slices import build_slices

    prof = load_profile(profile)
    items = []
    for n in prof.nodes:
        kw = {"mig_mode": n.mig_mode} if n.mig_mode else {}
        items += build_slices(load_node_profile(n.node_profile), n.name, kubernetes_version="1.37", **kw)
    return json.dumps({"kind": "List", "items": items})


def _healthy_cluster(tmp_path: Path, deploy_dir: Path, monkeypatch, **kw) -> tuple[KindCluster, RecordingRunner]:
    import labkit.cluster.backends.kind.backend as backend

    monkeypatch.setattr(backend, "driver_manifests",
                        lambda profile, image: driver_manifests(profile, image, deploy_dir=deploy_dir))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where the network marker goes
    dockerfile = deploy_dir / "workload" / "Dockerfile"
    dockerfile.parent.mkdir(exist_ok=True)
    dockerfile.write_text("FROM scratch\n")
    monkeypatch.setattr(backend, "WORKLOAD_DOCKERFILE", dockerfile)
    runner = RecordingRunner(responses={**HEALTHY, "kind get clusters": (0, "No kind clusters found.\n"),
                                        "docker image inspect": (1, "Error: No such image"),
                                        "docker network inspect kind": (1, "Error: No such network: kind"),
                                        "docker network inspect kind --format {{.Id}}": (0, NET_ID + "\n"),
                                        "kubectl --kubeconfig": (0, _slices_json("workshop"))})
    cluster = KindCluster(runner=runner, facts=HostFacts(dict(ALL_TOOLS)), state_dir=tmp_path, progress=False, **kw)
    return cluster, runner


def test_up_runs_exactly_the_planned_commands(tmp_path, deploy_dir, monkeypatch):
    cluster, runner = _healthy_cluster(tmp_path, deploy_dir, monkeypatch)
    cluster.up("workshop")
    lines = runner.lines()
    kc = f"--kubeconfig {tmp_path}/kubeconfig"
    assert lines[:4] == ["docker info --format '{{.ServerVersion}}'", "kind version",
                         "kubectl version --client -o json", "kind get clusters"]
    expected = [
        "docker network inspect kind",
        f"kind create cluster --name labkit-workshop --config {tmp_path}/kind-config.yaml {kc} --wait 180s",
        "docker network inspect kind --format '{{.Id}}'",  # made here: its ID is marked as labkit's
        "docker exec labkit-workshop-worker containerd config dump",
        "docker image inspect labkit/fake-gpus:dev",
        "docker build -t labkit/fake-gpus:dev -f",
        "docker image inspect labkit/workload:dev",
        "docker build -t labkit/workload:dev -f",
        "kind load docker-image labkit/fake-gpus:dev labkit/workload:dev --name labkit-workshop"
        " --nodes labkit-workshop-worker,labkit-workshop-worker2,labkit-workshop-worker3",
        f"kubectl {kc} apply -f {tmp_path}/fake-gpus.yaml",
        # one CoreDNS on a one-control-plane cluster, not kubeadm's 2 (backend.COREDNS_REPLICAS)
        f"kubectl {kc} -n kube-system scale deployment/coredns --replicas=1",
        f"kubectl {kc} -n fake-gpus rollout status daemonset/fake-gpus-kubelet-plugin-dgx-a100 --timeout 300s",
        f"kubectl {kc} -n fake-gpus rollout status daemonset/fake-gpus-kubelet-plugin-t4-inference --timeout 300s",
        f"kubectl {kc} get resourceslices.resource.k8s.io -o json",
    ]
    rest = lines[4:]
    assert len(rest) == len(expected), "\n".join(rest)
    for line, want in zip(rest, expected, strict=True):
        assert line.startswith(want), (line, want)
    # plan() lists the same commands, minus the probes that decide whether a step is needed
    planned = [" ".join(c) for c in cluster.plan("workshop")]
    assert [p.split(" -f ")[0] for p in planned] == [
        e.split(" -f")[0] for e in expected if "inspect" not in e and "config dump" not in e
        and "get resourceslices" not in e]
    # the files it used are the ones generated from the profile (this host: cgroup v2, all caps)
    assert yaml.safe_load((tmp_path / "kind-config.yaml").read_text()) == kind_config(
        "workshop", cluster_name="labkit-workshop")
    applied = list(yaml.safe_load_all((tmp_path / "fake-gpus.yaml").read_text()))
    assert [o["kind"] for o in applied] == ["Namespace", "DaemonSet", "DaemonSet"]
    # recorded for `labkit cluster status` and other processes
    state = runstate.read_state("kind", "workshop")
    assert state["cluster"] == "labkit-workshop" and state["kubeconfig"] == f"{tmp_path}/kubeconfig"
    assert set(cluster.timings) >= {"create kind cluster", "driver DaemonSets ready", "total"}
    runner.responses["docker network inspect kind --format {{.Id}} {{range"] = (0, f"{NET_ID} \n")
    cluster.down()
    # the network was not there before (inspect failed): it goes too, once no container uses it
    assert runner.lines()[-3:] == ["kind delete cluster --name labkit-workshop",
                                   "docker network inspect kind --format "
                                   "'{{.Id}} {{range .Containers}}{{.Name}} {{end}}'",
                                   "docker network rm kind"]
    assert runstate.read_state("kind", "workshop") is None
    assert not backend_module._network_marker(NET_ID).exists()


@pytest.mark.parametrize("users, marked, removed", [
    ("", True, True),                                  # labkit made it (another run dir), nobody uses it
    ("labkit-e2e-mig-lab-worker ", True, False),       # another cluster still on it
    ("", False, False),                                # a user's or kind's own network
])
def test_kinds_network_goes_with_the_last_labkit_cluster_only(tmp_path, deploy_dir, monkeypatch, users, marked,
                                                              removed):
    cluster, runner = _healthy_cluster(tmp_path, deploy_dir, monkeypatch)
    runner.responses["docker network inspect kind"] = (0, "[{}]")  # there before: this cluster did not make it
    cluster.up("workshop")
    assert not backend_module._network_marker(NET_ID).exists()
    if marked:  # as a labkit cluster of another run dir (another lane of make test) left it
        backend_module._network_marker(NET_ID).touch()
    runner.responses["docker network inspect kind --format {{.Id}} {{range"] = (0, f"{NET_ID} {users}\n")
    cluster.down()
    assert ("docker network rm kind" in runner.lines()) == removed
    assert backend_module._network_marker(NET_ID).exists() == (marked and not removed)


def test_existing_images_are_not_rebuilt_and_cgroup_v1_host_gets_the_kubelet_patch(tmp_path, deploy_dir, monkeypatch):
    cluster, runner = _healthy_cluster(tmp_path, deploy_dir, monkeypatch)
    cluster.facts = HostFacts(dict(ALL_TOOLS), cgroup_v2=False, cap_sys_resource=False)
    runner.responses["docker image inspect"] = (0, "[{}]")
    cluster.up("workshop")
    assert not [ln for ln in runner.lines() if " build " in ln]
    cfg = yaml.safe_load((tmp_path / "kind-config.yaml").read_text())
    assert cfg == kind_config("workshop", cluster_name="labkit-workshop", allow_cgroup_v1=True,
                              restrict_oom_score_adj=True)


def test_every_kubelet_resyncs_pods_every_10s(tmp_path, deploy_dir, monkeypatch):
    """A pod whose claims could not be prepared yet is tried again at the kubelet's next resync of it
    (kubernetes/kubernetes pkg/kubelet/kuberuntime/kuberuntime_manager.go SyncPod returns no error
    after FailedPrepareDynamicResources; pkg/kubelet/pod_workers.go completeWork requeues at
    syncFrequency): the kind config `labkit cluster up` creates the cluster from sets it cluster-wide."""
    cluster, runner = _healthy_cluster(tmp_path, deploy_dir, monkeypatch)
    cluster.up("workshop")
    cfg = yaml.safe_load((tmp_path / "kind-config.yaml").read_text())
    patches = [yaml.safe_load(p) for p in cfg["kubeadmConfigPatches"]]
    assert {"kind": "KubeletConfiguration", "syncFrequency": "10s"} in patches


#: what `kind create cluster` prints when kubeadm gives up on a wait (its --v=6 log, cut short)
KUBEADM_TIMEOUT = """ERROR: failed to create cluster: failed to join node with kubeadm: command "docker exec --privileged labkit-workshop-worker kubeadm join --config /kind/kubeadm.conf --skip-phases=preflight --v=6" failed with error: exit status 1
Command Output: I1128 01:02:03.456789     123 join.go:421] [preflight] found NodeName empty; using OS hostname as NodeName
[kubelet-start] Waiting for the kubelet to perform the TLS Bootstrap
error execution phase kubelet-start: timed out waiting for the condition
k8s.io/kubernetes/cmd/kubeadm/app/cmd/phases/workflow.(*Runner).Run.func1
	k8s.io/kubernetes@v1.37.1/cmd/kubeadm/app/cmd/phases/workflow/runner.go:262
runtime.goexit
	runtime/asm_amd64.s:1771
"""


class _FailsFirstCreates(RecordingRunner):
    """`kind create cluster` fails (in kubeadm) the first `fails` times, then works."""

    def __init__(self, fails: int, **kw):
        super().__init__(**kw)
        self.fails = fails

    def run(self, cmd, *, input=None, check=True, env=None):
        if cmd[1:3] == ["create", "cluster"] and self.fails > 0:
            self.fails -= 1
            self.commands.append(list(cmd))
            self.inputs.append(input)
            raise CommandError(cmd, subprocess.CompletedProcess(list(cmd), 1, "", KUBEADM_TIMEOUT))
        return super().run(cmd, input=input, check=check, env=env)


def test_a_kubeadm_wait_that_fails_is_tried_once_more_with_the_first_output_kept(tmp_path, deploy_dir, monkeypatch):
    cluster, healthy = _healthy_cluster(tmp_path, deploy_dir, monkeypatch)
    logged: list[str] = []
    runner = _FailsFirstCreates(1, responses=healthy.responses)
    cluster.runner, cluster.log = runner, logged.append
    cluster.up("workshop")
    creates = [ln for ln in runner.lines() if ln.startswith("kind create cluster")]
    assert len(creates) == 2
    assert "kind delete cluster --name labkit-workshop" in runner.lines()
    assert (tmp_path / "kind-create-failed.log").read_text() == KUBEADM_TIMEOUT
    (said,) = [ln for ln in logged if "kind create failed" in ln]
    # the message says what failed, not the Go stack trace kubeadm ends with
    assert "error execution phase kubelet-start: timed out waiting for the condition" in said
    assert "asm_amd64" not in said and "trying once more" in said


def test_a_second_kubeadm_failure_is_a_clear_error_naming_both_tries(tmp_path, deploy_dir, monkeypatch):
    cluster, healthy = _healthy_cluster(tmp_path, deploy_dir, monkeypatch)
    cluster.runner = runner = _FailsFirstCreates(2, responses=healthy.responses)
    with pytest.raises(ClusterError) as err:
        cluster.up("workshop")
    text = str(err.value)
    assert "the second try; the first try's output is in" in text and "kind-create-failed.log" in text
    assert "ERROR: failed to create cluster: failed to join node with kubeadm" in text
    assert "error execution phase kubelet-start" in text and "runtime.goexit" not in text
    assert len([ln for ln in runner.lines() if ln.startswith("kind create cluster")]) == 2


def test_a_create_that_fails_before_kubeadm_is_not_retried(tmp_path, deploy_dir, monkeypatch):
    cluster, runner = _healthy_cluster(tmp_path, deploy_dir, monkeypatch)
    runner.responses["kind create cluster"] = (1, 'ERROR: failed to create cluster: node(s) already exist for a cluster with the name "labkit-workshop"')
    with pytest.raises(ClusterError, match="already exist"):
        cluster.up("workshop")
    assert len([ln for ln in runner.lines() if ln.startswith("kind create cluster")]) == 1


def test_salient_lines_keep_the_error_and_drop_the_stack():
    from labkit.cluster.backends.kind.runner import salient_lines

    said = salient_lines(KUBEADM_TIMEOUT)
    assert said[0].startswith("ERROR: failed to create cluster: failed to join node with kubeadm")
    assert said[1] == "error execution phase kubelet-start: timed out waiting for the condition"
    assert len(said) == 2
    assert salient_lines("a\nb\nc") == ["a", "b", "c"]  # nothing names an error: the last lines
    assert salient_lines("unable to " + "x" * 500, width=20) == ["unable to xxxxxxxxxx ..."]


def test_up_stops_when_cdi_is_off(tmp_path, deploy_dir, monkeypatch):
    cluster, runner = _healthy_cluster(tmp_path, deploy_dir, monkeypatch)
    runner.responses["docker exec"] = (0, "[plugins]\n  enable_cdi = false\n  cdi_spec_dirs = ['/etc/cdi']\n")
    with pytest.raises(ClusterError, match="CDI"):
        cluster.up("workshop")


def test_cdi_check_knows_containerd_1_and_2():
    from labkit.cluster.backends.kind.preflight import cdi_check

    def check(dump: str) -> bool:
        return cdi_check(RecordingRunner(responses={"docker exec": (0, dump)}), "docker", "n").ok

    assert check("[plugins.'io.containerd.cri.v1.runtime']\n    cdi_spec_dirs = ['/etc/cdi', '/var/run/cdi']\n")
    assert check("[plugins.\"io.containerd.grpc.v1.cri\"]\n  enable_cdi = true\n  cdi_spec_dirs = []\n")
    assert not check("[plugins.\"io.containerd.grpc.v1.cri\"]\n  enable_cdi = false\n")
    assert not check("")


def test_a_running_cluster_is_reused_and_down_only_removes_what_the_session_applied(tmp_path, deploy_dir,
                                                                                   monkeypatch):
    first, runner = _healthy_cluster(tmp_path, deploy_dir, monkeypatch, keep=True)
    first.up("workshop")
    first.down()  # keep=True: `labkit cluster up` leaves it running
    assert not any(ln.startswith("kind delete") for ln in runner.lines())
    runner.responses["kind get clusters"] = (0, "k1-dev\nlabkit-workshop\n")
    runner.responses["kind get kubeconfig"] = (0, "apiVersion: v1\nkind: Config\n")
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
           "spec": {"containers": [{"name": "main", "image": "busybox"}]}}
    second = KindCluster(runner=runner, facts=HostFacts(dict(ALL_TOOLS)), state_dir=tmp_path, progress=False)
    runner.commands.clear()
    second.up("workshop")
    assert second.attached
    assert not any("create cluster" in ln for ln in runner.lines())
    assert runner.lines()[-1] == "kind get kubeconfig --name labkit-workshop"
    runner.responses["kubectl --kubeconfig"] = (0, json.dumps(pod))
    runner.responses[f"kubectl --kubeconfig {tmp_path}/kubeconfig get"] = (0, json.dumps({"items": []}))
    second.apply(pod)
    runner.commands.clear()
    second.down()
    lines = runner.lines()
    assert f"kubectl --kubeconfig {tmp_path}/kubeconfig delete pods p --wait=false -n default" in lines
    assert not any(ln.startswith("kind delete") for ln in lines)


def test_another_version_of_the_profile_is_not_reused(tmp_path, deploy_dir, monkeypatch):
    first, runner = _healthy_cluster(tmp_path, deploy_dir, monkeypatch, keep=True)
    first.up("workshop")
    state = runstate.read_state("kind", "workshop")
    runstate.write_state("kind", "workshop", {**state, "fingerprint": "0000"})
    runner.responses["kind get clusters"] = (0, "labkit-workshop\n")
    with pytest.raises(ClusterError, match="another version of profile workshop.*labkit cluster down --backend kind"):
        KindCluster(runner=runner, facts=HostFacts(dict(ALL_TOOLS)), state_dir=tmp_path, progress=False).up("workshop")


def _attached(tmp_path: Path, runner: RecordingRunner, **kw) -> KindCluster:
    runner.responses.update({**HEALTHY, "kind get clusters": (0, "labkit-workshop\n"),
                             "kind get kubeconfig": (0, "apiVersion: v1\n"),
                             "docker exec labkit-workshop-worker ctr": (0, "docker.io/labkit/workload:dev\n"
                                                                        "registry.k8s.io/pause:3.10.2\nsha256:abc\n"
                                                                        "docker.io/library/busybox:1.36\n")})
    c = KindCluster(runner=runner, facts=HostFacts(dict(ALL_TOOLS)), state_dir=tmp_path, progress=False, **kw)
    return c.up("workshop")


VLLM_POD = """
apiVersion: v1
kind: Pod
metadata: {name: infer}
spec:
  containers:
  - {name: server, image: vllm/vllm-openai:v0.9.0, command: [python3, -m, vllm.entrypoints.openai.api_server]}
  - {name: side, image: busybox:1.36}
  initContainers:
  - {name: warm, image: nvidia/cuda:12.4.0-base-ubuntu22.04, args: [nvidia-smi]}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: train}
spec:
  selector: {matchLabels: {app: t}}
  template:
    metadata: {labels: {app: t}}
    spec:
      containers: [{name: main, image: pytorch/pytorch}]
"""


def test_images_missing_on_the_nodes_run_as_the_workload_image(tmp_path, capsys):
    runner = RecordingRunner()
    c = _attached(tmp_path, runner)
    c.apply(VLLM_POD)
    pod, deploy = yaml.safe_load_all(runner.inputs[-1])
    server, side = pod["spec"]["containers"]
    assert server == {"name": "server", "image": "labkit/workload:dev", "imagePullPolicy": "IfNotPresent",
                      "args": ["python3", "-m", "vllm.entrypoints.openai.api_server"]}
    assert side == {"name": "side", "image": "busybox:1.36"}  # on the nodes: runs as written
    assert pod["spec"]["initContainers"][0] == {"name": "warm", "image": "labkit/workload:dev",
                                                "imagePullPolicy": "IfNotPresent", "args": ["nvidia-smi"]}
    assert pod["metadata"]["annotations"]["labkit.dev/image-swapped"] == (
        "warm=nvidia/cuda:12.4.0-base-ubuntu22.04,server=vllm/vllm-openai:v0.9.0")
    template = deploy["spec"]["template"]
    assert template["spec"]["containers"][0]["image"] == "labkit/workload:dev"
    assert template["metadata"]["annotations"]["labkit.dev/image-swapped"] == "main=pytorch/pytorch"
    err = capsys.readouterr().err
    assert err.count("is not on the kind nodes") == 3
    assert "image vllm/vllm-openai:v0.9.0 is not on the kind nodes" in err and "LABKIT_KIND_SWAP_IMAGES=0" in err


@pytest.mark.parametrize("how", ["option", "env"])
def test_image_swap_can_be_switched_off(tmp_path, monkeypatch, how):
    if how == "env":
        monkeypatch.setenv("LABKIT_KIND_SWAP_IMAGES", "0")
    runner = RecordingRunner()
    c = _attached(tmp_path, runner, **({"swap_images": False} if how == "option" else {}))
    c.apply(VLLM_POD)
    pod, _ = yaml.safe_load_all(runner.inputs[-1])
    assert pod["spec"]["containers"][0]["image"] == "vllm/vllm-openai:v0.9.0"
    assert "annotations" not in pod["metadata"]


def test_normalize_image():
    assert normalize_image("busybox") == "docker.io/library/busybox:latest"
    assert normalize_image("vllm/vllm-openai:v0.9.0") == "docker.io/vllm/vllm-openai:v0.9.0"
    assert normalize_image("registry.k8s.io/pause:3.10.2") == "registry.k8s.io/pause:3.10.2"
    assert normalize_image("localhost:5000/x") == "localhost:5000/x:latest"
    assert normalize_image("nvcr.io/nvidia/cuda@sha256:ab") == "nvcr.io/nvidia/cuda@sha256:ab"


def test_pod_env_reads_the_named_container(tmp_path):
    runner = RecordingRunner()
    c = _attached(tmp_path, runner)
    kc = f"kubectl --kubeconfig {tmp_path}/kubeconfig"
    pod = {"kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
           "spec": {"containers": [{"name": "a"}, {"name": "b"}]}}
    runner.responses[f"{kc} get pods p"] = (0, json.dumps(pod))
    runner.responses[f"{kc} exec -n default p -c b"] = (0, "PATH=/bin\nFAKE_GPU_0_NAME=gpu-1\n"
                                                          "NVIDIA_VISIBLE_DEVICES=GPU-1\nHOSTNAME=p\n")
    assert c.pod_env("p", container="b") == {"FAKE_GPU_0_NAME": "gpu-1", "NVIDIA_VISIBLE_DEVICES": "GPU-1"}
    assert c.container_env("p", container="b")["PATH"] == "/bin"
    assert runner.lines()[-1] == f"{kc} exec -n default p -c b -- env"
    with pytest.raises(ClusterError, match="pod default/p: no container 'c'; it has: a, b"):
        c.pod_env("p", container="c")


def test_up_refuses_fleets_and_failed_preflight(tmp_path):
    cluster = KindCluster(runner=RecordingRunner(), facts=HostFacts(dict(ALL_TOOLS)), state_dir=tmp_path)
    with pytest.raises(ClusterError, match="use backend='sim'"):
        cluster.up("fleet-1000")
    broke = KindCluster(runner=RecordingRunner(), facts=HostFacts({"docker": None, "podman": None,
                                                                   "kind": None, "kubectl": None}),
                        state_dir=tmp_path, progress=False)
    with pytest.raises(ClusterError, match="kind preflight failed"):
        broke.up("tiny")


def test_failed_command_raises_with_its_output():
    runner = RecordingRunner(responses={"kind create": (1, "ERROR: failed to create cluster: boom")})
    with pytest.raises(CommandError, match="boom"):
        runner.run(["kind", "create", "cluster"])


def test_kind_backend_is_registered():
    assert backend_class("kind") is KindCluster


def test_driver_manifests_from_the_real_deploy_dir_are_valid_objects():
    from kubernetes.client import V1ClusterRole, V1DaemonSet

    from labkit.cel.validation import validate

    objs = driver_manifests(load_profile("workshop"), "labkit/fake-gpus:dev")
    kinds = [o["kind"] for o in objs]
    assert kinds.count("DaemonSet") == 2 and "DeviceClass" in kinds and "ClusterRole" in kinds
    dra_objects = [o for o in objs if o["apiVersion"].startswith("resource.k8s.io")]
    assert validate(dra_objects) == []
    for o in objs:  # the client's pydantic models reject unknown fields and wrong types
        if o["kind"] == "DaemonSet":
            V1DaemonSet.model_validate(o)
            argv = o["spec"]["template"]["spec"]["containers"][0]["args"]
            assert argv[argv.index("--profile") + 1] in ("dgx-a100", "t4-inference")
        if o["kind"] == "ClusterRole":
            V1ClusterRole.model_validate(o)


@pytest.mark.slow
def test_image_file_tree_runs_the_driver(tmp_path: Path):
    """`docker build` without Docker: the Dockerfile's file tree, then the entrypoint run from it."""
    import subprocess
    import sys

    from labkit.cluster.backends.kind.image import build_image_tree

    tree = build_image_tree(tmp_path / "rootfs")
    assert tree.base == "python:3.11-slim"
    assert tree.entrypoint == ["python", "-m", "fake_gpus"]
    files = tree.files()
    assert "/opt/fake-gpus/fake_gpus/__main__.py" in files
    assert any(f.startswith("/opt/fake-gpus/fake_gpus/catalog/profiles/") for f in files)
    assert not any("/labkit/" in f for f in files), "the driver image carries fake_gpus only"
    site = tree.site_packages()
    for dist in ("yaml", "grpc", "kubernetes"):
        assert (site / dist).is_dir(), f"{dist} installed from requirements.txt"
    # the entrypoint, with the host's Python but only the tree on sys.path (-S: no host site-packages)
    out = subprocess.run([sys.executable, "-S", *tree.entrypoint[1:], "profiles"], env=tree.run_env(),
                         cwd=tree.path(tree.workdir), capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "dgx-a100" in out.stdout
    assert tree.skipped_runs == ["python -m fake_gpus profiles > /dev/null"]


# -- DeviceTaintRules before the work they keep off a device ----------------------------------------------
TAINT_LAST = """
apiVersion: v1
kind: Pod
metadata: {name: avoids-broken}
spec:
  containers: [{name: main, image: busybox:1.36, resources: {claims: [{name: gpu}]}}]
  resourceClaims: [{name: gpu, resourceClaimName: one-t4}]
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: one-t4}
spec:
  devices:
    requests: [{name: gpu, exactly: {deviceClassName: gpu.nvidia.com}}]
---
apiVersion: resource.k8s.io/v1
kind: DeviceTaintRule
metadata: {name: broken}
spec:
  deviceSelector: {driver: gpu.nvidia.com, pool: t4-0, device: gpu-0}
  taint: {key: labkit.dev/broken, value: "true", effect: NoSchedule}
"""


class _Controller(RecordingRunner):
    """kubectl against a cluster whose kube-controller-manager reports a DeviceTaintRule on the
    `report_at`-th read of it (never when None); `apply` echoes what it was given, as stored."""

    def __init__(self, report_at: int | None) -> None:
        super().__init__()
        self.report_at, self.reads = report_at, 0

    def run(self, cmd, *, input=None, check=True, env=None):
        joined = " ".join(cmd)
        if " apply -o json -f -" in joined:
            self.commands.append(list(cmd))
            self.inputs.append(input)
            docs = [{**d, "metadata": {**d["metadata"], "generation": 1}} for d in yaml.safe_load_all(input)]
            return subprocess.CompletedProcess(list(cmd), 0, json.dumps({"kind": "List", "items": docs}), "")
        if " get devicetaintrules.resource.k8s.io broken " in joined:
            self.reads += 1
            rule = {"kind": "DeviceTaintRule", "metadata": {"name": "broken", "generation": 1}}
            if self.report_at is not None and self.reads >= self.report_at:
                rule["status"] = {"conditions": [{"type": "EvictionInProgress", "status": "False",
                                                  "observedGeneration": 1, "reason": "OtherEffect"}]}
            self.commands.append(list(cmd))
            self.inputs.append(input)
            return subprocess.CompletedProcess(list(cmd), 0, json.dumps(rule), "")
        return super().run(cmd, input=input, check=check, env=env)


def _applied_kinds(runner: RecordingRunner) -> list[list[str]]:
    return [[d["kind"] for d in yaml.safe_load_all(i)] for c, i in zip(runner.commands, runner.inputs, strict=True)
            if "apply" in c]


def test_a_taint_rule_is_in_force_before_the_pod_it_keeps_off_the_device_is_sent(tmp_path):
    """The scenario kind got wrong once under load: rule, claim and pod in one kubectl apply, the
    scheduler gave the pod the tainted device before its watch brought the rule. Now the rule goes
    alone, apply reads it until kube-controller-manager reports its generation, then the rest goes
    (claims before pods), whatever the file's order."""
    runner = _Controller(report_at=3)
    c = _attached(tmp_path, runner)
    runner.commands.clear(), runner.inputs.clear()
    stored = c.apply(TAINT_LAST)
    assert _applied_kinds(runner) == [["DeviceTaintRule"], ["ResourceClaim", "Pod"]]
    lines = runner.lines()
    reads = [i for i, ln in enumerate(lines) if " get devicetaintrules" in ln]
    applies = [i for i, ln in enumerate(lines) if " apply " in ln]
    assert len(reads) == 3 and applies[0] < reads[0] and reads[-1] < applies[1]
    assert [o["kind"] for o in stored] == ["DeviceTaintRule", "ResourceClaim", "Pod"]


def test_a_taint_rule_nobody_reports_is_a_warning_naming_it_and_the_rest_still_goes(tmp_path, monkeypatch):
    monkeypatch.setattr("labkit.cluster.backends.kubeapi.RULE_REPORT_TIMEOUT", 0.3)
    runner = _Controller(report_at=None)
    c = _attached(tmp_path, runner)
    runner.commands.clear(), runner.inputs.clear()
    with pytest.warns(UserWarning, match=r"DeviceTaintRule broken: kube-controller-manager has not reported it "
                                         r"within 0 s.*pods applied now can still get its devices"):
        c.apply(TAINT_LAST)
    assert _applied_kinds(runner) == [["DeviceTaintRule"], ["ResourceClaim", "Pod"]]
    assert runner.reads >= 2


def test_without_taint_rules_apply_is_one_kubectl_call_and_before_1_35_no_rule_is_waited_for(tmp_path):
    runner = _Controller(report_at=None)
    c = _attached(tmp_path, runner)
    runner.commands.clear(), runner.inputs.clear()
    c.apply(TAINT_LAST.split("---")[0] + "---" + TAINT_LAST.split("---")[1])
    assert _applied_kinds(runner) == [["ResourceClaim", "Pod"]]
    c.profile = dataclasses.replace(load_profile("workshop"), kubernetes_version="1.34")
    runner.commands.clear(), runner.inputs.clear()
    c.apply(TAINT_LAST)  # 1.34's kube-controller-manager writes no status: nothing to wait for
    assert _applied_kinds(runner) == [["DeviceTaintRule"], ["ResourceClaim", "Pod"]] and runner.reads == 0
