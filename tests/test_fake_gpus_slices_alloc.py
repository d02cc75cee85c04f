"""Our dynamic-MIG slices through the labkit allocator: MIG geometry must decide what fits."""

from __future__ import annotations

import pytest

from fake_gpus.slices import build_slices, device_classes

alloc = pytest.importorskip("labkit.allocator")

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
