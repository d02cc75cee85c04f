"""labkit.api.attributes: the one reader of ResourceSlice attribute values, on real slices."""

from __future__ import annotations

from fake_gpus.slices import build_slices
from labkit.api.attributes import (
    device_attribute,
    lookup_attribute,
    plain_attributes,
    plain_value,
    scalar_value,
)
from labkit.course.show import device_table


def test_values_lose_their_wrapper():
    assert scalar_value({"int": 0}) == ("int", 0)          # a zero is a value, not a missing one
    assert scalar_value({"bool": False}) == ("bool", False)
    assert plain_value({"version": "1.2.3"}) == "1.2.3"
    assert plain_value({"strings": ["a", "b"]}) == ["a", "b"]
    assert plain_value({"float": 1.5}) is None and plain_value(None) is None


def test_lookup_bare_name_only_in_the_drivers_domain():
    attrs = {"index": {"int": 3}, "other.io/index": {"int": 9}}
    assert lookup_attribute(attrs, "gpu.nvidia.com", "gpu.nvidia.com/index") == {"int": 3}
    assert lookup_attribute(attrs, "gpu.nvidia.com", "nic.io/index") is None
    assert device_attribute({"attributes": attrs}, "other.io/index", "gpu.nvidia.com") == 9


def test_fake_gpu_slices_read_back():
    (gpus,) = [s for s in build_slices("mig-a100", "n1") if s["spec"]["driver"] == "gpu.nvidia.com"]
    devices = gpus["spec"]["devices"]
    mig = next(d for d in devices if d["name"].startswith("gpu-0-mig-"))
    plain = plain_attributes(mig)
    assert plain["type"] == "mig"
    assert plain["profile"].count(".") == 1 and plain["profile"][0].isdigit()      # e.g. 1g.10gb
    assert device_attribute(mig, "gpu.nvidia.com/profile", "gpu.nvidia.com") == plain["profile"]
    table = device_table([gpus], "n1")
    assert plain["profile"] in table and mig["name"] in table
