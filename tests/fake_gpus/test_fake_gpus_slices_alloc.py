"""Our dynamic-MIG slices through the labkit allocator: MIG geometry must decide what fits; and
devices shared by capacity (NVIDIA's consumable shares) allocated as kube-scheduler does."""

from __future__ import annotations

import dataclasses
import json

from fake_gpus.catalog import load_node_profile
from fake_gpus.slices import build_slices, device_classes
from labkit import allocator as alloc
from labkit import cli
from tests.paths import REPO

NODE = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-1", "labels": {"kubernetes.io/hostname": "node-1"}}}


def _claim(name, requests, same_gpu=True):
    constraints = [{"matchAttribute": "gpu.nvidia.com/parentUUID"}] if same_gpu else []
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
            "spec": {"devices": {"requests": requests, "constraints": constraints}}}


def _mig(name, profile, count=1):
    return {"name": name, "exactly": {
        "deviceClassName": "mig.nvidia.com", "allocationMode": "ExactCount", "count": count,
        "selectors": [{"cel": {"expression": f"device.attributes['gpu.nvidia.com'].profile == '{profile}'"}}]}}


def _allocate(profile, claim):
    slices = build_slices(profile, "node-1", mig_mode="dynamic")
    a = alloc.Allocator(alloc.features_for("1.37"), device_classes(), slices, [])
    return a.allocate(NODE, [claim])


def test_mig_mix_that_fits_one_h100():
    out = _allocate("dgx-h100", _claim("fits", [_mig("small", "1g.10gb", 4), _mig("big", "3g.40gb")]))
    assert out.status == "allocated", out.error
    devices = sorted(r["device"] for r in out.allocations[0]["devices"]["results"])
    gpu = devices[0].split("-mig-")[0]
    assert all(d.startswith(gpu + "-mig-") for d in devices)
    assert f"{gpu}-mig-3g40gb-9-4" in devices  # slices 0-3 hold the four 1g instances


def test_mig_mix_that_overflows_memory_slices():
    # 7x 1g (slices 0-6) leave no 4-slice window for a 3g on the same GPU
    out = _allocate("mig-a100", _claim("nofit", [_mig("small", "1g.5gb", 7), _mig("big", "3g.20gb")]))
    assert out.status == "unsatisfiable"


def test_full_gpu_and_mig_exclude_each_other_on_hopper():
    slices = build_slices("dgx-h100", "node-1", mig_mode="dynamic")
    a = alloc.Allocator(alloc.features_for("1.37"), device_classes(), slices, [])
    whole = {"name": "g", "exactly": {"deviceClassName": "gpu.nvidia.com", "allocationMode": "ExactCount", "count": 7}}
    ok = a.allocate(NODE, [_claim("mix", [_mig("m", "3g.40gb", 2), whole], same_gpu=False)])
    assert ok.status == "allocated", ok.error
    whole8 = {**whole, "exactly": {**whole["exactly"], "count": 8}}
    assert a.allocate(NODE, [_claim("mix8", [_mig("m", "3g.40gb"), whole8], same_gpu=False)]).status == "unsatisfiable"


def test_gh200_mig_geometry():
    """GH200 (H100 96GB): seven 1g.12gb fit one GPU, an eighth does not; 4x 1g.12gb + 3g.48gb fit."""
    assert _allocate("gh200", _claim("seven", [_mig("m", "1g.12gb", 7)])).status == "allocated"
    assert _allocate("gh200", _claim("eight", [_mig("m", "1g.12gb", 8)])).status == "unsatisfiable"
    out = _allocate("gh200", _claim("mix", [_mig("small", "1g.12gb", 4), _mig("big", "3g.48gb")]))
    assert out.status == "allocated", out.error
    assert "gpu-0-mig-3g48gb-9-4" in {r["device"] for r in out.allocations[0]["devices"]["results"]}


def test_sharing_by_capacity_example(capsys):
    """examples/sharing/by-capacity.yaml on nvidia-consumable-shares-memory: 30Gi + 40Gi share gpu-0
    (81559Mi), 20Gi does not fit the 9879Mi left and takes gpu-1; each claim its own share."""
    example = REPO / "examples" / "sharing" / "by-capacity.yaml"
    assert cli.main(["simulate", "--profile", "nvidia-consumable-shares-memory", "-o", "json", "-f", str(example)]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert {p["name"]: p["phase"] for p in rep["pods"]} == {"inference-a": "Running", "inference-b": "Running",
                                                             "trainer": "Running"}
    got = {c["name"]: [(r["device"], r["consumedCapacity"]) for r in c["allocation"]["devices"]["results"]]
           for c in rep["claims"]}
    assert got == {"inference-a": [("gpu-0", {"memory": "30Gi"})], "inference-b": [("gpu-0", {"memory": "40Gi"})],
                   "trainer": [("gpu-1", {"memory": "20Gi"})]}
    shares = [r["shareID"] for c in rep["claims"] for r in c["allocation"]["devices"]["results"]]
    assert len(set(shares)) == 3


def test_consumable_shares_count_limits_claims_per_gpu():
    """--consumable-shares=4: each claim takes one share by default, so one GPU serves four claims
    and the fifth one goes to the next GPU (the allocator's device order)."""
    slices = build_slices("h100-shares", "node-1")
    state = alloc.AllocatedState()
    a = alloc.Allocator(alloc.features_for("1.37"), device_classes(), slices, state)
    req = [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "allocationMode": "ExactCount", "count": 1}}]
    chosen = []
    for i in range(9):
        out = a.allocate(NODE, [_claim(f"c{i}", req, same_gpu=False)])
        if out.status != "allocated":
            chosen.append(out.status)
            break
        state.add(out.allocations[0])
        chosen.append(out.allocations[0]["devices"]["results"][0]["device"])
    assert chosen == ["gpu-0"] * 4 + ["gpu-1"] * 4 + ["unsatisfiable"]


def test_consumable_shares_on_mig_devices_need_zero_engine_requests():
    """NVIDIA puts a request policy only on `memory` (and `shares`); a MIG device's engine and
    memory-slice capacities have none, so Kubernetes charges a claim their full value unless the
    claim asks for less. Two default claims therefore land on two MIG devices; a claim that
    requests zero of them shares the first one."""
    prof = dataclasses.replace(load_node_profile("mig-a100"), consumable_shares="4")
    slices = build_slices(prof, "node-1", mig_mode="static")
    state = alloc.AllocatedState()
    a = alloc.Allocator(alloc.features_for("1.37"), device_classes(), slices, state)
    first = next(d for s in slices for d in s["spec"]["devices"] if d["name"].startswith("gpu-0-mig-"))
    profile = first["attributes"]["profile"]["string"]

    def claim(name, capacity=None):
        req = {"name": "m", "exactly": {"deviceClassName": "mig.nvidia.com", "allocationMode": "ExactCount",
                                        "count": 1, "selectors": [{"cel": {"expression":
                                            f"device.attributes['gpu.nvidia.com'].profile == '{profile}'"}}]}}
        if capacity:
            req["exactly"]["capacity"] = {"requests": capacity}
        return _claim(name, [req], same_gpu=False)

    got = []
    zero = {k: "0" for k in first["capacity"] if k not in ("memory", "shares")}
    for c in (claim("a"), claim("b"), claim("c", zero)):
        out = a.allocate(NODE, [c])
        assert out.status == "allocated", out.error
        state.add(out.allocations[0])
        got.append(out.allocations[0]["devices"]["results"][0]["device"])
    assert got[0] == first["name"] and got[1] != got[0] and got[2] == got[0]
