"""The kind backend end to end, on real kind clusters (kubelet, containerd with CDI, the fake driver
as a DaemonSet), through what a user types: `labkit cluster up --backend kind --profile P`, then
`connect("kind", P)` from Python, `kubectl`, and `labkit cluster down`.

Needs a container engine, kind, a 1.37 kubectl and a node image (make test provides them through
tools/with-kind.sh: DOCKER_HOST, LABKIT_KIND_NODE_IMAGE, ~/.cache/dra-labkit/bin on PATH). One
cluster per profile, shared by that profile's tests (tests run in file order: workshop, then
mig-lab, then topology-lab; each of the later two is created while the previous profile's last
tests run); each profile's notebooks (nbval, LABKIT_BACKEND=kind) run on that cluster too. Measured times go to
test-artifacts/kind-e2e.json.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import re
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from labkit.cluster import NotFound, connect
from labkit.cluster.backends.kind.backend import SWAP_ANNOTATION, KindCluster
from labkit.cluster.backends.kind.driver import helm_values
from labkit.cluster.backends.kind.preflight import find_tool
from labkit.cluster.report import normalize_report, simulate_report
from labkit.model.profiles import load_profile
from tests import kindutil
from tests.e2e import test_least_privilege, test_rack_kind
from tests.local import test_rack_local
from tests.paths import REPO

pytestmark = [pytest.mark.kind, pytest.mark.slow]

ROOT = REPO
SCENARIOS = ROOT / "tests" / "data" / "scenarios"
ARTIFACTS = ROOT / "test-artifacts" / "kind-e2e.json"
SYSTEM_NAMESPACES = {"kube-system", "kube-public", "kube-node-lease", "fake-gpus", "local-path-storage"}
MEASURED = kindutil.MEASURED
_run = kindutil.run_in_root
_host_snapshot = kindutil.host_snapshot


# -- the clusters: tests/conftest.py `kind_clusters` (shared with the kind column of the backend cases)
@pytest.fixture(scope="session")
def clusters(kind_clusters: kindutil.Clusters) -> kindutil.Clusters:
    return kind_clusters


@pytest.fixture(scope="session")
def host_before(kind_host_before: dict[str, set[str]]) -> dict[str, set[str]]:
    return kind_host_before


# -- helpers ---------------------------------------------------------------------------------------
def kubectl(c: KindCluster, *args: str, check: bool = True) -> str:
    out = _run(c._tool("kubectl"), "--kubeconfig", str(c.kubeconfig), *args, timeout=300)
    if check:
        assert out.returncode == 0, f"kubectl {' '.join(args)}: {out.stderr}"
    return out.stdout


def real_env(c: KindCluster, pod: str, container: str) -> dict[str, str]:
    """What `kubectl exec POD -c CONTAINER -- env` prints."""
    text = kubectl(c, "exec", pod, "-c", container, "--", "env")
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


GPU_NAME_KEY = re.compile(r"FAKE_GPU_(.+)_NAME")  # FAKE_GPU_<id>_NAME, <id> from the device name


def gpu_ids(env: dict[str, str]) -> set[str]:
    return {m.group(1) for k in env if (m := GPU_NAME_KEY.fullmatch(k))}


def gpu_names(env: dict[str, str]) -> set[str]:
    return {env[f"FAKE_GPU_{i}_NAME"] for i in gpu_ids(env)}


def device_env(report: dict) -> dict:
    """A report whose container env keeps what identifies the devices (the per-device variables
    and the derived lists). Claim-level variables (FAKE_DRA_CLAIM, ...) are left out: with two
    claims of one driver in a container, which one a runtime shows depends on CDI edit order."""
    keep = re.compile(r"FAKE_(GPU|NIC)_.+_.+|NVIDIA_VISIBLE_DEVICES")
    out = copy.deepcopy(report)
    for p in out["pods"]:
        for ctr in p.get("containers") or []:
            ctr["env"] = {k: v for k, v in ctr["env"].items() if keep.fullmatch(k)}
    return out


def running(c: KindCluster, *pods: str, timeout: float = 180) -> None:
    def ok(cl: Any) -> bool:
        return all(cl.get("Pod", p).get("status", {}).get("phase") == "Running" for p in pods)

    assert c.wait(until=ok, timeout=timeout), {p: c.get("Pod", p).get("status") for p in pods}


def results(c: KindCluster, claim: str) -> dict[str, str]:
    """request -> device of an allocated claim."""
    alloc = c.get("ResourceClaim", claim)["status"]["allocation"]
    return {r["request"]: r["device"] for r in alloc["devices"]["results"]}


def claim_of(c: KindCluster, pod: str, name: str) -> str:
    return next(s["resourceClaimName"] for s in c.get("Pod", pod)["status"]["resourceClaimStatuses"]
                if s["name"] == name)


def slice_devices(c: KindCluster) -> dict[str, dict]:
    return {d["name"] + "@" + s["spec"]["nodeName"]: d for s in c.list("ResourceSlice")
            for d in s["spec"].get("devices") or []}


def uuid(c: KindCluster, node: str, device: str) -> str:
    return slice_devices(c)[f"{device}@{node}"]["attributes"]["uuid"]["string"]


def clean(c: KindCluster) -> None:
    """Delete every user pod, claim, template and taint rule (the cluster stays)."""
    for kind in ("Pod", "ResourceClaim", "ResourceClaimTemplate", "DeviceTaintRule"):
        for o in c.list(kind):
            ns = o["metadata"].get("namespace")
            if ns not in SYSTEM_NAMESPACES:
                with contextlib.suppress(NotFound):
                    c.delete(kind, o["metadata"]["name"], ns)
    assert c.wait(until=lambda cl: not user_objects(cl, "Pod") and not user_objects(cl, "ResourceClaim"), timeout=180)


def user_objects(c: KindCluster, kind: str) -> list[dict]:
    return [o for o in c.list(kind) if o["metadata"].get("namespace") not in SYSTEM_NAMESPACES]


def user_report(c: Any) -> dict:
    report = simulate_report(c)
    return normalize_report({k: [r for r in v if r["namespace"] not in SYSTEM_NAMESPACES] for k, v in report.items()})


# -- workshop --------------------------------------------------------------------------------------
def test_driver_daemonset_ready_on_every_worker(clusters):
    c = clusters.get("workshop")
    profile = load_profile("workshop")
    nodes = {n["metadata"]["name"] for n in c.list("Node")}
    assert {n.name for n in profile.nodes} <= nodes  # workers register under the profile's node names
    for ds in c.list("DaemonSet", "fake-gpus"):
        st = ds["status"]
        assert st["desiredNumberScheduled"] == st["numberReady"] == st["updatedNumberScheduled"] > 0, ds["metadata"]
    pods = [p for p in c.list("Pod", "fake-gpus") if p["metadata"]["name"].startswith("fake-gpus-kubelet-plugin")]
    assert sorted(p["spec"]["nodeName"] for p in pods) == sorted(n.name for n in profile.nodes)
    assert all(p["status"]["phase"] == "Running" for p in pods)
    # one CoreDNS, not kubeadm's 2 (labkit.cluster.backends.kind.backend.COREDNS_REPLICAS; clusters/README.md)
    dns = [p for p in c.list("Pod", "kube-system") if p["metadata"]["name"].startswith("coredns-")
           and not p["metadata"].get("deletionTimestamp")]
    assert c.get("Deployment", "coredns", "kube-system")["spec"]["replicas"] == 1 and len(dns) == 1, dns


def _spec(s: dict) -> dict:
    """A slice's spec, generation included: a freshly started plugin publishes generation 1, as
    Kubernetes' resourceslice controller starts a pool and as the CLI prints it."""
    return json.loads(json.dumps(s["spec"]))


