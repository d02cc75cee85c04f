"""container_env and the CDI spec builder: naming rules, env content, shared code path."""

from __future__ import annotations

import re
import string

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fake_gpus.plugin import cdi
from fake_gpus.plugin.devices import ClaimError, DeviceIndex, allocated_devices
from tests.fake_gpus.test_fake_gpus_plugin_support import (
    DRIVER,
    GPU0_UUID,
    MIG_UUID,
    make_claim,
    mig,
    node_slices,
)

UID = "9f8e7d6c-0000-4000-8000-000000000001"
KIND_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]*/[A-Za-z][A-Za-z0-9_.-]*$")
NAME_RE = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9_.:-]*[A-Za-z0-9])?$")


def spec_env(spec: dict) -> dict[str, str]:
    env = dict(e.split("=", 1) for e in spec["containerEdits"]["env"])
    for d in spec["devices"]:
        env.update(e.split("=", 1) for e in d["containerEdits"]["env"])
    return env


def test_container_env_equals_spec_env():
    claim = make_claim("c", UID, [("a", "gpu-0"), ("b", "gpu-2-mig-1g5gb-19-0"), ("n", "nic-0")])
    slices = node_slices()
    devices = allocated_devices(claim, DRIVER, DeviceIndex(slices))
    spec = cdi.build_spec(claim, DRIVER, devices)
    assert cdi.container_env(claim, DRIVER, slices) == cdi.visible_devices(spec_env(spec))


def test_container_env_content():
    claim = make_claim("c", UID, [("a", "gpu-0"), ("b", "gpu-2-mig-1g5gb-19-0")], namespace="ns1")
    env = cdi.container_env(claim, DRIVER, node_slices())
    assert env["NVIDIA_VISIBLE_DEVICES"] == f"{GPU0_UUID},{MIG_UUID}"
    assert env["FAKE_GPU_DEVICES"] == "gpu-0,gpu-2-mig-1g5gb-19-0"
    assert env["FAKE_GPU_0_NAME"] == "gpu-0" and env["FAKE_GPU_2_MIG_1G5GB_19_0_NAME"] == "gpu-2-mig-1g5gb-19-0"
    assert env["FAKE_GPU_2_MIG_1G5GB_19_0_MIG_PROFILE"] == "1g.5gb"
    assert env["FAKE_GPU_2_MIG_1G5GB_19_0_MEMORY"] == "4864Mi"
    assert env["FAKE_GPU_0_PCIE_ROOT"] == "pci0000:00"
    assert env["FAKE_GPU_0_REQUEST"] == "a"
    assert env["FAKE_DRA_CLAIM"] == "ns1/c" and env["FAKE_DRA_CLAIM_UID"] == UID
    assert "FAKE_GPU_0_MIG_PROFILE" not in env and "FAKE_NIC_DEVICES" not in env


def test_container_env_other_driver_is_empty():
    claim = make_claim("c", UID, [("a", "gpu-0")])
    assert cdi.container_env(claim, "other.example.com", node_slices()) == {}


def test_container_env_errors_are_value_errors():
    with pytest.raises(ClaimError, match="not allocated"):
        cdi.container_env(make_claim("c", UID, [], allocated=False), DRIVER, node_slices())
    with pytest.raises(ValueError, match="gpu-42"):
        cdi.container_env(make_claim("c", UID, [("a", "gpu-42")]), DRIVER, node_slices())


def test_device_without_uuid_gets_stable_fake_uuid():
    sl = node_slices()
    dyn = mig("gpu-0-mig-1g5gb-19-3", "", "GPU-x")
    del dyn["attributes"]["uuid"]
    sl[0]["spec"]["devices"].append(dyn)
    claim = make_claim("c", UID, [("a", "gpu-0-mig-1g5gb-19-3")])
    e1 = cdi.container_env(claim, DRIVER, sl)
    e2 = cdi.container_env(claim, DRIVER, sl)
    assert e1["FAKE_GPU_0_MIG_1G5GB_19_3_UUID"].startswith("MIG-") and e1 == e2


