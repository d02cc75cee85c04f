"""NVIDIA opaque configs (GpuConfig / MigDeviceConfig sharing, VfioDeviceConfig) in the container env and errors."""

from __future__ import annotations

import dataclasses

import pytest

from fake_gpus.catalog import load_node_profile
from fake_gpus.plugin import cdi
from fake_gpus.plugin.claims import InMemoryClaimSource
from fake_gpus.plugin.devices import ClaimError
from fake_gpus.slices import build_slices
from tests.fake_gpus.test_fake_gpus_plugin_support import (
    DRIVER,
    Kubelet,
    make_claim,
    node_slices,
    prepare,
    short_tmpdir,
    start_plugin,
)

UID = "3c000000-0000-4000-8000-000000000001"
API = "resource.nvidia.com/v1beta1"


def with_config(claim: dict, *entries: tuple[list[str], str, dict | None]) -> dict:
    claim["status"]["allocation"]["devices"]["config"] = [
        {"source": src, "requests": reqs, "opaque": {"driver": DRIVER, "parameters": params}}
        for reqs, src, params in entries]
    return claim


def gpu_cfg(strategy: str, **extra) -> dict:
    sharing: dict = {"strategy": strategy}
    sharing.update(extra)
    return {"apiVersion": API, "kind": "GpuConfig", "sharing": sharing}


def test_time_slicing_and_mps_per_request():
    claim = with_config(make_claim("c", UID, [("ts", "gpu-0"), ("mps", "gpu-1"), ("mig", "gpu-2-mig-1g5gb-19-0")]),
                        (["ts"], "FromClaim", gpu_cfg("TimeSlicing", timeSlicingConfig={"interval": "Long"})),
                        (["mps"], "FromClaim", gpu_cfg("MPS", mpsConfig={"defaultActiveThreadPercentage": 50,
                                                                          "defaultPinnedDeviceMemoryLimit": "10Gi"})),
                        (["mig"], "FromClaim", {"apiVersion": API, "kind": "MigDeviceConfig",
                                                "sharing": {"strategy": "MPS"}}))
    env = cdi.container_env(claim, DRIVER, node_slices())
    assert env["FAKE_GPU_0_SHARING_STRATEGY"] == "TimeSlicing" and env["FAKE_GPU_0_TIMESLICE_INTERVAL"] == "Long"
    assert env["FAKE_GPU_1_SHARING_STRATEGY"] == "MPS"
    assert env["FAKE_GPU_1_MPS_ACTIVE_THREAD_PERCENTAGE"] == "50"
    assert env["FAKE_GPU_1_MPS_PINNED_DEVICE_MEMORY_LIMIT"] == "10Gi"
    assert env["FAKE_GPU_2_MIG_1G5GB_19_0_CONFIG_KIND"] == "MigDeviceConfig" and env["FAKE_GPU_2_MIG_1G5GB_19_0_SHARING_STRATEGY"] == "MPS"


def test_last_matching_config_wins_and_other_drivers_are_ignored():
    claim = with_config(make_claim("c", UID, [("gpu", "gpu-0"), ("other", "gpu-1")]),
                        ([], "FromClass", gpu_cfg("TimeSlicing")),
                        (["gpu"], "FromClaim", gpu_cfg("MPS")))
    claim["status"]["allocation"]["devices"]["config"].append(
        {"source": "FromClaim", "requests": [], "opaque": {"driver": "other.example.com", "parameters": {"x": 1}}})
    env = cdi.container_env(claim, DRIVER, node_slices())
    assert env["FAKE_GPU_0_SHARING_STRATEGY"] == "MPS"
    assert env["FAKE_GPU_1_SHARING_STRATEGY"] == "TimeSlicing"  # class default, interval Default
    assert env["FAKE_GPU_1_TIMESLICE_INTERVAL"] == "Default"


def test_subrequest_names_match_configs():
    claim = with_config(make_claim("c", UID, [("gpu/big", "gpu-0")]), (["gpu/big"], "FromClaim", gpu_cfg("MPS")))
    assert cdi.container_env(claim, DRIVER, node_slices())["FAKE_GPU_0_SHARING_STRATEGY"] == "MPS"