def check_slices(c: KindCluster, profile: str) -> None:
    """Every node's ResourceSlices (spec) equal `python -m fake_gpus slices` for its hardware. A plugin
    publishes its drivers' slices one after the other (GPUs, then NICs), so this first waits until every
    node has as many slices as it should, however late the last one comes."""
    prof = load_profile(profile)
    wants: dict[str, list[dict]] = {}
    for n in prof.nodes:
        cmd = [sys.executable, "-m", "fake_gpus", "slices", "--profile", n.node_profile, "--node", n.name, "-o", "json"]
        if n.mig_mode:
            cmd += ["--mig", n.mig_mode]
        if prof.topology_attributes:
            cmd += ["--topology-attributes"]
        wants[n.name] = sorted((_spec(s) for s in json.loads(_run(*cmd).stdout)),
                               key=lambda s: (s["driver"], s["pool"]["name"]))
    live: list[dict] = []

    def all_published(cl: KindCluster) -> bool:
        live[:] = cl.list("ResourceSlice")
        counts = Counter(s["spec"].get("nodeName") for s in live)
        return all(counts[node] == len(want) for node, want in wants.items())

    published = c.wait(until=all_published, timeout=300)
    for node, want in wants.items():
        got = sorted((_spec(s) for s in live if s["spec"].get("nodeName") == node),
                     key=lambda s: (s["driver"], s["pool"]["name"]))
        assert published and got and len(got) == len(want), (node, [(s["driver"], s["pool"]["name"]) for s in got],
                                                              [(s["driver"], s["pool"]["name"]) for s in want])
        assert got == want, node