def test_spec_kind_names_and_version():
    claim = make_claim("c", UID, [("a", "gpu-0")])
    spec = cdi.build_spec(claim, DRIVER, allocated_devices(claim, DRIVER, DeviceIndex(node_slices())))
    assert spec["kind"] == "k8s.gpu.nvidia.com/claim" and KIND_RE.match(spec["kind"])
    assert spec["cdiVersion"] == "0.5.0"  # the name starts with a digit
    assert cdi.validate_spec(spec) == []
    letter = make_claim("c", "abc-1", [("a", "gpu-0")])
    spec2 = cdi.build_spec(letter, DRIVER, allocated_devices(letter, DRIVER, DeviceIndex(node_slices())))
    assert spec2["cdiVersion"] == "0.3.0"


def test_spec_path_and_ids(tmp_path):
    assert cdi.spec_path(tmp_path, DRIVER, UID).name == f"k8s.gpu.nvidia.com-claim_{UID}.yaml"
    assert cdi.cdi_device_id(DRIVER, cdi.cdi_device_name(UID, "gpu-0")) == f"k8s.gpu.nvidia.com/claim={UID}-gpu-0"
    with pytest.raises(ValueError, match="invalid"):
        cdi.cdi_device_name(UID, "gpu 0")


def test_validate_spec_catches_problems():
    bad = {"cdiVersion": "0.3.0", "kind": "1vendor/claim",
           "devices": [{"name": "1abc", "containerEdits": {"env": ["NOEQUALS"]}},
                       {"name": "1abc", "containerEdits": {}}, {"name": "-x", "containerEdits": {}}],
           "containerEdits": {"env": []}}
    problems = cdi.validate_spec(bad)
    assert any("vendor" in p for p in problems)
    assert any("duplicate" in p for p in problems)
    assert any("0.5.0" in p for p in problems)
    assert any("'-x'" in p for p in problems)
    assert any("KEY=VALUE" in p for p in problems)


def test_write_and_remove_spec(tmp_path):
    claim = make_claim("c", UID, [("a", "gpu-0")])
    spec = cdi.build_spec(claim, DRIVER, allocated_devices(claim, DRIVER, DeviceIndex(node_slices())))
    path = cdi.write_spec(tmp_path / "cdi", DRIVER, UID, spec)
    assert path.exists() and list(path.parent.iterdir()) == [path]  # no temp files left
    cdi.remove_spec(tmp_path / "cdi", DRIVER, UID)
    cdi.remove_spec(tmp_path / "cdi", DRIVER, UID)  # idempotent
    assert not path.exists()


DEVICES = ["gpu-0", "gpu-1", "gpu-2-mig-1g5gb-19-0", "gpu-3", "nic-0"]
label = st.text(alphabet=string.ascii_lowercase + string.digits, min_size=1, max_size=8)


@settings(max_examples=60, deadline=None)
@given(uid=st.uuids().map(str),
       picks=st.lists(st.tuples(label, st.sampled_from(DEVICES), st.one_of(st.none(), st.uuids().map(str))),
                      min_size=1, max_size=6))
def test_property_specs_are_valid_and_ids_unique(uid, picks):
    # a shared device gets a shareID per allocation; others at most once per claim
    results, used = [], set()
    for req, dev, share in picks:
        share = share if dev == "gpu-3" else None
        if dev != "gpu-3" and dev in used:
            continue
        used.add(dev)
        results.append((req, dev, share) if share else (req, dev))
    claim = make_claim("c", uid, results)
    slices = node_slices()
    devices = allocated_devices(claim, DRIVER, DeviceIndex(slices))
    spec = cdi.build_spec(claim, DRIVER, devices)
    assert cdi.validate_spec(spec) == []
    assert all(NAME_RE.match(d["name"]) and d["name"].startswith(uid) for d in spec["devices"])
    env = cdi.container_env(claim, DRIVER, slices)
    assert env == cdi.visible_devices(spec_env(spec))
    gpus = list(dict.fromkeys(r[1] for r in results if r[1] != "nic-0"))
    assert env.get("FAKE_GPU_COUNT", "0") == str(len(gpus))
    assert env.get("FAKE_GPU_DEVICES", "") == ",".join(gpus)
    assert all(env[f"FAKE_GPU_{key(g)}_NAME"] == g for g in gpus)


