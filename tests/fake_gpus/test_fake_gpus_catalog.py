"""Catalog facts vs the published NVIDIA figures, node-profile structure and loader errors."""

from __future__ import annotations

import itertools
import json
import textwrap

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from fake_gpus.catalog import (
    CATALOG_DIR,
    CatalogError,
    gpu_model,
    gpu_models,
    load_node_profile,
    nic_model,
    node_profiles,
    published_figures,
)
from fake_gpus.catalog.loader import twin_path, yaml_twin
from fake_gpus.topology import topology_matrix, topology_structure

PUB = published_figures()
REQUIRED_MODELS = ["A100-SXM4-40GB", "A100-SXM4-80GB", "A100-PCIE-80GB", "H100-SXM5-80GB", "H200-141GB", "GH200-96GB",
                   "GH200-144GB", "L4", "T4"]
REQUIRED_PROFILES = ["dgx-a100", "dgx-h100", "t4-inference", "l4-edge", "mig-a100", "hgx-h200", "mixed-a100-t4", "gh200",
                     "gh200-nvl2", "passthrough-h100", "h100-shares"]


def test_required_models_and_profiles_exist():
    assert set(REQUIRED_MODELS) <= set(gpu_models())
    assert set(REQUIRED_PROFILES) <= set(node_profiles())
    assert set(PUB["gpus"]) == set(REQUIRED_MODELS)


@pytest.mark.parametrize("name", REQUIRED_MODELS)
def test_gpu_model_matches_published_figures(name):
    m, pub = gpu_model(name), PUB["gpus"][name]
    assert m.product_name == pub["productName"]
    assert m.memory_mib == pub["memoryMiB"]
    assert m.multiprocessors == pub["multiprocessors"]
    assert m.cuda_compute_capability == pub["cudaComputeCapability"]
    assert m.architecture == pub["architecture"]
    assert m.mig_capable == pub["mig"]


@pytest.mark.parametrize("name", sorted(PUB["mig"]))
def test_mig_profiles_match_published_figures(name):
    m, pub = gpu_model(name), PUB["mig"][name]
    assert [p.name for p in m.mig_profiles] == list(pub)
    for p in m.mig_profiles:
        want = pub[p.name]
        assert p.gi_profile_id == want["id"], p.name
        assert p.compute_slices == want["computeSlices"], p.name
        assert p.memory_slices == want["memorySlices"], p.name
        assert p.max_instances == want["instances"], p.name
        assert list(p.placements) == want["placements"], p.name
        for k, attr in [("decoders", "decoders"), ("jpegEngines", "jpeg_engines"), ("ofaEngines", "ofa_engines"),
                        ("copyEngines", "copy_engines")]:
            if k in want:
                assert getattr(p, attr) == want[k], (p.name, k)
    for pname, mib in PUB["migMemoryMiB"].get(name, {}).items():
        assert m.mig_profile(pname).memory_mib == mib
    for pname, sms in PUB["migMultiprocessors"].get(name, {}).items():
        assert m.mig_profile(pname).multiprocessors == sms
    for pname, engines in PUB["migEngines"].get(name, {}).items():
        p = m.mig_profile(pname)
        assert (p.decoders, p.copy_engines, p.jpeg_engines, p.ofa_engines) == (
            engines["decoders"], engines["copyEngines"], engines["jpegEngines"], engines["ofaEngines"]), pname


@pytest.mark.parametrize("name", sorted(PUB["mig"]))
def test_mig_geometry_is_self_consistent(name):
    m = gpu_model(name)
    full = max(m.mig_profiles, key=lambda p: p.memory_slices)
    assert full.memory_slices == m.mig_memory_slices == 8
    assert full.compute_slices == m.mig_compute_slices == 7
    assert full.memory_mib <= m.memory_mib
    assert full.multiprocessors <= m.multiprocessors
    for p in m.mig_profiles:
        # GI memory grows with the memory slices; same slice count -> same memory
        for q in m.mig_profiles:
            if p.memory_slices < q.memory_slices:
                assert p.memory_mib < q.memory_mib, (p.name, q.name)
            elif p.memory_slices == q.memory_slices:
                assert p.memory_mib == q.memory_mib, (p.name, q.name)
        # the profile name's memory is the marketing capacity times the slice fraction
        gb = int(p.name.split(".")[1].split("gb")[0])
        marketing = int(name.split("-")[-1].removesuffix("GB"))
        assert abs(gb - marketing * p.memory_slices / 8) <= 1, p.name
        # max instances = placements that fit side by side
        assert p.max_instances == (1 if p.name.endswith("+me") else len(p.placements)), p.name
        # SMs scale with compute slices and never exceed the 7g profile
        assert p.multiprocessors <= full.multiprocessors
        assert p.multiprocessors * 7 // p.compute_slices >= full.multiprocessors * 0.8