def test_workshop_resourceslices_equal_fake_gpus_slices_for_each_node(clusters):
    check_slices(clusters.get("workshop"), "workshop")


SEED_40GI = """
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: big-a100}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly:
          deviceClassName: gpu.nvidia.com
          selectors:
          - cel:
              expression: >-
                device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0 &&
                device.attributes['gpu.nvidia.com'].productName == 'NVIDIA A100-SXM4-80GB'
---
apiVersion: v1
kind: Pod
metadata: {name: trainer}
spec:
  containers:
  - name: main
    image: pytorch/pytorch:2.4.0-cuda12.1-cudnn9-runtime
    command: [python, train.py]
    resources: {claims: [{name: gpu}]}
  resourceClaims: [{name: gpu, resourceClaimTemplateName: big-a100}]
"""


def test_seed_gpu_by_memory_and_product_runs_in_a_real_container(clusters):
    c = clusters.get("workshop")
    c.apply(SEED_40GI)
    running(c, "trainer")
    pod = c.get("Pod", "trainer")
    assert pod["spec"]["nodeName"] == "dgx-a100-0"
    # the image cannot run here: the stand-in ran instead, visibly
    assert pod["metadata"]["annotations"][SWAP_ANNOTATION] == "main=pytorch/pytorch:2.4.0-cuda12.1-cudnn9-runtime"
    assert pod["spec"]["containers"][0]["image"] == c.workload_image
    logs = kubectl(c, "logs", "trainer", "-c", "main")
    assert logs.startswith("labkit-workload: stand-in for") and "python train.py" in logs.splitlines()[0]
    (device,) = results(c, claim_of(c, "trainer", "gpu")).values()
    env = real_env(c, "trainer", "main")
    MEASURED["env trainer/main"] = {k: v for k, v in sorted(env.items()) if k.startswith(("FAKE_", "NVIDIA_"))}
    assert gpu_names(env) == {device}
    assert env["FAKE_GPU_0_PRODUCT"] == "NVIDIA A100-SXM4-80GB" and env["FAKE_GPU_0_MEMORY"] == "80Gi"
    assert env["NVIDIA_VISIBLE_DEVICES"] == uuid(c, "dgx-a100-0", device)
    assert c.pod_env("trainer", container="main") == {k: v for k, v in env.items() if k.startswith(("FAKE_", "NVIDIA_"))}
    # placements() and events() are the cluster's
    rows = [r for r in c.placements().rows if r["pod"] == "trainer"]
    assert [(r["request"], r["node"], r["device"]) for r in rows] == [("gpu", "dgx-a100-0", device)]
    evs = [e for e in c.events() if e.get("involvedObject", {}).get("name") == "trainer"]
    assert any(e["reason"] == "Scheduled" and "dgx-a100-0" in e["message"] for e in evs)
    assert any(e["reason"] == "Started" for e in evs)
    assert "is Running on node dgx-a100-0" in c.explain("trainer")


SEED_SHARED = (SCENARIOS / "shared-claim.yaml").read_text()


def test_seed_one_claim_shared_by_two_pods_same_gpu(clusters):
    c = clusters.get("workshop")
    c.apply(SEED_SHARED)
    running(c, "infer-1", "infer-2")
    (device,) = results(c, "shared-t4").values()
    claim = c.get("ResourceClaim", "shared-t4")
    assert sorted(r["name"] for r in claim["status"]["reservedFor"]) == ["infer-1", "infer-2"]
    envs = {p: real_env(c, p, "main") for p in ("infer-1", "infer-2")}
    for p, env in envs.items():
        MEASURED[f"env {p}/main"] = {k: v for k, v in sorted(env.items()) if k.startswith(("FAKE_", "NVIDIA_"))}
        assert gpu_names(env) == {device}, p
        assert env["NVIDIA_VISIBLE_DEVICES"] == uuid(c, "t4-0", device)
        assert env["FAKE_DRA_CLAIM"] == "default/shared-t4"
    assert {r["node"] for r in c.placements().rows if r["claim"] == "shared-t4"} == {"t4-0"}


