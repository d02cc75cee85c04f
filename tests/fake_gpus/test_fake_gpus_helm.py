"""The fake driver's Helm chart (fake_gpus/deploy/helm/fake-gpus) through a real `helm` (tools/build-helm.sh:
built from the Go module proxy, cached under ~/.cache/dra-labkit/helm/<version>): `helm lint` passes, and
`helm template` renders the same objects as today's manifests for the same choices -- the kustomize base
(`kubectl kustomize fake_gpus/deploy`) with the default values, the kind backend's per-hardware DaemonSets
with `labkit.cluster.backends.kind.driver.helm_values(profile)` -- apart from Helm's own labels. Bad values are refused
with one line naming the value. The feature gates and sharing values reach the plugin as flags that its own
parser accepts and that change the slices it publishes. On the local control plane (local lane) the API
server accepts every rendered object and `helm install` / `helm uninstall` leave nothing behind; installing
with plugin pods on kind: tests/e2e/test_cluster_kind_e2e.py."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from fake_gpus.cli import build_parser
from fake_gpus.plugin.cli import load_slices
from labkit.cluster.backends.kind.driver import driver_manifests, helm_values
from labkit.cluster.backends.kind.preflight import find_tool
from labkit.model.profiles import load_profile
from tests.fake_gpus.test_fake_gpus_deploy import _kubelet_expand
from tests.localutil import ready_local_cluster
from tests.paths import REPO

ROOT = REPO
CHART = ROOT / "fake_gpus" / "deploy" / "helm" / "fake-gpus"
DEPLOY = ROOT / "fake_gpus" / "deploy"
#: what Helm adds and the kustomize base has not
HELM_LABELS = ("app.kubernetes.io/managed-by", "app.kubernetes.io/instance", "helm.sh/chart")


@pytest.fixture(scope="session")
def helm() -> str:
    """The cached helm binary (make test builds it; a cold build here takes minutes)."""
    out = subprocess.run(["bash", str(ROOT / "tools" / "build-helm.sh")], capture_output=True, text=True)
    assert out.returncode == 0, f"tools/build-helm.sh failed:\n{out.stderr}"
    return out.stdout.strip().splitlines()[-1]


def run_helm(helm: str, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    out = subprocess.run([helm, *args], capture_output=True, text=True, cwd=ROOT)
    if check:
        assert out.returncode == 0, f"helm {' '.join(args)}:\n{out.stderr}"
    return out


def render(helm: str, *args: str, namespace: str = "fake-gpus") -> list[dict[str, Any]]:
    out = run_helm(helm, "template", "fake-gpus", str(CHART), "--namespace", namespace, *args)
    return [d for d in yaml.safe_load_all(out.stdout) if d]


def without_helm_labels(objs: list[dict[str, Any]], *extra: str) -> list[dict[str, Any]]:
    for o in objs:
        labels = o["metadata"].get("labels") or {}
        for key in (*HELM_LABELS, *extra):
            labels.pop(key, None)
        if not labels:
            o["metadata"].pop("labels", None)
    return objs


def by_identity(objs: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    out = {(o["kind"], o["metadata"]["name"]): o for o in objs}
    assert len(out) == len(objs), "two objects of the same kind and name"
    return out


def kustomize(directory: Path = DEPLOY) -> list[dict[str, Any]]:
    kubectl = find_tool("kubectl")
    assert kubectl, "kubectl is needed for `kubectl kustomize` (make test puts the cached one on PATH)"
    out = subprocess.run([kubectl, "kustomize", str(directory)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return [d for d in yaml.safe_load_all(out.stdout) if d]


def test_helm_is_the_pinned_version(helm):
    out = run_helm(helm, "version", "--short")
    assert out.stdout.startswith("v4.3.1"), out.stdout


def test_helm_lint_passes(helm):
    out = run_helm(helm, "lint", "--strict", str(CHART), "--namespace", "fake-gpus")
    assert "1 chart(s) linted, 0 chart(s) failed" in out.stdout, out.stdout


def test_default_values_render_the_kustomize_base(helm):
    """Same objects, field for field, except the Namespace (helm install --create-namespace makes it)
    and Helm's bookkeeping labels."""
    want = by_identity([o for o in kustomize() if o["kind"] != "Namespace"])
    got = by_identity(without_helm_labels(render(helm)))
    assert sorted(got) == sorted(want)
    for key, obj in want.items():
        assert got[key] == obj, key
    # and every namespaced object lands in the release's namespace, the VAP follows it
    got = by_identity(render(helm, namespace="gpu-lab"))
    assert got["DaemonSet", "fake-gpus-kubelet-plugin"]["metadata"]["namespace"] == "gpu-lab"
    assert got["ClusterRoleBinding", "fake-gpus-kubelet-plugin"]["subjects"][0]["namespace"] == "gpu-lab"
    vap = got["ValidatingAdmissionPolicy", "fake-gpus-resourceslices-own-node"]
    assert vap["spec"]["matchConditions"][0]["expression"] == \
        'request.userInfo.username == "system:serviceaccount:gpu-lab:fake-gpus-kubelet-plugin"'


