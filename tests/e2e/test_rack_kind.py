"""ComputeDomains on kind, tested without kind (issue 27): what the kind backend and the Helm chart
deploy for a profile with compute-domain nodes (fake_gpus/deploy/compute-domains: the CRD, the two
DeviceClasses, the controller's Deployment under its own ServiceAccount with least-privilege RBAC),
the commands `up()` runs, and, on the `local` control plane, that exactly the committed rights are
granted. The same flow on a real kind cluster: tests/e2e/test_cluster_kind_e2e.py (profile nvl72-two-trays).
"""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest
import yaml

from fake_gpus import cdcontroller, computedomain
from labkit.cluster.backends.kind.backend import KindCluster
from labkit.cluster.backends.kind.config import kind_config
from labkit.cluster.backends.kind.driver import driver_manifests
from labkit.cluster.backends.kind.preflight import HostFacts, find_tool
from labkit.model.profiles import load_profile
from tests.localutil import ready_local_cluster
from tests.paths import REPO

ROOT = REPO
CD_DEPLOY = ROOT / "fake_gpus" / "deploy" / "compute-domains"
RBAC = ROOT / "tests" / "data" / "rbac"
PROFILE = "nvl72-two-trays"
IMAGE = "labkit/fake-gpus:dev"
CONTROLLER_SA = "system:serviceaccount:fake-gpus:fake-gpus-compute-domain-controller"
PLUGIN_SA = "system:serviceaccount:fake-gpus:fake-gpus-kubelet-plugin"
NOBODY = "system:serviceaccount:fake-gpus:lk-nobody"
CD_KINDS = {"CustomResourceDefinition", "Deployment", "Role", "RoleBinding"}


def golden(name: str) -> dict[str, set[str]]:
    rows = [ln.split() for ln in (RBAC / name).read_text().splitlines() if ln.strip() and not ln.startswith("#")]
    return {r[0]: set(r[1:]) for r in rows}


def granted_by(objs: list[dict], subject: str, namespace: str) -> dict[str, set[str]]:
    """resource -> verbs that the (Cluster)Roles bound to `subject` grant in `namespace`, from manifests."""
    sa_ns, sa = subject.split(":")[2:]
    roles = {(o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]): o for o in objs
             if o["kind"] in ("Role", "ClusterRole")}
    out: dict[str, set[str]] = {}
    for b in objs:
        if b["kind"] not in ("RoleBinding", "ClusterRoleBinding"):
            continue
        if not any(s.get("name") == sa and s.get("namespace") == sa_ns for s in b["subjects"]):
            continue
        if b["kind"] == "RoleBinding" and b["metadata"]["namespace"] != namespace:
            continue
        ref = b["roleRef"]
        role = roles[(ref["kind"], b["metadata"].get("namespace") if ref["kind"] == "Role" else None, ref["name"])]
        for rule in role["rules"]:
            for group in rule["apiGroups"]:
                for res in rule["resources"]:
                    base, _, sub = res.partition("/")
                    key = (f"{base}.{group}" if group else base) + (f"/{sub}" if sub else "")
                    out.setdefault(key, set()).update(rule["verbs"])
    return out