PER_CONTAINER = """
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: two-gpus}
spec:
  spec:
    devices:
      requests:
      - name: first
        exactly: {deviceClassName: gpu.nvidia.com}
      - name: second
        exactly: {deviceClassName: gpu.nvidia.com}
---
apiVersion: v1
kind: Pod
metadata: {name: split}
spec:
  nodeSelector: {kubernetes.io/hostname: dgx-a100-0}
  resourceClaims: [{name: gpus, resourceClaimTemplateName: two-gpus}]
  containers:
  - name: uses-first
    image: vllm/vllm-openai:latest
    resources: {claims: [{name: gpus, request: first}]}
  - name: uses-second
    image: vllm/vllm-openai:latest
    resources: {claims: [{name: gpus, request: second}]}
  - name: uses-both
    image: vllm/vllm-openai:latest
    resources: {claims: [{name: gpus}]}
  - name: uses-none
    image: vllm/vllm-openai:latest
"""


def test_each_container_sees_exactly_the_devices_of_the_requests_it_references(clusters):
    c = clusters.get("workshop")
    c.apply(PER_CONTAINER)
    running(c, "split")
    devs = results(c, claim_of(c, "split", "gpus"))
    expected = {"uses-first": {devs["first"]}, "uses-second": {devs["second"]},
                "uses-both": {devs["first"], devs["second"]}, "uses-none": set()}
    claim_wide = {uuid(c, "dgx-a100-0", d) for d in devs.values()}
    for container, want in expected.items():
        env = real_env(c, "split", container)
        MEASURED[f"env split/{container}"] = {k: v for k, v in sorted(env.items()) if k.startswith(("FAKE_", "NVIDIA_"))}
        # the per-device variables (FAKE_GPU_<i>_*) are exactly the referenced requests' devices
        assert gpu_names(env) == want, container
        uuids = {env[f"FAKE_GPU_{i}_UUID"] for i in gpu_ids(env)}
        assert uuids == {uuid(c, "dgx-a100-0", d) for d in want}, container
        assert uuids <= claim_wide
        # the list a GPU runtime hook derives from the injected devices: exactly this container's
        hooked = c.pod_env("split", container=container)
        visible = set(filter(None, hooked.get("NVIDIA_VISIBLE_DEVICES", "").split(",")))
        assert visible == uuids, container


UNPLACEABLE = """
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: huge}
spec:
  devices:
    requests:
    - name: gpu
      exactly:
        deviceClassName: gpu.nvidia.com
        selectors:
        - cel: {expression: "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('100Gi')) >= 0"}
---
apiVersion: v1
kind: Pod
metadata: {name: too-big}
spec:
  resourceClaims: [{name: gpu, resourceClaimName: huge}]
  containers:
  - {name: main, image: busybox, resources: {claims: [{name: gpu}]}}
"""


def test_explain_of_a_pending_pod_says_why(clusters):
    c = clusters.get("workshop")
    c.apply(UNPLACEABLE)

    def unschedulable(cl: Any) -> bool:
        conds = cl.get("Pod", "too-big").get("status", {}).get("conditions") or []
        return any(x.get("reason") == "Unschedulable" for x in conds)

    assert c.wait(until=unschedulable, timeout=120)
    text = c.explain("too-big")
    assert text.startswith("Pod default/too-big is Pending"), text
    assert "100Gi" in text or "cannot allocate" in text.lower() or "no device" in text.lower(), text
    assert "FailedScheduling" in text or "Unschedulable" in text, text  # what kube-scheduler said
    evs = [e for e in c.events() if e.get("involvedObject", {}).get("name") == "too-big"]
    assert any(e["reason"] == "FailedScheduling" for e in evs)
    assert [r for r in c.placements().rows if r["pod"] == "too-big"] == []
    clean(c)


def _scenarios(profile: str) -> list[Path]:
    return [f for f in sorted(SCENARIOS.glob("*.yaml"))
            if re.match(r"# labkit-profile: (\S+)", f.read_text()).group(1) == profile]