def test_compute_domains_value_renders_the_compute_domains_kustomization(helm):
    """resources.computeDomains.enabled: the base plus fake_gpus/deploy/compute-domains (CRD, DeviceClasses,
    the controller's Deployment, ServiceAccount and RBAC), field for field; the release's namespace reaches
    every namespaced object and binding; off (the default), none of them."""
    want = by_identity([o for o in kustomize() + kustomize(DEPLOY / "compute-domains") if o["kind"] != "Namespace"])
    got = by_identity(without_helm_labels(render(helm, "--set", "resources.computeDomains.enabled=true")))
    assert sorted(got) == sorted(want)
    for key, obj in want.items():
        assert got[key] == obj, key
    moved = by_identity(render(helm, "--set", "resources.computeDomains.enabled=true", namespace="gpu-lab"))
    dep = moved["Deployment", "fake-gpus-compute-domain-controller"]
    assert dep["metadata"]["namespace"] == "gpu-lab"
    assert moved["RoleBinding", "fake-gpus-compute-domain-controller"]["subjects"][0]["namespace"] == "gpu-lab"
    assert moved["ClusterRoleBinding", "fake-gpus-compute-domain-plugin"]["subjects"][0]["namespace"] == "gpu-lab"
    assert not [k for k in by_identity(render(helm)) if "compute-domain" in k[1]]


@pytest.mark.parametrize("profile", ["workshop", "mig-lab", "topology-lab", "nvl72-two-trays"])
def test_hardware_values_render_the_kind_backends_daemonsets(helm, profile, tmp_path):
    """Per node label: helm_values(profile) renders what the kind backend applies for that profile (it
    applies the manifest files without kustomize, so without the part-of label)."""
    prof = load_profile(profile)
    image = "labkit/fake-gpus:dev"
    values = tmp_path / "values.yaml"
    values.write_text(yaml.safe_dump(helm_values(prof, image)))
    want = by_identity([o for o in driver_manifests(prof, image) if o["kind"] != "Namespace"])
    got = by_identity(without_helm_labels(render(helm, "-f", str(values)), "app.kubernetes.io/part-of"))
    assert sorted(got) == sorted(want)
    for key, obj in want.items():
        assert got[key] == obj, key
    assert len([k for k in got if k[0] == "DaemonSet"]) == len({(n.node_profile, n.mig_mode) for n in prof.nodes})


