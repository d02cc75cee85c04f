"""What NVIDIA's real driver hands a container, next to what the fake driver gives it (lesson 05)."""

from __future__ import annotations

from fake_gpus.plugin.cdi import NVIDIA_CONTROL_NODES, nvidia_container_view
from labkit.course.show import show_container_view


def _gpu(i: str, name: str, kind: str = "gpu", **extra: str) -> dict[str, str]:
    env = {f"FAKE_GPU_{i}_NAME": name, f"FAKE_GPU_{i}_POOL": "node-0", f"FAKE_GPU_{i}_TYPE": kind,
           f"FAKE_GPU_{i}_UUID": f"GPU-{i}"}
    env.update({f"FAKE_GPU_{i}_{k}": v for k, v in extra.items()})
    return env


def test_a_real_container_gets_void_and_device_nodes_not_the_uuid():
    env = {**_gpu("3", "gpu-3"), "NVIDIA_VISIBLE_DEVICES": "GPU-3", "FAKE_GPU_DEVICES": "gpu-3"}
    view = nvidia_container_view(env)
    assert view["env"] == ["NVIDIA_VISIBLE_DEVICES=void"]
    assert view["deviceNodes"] == ["/dev/nvidia3", *NVIDIA_CONTROL_NODES]
    assert view["check"] == ["nvidia-smi -L lists GPU-3"]
    shown = show_container_view(env)
    first = shown.splitlines()[1].split()
    assert first == ["NVIDIA_VISIBLE_DEVICES=GPU-3", "NVIDIA_VISIBLE_DEVICES=void"]
    assert "device node /dev/nvidia3" in shown


def test_mig_adds_the_caps_node_of_its_parent_and_vfio_gets_no_nvidia_nodes():
    mig = nvidia_container_view(_gpu("0_MIG_3G40GB_9_0", "gpu-0-mig-3g40gb-9-0", "mig", MIG_PROFILE="3g.40gb"))
    assert mig["deviceNodes"][0] == "/dev/nvidia0" and mig["deviceNodes"][1].startswith("/dev/nvidia-caps/")
    vfio = nvidia_container_view(_gpu("VFIO_2", "gpu-vfio-2", "vfio", PCI_BUS_ID="0000:9d:00.0"))
    assert vfio["env"] == ["NVIDIA_VISIBLE_DEVICES=void"] and vfio["mounts"] == []
    assert not any(n.startswith("/dev/nvidia") for n in vfio["deviceNodes"])
    assert nvidia_container_view({"FAKE_NIC_0_NAME": "nic-0", "FAKE_NIC_0_POOL": "n"}) == {}
    assert show_container_view({}).splitlines()[1].split() == ["(no", "GPU)", "(no", "GPU)"]