def check_scenario_corpus(c: KindCluster, profile: str) -> None:
    """The scenarios tests/local/test_cluster_sim_vs_local.py runs on local, here on kind: same reports."""
    clean(c)
    done = 0
    for scenario in _scenarios(profile):
        c.apply(scenario)
        assert c.wait(timeout=180), scenario.name
        got = user_report(c)
        sim = connect("sim", profile, progress=False)
        sim.apply(scenario)
        sim.wait()
        assert device_env(normalize_report(simulate_report(sim))) == device_env(got), scenario.name
        clean(c)
        done += 1
    assert done
    MEASURED.setdefault("sim-vs-kind scenarios", {})[profile] = done


GENERATED = int(os.environ.get("LABKIT_SIMKIND_EXAMPLES", "12"))


def check_generated(c: KindCluster, profile: str) -> None:
    """tests/scenario_gen.py's scenarios (as tests/local/test_cluster_sim_vs_local_generated.py), on kind."""
    from tests.scenario_gen import claims_caught_up, pod_settled, scenarios

    clean(c)
    cases = [s for s in scenarios(GENERATED, 0) if s.profile == profile]
    failures = []
    for sc in cases:
        if sc.setup:
            c.apply(sc.setup)
        for pod in sc.pods:
            c.apply(pod)
            name = pod["metadata"]["name"]
            assert c.wait(until=lambda cl, n=name: pod_settled(cl.get("Pod", n)), timeout=180), (sc.seed, name)
        assert c.wait(until=claims_caught_up, timeout=180), (sc.seed, "claims did not catch up with the pods")
        got = user_report(c)
        sim = connect("sim", profile, progress=False)
        if sc.setup:
            sim.apply(sc.setup)
        for pod in sc.pods:
            sim.apply(pod)
            sim.wait()
        want = device_env(normalize_report(simulate_report(sim)))
        got = device_env(got)
        if want != got:
            failures.append(f"seed {sc.seed}:\n{yaml.safe_dump({'sim': want, 'kind': got})}")
        clean(c)
    MEASURED.setdefault("sim-vs-kind generated", {})[profile] = len(cases)
    assert cases and not failures, "\n".join(failures)


# -- the course on kind ----------------------------------------------------------------------------
#: the notebooks that must pass nbval on kind, by the profile their first cell connects to; they run
#: on this session's cluster of that profile (connect() in the notebook finds it through
#: LABKIT_RUN_DIR), so the course costs no cluster start of its own. `make notebooks-kind`
#: (tools/kind-notebooks.sh) runs the same notebooks on clusters of their own.
KIND_NOTEBOOKS: dict[str, list[str]] = {}  # profile -> notebooks: the lessons' front matter (tools/lessons.py)
for _lesson in json.loads(subprocess.run([sys.executable, str(ROOT / "tools/lessons.py"), "json"], check=True,
                                         capture_output=True, text=True).stdout):
    if "kind" in _lesson["backends"]:
        KIND_NOTEBOOKS.setdefault(_lesson["profile"], []).append(_lesson["notebook"])


def check_notebooks(c: KindCluster, profile: str) -> None:
    books = KIND_NOTEBOOKS[profile]
    assert books and all((ROOT / b).is_file() for b in books), books
    clean(c)
    t0 = time.monotonic()
    out = _run(sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--nbval-lax", "--nbval-current-env",
               "-q", *books, env={**os.environ, "LABKIT_BACKEND": "kind"}, timeout=1800)
    tail = f"{out.stdout[-8000:]}\n{out.stderr[-2000:]}"
    assert out.returncode == 0, f"nbval on kind ({profile}) failed:\n{tail}"
    passed = re.search(r"(\d+) passed", out.stdout)
    assert passed and int(passed[1]) > 0 and "failed" not in out.stdout.splitlines()[-1], tail
    # every notebook's last cell removed what that notebook applied; the cluster is still this one
    assert not user_objects(c, "Pod"), [o["metadata"]["name"] for o in user_objects(c, "Pod")]
    MEASURED.setdefault("notebooks on kind", {})[profile] = {
        "notebooks": [Path(b).stem for b in books], "cells passed": int(passed[1]),
        "s": round(time.monotonic() - t0, 1)}


def test_workshop_scenario_corpus_matches_sim(clusters):
    check_scenario_corpus(clusters.get("workshop"), "workshop")