@pytest.mark.parametrize("params, needle", [
    ({"apiVersion": "v1", "kind": "GpuConfig"}, "apiVersion: 'v1' is not supported"),
    ({"apiVersion": API, "kind": "Bogus"}, "kind: 'Bogus' is not supported"),
    ({"apiVersion": API, "kind": "MigDeviceConfig"}, "cannot configure device gpu-0 of type gpu; use GpuConfig"),
    (gpu_cfg("Magic"), "unknown GPU sharing strategy: Magic, supported GPU sharing strategies: TimeSlicing, MPS"),
    (gpu_cfg("TimeSlicing", timeSlicingConfig={"interval": "Forever"}), "unknown time-slice interval: Forever"),
    (gpu_cfg("MPS", mpsConfig={"defaultActiveThreadPercentage": 150}), "must not be greater than 100"),
    (gpu_cfg("MPS", mpsConfig={"defaultActiveThreadPercentage": -1}), "must not be negative"),
    (gpu_cfg("MPS", mpsConfig={"defaultPinnedDeviceMemoryLimit": "512Ki"}), "default value set too low"),
    (gpu_cfg("TimeSlicing", mpsConfig={}), "cannot use MpsConfig with the 'TimeSlicing' strategy"),
    (gpu_cfg("MPS", timeSlicingConfig={}), "cannot use TimeSlicingConfig with the 'MPS' strategy"),
    (gpu_cfg("TimeSlicing", unexpectedField="foo"), 'strict decoding error: unknown field "sharing.unexpectedField"'),
    ("not-an-object", "must be an object"),
])
def test_bad_configs_name_the_field(params, needle):
    claim = with_config(make_claim("c", UID, [("gpu", "gpu-0")]), ([], "FromClaim", params))
    with pytest.raises(ClaimError) as info:
        cdi.container_env(claim, DRIVER, node_slices())
    assert needle in str(info.value)
    assert "claim default/c: status.allocation.devices.config[0].opaque.parameters" in str(info.value)


def test_bad_config_is_a_per_claim_error_over_grpc():
    claim = with_config(make_claim("c", UID, [("gpu", "gpu-0")]), ([], "FromClaim", gpu_cfg("Magic")))
    with short_tmpdir() as dirs:
        server = start_plugin(dirs, InMemoryClaimSource([claim]))
        try:
            kubelet = Kubelet(server.registration_socket)
            stub, pb2 = kubelet.dra()
            r = prepare(stub, pb2, claim).claims[UID]
            assert "unknown GPU sharing strategy: Magic" in r.error and len(r.devices) == 0
            assert server.state.prepared() == {} and not list(dirs.cdi.glob("*"))
            kubelet.close()
        finally:
            server.stop()


def test_mig_time_slicing_is_accepted_as_nvidia_does():
    """NVIDIA's tests/bats gpu-simple-mig-ts: MigDeviceConfig + TimeSlicing runs (no interval: the
    MIG kind has no timeSlicingConfig, which strict decoding refuses)."""
    mig_ts = {"apiVersion": API, "kind": "MigDeviceConfig", "sharing": {"strategy": "TimeSlicing"}}
    claim = with_config(make_claim("c", UID, [("mig", "gpu-2-mig-1g5gb-19-0")]), ([], "FromClaim", mig_ts))
    env = cdi.container_env(claim, DRIVER, node_slices())
    assert env["FAKE_GPU_2_MIG_1G5GB_19_0_SHARING_STRATEGY"] == "TimeSlicing"
    assert "FAKE_GPU_2_MIG_1G5GB_19_0_TIMESLICE_INTERVAL" not in env
    bad = {**mig_ts, "sharing": {"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Long"}}}
    claim = with_config(make_claim("c", UID, [("mig", "gpu-2-mig-1g5gb-19-0")]), ([], "FromClaim", bad))
    with pytest.raises(ClaimError, match='unknown field "sharing.timeSlicingConfig"'):
        cdi.container_env(claim, DRIVER, node_slices())


def test_mps_zero_percent_and_vfio_policy():
    claim = with_config(make_claim("c", UID, [("gpu", "gpu-0")]),
                        ([], "FromClaim", gpu_cfg("MPS", mpsConfig={"defaultActiveThreadPercentage": 0})))
    assert cdi.container_env(claim, DRIVER, node_slices())["FAKE_GPU_0_MPS_ACTIVE_THREAD_PERCENTAGE"] == "0"


def vfio_claim(params: dict | None, device: str = "gpu-vfio-2") -> dict:
    claim = make_claim("v", UID, [("gpu", device)], pool="node-v")
    return with_config(claim, ([], "FromClaim", params)) if params is not None else claim