def test_nic_models():
    cx7, bf3 = nic_model("ConnectX-7"), nic_model("BlueField-3")
    assert cx7.type == "nic" and cx7.link_speed_gbps == 400 and cx7.vendor_id == "15b3"
    assert bf3.type == "dpu"
    with pytest.raises(CatalogError, match="known: .*ConnectX-7"):
        nic_model("ConnectX-9")


def test_unknown_gpu_model_lists_known():
    with pytest.raises(CatalogError, match="unknown GPU model 'B300'.*A100-SXM4-40GB"):
        gpu_model("B300")


# ------------------------------------------------------------------ dgx-a100


def test_dgx_a100_facts():
    from fake_gpus.topology import switch_chain

    p = load_node_profile("dgx-a100")
    assert [g.model.name for g in p.gpus] == ["A100-SXM4-80GB"] * 8
    assert sorted(g.minor for g in p.gpus) == list(range(8))
    assert len(p.sockets) == 2 and {s["numaNode"] for s in p.sockets} == {0, 1}
    # 4 PCIe switch complexes (top-level switches), each under its own root, each with exactly
    # 2 GPUs and 1-2 NICs somewhere below it
    top = [w for w in p.pcie_switches if w["parent"] is None]
    assert len(top) == 4 and len({w["root"] for w in top}) == 4
    for w in top:
        gpus = [g for g in p.gpus if switch_chain(p, g.pcie_switch)[-1] == w["id"]]
        nics = [n for n in p.nics if switch_chain(p, n.pcie_switch)[-1] == w["id"]]
        assert len(gpus) == 2 and 1 <= len(nics) <= 2
        assert {n.pcie_root for n in nics} == {g.pcie_root for g in gpus} == {w["root"]}
    assert len({g.socket for g in p.gpus}) == 2
    m = topology_matrix(p)
    for a, b in itertools.permutations(range(8), 2):
        assert m[f"GPU{a}"][f"GPU{b}"] == "NV12"
    # GPU and NIC of one switch: PIX (a real DGX A100's two-level complexes read PXB)
    for g in p.gpus:
        for n in p.nics:
            code = m[f"GPU{g.minor}"][f"NIC{n.index}"]
            if n.pcie_root == g.pcie_root:
                assert code == "PIX"
            elif n.numa_node == g.numa_node:
                assert code == "NODE"
            else:
                assert code == "SYS"
    assert m["NIC0"]["NIC1"] == "PIX"


def test_topology_codes_per_profile():
    t4 = topology_matrix(load_node_profile("t4-inference"))
    assert t4["GPU0"]["GPU3"] == "PHB" and t4["GPU2"]["GPU2"] == "X"
    h100 = topology_matrix(load_node_profile("dgx-h100"))
    assert h100["GPU0"]["GPU7"] == "NV18"
    mixed = topology_matrix(load_node_profile("mixed-a100-t4"))
    assert mixed["GPU0"]["GPU1"] == "NV12" and mixed["GPU0"]["GPU2"] == "SYS" and mixed["GPU2"]["GPU3"] == "PHB"
    h200 = topology_matrix(load_node_profile("hgx-h200"))
    assert (h200["GPU0"]["NIC0"], h200["GPU1"]["NIC0"], h200["GPU2"]["NIC0"], h200["GPU4"]["NIC0"]) == (
        "PIX", "PXB", "PHB", "SYS")
    l4 = topology_matrix(load_node_profile("l4-edge"))
    assert l4["GPU0"]["GPU1"] == "NODE" and l4["GPU1"]["NIC0"] == "PHB"