def test_workshop_generated_scenarios_match_sim(clusters):
    check_generated(clusters.get("workshop"), "workshop")


def test_workshop_notebooks_pass_on_kind(clusters):
    check_notebooks(clusters.get("workshop"), "workshop")


# issue 17.4 on this cluster (its standalone form, marked kind_standalone, starts a cluster of its own;
# the fault runs of 17.2 are a lane of their own, tests/e2e/test_kind_faults.py)
def test_workshop_driver_service_account_has_exactly_the_expected_rights(clusters):
    c = clusters.get("workshop")
    clusters.prefetch("mig-lab")  # the workshop's last two tests (~90 s) cover its creation: kindutil.PREFETCH
    test_least_privilege.check_service_account(c)
    test_least_privilege.check_own_node_slices(c)


# issue 31: the fake driver's Helm chart on this cluster, last of the workshop's tests: the kit's own driver
# objects are deleted, the chart is installed with the values that stand for this profile
# (labkit.cluster.kind.driver.helm_values), its slices and a seed pattern are checked, and `helm uninstall`
# must leave nothing of the chart behind.
HELM_CHART = ROOT / "fake_gpus" / "deploy" / "helm" / "fake-gpus"
HELM_KINDS = ("daemonsets,configmaps,serviceaccounts,secrets,deviceclasses,clusterroles,clusterrolebindings,"
              "validatingadmissionpolicies,validatingadmissionpolicybindings")


def helm_binary() -> str:
    out = _run("bash", str(ROOT / "tools" / "build-helm.sh"))
    assert out.returncode == 0, out.stderr
    return out.stdout.strip().splitlines()[-1]


def test_workshop_helm_chart_installs_runs_a_seed_and_uninstalls_clean(clusters, tmp_path):
    c = clusters.get("workshop")
    clean(c)
    helm = helm_binary()
    kc = str(c.kubeconfig)
    t0 = time.monotonic()
    kubectl(c, "delete", "-f", str(c.manifest_path), "--wait=true")
    assert c.wait(until=lambda cl: not cl.list("ResourceSlice") and not cl.list("DeviceClass"), timeout=180)
    assert c.wait(until=lambda cl: "fake-gpus" not in {n["metadata"]["name"] for n in cl.list("Namespace")},
                  timeout=180)
    values = tmp_path / "values.yaml"
    values.write_text(yaml.safe_dump(helm_values(c.profile, c.image)))
    t1 = time.monotonic()
    out = _run(helm, "install", "fake-gpus", str(HELM_CHART), "--namespace", "fake-gpus", "--create-namespace",
               "-f", str(values), "--kubeconfig", kc, "--wait", "--timeout", "5m")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "STATUS: deployed" in out.stdout, out.stdout
    check_slices(c, "workshop")  # waits until every node has all its drivers' slices
    MEASURED["helm install -> slices published s"] = round(time.monotonic() - t1, 1)
    c.apply(SEED_40GI)
    running(c, "trainer")
    (device,) = results(c, claim_of(c, "trainer", "gpu")).values()
    assert c.get("Pod", "trainer")["spec"]["nodeName"] == "dgx-a100-0"
    assert gpu_names(real_env(c, "trainer", "main")) == {device}
    clean(c)
    t2 = time.monotonic()
    out = _run(helm, "uninstall", "fake-gpus", "--namespace", "fake-gpus", "--kubeconfig", kc, "--wait",
               "--timeout", "5m")
    assert out.returncode == 0, out.stdout + out.stderr
    # nothing left: no object of the release, no helm release record, no plugin pod, no ResourceSlice
    assert kubectl(c, "get", HELM_KINDS, "-A", "-l", "app.kubernetes.io/instance=fake-gpus", "-o", "name") == ""
    assert kubectl(c, "get", "secrets", "-n", "fake-gpus", "-l", "owner=helm", "-o", "name") == ""
    assert c.wait(until=lambda cl: not cl.list("Pod", "fake-gpus") and not cl.list("ResourceSlice"), timeout=180)
    MEASURED["helm uninstall -> nothing left s"] = round(time.monotonic() - t2, 1)
    MEASURED["helm chart test s"] = round(time.monotonic() - t0, 1)
    kubectl(c, "delete", "namespace", "fake-gpus", "--wait=true")  # made by --create-namespace; helm leaves it