def test_kind_deploys_compute_domains_only_for_profiles_with_compute_domain_nodes():
    objs = driver_manifests(load_profile(PROFILE), IMAGE)
    cd_objs = cdcontroller.manifests()
    # every object of deploy/compute-domains, after the driver's own, the image set on the controller
    tail = objs[-len(cd_objs):]
    assert [(o["kind"], o["metadata"]["name"]) for o in tail] == [(o["kind"], o["metadata"]["name"]) for o in cd_objs]
    (dep,) = [o for o in tail if o["kind"] == "Deployment"]
    pod = dep["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "fake-gpus-compute-domain-controller"
    (ctr,) = pod["containers"]
    assert ctr["image"] == IMAGE and ctr["imagePullPolicy"] == "IfNotPresent"
    assert ctr["command"] == ["python", "-m", "fake_gpus", "compute-domain-controller"]
    assert ctr["args"] == ["--namespace", "$(POD_NAMESPACE)", "--daemon-image", IMAGE]
    assert {d["metadata"]["name"] for d in tail if d["kind"] == "DeviceClass"} == {
        computedomain.CHANNEL_CLASS, computedomain.DAEMON_CLASS}
    # the plugin's DaemonSet for the trays is there too, and nothing asks for the controller's rights
    # on a profile without such nodes
    assert any(o["kind"] == "DaemonSet" and o["metadata"]["name"].endswith("gb200-nvl72-tray") for o in objs)
    for other in ("workshop", "mig-lab", "topology-lab", "tiny"):
        kinds = {o["kind"] for o in driver_manifests(load_profile(other), IMAGE)}
        names = {o["metadata"]["name"] for o in driver_manifests(load_profile(other), IMAGE)}
        assert not kinds & CD_KINDS and not any("compute-domain" in n for n in names), other


def test_two_trays_one_clique_two_kind_workers():
    cfg = kind_config(PROFILE)
    workers = [n for n in cfg["nodes"] if n["role"] == "worker"]
    assert len(workers) == 2
    assert {w["labels"]["nvidia.com/gpu.clique"] for w in workers} == {"5f0c9a3e-1d2b-4c6e-8a7f-3b9d2e1c0a01.1"}
    assert [w["labels"]["labkit.dev/profile-node"] for w in workers] == ["tray-0", "tray-1"]


def test_up_waits_for_the_crd_and_the_controller(tmp_path, monkeypatch):
    monkeypatch.setenv("LABKIT_RUN_DIR", str(tmp_path / "run"))
    c = KindCluster(facts=HostFacts({"docker": "docker", "kind": "kind", "kubectl": "kubectl"}), state_dir=tmp_path,
                    image=IMAGE, progress=False)
    lines = c.describe_plan(PROFILE).splitlines()
    kc = f"kubectl --kubeconfig {tmp_path}/kubeconfig"
    assert lines[-3:] == [
        f"{kc} -n fake-gpus rollout status daemonset/fake-gpus-kubelet-plugin-gb200-nvl72-tray --timeout 300s",
        f"{kc} wait --for=condition=Established --timeout=120s customresourcedefinition/computedomains.resource.nvidia.com"
        " customresourcedefinition/computedomaincliques.resource.nvidia.com",
        f"{kc} -n fake-gpus rollout status deployment/fake-gpus-compute-domain-controller --timeout 300s",
    ]
    applied = list(yaml.safe_load_all((tmp_path / "fake-gpus.yaml").read_text()))
    assert applied == driver_manifests(load_profile(PROFILE), IMAGE)
    assert "rollout status deployment/" not in KindCluster(facts=c.facts, state_dir=tmp_path / "w", progress=False).describe_plan(
        "workshop")


def test_compute_domain_deviceclasses_file_in_sync_with_code():
    text = (CD_DEPLOY / "03-deviceclasses.yaml").read_text()
    assert text.startswith("# GENERATED")
    assert [d for d in yaml.safe_load_all(text) if d] == computedomain.device_classes()
    out = subprocess.run([sys.executable, "-m", "fake_gpus", "deviceclasses", "--compute-domains"], capture_output=True,
                         text=True, cwd=ROOT)
    assert [d for d in yaml.safe_load_all(out.stdout) if d] == computedomain.device_classes()


def test_kustomization_lists_every_compute_domain_manifest():
    k = yaml.safe_load((CD_DEPLOY / "kustomization.yaml").read_text())
    assert sorted(k["resources"]) == sorted(f.name for f in CD_DEPLOY.glob("*.yaml") if f.name != "kustomization.yaml")


def test_committed_rights_are_what_the_manifests_grant():
    """Without a cluster: the goldens say what the RBAC in deploy/ (base + compute-domains) grants."""
    objs = driver_manifests(load_profile(PROFILE), IMAGE)
    assert granted_by(objs, CONTROLLER_SA, "fake-gpus") == golden("fake-gpus-compute-domain-controller.txt")
    assert granted_by(objs, PLUGIN_SA, "default") == golden("fake-gpus-kubelet-plugin-computedomains.txt")
    # the workshop's plugin gets the base rights only
    base = driver_manifests(load_profile("workshop"), IMAGE)
    assert granted_by(base, PLUGIN_SA, "default") == golden("fake-gpus-kubelet-plugin.txt")
    assert granted_by(base, CONTROLLER_SA, "fake-gpus") == {}
    # never more than NVIDIA's chart grants its controller and its kubelet plugin
    # (deployments/helm/dra-driver-nvidia-gpu/templates/rbac-{controller,kubeletplugin}.yaml at 95932046)
    nvidia_controller = {
        "computedomains.resource.nvidia.com": {"get", "list", "watch", "update"},
        "computedomains.resource.nvidia.com/status": {"update"},
        "resourceclaimtemplates.resource.k8s.io": {"get", "list", "watch", "create", "update", "delete"},
        "nodes": {"get", "list", "watch", "update"}, "pods": {"get", "list", "watch"},
        "daemonsets.apps": {"get", "list", "watch", "create", "update", "patch", "delete"},
        # the daemons write the cliques upstream (rbac-compute-domain-daemon.yaml); ours cannot
        "computedomaincliques.resource.nvidia.com": {"get", "list", "watch", "create", "update", "patch"}}
    nvidia_plugin = {"computedomains.resource.nvidia.com": {"get", "list", "watch"},
                     "nodes": {"get", "list", "watch", "update", "patch"}}
    for res, verbs in golden("fake-gpus-compute-domain-controller.txt").items():
        # patch where NVIDIA's controller updates (ours sends merge patches of finalizers / a label);
        # delete of cliques: upstream the daemon pods own them (garbage collection), ours are deleted
        # with their domain by the controller
        extra = {"patch"} | ({"delete"} if res.startswith("computedomaincliques") else set())
        assert verbs - extra <= nvidia_controller[res], res
    for res, verbs in golden("fake-gpus-kubelet-plugin-computedomains.txt").items():
        if res in nvidia_plugin:
            assert verbs <= nvidia_plugin[res], res


# -- on the local control plane (real kube-apiserver with RBAC; its controller runs under this account) --
def can_i(kubeconfig: str, user: str, namespace: str) -> dict[str, set[str]]:
    """`kubectl auth can-i --list --as=USER -n NS`: resource -> verbs (resource rows only)."""
    kubectl = find_tool("kubectl")
    assert kubectl
    out = subprocess.run([kubectl, "--kubeconfig", kubeconfig, "auth", "can-i", "--list", f"--as={user}",
                          "-n", namespace], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    rights: dict[str, set[str]] = {}
    for line in out.stdout.splitlines()[1:]:
        parts = line.split("[")
        if not line or line[0].isspace() or len(parts) < 4:
            continue  # non-resource URLs
        rights.setdefault(parts[0].split()[0], set()).update(parts[3].rstrip("] ").split())
    return rights


def extra_rights(kubeconfig: str, user: str, namespace: str) -> dict[str, set[str]]:
    base = can_i(kubeconfig, NOBODY, namespace)
    got = {r: v - base.get(r, set()) for r, v in can_i(kubeconfig, user, namespace).items()}
    return {r: v for r, v in got.items() if v}


@pytest.mark.local
@pytest.mark.slow
def test_local_controller_account_has_exactly_the_committed_rights():
    with ready_local_cluster(PROFILE) as c:
        kc = str(c.kubeconfig)
        assert extra_rights(kc, CONTROLLER_SA, "fake-gpus") == golden("fake-gpus-compute-domain-controller.txt")
        # its namespaced rights stop at its namespace
        assert "daemonsets.apps" not in extra_rights(kc, CONTROLLER_SA, "default")


def test_the_daemon_pods_command_prints_its_domain_and_serves_until_sigterm():
    """What the controller's DaemonSet runs from the driver image on kind (`--daemon-image`)."""
    argv = [sys.executable, "-m", "fake_gpus", "compute-domain-daemon"]
    bare = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, env={"PATH": "/usr/bin:/bin"})
    assert bare.returncode == 2 and len(bare.stderr.strip().splitlines()) == 1
    assert "no COMPUTE_DOMAIN_UUID" in bare.stderr
    env = {"PATH": "/usr/bin:/bin", "CLIQUE_ID": "c.1", "COMPUTE_DOMAIN_UUID": "u-1", "COMPUTE_DOMAIN_NAME": "d",
           "COMPUTE_DOMAIN_NAMESPACE": "default"}
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env) as proc:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # the daemon is up once it said so
        assert line.strip() == ("compute-domain-daemon (fake IMEX daemon): CLIQUE_ID=c.1 COMPUTE_DOMAIN_NAME=d "
                                "COMPUTE_DOMAIN_NAMESPACE=default COMPUTE_DOMAIN_UUID=u-1")
        assert proc.poll() is None
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