def key(device: str) -> str:
    return re.sub(r"[^A-Za-z0-9]", "_", device.split("-", 1)[1]).upper()


def test_every_catalog_device_prepares_with_valid_spec(tmp_path):
    """Every device of every node profile, in every MIG mode, for both drivers: one claim each."""
    from fake_gpus.catalog import MIG_MODES, load_node_profile, node_profiles
    from fake_gpus.plugin.claims import InMemoryClaimSource
    from fake_gpus.plugin.state import DriverState
    from fake_gpus.slices import build_slices

    n = 0
    for profile in node_profiles():
        for mode in MIG_MODES:
            if mode == "dynamic" and any(g.passthrough for g in load_node_profile(profile).gpus):
                continue  # NVIDIA: DynamicMIG and PassthroughSupport are mutually exclusive
            slices = build_slices(profile, "node-x", mig_mode=mode)
            for driver in sorted({s["spec"]["driver"] for s in slices} - {"compute-domain.nvidia.com"}):
                # (compute-domain devices need their ComputeDomain's opaque config: test_rack_computedomain.py)
                names = [d["name"] for s in slices if s["spec"]["driver"] == driver
                         for d in s["spec"].get("devices", [])]
                claims = [make_claim(f"c{i}", f"{i:08d}-0000-4000-8000-000000000000", [("r", name)],
                                     driver=driver, pool="node-x") for i, name in enumerate(names)]
                state = DriverState(driver, InMemoryClaimSource(claims), cdi_dir=tmp_path / "cdi",
                                    checkpoint_path=tmp_path / f"{profile}-{mode}-{driver}.json", slices=slices)
                uuids = set()
                for c in claims:
                    m = c["metadata"]
                    prepared = state.prepare(m["namespace"], m["name"], m["uid"], save=False)
                    assert cdi.validate_spec(prepared.cdi_spec) == []
                    env = cdi.container_env(c, driver, slices)
                    name = c["status"]["allocation"]["devices"]["results"][0]["device"]
                    if driver.endswith(".example.com"):  # the dra-example-driver personality
                        assert env["DRA_RESOURCE_DRIVER_NAME"] == driver and env["KUBERNETES_NODE_NAME"] == "node-x"
                    elif driver == DRIVER:
                        p = f"FAKE_GPU_{key(name)}_"
                        # a GPU bound to vfio-pci reaches the container as /dev/vfio, not by the NVIDIA runtime
                        visible = "void" if env[p + "TYPE"] == "vfio" else env[p + "UUID"]
                        assert env[p + "PRODUCT"] and env["NVIDIA_VISIBLE_DEVICES"] == visible
                        uuids.add(env[p + "UUID"])
                    else:
                        p = f"FAKE_NIC_{key(name)}_"
                        assert env[p + "PCIE_ROOT"].startswith("pci") and env[p + "PRODUCT"]
                    state.unprepare(m["namespace"], m["name"], m["uid"], save=False)
                    n += 1
                if driver == DRIVER:
                    assert len(uuids) == len(names), f"{profile}/{mode}: device UUIDs are not unique"
    assert n > 300
    # only the example driver's per-node `common` specs stay (its driver writes them once, at start)
    assert all(p.name.endswith("_common.yaml") for p in (tmp_path / "cdi").iterdir())