# -- mig-lab ---------------------------------------------------------------------------------------
MIG_PAIR = """
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: mig-pair}
spec:
  spec:
    devices:
      requests:
      - name: big
        exactly:
          deviceClassName: mig.nvidia.com
          selectors:
          - cel: {expression: "device.attributes['gpu.nvidia.com'].profile == '3g.40gb'"}
      - name: small
        exactly:
          deviceClassName: mig.nvidia.com
          selectors:
          - cel: {expression: "device.attributes['gpu.nvidia.com'].profile == '1g.10gb'"}
      constraints:
      - requests: [big, small]
        matchAttribute: gpu.nvidia.com/parentUUID
---
apiVersion: v1
kind: Pod
metadata: {name: mig-worker}
spec:
  resourceClaims: [{name: mig, resourceClaimTemplateName: mig-pair}]
  containers:
  - name: big
    image: nvidia/cuda:12.4.0-base-ubuntu22.04
    resources: {claims: [{name: mig, request: big}]}
  - name: small
    image: nvidia/cuda:12.4.0-base-ubuntu22.04
    resources: {claims: [{name: mig, request: small}]}
"""


def test_mig_lab_slices_and_the_mig_pair_on_one_parent(clusters):
    c = clusters.get("mig-lab")
    check_slices(c, "mig-lab")
    clean(c)
    c.apply(MIG_PAIR)
    running(c, "mig-worker")
    node = c.get("Pod", "mig-worker")["spec"]["nodeName"]
    devs = results(c, claim_of(c, "mig-worker", "mig"))
    attrs = {r: slice_devices(c)[f"{d}@{node}"]["attributes"] for r, d in devs.items()}
    assert attrs["big"]["profile"]["string"] == "3g.40gb" and attrs["small"]["profile"]["string"] == "1g.10gb"
    parent = attrs["big"]["parentUUID"]["string"]
    assert attrs["small"]["parentUUID"]["string"] == parent
    for container in ("big", "small"):
        env = real_env(c, "mig-worker", container)
        MEASURED[f"env mig-worker/{container}"] = {k: v for k, v in sorted(env.items())
                                                   if k.startswith(("FAKE_", "NVIDIA_"))}
        assert gpu_names(env) == {devs[container]}, container
        (i,) = gpu_ids(env)
        assert env[f"FAKE_GPU_{i}_MIG_PROFILE"] == attrs[container]["profile"]["string"]
        assert env[f"FAKE_GPU_{i}_PARENT_UUID"] == parent
    clean(c)


def test_mig_lab_scenario_corpus_matches_sim(clusters):
    check_scenario_corpus(clusters.get("mig-lab"), "mig-lab")


def test_mig_lab_generated_scenarios_match_sim(clusters):
    check_generated(clusters.get("mig-lab"), "mig-lab")


def test_mig_lab_notebooks_pass_on_kind(clusters):
    c = clusters.get("mig-lab")
    clusters.prefetch("topology-lab")  # created during mig-lab's last test (~60 s) and its `down`
    check_notebooks(c, "mig-lab")


# -- topology-lab ----------------------------------------------------------------------------------
def test_topology_lab_scenario_corpus_matches_sim(clusters):
    c = clusters.get("topology-lab")
    check_slices(c, "topology-lab")
    check_scenario_corpus(c, "topology-lab")


def test_topology_lab_notebooks_pass_on_kind(clusters):
    c = clusters.get("topology-lab")
    clusters.prefetch("nvl72-two-trays")  # created during topology-lab's last test (~75 s)
    check_notebooks(c, "topology-lab")


# -- nvl72-two-trays: ComputeDomains (issue 27) ----------------------------------------------------
# Two GB200 trays (clusters/nvl72-two-trays.yaml says why two): the kind backend deployed
# fake_gpus/deploy/compute-domains (CRD, DeviceClasses, the controller's Deployment under its own
# ServiceAccount); NVIDIA's demos run unchanged (tests/data/upstream/nvidia-computedomain).
CD_LABEL = "resource.nvidia.com/computeDomain"