@pytest.mark.parametrize("name", REQUIRED_PROFILES)
def test_topology_matrix_is_symmetric_and_structure_consistent(name):
    p = load_node_profile(name)
    m = topology_matrix(p)
    labels = list(m)
    assert len(labels) == len(p.gpus) + len(p.nics)
    for a in labels:
        assert m[a][a] == "X"
        for b in labels:
            assert m[a][b] == m[b][a]
    s = topology_structure(p)
    ids = {n["id"] for n in s["nodes"]}
    assert len(ids) == len(s["nodes"])
    for link in s["links"]:
        assert link["a"] in ids and link["b"] in ids, link
        assert link["type"] in {"pcie", "nvlink", "smp"} and link["bandwidthGBps"] > 0


def test_mig_a100_static_layouts_do_not_overlap():
    p = load_node_profile("mig-a100")
    assert p.mig_mode == "static"
    for g in p.gpus:
        assert g.mig_layout
        used: list[int] = []
        for pl in g.mig_layout:
            prof = g.model.mig_profile(pl.profile)
            assert pl.placement in prof.placements
            used += list(prof.slices_at(pl.placement))
        assert len(used) == len(set(used))
        assert sum(g.model.mig_profile(pl.profile).compute_slices for pl in g.mig_layout) <= 7


# ------------------------------------------------------------------ loader errors


def _write(tmp_path, text, name="custom.yaml"):
    f = tmp_path / name
    f.write_text(textwrap.dedent(text))
    return f


GOOD = """
name: custom
sockets: [{id: 0, numaNode: 0}]
pcieRoots: [{id: pci0000:00, socket: 0}]
gpus:
  - {minor: 0, model: T4, pciBusID: "0000:3b:00.0", pcieRoot: pci0000:00}
"""


def test_user_profile_by_path_and_env(tmp_path, monkeypatch):
    f = _write(tmp_path, GOOD)
    assert load_node_profile(str(f)).gpus[0].model.name == "T4"
    monkeypatch.setenv("FAKE_GPUS_PROFILE_PATH", str(tmp_path))
    assert "custom" in node_profiles()
    assert load_node_profile("custom").name == "custom"


@pytest.mark.parametrize(
    ("mutation", "pattern"),
    [
        (("model: T4", "model: T5"), r"NodeProfile/custom: gpus\[0\]\.model: unknown GPU model 'T5'"),
        (("pciBusID: \"0000:3b:00.0\"", "pciBusID: \"3b:00.0\""), r"gpus\[0\]\.pciBusID: .*must look like"),
        (("pcieRoot: pci0000:00}", "pcieRoot: pci0000:80}"), r"gpus\[0\]\.pcieRoot: PCIe root 'pci0000:80' is not declared"),
        (("minor: 0", "minr: 0"), r"gpus\[0\]\.minr: unknown field"),
        (("name: custom", "name: Custom_1"), r"name: 'Custom_1' must be a DNS label"),
        (("socket: 0}]", "socket: 3}]"), r"pcieRoots\[0\]\.socket: socket 3 is not declared"),
        (("gpus:", "pcieSwitches: [{id: leaf, parent: top}]\ngpus:"),
         r"pcieSwitches\[0\]\.parent: parent switch 'top' must be declared earlier"),
        (("gpus:", "pcieSwitches: [{id: sw, root: pci0000:00, parent: sw}]\ngpus:"),
         r"pcieSwitches\[0\]: exactly one of root or parent"),
        (("pcieRoot: pci0000:00}", "pcieRoot: pci0000:00, pcieSwitch: sw}"),
         r"gpus\[0\]: exactly one of pcieSwitch or pcieRoot"),
        (("pcieRoot: pci0000:00}", "pcieRoot: pci0000:00, passthrough: true}"),
         r"gpus\[0\]\.passthrough: GPU model T4 has no pci\.deviceID / pci\.addressableMemoryMiB"),
        (("model: T4, pciBusID: \"0000:3b:00.0\", pcieRoot: pci0000:00}",
          "model: H100-SXM5-80GB, pciBusID: \"0000:3b:00.0\", pcieRoot: pci0000:00, passthrough: true, "
          "migLayout: [{profile: 7g.80gb, placement: 0}]}"),
         r"gpus\[0\]\.passthrough: a GPU bound to vfio-pci has no MIG devices"),
        (("name: custom", "name: custom\nconsumableShares: some"),
         r"consumableShares: invalid value 'some' \(must be 'disabled', 'memory', 'unlimited', or a positive integer\)"),
        (("name: custom", "name: custom\nconsumableShares: 0"), r"consumableShares: invalid value 0"),
    ],
)
def test_bad_profile_errors_name_field_path(tmp_path, mutation, pattern):
    f = _write(tmp_path, GOOD.replace(*mutation))
    with pytest.raises(CatalogError, match=pattern):
        load_node_profile(str(f))


