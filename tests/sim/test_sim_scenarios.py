"""The shared scenario set (tests/data/scenarios): expected placements, explain(), determinism."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from labkit.cluster import connect
from labkit.cluster.report import normalize_report, simulate_report
from tests.paths import TEST_DATA

SCENARIOS = TEST_DATA / "scenarios"


def profile_of(path: Path) -> str:
    m = re.match(r"# labkit-profile: (\S+)", path.read_text())
    assert m, f"{path.name}: first line must be '# labkit-profile: <name>'"
    return m.group(1)


def run(name: str, seed: int = 0):
    path = SCENARIOS / name
    c = connect("sim", profile_of(path), seed=seed, progress=False)
    c.apply(path)
    c.wait()
    return c


def results(claim):
    return claim["allocation"]["devices"]["results"]


def test_every_scenario_names_its_profile():
    files = sorted(SCENARIOS.glob("*.yaml"))
    assert len(files) >= 6
    for f in files:
        profile_of(f)


def test_gpu_40gi_only_on_a100():
    rep = simulate_report(run("gpu-40gi.yaml"))
    assert [(p["name"], p["node"], p["phase"]) for p in rep["pods"]] == [("train-a", "dgx-a100-0", "Running")]
    assert [results(c)[0]["device"] for c in rep["claims"]] == ["gpu-0"]


def test_shared_claim_one_device_two_pods():
    c = run("shared-claim.yaml")
    rep = simulate_report(c)
    [claim] = rep["claims"]
    assert [r["name"] for r in claim["reservedFor"]] == ["infer-1", "infer-2"]
    assert {p["node"] for p in rep["pods"]} == {"t4-0"}
    assert c.pod_env("infer-1")["NVIDIA_VISIBLE_DEVICES"] == c.pod_env("infer-2")["NVIDIA_VISIBLE_DEVICES"]


def test_mig_pair_same_parent():
    c = run("mig-pair.yaml")
    [claim] = simulate_report(c)["claims"]
    devs = {r["request"]: r["device"] for r in results(claim)}
    assert devs["big"].startswith("gpu-1-mig-3g20gb") and devs["small"].startswith("gpu-1-mig-1g5gb")
    assert {row["profile"] for row in c.placements().rows} == {"3g.20gb", "1g.5gb"}


def test_gpu_and_nic_share_pcie_root():
    c = run("gpu-nic-pcieroot.yaml")
    [claim] = simulate_report(c)["claims"]
    by_req = {r["request"]: r for r in results(claim)}
    assert by_req["gpu"]["driver"] == "gpu.nvidia.com" and by_req["nic"]["driver"] == "nic.fake-gpus.dev"
    roots = set()
    for s in c.list("ResourceSlice"):
        for d in s["spec"]["devices"]:
            for r in by_req.values():
                if (s["spec"]["driver"], s["spec"]["pool"]["name"], d["name"]) == (r["driver"], r["pool"], r["device"]):
                    roots.add(d["attributes"]["resource.kubernetes.io/pcieRoot"]["string"])
    assert len(roots) == 1


def test_first_available_falls_back_to_two_a100():
    [claim] = simulate_report(run("first-available.yaml"))["claims"]
    assert [r["request"] for r in results(claim)] == ["accel/two-a100", "accel/two-a100"]


def test_unplaceable_pending_with_explanation():
    c = run("unplaceable.yaml")
    [p] = simulate_report(c)["pods"]
    assert (p["node"], p["phase"], p["reason"]) == (None, "Pending", "Unschedulable")
    cond = c.get("Pod", "too-big")["status"]["conditions"][0]
    assert cond["message"] == ("0/3 nodes are available: 3 cannot allocate all claims. preemption: "
                               "0/3 nodes are available: 3 Preemption is not helpful for scheduling.")
    text = c.explain("too-big")
    assert "cannot allocate all claims: dgx-a100-0, t4-0, t4-1" in text
    assert "needs 16" in text  # the allocator's explanation names the failing request


@pytest.mark.parametrize("name", sorted(p.name for p in SCENARIOS.glob("*.yaml")))
def test_deterministic(name):
    a = json.dumps(simulate_report(run(name)), sort_keys=True)
    b = json.dumps(simulate_report(run(name)), sort_keys=True)
    assert a == b
    other_seed = simulate_report(run(name, seed=7))
    assert normalize_report(json.loads(a)) == normalize_report(other_seed)


def test_normalize_report_hides_only_randomness():
    rep = simulate_report(run("gpu-40gi.yaml"))
    norm = normalize_report(rep)
    assert [c["name"] for c in norm["claims"]] == ["train-a-gpu-xxxxx"]
    assert norm["claims"][0]["reservedFor"] == [{"resource": "pods", "name": "train-a"}]
    assert norm["claims"][0]["allocation"] == rep["claims"][0]["allocation"]


def test_extended_resource_served_by_dra():
    rep = simulate_report(run("extended-resource.yaml"))
    [claim] = rep["claims"]
    assert re.fullmatch(r"legacy-gpu-extended-resources-[bcdfghjklmnpqrstvwxz2456789]{5}", claim["name"])
    assert [r["request"] for r in results(claim)] == ["container-0-request-0"] * 2
    assert rep["pods"][0]["node"] == "t4-1"


def test_device_taint_rule_skips_the_tainted_gpu():
    [claim] = simulate_report(run("device-taint.yaml"))["claims"]
    assert [r["device"] for r in results(claim)] == ["gpu-1"]


def test_explain_says_each_thing_once_and_names_every_node():
    """The debugging lab (notebook 09): no error repeated, no node left out."""
    c = connect("sim", "workshop", progress=False)
    claim = ("apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: %s}\n"
             "spec: {devices: {requests: [{name: gpu, exactly: %s}]}}\n---\n")
    pod = ("apiVersion: v1\nkind: Pod\nmetadata: {name: %s}\nspec: {resourceClaims: [{name: gpu, "
           "resourceClaimName: %s}], containers: [{name: m, image: x, resources: {claims: [{name: gpu}]}}]}\n")
    c.apply(claim % ("too-many", "{deviceClassName: gpu.nvidia.com, count: 9}") + pod % ("too-many", "too-many"))
    c.apply(claim % ("wrong-class", "{deviceClassName: gpu.nvidia.co}") + pod % ("wrong-class", "wrong-class"))
    c.wait()
    text = c.explain("too-many")
    assert "allocator on dgx-a100-0: unsatisfiable" in text
    assert "allocator on t4-0, t4-1: unsatisfiable" in text  # t4-1 used to be dropped
    assert text.count("4 usable, 9 needed") == 1
    text = c.explain("wrong-class")
    # kube-scheduler refuses a missing DeviceClass in PreFilter, before any node is tried
    assert text == ("Pod default/wrong-class is Pending: request gpu: device class gpu.nvidia.co does not exist "
                    "(DynamicResources PreFilter, Unschedulable)"), text
