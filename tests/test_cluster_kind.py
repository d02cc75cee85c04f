"""The kind backend, tested without Docker: configs, preflight, the exact commands, manifests."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import yaml

from labkit.cluster.base import ClusterError, backend_class
from labkit.cluster.kind.backend import KindCluster
from labkit.cluster.kind.config import CDI_PATCH, MIG_LABEL, PROFILE_LABEL, kind_config
from labkit.cluster.kind.driver import driver_manifests
from labkit.cluster.kind.images import NODE_IMAGES, node_image, parse_kind_version
from labkit.cluster.kind.preflight import HostFacts, run_preflight
from labkit.cluster.kind.runner import CommandError, RecordingRunner
from labkit.sim.profiles import load_profile

ALL_TOOLS = {"docker": "/usr/bin/docker", "podman": None, "kind": "/usr/bin/kind", "kubectl": "/usr/bin/kubectl"}
HEALTHY = {"docker info": (0, "28.2.2\n"), "kind version": (0, "kind v0.33.0 go1.25.1 linux/amd64\n"),
           "docker exec": (0, "[plugins]\n  enable_cdi = true\n")}


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
    assert all(n["image"] == NODE_IMAGES["1.37"] for n in cfg["nodes"])
    assert cfg["containerdConfigPatches"] == [CDI_PATCH]
    assert "enable_cdi = true" in CDI_PATCH
    # 1.37 needs no gates or alpha APIs for core DRA
    assert "featureGates" not in cfg and "runtimeConfig" not in cfg


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
    assert patches[0] == {"kind": "JoinConfiguration",
                          "nodeRegistration": {"taints": [{"key": "gpu", "value": "t4", "effect": "NoSchedule"}]}}
    assert {"kind": "KubeletConfiguration", "failCgroupV1": False} in patches


def test_parse_kind_version():
    assert parse_kind_version("kind v0.33.0 go1.25.1 linux/amd64") == (0, 33, 0)
    assert parse_kind_version("kind v0.20.0-alpha+abc go1.20") == (0, 20, 0)
    assert parse_kind_version("garbage") is None


def _failures(checks):
    return {c.name: c for c in checks if not c.ok}


def test_preflight_all_good():
    checks = run_preflight(RecordingRunner(responses=HEALTHY), HostFacts(dict(ALL_TOOLS), cgroup_v2=True))
    assert _failures(checks) == {}


def test_preflight_no_engine_no_kind_no_kubectl():
    facts = HostFacts({"docker": None, "podman": None, "kind": None, "kubectl": None})
    fails = _failures(run_preflight(RecordingRunner(), facts))
    assert set(fails) == {"container engine", "kind", "kubectl"}
    assert "backend='local'" in fails["container engine"].fix
    assert "go install sigs.k8s.io/kind@v0.33.0" in fails["kind"].fix


def test_preflight_daemon_down_old_kind_cgroup_v1():
    runner = RecordingRunner(responses={"docker info": (1, "Cannot connect to the Docker daemon"),
                                        "kind version": (0, "kind v0.29.0 go1.24 linux/amd64")})
    fails = _failures(run_preflight(runner, HostFacts(dict(ALL_TOOLS), cgroup_v2=False), "1.37"))
    assert "does not answer" in fails["container engine"].detail
    assert "older than v0.33.0" in fails["kind"].detail
    assert "failCgroupV1" in fails["cgroup v2"].detail
    # cgroup v1 is fine for 1.34
    fails_134 = _failures(run_preflight(runner, HostFacts(dict(ALL_TOOLS), cgroup_v2=False), "1.34"))
    assert "cgroup v2" not in fails_134


def test_podman_is_used_when_docker_is_absent():
    runner = RecordingRunner(responses={"podman info": (0, "5.0\n"), "kind version": (0, "kind v0.33.0")})
    facts = HostFacts({"docker": None, "podman": "/usr/bin/podman", "kind": "k", "kubectl": "k"})
    assert _failures(run_preflight(runner, facts)) == {}
    assert ["podman", "info", "--format", "{{.ServerVersion}}"] in runner.commands


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


def _healthy_cluster(tmp_path: Path, deploy_dir: Path, monkeypatch) -> tuple[KindCluster, RecordingRunner]:
    import labkit.cluster.kind.backend as backend

    monkeypatch.setattr(backend, "driver_manifests",
                        lambda profile, image: driver_manifests(profile, image, deploy_dir=deploy_dir))
    runner = RecordingRunner(responses=dict(HEALTHY))
    cluster = KindCluster(runner=runner, facts=HostFacts(dict(ALL_TOOLS)), state_dir=tmp_path, progress=False)
    return cluster, runner


def test_up_runs_exactly_the_planned_commands(tmp_path, deploy_dir, monkeypatch):
    cluster, runner = _healthy_cluster(tmp_path, deploy_dir, monkeypatch)
    cluster.up("workshop")
    lines = runner.lines()
    kc = f"--kubeconfig {tmp_path}/kubeconfig"
    assert lines[:2] == ["docker info --format '{{.ServerVersion}}'", "kind version"]
    expected = [
        f"kind create cluster --name labkit --config {tmp_path}/kind-config.yaml {kc} --wait 180s",
        "docker exec labkit-worker containerd config dump",
        "docker build -t labkit/fake-gpus:dev -f",
        "kind load docker-image labkit/fake-gpus:dev --name labkit",
        f"kubectl {kc} apply -f {tmp_path}/fake-gpus.yaml",
        f"kubectl {kc} -n fake-gpus rollout status daemonset --timeout 180s",
        f"kubectl {kc} wait --for=create resourceslices --all --timeout 120s",
    ]
    rest = lines[2:]
    assert len(rest) == len(expected)
    for line, want in zip(rest, expected, strict=True):
        assert line.startswith(want), (line, want)
    # the files it used are the ones generated from the profile
    assert yaml.safe_load((tmp_path / "kind-config.yaml").read_text()) == kind_config("workshop")
    applied = list(yaml.safe_load_all((tmp_path / "fake-gpus.yaml").read_text()))
    assert [o["kind"] for o in applied] == ["Namespace", "DaemonSet", "DaemonSet"]
    cluster.down()
    assert runner.lines()[-1] == "kind delete cluster --name labkit"


def test_up_stops_when_cdi_is_off(tmp_path, deploy_dir, monkeypatch):
    cluster, runner = _healthy_cluster(tmp_path, deploy_dir, monkeypatch)
    runner.responses["docker exec"] = (0, "[plugins]\n  enable_cdi = false\n")
    with pytest.raises(ClusterError, match="CDI"):
        cluster.up("workshop")


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

    from labkit.api import validate

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

    from labkit.cluster.kind.image import build_image_tree

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