def test_load_node_profile_passthrough_and_bad_type():
    p = load_node_profile("l4-edge")
    assert load_node_profile(p) is p
    with pytest.raises(CatalogError, match="expected a profile name"):
        load_node_profile(42)


def test_bad_yaml_and_unknown_profile(tmp_path):
    f = _write(tmp_path, "name: [unclosed\n")
    with pytest.raises(CatalogError, match="not valid YAML"):
        load_node_profile(str(f))
    with pytest.raises(CatalogError, match="unknown node profile 'nope'.*dgx-a100"):
        load_node_profile("nope")


@pytest.mark.parametrize(
    ("layout", "pattern"),
    [
        ("[{profile: 3g.20gb, placement: 0}, {profile: 2g.10gb, placement: 2}]", "overlaps memory slice 2"),
        ("[{profile: 3g.20gb, placement: 2}]", r"cannot start at memory slice 2 \(valid: \[0, 4\]\)"),
        ("[{profile: 9g.99gb, placement: 0}]", "unknown MIG profile '9g.99gb'"),
        ("[{profile: 4g.20gb, placement: 0}, {profile: 1g.5gb, placement: 4}, {profile: 1g.5gb, placement: 5},"
         " {profile: 1g.5gb, placement: 6}, {profile: 1g.5gb, placement: 7}]", "cannot start at memory slice 7"),
        ("[{profile: 1g.5gb+me, placement: 0}, {profile: 1g.5gb+me, placement: 1}]",
         r"more than 1 instance\(s\) of 1g.5gb\+me"),
    ],
)
def test_bad_static_layouts_rejected(tmp_path, layout, pattern):
    text = GOOD.replace("model: T4", "model: A100-SXM4-40GB").replace(
        "pcieRoot: pci0000:00}", f"pcieRoot: pci0000:00, migLayout: {layout}}}")
    with pytest.raises(CatalogError, match=pattern):
        load_node_profile(str(_write(tmp_path, text)))


def test_mig_layout_on_non_mig_gpu_rejected(tmp_path):
    text = GOOD.replace("pcieRoot: pci0000:00}", "pcieRoot: pci0000:00, migLayout: [{profile: 1g.5gb, placement: 0}]}")
    with pytest.raises(CatalogError, match="T4 does not support MIG"):
        load_node_profile(str(_write(tmp_path, text)))


A100_40 = gpu_model("A100-SXM4-40GB")


@st.composite
def layouts(draw):
    n = draw(st.integers(min_value=1, max_value=8))
    out = []
    for _ in range(n):
        p = draw(st.sampled_from(A100_40.mig_profiles))
        start = draw(st.sampled_from(p.placements) if draw(st.booleans()) else st.integers(0, 7))
        out.append((p.name, start))
    return out


@st.composite
def fitting_layouts(draw):
    """Greedy: candidates in random order, keep each one that still fits (mostly valid layouts)."""
    cands = [(p.name, s) for p in A100_40.mig_profiles for s in p.placements]
    out: list[tuple[str, int]] = []
    for cand in draw(st.permutations(cands))[: draw(st.integers(1, 12))]:
        if _expected_valid([*out, cand]):
            out.append(cand)
    return out


def _expected_valid(layout) -> bool:
    used: set[int] = set()
    counts: dict[str, int] = {}
    compute = 0
    for name, start in layout:
        p = A100_40.mig_profile(name)
        if start not in p.placements:
            return False
        span = set(range(start, start + p.memory_slices))
        if span & used:
            return False
        used |= span
        counts[name] = counts.get(name, 0) + 1
        compute += p.compute_slices
        if counts[name] > p.max_instances or compute > 7:
            return False
    return True


