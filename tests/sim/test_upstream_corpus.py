"""Upstream manifests, unchanged, on the sim: the outcome upstream's own tests or docs expect.

Sources (tests/data/upstream/README.md has paths, commits and licenses):
- kubernetes.io DRA tutorial/tasks (content/en/examples/dra)
- kubernetes-sigs/dra-example-driver demo/examples/* (expected outcomes: its test/e2e/e2e_test.go)
- NVIDIA/k8s-dra-driver-gpu demo/specs/quickstart/v1 and tests/bats/specs (expected: tests/bats/*.bats)
- kubernetes-sigs/dra-driver-nvidia-gpu (the same driver's new home) demo/specs/consumable-shares and
  the consumable-shares bats specs (expected: its README and test_gpu_consumable_shares.bats)

Each case runs `labkit simulate -f <files> --profile <profile> -o json` as a user would and
checks the report: phases, which pods/containers share which device, each container's env.
Where a manifest needs something outside DRA (a Helm value, a disabled API version, a
sed-substituted template), the test says what and applies the equivalent.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from labkit.cli import main
from labkit.cluster.backends import connect
from labkit.cluster.report import simulate_report
from tests.paths import TEST_DATA

UP = TEST_DATA / "upstream"
EX = UP / "dra-example-driver"
QS = UP / "nvidia-quickstart"
BATS = UP / "nvidia-bats"
WEB = UP / "kubernetes-website" / "dra"
SHARES = UP / "nvidia-consumable-shares"


def simulate(capsys, profile: str, *files: Path | str, advance: float = 0.0, expect_rc: int = 0) -> dict:
    args = ["simulate", "--profile", profile, "-o", "json", "-f", *map(str, files)]
    if advance:
        args += ["--advance", str(advance)]
    rc = main(args)
    out, err = capsys.readouterr()
    assert rc == expect_rc, err
    return json.loads(out) if rc == 0 else {"error": err}


def steps(profile: str, *files: Path, advance: float = 0.0) -> dict:
    """`kubectl apply -f` one file after the other, waiting in between (the demos' numbered steps)."""
    cluster = connect("sim", profile, progress=False)
    for f in files:
        cluster.apply(f)
        cluster.wait()
    if advance:
        cluster.advance(advance)
    return simulate_report(cluster)


def pods(rep: dict) -> dict[str, dict]:
    return {p["name"]: p for p in rep["pods"]}


def env(rep: dict, pod: str, ctr: str) -> dict[str, str]:
    return next(c["env"] for c in pods(rep)[pod]["containers"] if c["name"] == ctr)


def example_gpus(e: dict[str, str]) -> set[str]:
    """Devices a container of the example driver sees: GPU_DEVICE_<id>=<device name> (what its
    e2e test greps from the container log)."""
    return {v for k, v in e.items() if re.fullmatch(r"GPU_DEVICE_[0-9A-Z_]+", k)
            and not k.endswith(("_RESOURCE_CLAIM", "_SHARING_STRATEGY", "_TIMESLICE_INTERVAL", "_PARTITION_COUNT",
                                "_MEMORY", "_COMPUTE"))}


def prop(e: dict[str, str], name: str) -> set[str]:
    return {v for k, v in e.items() if k.startswith("GPU_DEVICE_") and k.endswith("_" + name)}


def nvidia_gpus(e: dict[str, str]) -> list[str]:
    """What `nvidia-smi -L` lists in NVIDIA's bats tests: the container's visible devices."""
    return [u for u in e.get("NVIDIA_VISIBLE_DEVICES", "").split(",") if u]


def claim_of(rep: dict, pod: str) -> dict:
    return next(c for c in rep["claims"] if c["name"].startswith(pod + "-"))


def running(rep: dict, *names: str) -> None:
    got = {n: (pods(rep)[n]["phase"], pods(rep)[n]["reason"]) for n in names}
    assert all(v == ("Running", "") for v in got.values()), got


# ------------------------------------------------------------------ dra-example-driver demos


def test_example_basic_resourceclaimtemplate(capsys):
    rep = simulate(capsys, "example-driver", EX / "basic-resourceclaimtemplate/basic-resourceclaimtemplate.yaml")
    running(rep, "pod0", "pod1")
    g0, g1 = example_gpus(env(rep, "pod0", "ctr0")), example_gpus(env(rep, "pod1", "ctr0"))
    assert len(g0) == len(g1) == 1 and g0 != g1  # 1 distinct GPU per pod
    e = env(rep, "pod0", "ctr0")
    assert e["KUBERNETES_NODE_NAME"] == "kind-worker" and e["DRA_RESOURCE_DRIVER_NAME"] == "gpu.example.com"


def test_example_basic_multiple_requests(capsys):
    rep = simulate(capsys, "example-driver", EX / "basic-multiple-requests/basic-multiple-requests.yaml")
    running(rep, "pod0")
    assert len(example_gpus(env(rep, "pod0", "ctr0"))) == 2


@pytest.mark.parametrize("demo, members", [
    ("basic-shared-claim-across-containers", [("pod0", "ctr0"), ("pod0", "ctr1")]),
    ("basic-shared-claim-across-pods", [("pod0", "ctr0"), ("pod1", "ctr0")]),
    ("initcontainer-shared-gpu", [("pod0", "init0"), ("pod0", "ctr0")]),
])
def test_example_shared_gpu_time_slicing_default(capsys, demo, members):
    rep = simulate(capsys, "example-driver", EX / demo / f"{demo}.yaml")
    running(rep, *{p for p, _ in members})
    envs = [env(rep, p, c) for p, c in members]
    assert len({frozenset(example_gpus(e)) for e in envs}) == 1 and len(example_gpus(envs[0])) == 1
    assert all(prop(e, "SHARING_STRATEGY") == {"TimeSlicing"} and prop(e, "TIMESLICE_INTERVAL") == {"Default"}
               for e in envs)


def test_example_opaque_config_time_slicing_and_space_partitioning(capsys):
    rep = simulate(capsys, "example-driver",
                   EX / "basic-resourceclaim-opaque-config/basic-resourceclaim-opaque-config.yaml")
    running(rep, "pod0")
    ts = [env(rep, "pod0", c) for c in ("ts-ctr0", "ts-ctr1")]
    sp = [env(rep, "pod0", c) for c in ("sp-ctr0", "sp-ctr1")]
    assert example_gpus(ts[0]) == example_gpus(ts[1]) and example_gpus(sp[0]) == example_gpus(sp[1])
    assert example_gpus(ts[0]) != example_gpus(sp[0])  # each container sees only its request's GPU
    assert all(prop(e, "SHARING_STRATEGY") == {"TimeSlicing"} and prop(e, "TIMESLICE_INTERVAL") == {"Long"} for e in ts)
    assert all(prop(e, "SHARING_STRATEGY") == {"SpacePartitioning"} and prop(e, "PARTITION_COUNT") == {"10"}
               for e in sp)


def test_example_admin_access(capsys):
    rep = simulate(capsys, "example-driver", EX / "admin-access/admin-access.yaml")
    running(rep, "pod0")
    assert env(rep, "pod0", "ctr0")["DRA_ADMIN_ACCESS"] == "true"


def test_example_cel_selector(capsys):
    rep = simulate(capsys, "example-driver", EX / "cel-selector/cel-selector.yaml")
    running(rep, "pod0")
    assert len(example_gpus(env(rep, "pod0", "ctr0"))) == 1


def test_example_prioritized_alternatives(capsys):
    rep = simulate(capsys, "example-driver", EX / "prioritized-alternatives/prioritized-alternatives.yaml")
    running(rep, "pod0", "pod1")
    chosen = {p: [r["request"] for r in claim_of(rep, p)["allocation"]["devices"]["results"]] for p in ("pod0", "pod1")}
    assert chosen == {"pod0": ["gpu/older-gpu"], "pod1": ["gpu/latest-gpu"]}


def test_example_extended_resource_request(capsys):
    demo = EX / "extended-resource-request/extended-resource-request.yaml"
    # pod1 asks for example.com/gpu, which needs the chart value
    # deviceClass.extendedResourceName=example.com/gpu (profile example-driver-extended)
    rep = simulate(capsys, "example-driver-extended", demo)
    running(rep, "pod0", "pod1")
    g = [example_gpus(env(rep, p, "ctr0")) for p in ("pod0", "pod1")]
    assert len(g[0]) == len(g[1]) == 1 and g[0] != g[1]
    # without the value, as the manifest's comment says: pod1 Pending, pod0 (implicit name) Running
    rep = simulate(capsys, "example-driver", demo)
    running(rep, "pod0")
    assert (pods(rep)["pod1"]["phase"], pods(rep)["pod1"]["reason"]) == ("Pending", "Unschedulable")


def test_example_podgroup_shares_one_gpu_per_group(capsys):
    rep = simulate(capsys, "example-driver",
                   EX / "podgroup-resourceclaimtemplate/podgroup-resourceclaimtemplate.yaml")
    groups: dict[str, set[frozenset[str]]] = {}
    for p in rep["pods"]:
        assert p["phase"] == "Running", p
        groups.setdefault(p["name"].rsplit("-", 2)[0], set()).add(frozenset(example_gpus(p["containers"][0]["env"])))
    assert sorted(groups) == ["group-1", "group-2"]
    assert all(len(s) == 1 for s in groups.values())  # every pod of a group: the same GPU
    assert groups["group-1"] != groups["group-2"]
    assert sorted(r["name"] for c in rep["claims"] for r in c["reservedFor"]) == ["group-1", "group-2"]


def test_example_partitionable_devices(capsys):
    rep = simulate(capsys, "example-driver-partitionable", EX / "partitionable-devices/partitionable-devices.yaml")
    running(rep, "pod0")
    assert len(example_gpus(env(rep, "pod0", "ctr0"))) == 2


@pytest.mark.parametrize("profile, demo", [
    ("example-driver-multi", "gpu-allow-multiple-allocations"),
    ("example-driver-multi-partitionable", "gpu-allow-multiple-allocations-partitionable"),
])
def test_example_multiple_allocations_share_a_device(capsys, profile, demo):
    rep = simulate(capsys, profile, EX / demo / f"{demo}.yaml")
    running(rep, "pod0", "pod1")
    results = [r for c in rep["claims"] for r in c["allocation"]["devices"]["results"]]
    assert len({r["device"] for r in results}) == 1  # two shares of the same device
    assert len({r["shareID"] for r in results}) == 2 and all(r.get("consumedCapacity") for r in results)
    for p in ("pod0", "pod1"):
        e = env(rep, p, "ctr0")
        assert prop(e, "MEMORY") and prop(e, "COMPUTE")  # what the share consumed


def test_example_net_consumable_capacity(capsys):
    rep = simulate(capsys, "example-driver-net", EX / "net-consumable-capacity/net-consumable-capacity.yaml")
    running(rep, "pod0", "pod1")
    for p in ("pod0", "pod1"):
        e = env(rep, p, "ctr0")
        assert any(re.fullmatch(r"NET_DEVICE_\d+_INGRESS_RATE", k) for k in e), e
        assert any(re.fullmatch(r"NET_DEVICE_\d+_EGRESS_RATE", k) for k in e), e


def test_example_native_resource_request_shares_numa_device(capsys):
    rep = simulate(capsys, "example-driver-cpu", EX / "native-resource-request/native-resource-request.yaml")
    running(rep, "pod0")
    results = claim_of(rep, "pod0")["allocation"]["devices"]["results"]
    assert len(results) == 2 and results[0]["device"] == results[1]["device"]
    assert results[0]["shareID"] and results[1]["shareID"] and results[0]["shareID"] != results[1]["shareID"]


def test_example_binding_conditions(capsys):
    rep = simulate(capsys, "example-driver", EX / "binding-conditions/binding-conditions.yaml")
    running(rep, "pod0")


# ---- device taints: the demos need resource.k8s.io/v1beta2 (off by default; the README asks for
# --runtime-config=resource.k8s.io/v1beta2=true). On 1.37 DeviceTaintRule is resource.k8s.io/v1:
# the test shows the refusal, then applies the same rule as v1 (the equivalent).

TAINTS = EX / "device-taints-tolerations"


def v1(path: Path, tmp_path: Path) -> Path:
    doc = yaml.safe_load(path.read_text())
    assert doc["apiVersion"] == "resource.k8s.io/v1beta2"
    doc["apiVersion"] = "resource.k8s.io/v1"
    out = tmp_path / f"v1-{path.name}"
    out.write_text(yaml.safe_dump(doc))
    return out


def test_example_taint_v1beta2_is_refused_with_the_fix(capsys):
    rep = simulate(capsys, "example-driver", TAINTS / "device-taint-pod-toleration/1-device-taint-rule.yaml",
                   expect_rc=2)
    assert "DeviceTaintRule is resource.k8s.io/v1 from Kubernetes 1.37" in rep["error"]


def test_example_taint_toleration(capsys, tmp_path):
    d = TAINTS / "device-taint-pod-toleration"
    rep = simulate(capsys, "example-driver", v1(d / "1-device-taint-rule.yaml", tmp_path),
                   d / "2-basic-resourceclaimtemplate.yaml")
    running(rep, "pod-with-toleration")
    assert pods(rep)["pod-without-toleration"]["phase"] == "Pending"  # every GPU is tainted


def test_example_taint_noexecute_evicts(capsys, tmp_path):
    d = TAINTS / "device-taint-pod-noexecute"
    rep = steps("example-driver", d / "1-basic-resourceclaimtemplate.yaml", d / "2-pod-to-be-evicted.yaml",
                v1(d / "3-device-taint-rule.yaml", tmp_path), d / "4-pod-no-execute.yaml")
    assert "pod-to-be-evicted" not in pods(rep) or pods(rep)["pod-to-be-evicted"]["phase"] == "Failed"
    assert pods(rep)["pod-no-execute"]["phase"] == "Pending"


def test_example_taint_noschedule(capsys, tmp_path):
    d = TAINTS / "device-taint-pod-noschedule"
    # 4-pod-not-scheduled.yaml has no apiVersion: kubectl refuses it as well
    rep = simulate(capsys, "example-driver", d / "4-pod-not-scheduled.yaml", expect_rc=2)
    assert "apiVersion" in rep["error"]
    fixed = tmp_path / "4-pod-not-scheduled.yaml"
    fixed.write_text("apiVersion: v1\n" + (d / "4-pod-not-scheduled.yaml").read_text())
    rep = steps("example-driver", d / "1-basic-resourceclaimtemplate.yaml", d / "2-pod-keeps-running.yaml",
                v1(d / "3-device-taint-rule.yaml", tmp_path), fixed)
    running(rep, "pod-keeps-running")
    assert pods(rep)["pod-no-schedule"]["phase"] == "Pending"


def test_example_taint_eviction_time(capsys, tmp_path):
    d = TAINTS / "device-taint-configurable-pod-eviction-time"
    files = (d / "1-basic-resourceclaimtemplate.yaml", v1(d / "2-device-taint-rule.yaml", tmp_path))
    rep = steps("example-driver", *files)
    running(rep, "pod-with-toleration", "pod-with-300s-toleration")
    assert pods(rep).get("pod-no-toleration", {"phase": "Failed"})["phase"] != "Running"
    rep = steps("example-driver", *files, advance=301)
    running(rep, "pod-with-toleration")
    assert pods(rep).get("pod-with-300s-toleration", {"phase": "Failed"})["phase"] != "Running"


# ------------------------------------------------------------------ kubernetes.io


def test_kubernetes_io_tutorial(capsys, tmp_path):
    """Tutorial "Install a DRA driver": the driver is the dra-example-driver (profile example-driver);
    `kubectl create namespace dra-tutorial` is a command there, here a Namespace object."""
    ns = tmp_path / "ns.yaml"
    ns.write_text("apiVersion: v1\nkind: Namespace\nmetadata: {name: dra-tutorial}\n")
    ex = WEB / "driver-install"
    rep = simulate(capsys, "example-driver", ns, ex / "deviceclass.yaml", ex / "example/resourceclaim.yaml",
                   ex / "example/pod.yaml")
    running(rep, "pod0")
    claim = next(c for c in rep["claims"] if c["name"] == "some-gpu")
    assert claim["reservedFor"][0]["name"] == "pod0" and len(example_gpus(env(rep, "pod0", "ctr0"))) == 1


def test_kubernetes_io_concept_examples(capsys):
    """The concept page's examples name driver.example.com, a driver nobody installs: the DeviceClass is
    v1beta2 (not served by default since 1.36), resourceclaim.yaml has `expression` one level too
    high (the API server's strict decoding refuses it too), and the Job's pods wait for the claim."""
    assert "resource.k8s.io/v1beta2 is not served" in simulate(capsys, "example-driver", WEB / "deviceclass.yaml",
                                                                expect_rc=2)["error"]
    assert 'unknown field "expression"' in simulate(capsys, "example-driver", WEB / "resourceclaim.yaml",
                                                    expect_rc=2)["error"]
    rep = simulate(capsys, "example-driver", WEB / "resourceclaimtemplate.yaml", WEB / "dra-example-job.yaml")
    assert [p["phase"] for p in rep["pods"]] == ["Pending", "Pending"]  # parallelism 2
    assert all(len(p["containers"]) == 3 for p in rep["pods"])


# ------------------------------------------------------------------ NVIDIA quickstart (v1)


def test_nvidia_quickstart_gpu_test1_distinct(capsys):
    rep = simulate(capsys, "tiny", QS / "gpu-test1.yaml")
    running(rep, "pod1", "pod2")
    a, b = nvidia_gpus(env(rep, "pod1", "ctr")), nvidia_gpus(env(rep, "pod2", "ctr"))
    assert len(a) == len(b) == 1 and a != b


def test_nvidia_quickstart_gpu_test2_shared_in_pod(capsys):
    rep = simulate(capsys, "tiny", QS / "gpu-test2.yaml")
    running(rep, "pod")
    assert nvidia_gpus(env(rep, "pod", "ctr0")) == nvidia_gpus(env(rep, "pod", "ctr1")) != []


def test_nvidia_quickstart_gpu_test3_shared_across_pods(capsys):
    rep = simulate(capsys, "tiny", QS / "gpu-test3.yaml")
    running(rep, "pod1", "pod2")
    assert nvidia_gpus(env(rep, "pod1", "ctr")) == nvidia_gpus(env(rep, "pod2", "ctr")) != []


def test_nvidia_quickstart_gpu_tests_1_to_4_together(capsys):
    """The README applies gpu-test{1,2,3,4}.yaml at once on its machine (profile nvidia-quickstart:
    8x A100-40GB, GPUs 0-3 MIG half-balanced). gpu-test4: every pod gets 4 MIG devices of one GPU."""
    rep = simulate(capsys, "nvidia-quickstart", *(QS / f"gpu-test{i}.yaml" for i in (1, 2, 3, 4)))
    assert all(p["phase"] == "Running" for p in rep["pods"]) and len(rep["pods"]) == 9
    parents_seen = []
    for p in (p for p in rep["pods"] if p["namespace"] == "gpu-test4"):
        for c in p["containers"]:
            assert len(nvidia_gpus(c["env"])) == 1 and nvidia_gpus(c["env"])[0].startswith("MIG-")
        parents = {v for c in p["containers"] for k, v in c["env"].items() if k.endswith("_PARENT_UUID")}
        assert len(parents) == 1  # constraint matchAttribute parentUUID
        parents_seen += parents
    assert len(set(parents_seen)) == 4


def test_nvidia_quickstart_gpu_test5_timeslicing_and_mps(capsys):
    rep = simulate(capsys, "tiny", QS / "gpu-test5.yaml")
    running(rep, "pod0")
    e = {c: env(rep, "pod0", c) for c in ("ts-ctr0", "ts-ctr1", "mps-ctr0", "mps-ctr1")}
    assert nvidia_gpus(e["ts-ctr0"]) == nvidia_gpus(e["ts-ctr1"]) != nvidia_gpus(e["mps-ctr0"]) == nvidia_gpus(e["mps-ctr1"])
    strategy = {c: {v for k, v in x.items() if k.endswith("_SHARING_STRATEGY")} for c, x in e.items()}
    assert strategy == {"ts-ctr0": {"TimeSlicing"}, "ts-ctr1": {"TimeSlicing"}, "mps-ctr0": {"MPS"}, "mps-ctr1": {"MPS"}}


def test_nvidia_quickstart_gpu_test6_needs_index_attribute(capsys):
    """gpu-test6 selects on `index`, which the current NVIDIA driver no longer publishes (its GPU
    attributes: tests/bats test_gpu_basic "inspect device attributes"): the CEL selector fails."""
    rep = simulate(capsys, "tiny", QS / "gpu-test6.yaml")
    for p in rep["pods"]:
        assert p["phase"] == "Pending"
        assert any("no such key" in e["message"] and "index" in e["message"] for e in p["events"]), p["events"]


def test_nvidia_quickstart_mps(capsys):
    rep = simulate(capsys, "tiny", QS / "gpu-test-mps.yaml")
    running(rep, "test-pod")
    assert nvidia_gpus(env(rep, "test-pod", "mps-ctr0")) == nvidia_gpus(env(rep, "test-pod", "mps-ctr1")) != []


# ------------------------------------------------------------------ NVIDIA tests/bats specs


@pytest.mark.parametrize("spec, pod, ctrs, n", [
    ("gpu-simple-full.yaml", "pod-full-gpu", ["ctr"], 1),
    ("gpu-1pod-2cnt-1gpu.yaml", "pod1", ["ctr0", "ctr1"], 1),
    ("gpu-timeslicing.yaml", "pod-timeslicing", None, 1),
    ("gpu-mps.yaml", "pod-mps", None, 1),
    ("gpu-two-claims-one-pod.yaml", "pod-two-claims", None, 2),
    ("gpu-cuda-busgrind.yaml", "pod-cuda-busgrind", None, 1),
    ("gpu-cuda-demo-suite.yaml", "pod-cuda-demo", None, 1),
])
def test_nvidia_bats_full_gpus(capsys, spec, pod, ctrs, n):
    rep = simulate(capsys, "tiny", BATS / spec)
    running(rep, pod)
    names = ctrs or [c["name"] for c in pods(rep)[pod]["containers"]]
    seen = [nvidia_gpus(env(rep, pod, c)) for c in names]
    assert all(len(s) == n and all(u.startswith("GPU-") for u in s) for s in seen)
    assert all(s == seen[0] for s in seen)  # containers of one claim share its GPU(s)


@pytest.mark.parametrize("spec, same", [("gpu-2pods-2gpus.yaml", False), ("gpu-2pods-1gpu.yaml", True)])
def test_nvidia_bats_two_pods(capsys, spec, same):
    rep = simulate(capsys, "tiny", BATS / spec)
    running(rep, "pod1", "pod2")
    a = nvidia_gpus(pods(rep)["pod1"]["containers"][0]["env"])
    b = nvidia_gpus(pods(rep)["pod2"]["containers"][0]["env"])
    assert len(a) == len(b) == 1 and (a == b) == same


@pytest.mark.parametrize("spec, pod", [("gpu-anymig.yaml", "pod-anymig"), ("gpu-simple-mig.yaml", "pod-mig1g"),
                                       ("gpu-simple-mig-ts.yaml", "pod-mig1g")])
def test_nvidia_bats_mig(capsys, spec, pod):
    rep = simulate(capsys, "mig-lab", BATS / spec)
    running(rep, pod)
    e = pods(rep)[pod]["containers"][0]["env"]
    assert [u[:4] for u in nvidia_gpus(e)] == ["MIG-"]
    assert any(k.endswith("_PARENT_UUID") and v.startswith("GPU-") for k, v in e.items())
    if spec == "gpu-simple-mig-ts.yaml":
        assert {v for k, v in e.items() if k.endswith("_SHARING_STRATEGY")} == {"TimeSlicing"}


def test_nvidia_bats_multiple_mig_one_per_container(capsys):
    rep = simulate(capsys, "mig-lab", BATS / "gpu-multiple-mig.yaml")
    running(rep, "pod-2mig")
    migs = [nvidia_gpus(c["env"]) for c in pods(rep)["pod-2mig"]["containers"]]
    assert len(migs) == 2 and all(len(m) == 1 and m[0].startswith("MIG-") for m in migs) and migs[0] != migs[1]


def test_nvidia_bats_cel_nomatch_stays_pending(capsys):
    rep = simulate(capsys, "tiny", BATS / "gpu-cel-nomatch.yaml")
    assert (pods(rep)["pod-cel-nomatch"]["phase"], pods(rep)["pod-cel-nomatch"]["reason"]) == ("Pending", "Unschedulable")


def test_nvidia_bats_job_completes(capsys):
    rep = simulate(capsys, "tiny", BATS / "gpu-job-rct.yaml", advance=600)
    assert [p["phase"] for p in rep["pods"]] == ["Succeeded", "Succeeded"]  # completions 2
    rep = simulate(capsys, "tiny", BATS / "gpu-job-rct-parallel.yaml")
    assert [p["phase"] for p in rep["pods"]] == ["Running", "Running"]


def test_nvidia_bats_pod_that_exits(capsys):
    rep = simulate(capsys, "tiny", BATS / "gpu-pod-fail-restart.yaml", advance=120)
    assert pods(rep)["pod-restart-gpu"]["phase"] == "Succeeded"


def test_nvidia_bats_stress_shared_claim(capsys, tmp_path):
    """test_gpu_stress.bats renders pods-shared-gpu.yaml with sed s/__INDEX__/i/ for N pods; N=10 here."""
    rendered = tmp_path / "pods.yaml"
    rendered.write_text("".join((BATS / "pods-shared-gpu.yaml").read_text().replace("__INDEX__", str(i))
                                for i in range(10)))
    rep = simulate(capsys, "tiny", BATS / "rc-shared-gpu.yaml", rendered)
    assert len(rep["pods"]) == 10
    running(rep, *pods(rep))
    assert len({tuple(nvidia_gpus(p["containers"][0]["env"])) for p in rep["pods"]}) == 1


# ------------------------------------------------------------------ NVIDIA consumable shares, passthrough


def shared_gpu(rep: dict, *names: str) -> str:
    """The one GPU all these pods see (nvidia-smi -L in the bats tests), each through its own claim
    and share; returns its UUID."""
    seen = {tuple(nvidia_gpus(pods(rep)[n]["containers"][0]["env"])) for n in names}
    assert len(seen) == 1 and len(next(iter(seen))) == 1 and next(iter(seen))[0].startswith("GPU-"), seen
    results = [r for c in rep["claims"] for r in c["allocation"]["devices"]["results"]]
    assert len({r["shareID"] for r in results}) == len(results) == len(names)  # one share per claim
    return next(iter(seen))[0]


@pytest.mark.parametrize("spec, pod, consumed", [
    ("gpu-consumable-shares-memory.yaml", "pod-share-memory", {"memory": "2Gi", "shares": "1"}),
    ("gpu-consumable-shares-integer.yaml", "pod-share-integer", {"memory": "0", "shares": "1"}),
])
def test_nvidia_bats_consumable_shares_two_pods_one_gpu(capsys, spec, pod, consumed):
    """test_gpu_consumable_shares.bats (chart: ConsumableShares=true, consumableShares=4): both pods
    READY and `nvidia-smi -L` prints the same GPU UUID. Each claim consumes what its request asks,
    the request policy's default otherwise (memory 0, 1 share)."""
    rep = simulate(capsys, "nvidia-consumable-shares", BATS / spec)
    running(rep, f"{pod}-0", f"{pod}-1")
    shared_gpu(rep, f"{pod}-0", f"{pod}-1")
    assert [r["consumedCapacity"] for c in rep["claims"] for r in c["allocation"]["devices"]["results"]] == [consumed] * 2


def test_nvidia_bats_consumable_shares_refuse_mps(capsys):
    """The same suite's third test: gpu-mps.yaml never gets READY, the driver refuses MPS."""
    rep = simulate(capsys, "nvidia-consumable-shares", BATS / "gpu-mps.yaml")
    p = pods(rep)["pod-mps"]
    assert p["phase"] == "Pending"
    assert any("MPS sharing is not supported when consumable shares is enabled" in e["message"] for e in p["events"])


@pytest.mark.parametrize("profile, demo, replicas, consumed", [
    ("nvidia-consumable-shares", "integer-sharing", 4, {"memory": "0", "shares": "1"}),
    ("nvidia-consumable-shares-memory", "memory-sharing", 2, {"memory": "4Gi"}),
    ("nvidia-consumable-shares-unlimited", "unlimited-sharing", 2, {"memory": "0"}),
])
def test_nvidia_consumable_shares_demos(capsys, profile, demo, replicas, consumed):
    """demo/specs/consumable-shares: every replica of the Deployment runs, all on one GPU (the
    allocator fills gpu-0 before gpu-1, as kube-scheduler does), each with its own share."""
    rep = simulate(capsys, profile, SHARES / f"{demo}.yaml")
    names = [p["name"] for p in rep["pods"]]
    assert len(names) == replicas
    running(rep, *names)
    shared_gpu(rep, *names)
    results = [r for c in rep["claims"] for r in c["allocation"]["devices"]["results"]]
    assert {r["device"] for r in results} == {"gpu-0"} and all(r["consumedCapacity"] == consumed for r in results)


def test_nvidia_consumable_shares_memory_mode_without_request_takes_the_whole_gpu(capsys, tmp_path):
    """--consumable-shares=memory: a claim that asks for no memory gets the default, all of it, so a
    second such claim needs the other GPU and a third one waits."""
    rct = yaml.safe_load_all((SHARES / "memory-sharing.yaml").read_text())
    docs = list(rct)
    for d in docs:
        if d["kind"] == "ResourceClaimTemplate":
            del d["spec"]["spec"]["devices"]["requests"][0]["exactly"]["capacity"]
        if d["kind"] == "Deployment":
            d["spec"]["replicas"] = 3
    f = tmp_path / "whole.yaml"
    f.write_text(yaml.safe_dump_all(docs))
    rep = simulate(capsys, "nvidia-consumable-shares-memory", f)
    phases = sorted(p["phase"] for p in rep["pods"])
    assert phases == ["Pending", "Running", "Running"]
    results = [r for c in rep["claims"] if c.get("allocation") for r in c["allocation"]["devices"]["results"]]
    assert sorted(r["device"] for r in results) == ["gpu-0", "gpu-1"]
    assert all(r["consumedCapacity"] == {"memory": "81559Mi"} for r in results)


def test_nvidia_quickstart_vfio_passthrough(capsys):
    """gpu-test-vfiopci.yaml (DeviceClass vfio.gpu.nvidia.com, chart featureGates.PassthroughSupport=
    true): the pod gets a GPU bound to vfio-pci, through /dev/vfio and not the NVIDIA runtime."""
    rep = simulate(capsys, "passthrough-lab", QS / "gpu-test-vfiopci.yaml")
    running(rep, "pod1")
    e = env(rep, "pod1", "ctr")
    assert e["NVIDIA_VISIBLE_DEVICES"] == "void" and e["FAKE_GPU_DEVICES"] in ("gpu-vfio-2", "gpu-vfio-3")
    i = e["FAKE_GPU_DEVICES"].upper().replace("-", "_").removeprefix("GPU_")
    assert (e[f"FAKE_GPU_{i}_TYPE"], e[f"FAKE_GPU_{i}_IOMMU_BACKEND"]) == ("vfio", "legacy")
    assert f"FAKE_GPU_{i}_IOMMU_API_DEVICE" not in e  # NVIDIA's default: no IOMMU API device


def test_nvidia_quickstart_vfio_config(capsys, tmp_path):
    """gpu-test-vfio-config.yaml puts its Pod in namespace gpu-test-vfiopci, which the file never
    creates (its Namespace and template are gpu-test-vfio): kubectl apply fails that Pod too. With
    the Pod in gpu-test-vfio, the VfioDeviceConfig (LegacyOnly, enableAPIDevice) reaches it."""
    src = QS / "gpu-test-vfio-config.yaml"
    rep = simulate(capsys, "passthrough-lab", src, expect_rc=2)
    assert 'namespace "gpu-test-vfiopci" not found' in rep["error"]
    fixed = tmp_path / "gpu-test-vfio-config.yaml"
    fixed.write_text(src.read_text().replace("namespace: gpu-test-vfiopci", "namespace: gpu-test-vfio"))
    rep = simulate(capsys, "passthrough-lab", QS / "gpu-test-vfiopci.yaml", fixed)
    running(rep, "pod1", "pod1-full-vfioconfig")
    a, b = env(rep, "pod1", "ctr"), env(rep, "pod1-full-vfioconfig", "ctr")
    assert {a["FAKE_GPU_DEVICES"], b["FAKE_GPU_DEVICES"]} == {"gpu-vfio-2", "gpu-vfio-3"}  # both passthrough GPUs
    assert {k.split("_", 4)[-1]: v for k, v in b.items() if "IOMMU" in k or "CONFIG_KIND" in k} == {
        "CONFIG_KIND": "VfioDeviceConfig", "IOMMU_BACKEND_POLICY": "LegacyOnly", "IOMMU_BACKEND": "legacy",
        "IOMMU_API_DEVICE": "/dev/vfio/vfio"}
    # next to them gpu-test1's two pods get the two GPUs the nvidia driver keeps; one more
    # passthrough pod finds no free vfio device
    extra = tmp_path / "pod3.yaml"
    pod = next(d for d in yaml.safe_load_all((QS / "gpu-test-vfiopci.yaml").read_text()) if d["kind"] == "Pod")
    pod["metadata"]["name"] = "pod3"
    extra.write_text(yaml.safe_dump(pod))
    rep = simulate(capsys, "passthrough-lab", QS / "gpu-test1.yaml", QS / "gpu-test-vfiopci.yaml", fixed, extra)
    seen = [p["containers"][0]["env"].get("FAKE_GPU_DEVICES") for p in rep["pods"] if p["phase"] == "Running"]
    assert sorted(seen) == ["gpu-0", "gpu-1", "gpu-vfio-2", "gpu-vfio-3"]
    assert (pods(rep)["pod3"]["phase"], pods(rep)["pod3"]["reason"]) == ("Pending", "Unschedulable")