def test_nvl72_slices_controller_and_least_privilege(clusters):
    c = clusters.get("nvl72-two-trays")
    check_slices(c, "nvl72-two-trays")  # GPUs, NICs and the compute-domain plugin's channel-0 / daemon-0
    (dep,) = [d for d in c.list("Deployment", "fake-gpus") if d["metadata"]["name"] == "fake-gpus-compute-domain-controller"]
    assert dep["status"].get("availableReplicas") == 1, dep["status"]
    kc = str(c.kubeconfig)
    assert test_rack_kind.extra_rights(kc, test_rack_kind.CONTROLLER_SA, "fake-gpus") == \
        test_rack_kind.golden("fake-gpus-compute-domain-controller.txt")
    assert test_rack_kind.extra_rights(kc, test_rack_kind.PLUGIN_SA, "default") == \
        test_rack_kind.golden("fake-gpus-kubelet-plugin-computedomains.txt")


@pytest.mark.parametrize("demo", ["channel-injection", "channel-injection-all"])
def test_nvl72_compute_domain_demo_unchanged_gives_the_sims_answer_and_cleans_up(clusters, demo):
    """bats test_cd_imex_chan_inject: the pod runs with its IMEX channel(s) (the fake lists them in
    FAKE_IMEX_CHANNELS), the domain is Ready with the pod's tray in status.nodes, an IMEX daemon runs on
    that tray only; deleting the domain removes its templates, DaemonSet and node label, then its finalizer."""
    c = clusters.get("nvl72-two-trays")
    clean(c)
    sim = connect("sim", "nvl72-two-trays", progress=False)
    want = test_rack_local._outcome(sim, demo)
    got = test_rack_local._outcome(c, demo, timeout=300)
    MEASURED.setdefault("compute domains on kind", {})[demo] = {k: v for k, v in got.items() if k != "channels"}
    assert got == want
    name = f"imex-{demo}"
    cd = c.get("ComputeDomain", name)
    uid = cd["metadata"]["uid"]
    node = c.get("Pod", name)["spec"]["nodeName"]
    env = real_env(c, name, "ctr")
    channels = env["FAKE_IMEX_CHANNELS"].split(",")
    assert channels == (["channel0"] if demo == "channel-injection" else [f"channel{i}" for i in range(2048)])
    assert env["FAKE_COMPUTE_DOMAIN"] == uid
    daemons = [p for p in c.list("Pod", "fake-gpus") if (p["metadata"].get("labels") or {}).get(CD_LABEL) == uid]
    assert [(p["spec"]["nodeName"], p["status"]["phase"]) for p in daemons] == [(node, "Running")]
    assert f"COMPUTE_DOMAIN_UUID={uid}" in kubectl(c, "-n", "fake-gpus", "logs", daemons[0]["metadata"]["name"])
    labelled = {n["metadata"]["name"] for n in c.list("Node") if CD_LABEL in n["metadata"]["labels"]}
    assert labelled == {node}
    # deletion: the pod, then the domain; the controller's finalizer goes last
    c.delete("Pod", name)
    c.delete("ComputeDomain", name)

    def gone(cl: Any) -> bool:
        return (not cl.list("ComputeDomain") and not user_objects(cl, "ResourceClaimTemplate")
                and not [d for d in cl.list("DaemonSet", "fake-gpus") if d["metadata"]["name"].endswith(uid)]
                and not [n for n in cl.list("Node") if CD_LABEL in n["metadata"]["labels"]])

    assert c.wait(until=gone, timeout=300)
    clean(c)


# -- last: nothing left behind ---------------------------------------------------------------------
def _used_by_others(network: str) -> bool:
    out = _run(find_tool("docker") or "docker", "network", "inspect", network, "--format",
               "{{range .Containers}}{{.Name}} {{end}}")
    return out.returncode == 0 and any(not n.startswith("labkit-e2e-") for n in out.stdout.split())


def test_down_leaves_no_container_network_or_process(clusters, host_before):
    ids = [i for profile_ids in clusters.container_ids.values() for i in profile_ids]
    clusters.down_all()
    after = _host_snapshot()
    ours = re.compile(r"labkit-e2e-")
    assert not [n for n in after["containers"] if ours.match(n)], after["containers"]
    # kind's shared network stays while another lane's cluster (the fault runs) is still on it
    left = {n for n in after["networks"] - host_before["networks"] if not _used_by_others(n)}
    assert not left, left
    assert not after["processes"], after["processes"]
    ps = _run("ps", "-eo", "args=").stdout
    assert ids and not [i for i in ids if i in ps], "a containerd shim of a deleted node is still running"
    assert not list(Path(os.environ["LABKIT_RUN_DIR"]).glob("kind-*")), "run state left behind"