@given(st.one_of(fitting_layouts(), layouts()))
@settings(max_examples=150, deadline=None)
def test_static_layout_validation_property(layout):
    from fake_gpus.catalog import parse_node_profile
    from fake_gpus.slices import build_slices

    data = {
        "name": "prop", "migMode": "static", "sockets": [{"id": 0}], "pcieRoots": [{"id": "pci0000:00", "socket": 0}],
        "gpus": [{"minor": 0, "model": "A100-SXM4-40GB", "pciBusID": "0000:07:00.0", "pcieRoot": "pci0000:00",
                  "migLayout": [{"profile": n, "placement": s} for n, s in layout]}],
    }
    if not _expected_valid(layout):
        with pytest.raises(CatalogError, match=r"NodeProfile/prop: gpus\[0\]\.migLayout\[\d\]"):
            parse_node_profile(data)
        return
    prof = parse_node_profile(data)
    devs = build_slices(prof, "n")[0]["spec"]["devices"]
    assert len(devs) == len(layout)
    slices_used = [k for d in devs for k in d["capacity"] if k.startswith("memorySlice")]
    assert len(slices_used) == len(set(slices_used))
    assert sum(int(d["capacity"]["multiprocessors"]["value"]) for d in devs) <= 98


def test_fake_gpus_imports_nothing_from_labkit():
    """Design rule: arrows point notebooks -> labkit -> fake_gpus, never back."""
    import ast
    from pathlib import Path

    import fake_gpus

    root = Path(fake_gpus.__file__).resolve().parent
    offenders = []
    for f in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(f.read_text(), str(f))):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            offenders += [f"{f.relative_to(root)}: {n}" for n in names if n.split(".")[0] == "labkit"]
    assert offenders == []


def test_a_json_twin_is_read_only_for_the_bytes_it_was_made_from(tmp_path):
    """The site ships each catalog file with a JSON twin (pure-Python YAML is slow in a browser tab): the
    loader takes the twin's document when its sha256 is that of the file's bytes, and parses the YAML when
    the file changed or the twin is unreadable."""
    path = tmp_path / "twin-demo.yaml"
    data = b"name: twin-demo\ndescription: from YAML\nexampleDriver: {gpus: 2}\n"
    path.write_bytes(data)
    twin = yaml_twin(data)
    assert json.loads(twin)["document"] == {"name": "twin-demo", "description": "from YAML", "exampleDriver": {"gpus": 2}}
    # a twin whose document says something else shows which of the two the loader read
    forged = json.dumps({"sha256": json.loads(twin)["sha256"],
                         "document": {"name": "twin-demo", "description": "from the twin", "exampleDriver": {"gpus": 3}}})
    twin_path(path).parent.mkdir()
    twin_path(path).write_text(forged)
    assert load_node_profile(str(path)).description == "from the twin"
    path.write_bytes(data + b"# edited\n")  # another version of the file: the twin is not its
    assert load_node_profile(str(path)).description == "from YAML"
    twin_path(path).write_text("{not json")
    path.write_bytes(data)
    assert load_node_profile(str(path)).description == "from YAML"
    assert yaml_twin(b"released: !!binary aGk=\n") is None  # bytes: JSON cannot hold them
    # a date stays a string, as Kubernetes' YAML reads it (fake_gpus.kubeyaml): JSON holds that
    assert json.loads(yaml_twin(b"released: 2020-05-14\n"))["document"] == {"released": "2020-05-14"}
    assert yaml_twin(b"{1: a}\n") is None  # a key that is not a string
    assert yaml_twin(b"a: [\n") is None  # not YAML


def test_every_shipped_catalog_file_has_a_twin_equal_to_its_yaml():
    files = sorted(CATALOG_DIR.glob("*.yaml")) + sorted((CATALOG_DIR / "profiles").glob("*.yaml"))
    assert len(files) > 10
    for f in files:
        twin = yaml_twin(f.read_bytes())
        assert twin is not None, f
        assert json.loads(twin)["document"] == yaml.safe_load(f.read_text()), f