@pytest.mark.parametrize("iommufd, iommu, want", [
    (False, None, {"IOMMU_BACKEND_POLICY": "LegacyOnly", "IOMMU_BACKEND": "legacy"}),  # NVIDIA's default config
    (False, {"backendPolicy": "PreferIommuFD", "enableAPIDevice": True},
     {"CONFIG_KIND": "VfioDeviceConfig", "IOMMU_BACKEND_POLICY": "PreferIommuFD", "IOMMU_BACKEND": "legacy",
      "IOMMU_API_DEVICE": "/dev/vfio/vfio"}),  # iommufd preferred, but the host has no /dev/iommu
    (True, {"backendPolicy": "PreferIommuFD", "enableAPIDevice": True},
     {"CONFIG_KIND": "VfioDeviceConfig", "IOMMU_BACKEND_POLICY": "PreferIommuFD", "IOMMU_BACKEND": "iommufd",
      "IOMMU_API_DEVICE": "/dev/iommu"}),
    (True, {"backendPolicy": "LegacyOnly"},
     {"CONFIG_KIND": "VfioDeviceConfig", "IOMMU_BACKEND_POLICY": "LegacyOnly", "IOMMU_BACKEND": "legacy"}),
])
def test_vfio_container_gets_the_iommu_backend_nvidia_chooses(iommufd, iommu, want):
    """NVIDIA's vfio CDI handler: iommufd only when preferred and present; the API device only
    with enableAPIDevice; never the NVIDIA runtime (NVIDIA_VISIBLE_DEVICES=void)."""
    prof = dataclasses.replace(load_node_profile("passthrough-h100"), iommufd=iommufd)
    slices = build_slices(prof, "node-v")
    params = None if iommu is None else {"apiVersion": API, "kind": "VfioDeviceConfig", "iommu": iommu}
    env = cdi.container_env(vfio_claim(params), DRIVER, slices)
    assert {k.removeprefix("FAKE_GPU_VFIO_2_"): v for k, v in env.items()
            if k.startswith("FAKE_GPU_VFIO_2_") and ("IOMMU" in k or "CONFIG" in k)} == want
    assert env["NVIDIA_VISIBLE_DEVICES"] == "void" and env["FAKE_GPU_VFIO_2_TYPE"] == "vfio"


def test_vfio_config_errors_name_the_field():
    slices = build_slices("passthrough-h100", "node-v")
    bad = {"apiVersion": API, "kind": "VfioDeviceConfig", "iommu": {"enableAPIDevice": "yes"}}
    with pytest.raises(ClaimError, match=r"iommu\.enableAPIDevice: 'yes' must be true or false"):
        cdi.container_env(vfio_claim(bad), DRIVER, slices)
    with pytest.raises(ClaimError, match="kind: GpuConfig cannot configure device gpu-vfio-2 of type vfio; use "
                                         "VfioDeviceConfig"):
        cdi.container_env(vfio_claim(gpu_cfg("TimeSlicing")), DRIVER, slices)
    with pytest.raises(ClaimError, match="kind: VfioDeviceConfig cannot configure device gpu-0 of type gpu"):
        cdi.container_env(vfio_claim({"apiVersion": API, "kind": "VfioDeviceConfig"}, "gpu-0"), DRIVER, slices)


def test_consumable_shares_refuse_mps_but_take_time_slicing():
    """With --consumable-shares the driver refuses MPS (its devices are then multi-allocatable)."""
    slices = build_slices("h100-shares", "node-v")
    claim = with_config(make_claim("s", UID, [("gpu", "gpu-0", "share-1")], pool="node-v"),
                        ([], "FromClaim", gpu_cfg("MPS")))
    with pytest.raises(ClaimError, match="MPS sharing is not supported when consumable shares is enabled"):
        cdi.container_env(claim, DRIVER, slices)
    claim = with_config(make_claim("s", UID, [("gpu", "gpu-0", "share-1")], pool="node-v"),
                        ([], "FromClaim", gpu_cfg("TimeSlicing")))
    env = cdi.container_env(claim, DRIVER, slices)
    assert env["FAKE_GPU_0_SHARING_STRATEGY"] == "TimeSlicing" and env["FAKE_GPU_0_SHARE_ID"] == "share-1"