def test_one_node_by_hostname(helm):
    objs = by_identity(render(helm, "--set", "hardware[0].name=t4", "--set", "hardware[0].nodeProfile=t4-inference",
                              "--set", "hardware[0].nodeSelector.kubernetes\\.io/hostname=gpu-node-1"))
    ds = objs["DaemonSet", "fake-gpus-kubelet-plugin-t4"]
    pod = ds["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"kubernetes.io/hostname": "gpu-node-1"}
    assert pod["containers"][0]["args"][-4:] == ["--profile", "t4-inference",
                                                 "--feature-gates", "NVMLDeviceHealthCheck=true"]
    assert ("DaemonSet", "fake-gpus-kubelet-plugin") not in objs


@pytest.mark.parametrize(("args", "message"), [
    (["--namespace", "default"], "installing into the 'default' namespace: use --namespace fake-gpus"),
    (["--set", "migMode=dynamc"], 'migMode "dynamc": must be none, static, dynamic or empty'),
    (["--set", "consumableShares=half"], 'consumableShares "half": must be disabled, memory, unlimited'),
    (["--set", "hardware[0].nodeProfile=dgx-a100"], "every hardware entry needs a name"),
    (["--set", "hardware[0].name=A100", "--set", "hardware[0].nodeProfile=dgx-a100"],
     'hardware[0].name "A100": must be a DNS label'),
])
def test_bad_values_are_refused_with_one_line(helm, args, message):
    ns = [] if "--namespace" in args else ["--namespace", "fake-gpus"]
    out = run_helm(helm, "template", "fake-gpus", str(CHART), *ns, *args, check=False)
    assert out.returncode == 1
    # the chart's message is helm's one error line (helm adds a hint line about --debug after it)
    first = out.stderr.splitlines()[0]
    assert first.startswith("Error: execution error at (fake-gpus/templates/") and message in first, out.stderr


def _plugin_args(ds: dict[str, Any], node: str = "kind-worker") -> Any:
    """The DaemonSet's argv, expanded as the kubelet does, parsed by the plugin's own parser."""
    (c,) = ds["spec"]["template"]["spec"]["containers"]
    env = {"NODE_NAME": node, "NODE_PROFILE": "dgx-h100", "MIG_MODE": ""}
    return build_parser().parse_args(["plugin", *(_kubelet_expand(a, env) for a in c["args"])])


def test_sharing_and_feature_gates_reach_the_plugin(helm):
    objs = by_identity(render(helm, "--set", "nodeProfile=dgx-h100", "--set", "consumableShares=4",
                              "--set", "featureGates.ConsumableShares=true", "--set", "featureGates.MPSSupport=true"))
    ds = objs["DaemonSet", "fake-gpus-kubelet-plugin"]
    assert ds["spec"]["template"]["spec"]["containers"][0]["args"][-4:] == [
        "--consumable-shares", "4", "--feature-gates", "ConsumableShares=true,MPSSupport=true,NVMLDeviceHealthCheck=true"]
    gpus = [d for s in load_slices(_plugin_args(ds)) for d in s["spec"].get("devices", [])
            if d["name"].startswith("gpu-")]
    assert gpus and all(d.get("allowMultipleAllocations") for d in gpus)
    assert all(d["capacity"]["shares"]["value"] == "4" for d in gpus)
    # the default: no such flags, devices not shared
    plain = by_identity(render(helm, "--set", "nodeProfile=dgx-h100"))["DaemonSet", "fake-gpus-kubelet-plugin"]
    assert not any(d.get("allowMultipleAllocations") for s in load_slices(_plugin_args(plain))
                   for d in s["spec"].get("devices", []))


@pytest.mark.parametrize(("flags", "message"), [
    (["--consumable-shares", "memory"], "--consumable-shares requires feature gate ConsumableShares to be enabled"),
    (["--feature-gates", "ConsumableShare=true"], "--feature-gates: unrecognized feature gate: ConsumableShare"),
    (["--feature-gates", "ConsumableShares"], "--feature-gates: missing bool value for ConsumableShares"),
    (["--feature-gates", "ConsumableShares=yes"], "--feature-gates: invalid value of ConsumableShares=yes"),
])
def test_plugin_refuses_what_nvidias_driver_refuses(flags, message):
    """`python -m fake_gpus plugin` as the DaemonSet runs it: one line, exit 2, before it serves anything."""
    out = subprocess.run([sys.executable, "-m", "fake_gpus", "plugin", "--node", "n1", "--profile", "dgx-h100",
                          "--no-publish", *flags], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 2, out.stderr
    assert message in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1, out.stderr


# -- on a real API server (the local control plane: kube-apiserver 1.37; the kind e2e installs it with pods) --
HELM_KINDS = ("daemonsets,configmaps,serviceaccounts,secrets,deviceclasses,clusterroles,clusterrolebindings,"
              "validatingadmissionpolicies,validatingadmissionpolicybindings")


@pytest.mark.local
@pytest.mark.slow
def test_kube_apiserver_accepts_the_chart_and_helm_uninstall_leaves_nothing(helm, tmp_path):
    with ready_local_cluster("tiny") as c:
        kc = str(c.kubeconfig)
        kubectl = find_tool("kubectl")
        assert kubectl
        rendered = tmp_path / "rendered.yaml"
        rendered.write_text(run_helm(helm, "template", "fake-gpus", str(CHART), "--namespace", "kube-system").stdout)
        # every object, DeviceClasses and the policy's CEL included, as the API server validates it
        out = subprocess.run([kubectl, "--kubeconfig", kc, "apply", "--dry-run=server", "-f", str(rendered)],
                             capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        assert "validatingadmissionpolicy.admissionregistration.k8s.io/fake-gpus-resourceslices-own-node created " \
               "(server dry run)" in out.stdout, out.stdout
        # and with ComputeDomains: both CRDs, the controller's Deployment, ServiceAccount and RBAC
        rendered.write_text(run_helm(helm, "template", "fake-gpus", str(CHART), "--namespace", "kube-system",
                                     "--set", "resources.computeDomains.enabled=true").stdout)
        out = subprocess.run([kubectl, "--kubeconfig", kc, "apply", "--dry-run=server", "-f", str(rendered)],
                             capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        for made in ("customresourcedefinition.apiextensions.k8s.io/computedomains.resource.nvidia.com",
                     "customresourcedefinition.apiextensions.k8s.io/computedomaincliques.resource.nvidia.com",
                     "deployment.apps/fake-gpus-compute-domain-controller",
                     "role.rbac.authorization.k8s.io/fake-gpus-compute-domain-controller",
                     "clusterrole.rbac.authorization.k8s.io/fake-gpus-compute-domain-plugin"):
            assert f"{made} created (server dry run)" in out.stdout, out.stdout
        # a real install and uninstall (the cluster's own DeviceClasses stay; no node is picked, so no plugin pod)
        out = run_helm(helm, "install", "fake-gpus", str(CHART), "--namespace", "fake-gpus", "--create-namespace",
                       "--kubeconfig", kc, "--set", "deviceClasses.enabled=false",
                       "--set", "kubeletPlugin.nodeSelector.fake-gpus\\.dev/none=none", "--wait", "--timeout", "5m")
        assert "STATUS: deployed" in out.stdout, out.stdout
        listed = subprocess.run([kubectl, "--kubeconfig", kc, "get", HELM_KINDS, "-A", "-l",
                                 "app.kubernetes.io/instance=fake-gpus", "-o", "name"], capture_output=True, text=True)
        assert len(listed.stdout.split()) == 8, listed.stdout  # SA, 2 ConfigMaps, DS, role, binding, VAP, binding
        run_helm(helm, "uninstall", "fake-gpus", "--namespace", "fake-gpus", "--kubeconfig", kc, "--wait")
        left = subprocess.run([kubectl, "--kubeconfig", kc, "get", HELM_KINDS, "-A", "-l",
                               "app.kubernetes.io/instance=fake-gpus", "-o", "name"], capture_output=True, text=True)
        assert left.returncode == 0 and left.stdout == "", left.stdout
        releases = subprocess.run([kubectl, "--kubeconfig", kc, "get", "secrets", "-n", "fake-gpus", "-l", "owner=helm",
                                   "-o", "name"], capture_output=True, text=True)
        assert releases.stdout == ""
