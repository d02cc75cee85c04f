"""Reads and validates the catalog YAML files. Every problem becomes one CatalogError line that
names the file/object, the field path and what to do about it."""

from __future__ import annotations

import hashlib
import json
import os
import re
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

import yaml

from fake_gpus.catalog.models import (
    GpuModel,
    GpuSlot,
    MigPlacement,
    MigProfile,
    NicModel,
    NicSlot,
    NodeProfile,
)
from fake_gpus.errors import InputError
from fake_gpus.example_driver import ExampleDriverSpec
from fake_gpus.kubeyaml import GoLoader, InputRefused, document, read_file

CATALOG_DIR = Path(__file__).resolve().parent
PROFILES_DIR = CATALOG_DIR / "profiles"
PROFILE_PATH_ENV = "FAKE_GPUS_PROFILE_PATH"
MIG_MODES = ("none", "static", "dynamic")

_PCI_BUS_ID = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")
_PCIE_ROOT = re.compile(r"^pci[0-9a-f]{4}:[0-9a-f]{2}$")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


class CatalogError(InputError, ValueError):
    """A catalog or node-profile file is invalid; str() is a one-line, actionable message."""


#: catalog files are a few levels deep; anything deeper is not a catalog (and would overflow reprs)
MAX_DEPTH = 50


def _depth(doc: Any) -> int:
    """Nesting depth of lists/mappings, without recursion."""
    deepest, stack = 0, [(doc, 0)]
    while stack:
        node, level = stack.pop()
        deepest = max(deepest, level)
        if level > MAX_DEPTH:
            break
        if isinstance(node, dict):
            stack.extend((v, level + 1) for v in node.values())
        elif isinstance(node, list):
            stack.extend((v, level + 1) for v in node)
    return deepest


def yaml_twin(data: bytes) -> bytes | None:
    """The JSON twin of a catalog file's bytes ``data``: its document as JSON with the bytes' sha256, or None
    when the document is not plain JSON data (or not valid YAML). Where PyYAML has no libyaml (Pyodide: a
    browser tab), parsing gpus.yaml in pure Python takes ~0.5 s of ``connect('sim')``; JSON takes
    milliseconds. The site build puts a twin beside each catalog file it ships (twin_path;
    notebooks/wheel_bytecode.py); _read_yaml uses one only for exactly the bytes it was made from."""
    try:
        doc = document(data.decode("utf-8-sig"), GoLoader)
        text = json.dumps({"sha256": hashlib.sha256(data).hexdigest(), "document": doc}, separators=(",", ":"))
    except (UnicodeDecodeError, yaml.YAMLError, RecursionError, TypeError, ValueError):  # InputRefused too
        return None  # not a document JSON can hold (e.g. a date, or a key that is not a string)
    return text.encode() if json.loads(text)["document"] == doc else None


def twin_path(path: Path | str) -> Path:
    """Where the JSON twin of the catalog file ``path`` lives (yaml_twin): its folder's __pycache__."""
    path = Path(path)
    return path.parent / "__pycache__" / f"{path.name}.json"


def _from_twin(path: Path, data: bytes) -> tuple[bool, Any]:
    """(found, document) from the JSON twin of ``path`` made from exactly ``data``."""
    try:
        saved = json.loads(twin_path(path).read_bytes())
    except (OSError, ValueError):
        return False, None
    if not isinstance(saved, dict) or saved.get("sha256") != hashlib.sha256(data).hexdigest():
        return False, None
    return True, saved.get("document")


def _read_yaml(path: Path, what: str) -> Any:
    """The document of a catalog or profile file, read as Kubernetes reads YAML (go-yaml's scalars and
    alias bound) and at most kubeyaml.MAX_INPUT_BYTES of it (fake_gpus.kubeyaml)."""
    try:
        data = read_file(path)
        text = data.decode("utf-8-sig")
    except InputRefused as e:
        raise CatalogError(f"{what} {path}: {e}") from None
    except OSError as e:
        raise CatalogError(f"{what} {path}: cannot read file ({e.strerror})") from None
    except UnicodeDecodeError as e:
        raise CatalogError(f"{what} {path}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    try:
        found, doc = _from_twin(path, data)
        if not found:
            doc = document(text, GoLoader)
        if _depth(doc) > MAX_DEPTH:
            raise RecursionError
        return doc
    except InputRefused as e:
        raise CatalogError(f"{what} {path}: {e}") from None
    except RecursionError:
        raise CatalogError(f"{what} {path}: nested too deeply to read; fix: flatten the file") from None
    except yaml.YAMLError as e:
        if "maximum nesting depth" in str(e):  # libyaml's own limit (PyYAML 6.0.4 wheels)
            raise CatalogError(f"{what} {path}: nested too deeply to read; fix: flatten the file") from None
        mark = getattr(e, "problem_mark", None)
        where = f": line {mark.line + 1}" if mark is not None else ""
        raise CatalogError(f"{what} {path}{where}: not valid YAML ({getattr(e, 'problem', e)})") from None


class _Ctx:
    """Field-path aware accessor for one mapping of a YAML document."""

    def __init__(self, obj: str, data: Any, path: str = ""):
        self.obj, self.data, self.path = obj, data, path
        if not isinstance(data, dict):
            self.fail(f"must be a mapping, got {type(data).__name__}")

    def fail(self, msg: str, key: str | None = None) -> None:
        p = self.sub(key) if key is not None else self.path
        raise CatalogError(f"{self.obj}: {p or '<root>'}: {msg}")

    def sub(self, key: str | int) -> str:
        if isinstance(key, int):
            return f"{self.path}[{key}]"
        return f"{self.path}.{key}" if self.path else key

    def only(self, allowed: set[str]) -> None:
        for k in self.data:
            if k not in allowed:
                self.fail(f"unknown field (allowed: {', '.join(sorted(allowed))})", str(k))

    def get(self, key: str, typ: type | tuple[type, ...], default: Any = ..., *, nonneg: bool = False) -> Any:
        if key not in self.data or self.data[key] is None:
            if default is ...:
                self.fail("required field is missing", key)
            return default
        v = self.data[key]
        ok = isinstance(v, typ) and not (isinstance(v, bool) and typ in (int, (int,)))
        if not ok:
            names = typ.__name__ if isinstance(typ, type) else "/".join(t.__name__ for t in typ)
            self.fail(f"must be {names}, got {type(v).__name__} {v!r}", key)
        if isinstance(v, int) and not isinstance(v, bool) and not -(2**63) <= v < 2**63:  # YAML reads up to uint64
            self.fail(f"must be a 64-bit integer, -9223372036854775808 to 9223372036854775807 (got {v})", key)
        if nonneg and v < 0:
            self.fail(f"must be >= 0, got {v}", key)
        return v

    def items(self, key: str, required: bool = False) -> list[_Ctx]:
        v = self.data.get(key)
        if v is None:
            if required:
                self.fail("required list is missing", key)
            return []
        if not isinstance(v, list):
            self.fail(f"must be a list, got {type(v).__name__}", key)
        base = self.sub(key)
        return [_Ctx(self.obj, item, f"{base}[{i}]") for i, item in enumerate(v)]


# ---------------------------------------------------------------- hardware models

_MIG_PROFILE_FIELDS = {
    "name", "giProfileId", "multiprocessors", "copyEngines", "decoders", "encoders", "jpegEngines",
    "ofaEngines", "memoryMiB", "memorySlices", "maxInstances", "placements", "memoryVerified",
}
_GPU_FIELDS = {
    "productName", "brand", "architecture", "cudaComputeCapability", "memoryMiB", "multiprocessors",
    "copyEngines", "decoders", "encoders", "jpegEngines", "ofaEngines", "formFactor", "pcieGeneration",
    "nvlink", "mig", "pci",
}


def _mig_profile(c: _Ctx, memory_slices: int) -> MigProfile:
    c.only(_MIG_PROFILE_FIELDS)
    name = c.get("name", str)
    if not re.match(r"^[1-7]g\.\d+gb(\+me)?$", name):
        c.fail(f"MIG profile name {name!r} must look like 1g.10gb or 1g.10gb+me", "name")
    placements = c.get("placements", list)
    size = c.get("memorySlices", int)
    for i, s in enumerate(placements):
        if not isinstance(s, int) or isinstance(s, bool) or s < 0 or s + size > memory_slices:
            c.fail(f"placement start {s!r} does not fit {size} slice(s) into {memory_slices}", f"placements[{i}]")
    return MigProfile(
        name=name,
        gi_profile_id=c.get("giProfileId", int, nonneg=True),
        multiprocessors=c.get("multiprocessors", int, nonneg=True),
        copy_engines=c.get("copyEngines", int, nonneg=True),
        decoders=c.get("decoders", int, nonneg=True),
        encoders=c.get("encoders", int, nonneg=True),
        jpeg_engines=c.get("jpegEngines", int, nonneg=True),
        ofa_engines=c.get("ofaEngines", int, nonneg=True),
        memory_mib=c.get("memoryMiB", int, nonneg=True),
        memory_slices=size,
        max_instances=c.get("maxInstances", int, nonneg=True),
        placements=tuple(placements),
        memory_verified=c.get("memoryVerified", bool, True),
    )


def _gpu_model(name: str, c: _Ctx) -> GpuModel:
    c.only(_GPU_FIELDS)
    profiles: tuple[MigProfile, ...] = ()
    mem_slices = compute_slices = 0
    if "mig" in c.data:
        m = _Ctx(c.obj, c.data["mig"], c.sub("mig"))
        m.only({"memorySlices", "computeSlices", "profiles"})
        mem_slices = m.get("memorySlices", int, nonneg=True)
        compute_slices = m.get("computeSlices", int, nonneg=True)
        profiles = tuple(_mig_profile(p, mem_slices) for p in m.items("profiles", required=True))
    nvlink = c.get("nvlink", dict, None)
    pci = _Ctx(c.obj, c.get("pci", dict, {}), c.sub("pci"))
    pci.only({"deviceID", "name", "addressableMemoryMiB"})
    device_id = pci.get("deviceID", str, "")
    if device_id and not re.match(r"^0x[0-9a-f]{4}$", device_id):
        pci.fail(f"{device_id!r} must look like 0x2330 (lower-case hex, as NVIDIA's driver prints it)", "deviceID")
    return GpuModel(
        name=name,
        product_name=c.get("productName", str),
        brand=c.get("brand", str),
        architecture=c.get("architecture", str),
        cuda_compute_capability=str(c.get("cudaComputeCapability", str)),
        memory_mib=c.get("memoryMiB", int, nonneg=True),
        multiprocessors=c.get("multiprocessors", int, nonneg=True),
        copy_engines=c.get("copyEngines", int, nonneg=True),
        decoders=c.get("decoders", int, nonneg=True),
        encoders=c.get("encoders", int, nonneg=True),
        jpeg_engines=c.get("jpegEngines", int, nonneg=True),
        ofa_engines=c.get("ofaEngines", int, nonneg=True),
        form_factor=c.get("formFactor", str),
        pcie_generation=c.get("pcieGeneration", int, nonneg=True),
        nvlink=dict(nvlink) if nvlink else None,
        mig_memory_slices=mem_slices,
        mig_compute_slices=compute_slices,
        mig_profiles=profiles,
        pci_device_id=device_id,
        pci_device_name=pci.get("name", str, ""),
        addressable_memory_mib=pci.get("addressableMemoryMiB", int, 0, nonneg=True),
    )


def _nic_model(name: str, c: _Ctx) -> NicModel:
    c.only({"productName", "vendor", "vendorID", "deviceID", "type", "linkType", "linkSpeedGbps", "ports",
            "pcieGeneration"})
    return NicModel(
        name=name,
        product_name=c.get("productName", str),
        vendor=c.get("vendor", str),
        vendor_id=c.get("vendorID", str),
        device_id=c.get("deviceID", str),
        type=c.get("type", str),
        link_type=c.get("linkType", str),
        link_speed_gbps=c.get("linkSpeedGbps", int, nonneg=True),
        ports=c.get("ports", int, nonneg=True),
        pcie_generation=c.get("pcieGeneration", int, nonneg=True),
    )


@cache
def _gpu_catalog() -> tuple[dict[str, GpuModel], dict[str, str]]:
    path = CATALOG_DIR / "gpus.yaml"
    c = _Ctx(f"GPU catalog {path.name}", _read_yaml(path, "GPU catalog"))
    models = _Ctx(c.obj, c.get("models", dict), "models")
    out = {name: _gpu_model(name, _Ctx(c.obj, spec, f"models.{name}")) for name, spec in models.data.items()}
    d = _Ctx(c.obj, c.get("defaults", dict), "defaults")
    defaults = {"driverVersion": d.get("driverVersion", str), "cudaDriverVersion": d.get("cudaDriverVersion", str),
                "addressingMode": d.get("addressingMode", str, "")}
    return out, defaults


@cache
def _nic_catalog() -> dict[str, NicModel]:
    path = CATALOG_DIR / "nics.yaml"
    c = _Ctx(f"NIC catalog {path.name}", _read_yaml(path, "NIC catalog"))
    models = _Ctx(c.obj, c.get("models", dict), "models")
    return {name: _nic_model(name, _Ctx(c.obj, spec, f"models.{name}")) for name, spec in models.data.items()}


def gpu_models() -> dict[str, GpuModel]:
    return dict(_gpu_catalog()[0])


def nic_models() -> dict[str, NicModel]:
    return dict(_nic_catalog())


def gpu_model(name: str) -> GpuModel:
    models = _gpu_catalog()[0]
    if name not in models:
        raise CatalogError(f"unknown GPU model {name!r} (known: {', '.join(sorted(models))})")
    return models[name]


def nic_model(name: str) -> NicModel:
    models = _nic_catalog()
    if name not in models:
        raise CatalogError(f"unknown NIC model {name!r} (known: {', '.join(sorted(models))})")
    return models[name]


def catalog_defaults() -> dict[str, str]:
    return dict(_gpu_catalog()[1])


# ---------------------------------------------------------------- node profiles

_PROFILE_FIELDS = {
    "name", "description", "migMode", "driverVersion", "cudaDriverVersion", "sockets", "pcieRoots",
    "pcieSwitches", "nvlinkDomains", "gpus", "nics", "addressingMode", "consumableShares", "iommuFD",
    "computeDomains", "fabricManagerPartitions",
}


def _profile_dirs() -> list[Path]:
    dirs = [PROFILES_DIR]
    for part in os.environ.get(PROFILE_PATH_ENV, "").split(os.pathsep):
        if part:
            dirs.append(Path(part))
    return dirs


def _profile_files() -> dict[str, Path]:
    """name -> file; later directories (user ones) override the packaged ones."""
    out: dict[str, Path] = {}
    for d in _profile_dirs():
        if d.is_dir():
            for f in sorted(d.glob("*.y*ml")):
                out[f.stem] = f
    return out


def node_profiles() -> list[str]:
    """Names of all known node profiles (packaged + directories in $FAKE_GPUS_PROFILE_PATH)."""
    return sorted(_profile_files())


def load_node_profile(name_or_path: str | os.PathLike[str] | NodeProfile) -> NodeProfile:
    """Load a profile by name (see node_profiles()) or from a YAML file path (a NodeProfile
    passes through unchanged)."""
    if isinstance(name_or_path, NodeProfile):
        return name_or_path
    if not isinstance(name_or_path, str | os.PathLike):
        raise CatalogError(f"node profile {name_or_path!r}: expected a profile name or a YAML file path")
    s = os.fspath(name_or_path)
    files = _profile_files()
    if s in files:
        path = files[s]
    elif s.endswith((".yaml", ".yml")) or os.sep in s or Path(s).is_file():
        path = Path(s)
        if not path.is_file():
            what = ("is a directory, not a file" if path.is_dir() else
                    "is not a regular file (it has no content to read)" if path.exists() else "no such file")
            raise CatalogError(f"node profile file {s}: {what}; give a node profile YAML file")
    else:
        raise CatalogError(f"unknown node profile {s!r} (known: {', '.join(sorted(files))}; "
                           f"or pass a path to a profile YAML file)")
    return _load_profile_file(path)


def parse_node_profile(data: Any, source: str = "<data>") -> NodeProfile:
    """Build a NodeProfile from already-parsed YAML data (a dict)."""
    name = data.get("name") if isinstance(data, dict) else None
    # a name that is not one plain line is quoted: the message's first line must still name the field
    obj = (f"NodeProfile/{name}" if name.isprintable() and name == name.strip() else f"NodeProfile/{name!r}") \
        if isinstance(name, str) and name else f"NodeProfile {source}"
    return _parse_profile(_Ctx(obj, data), source)


def _load_profile_file(path: Path) -> NodeProfile:
    try:
        st = path.stat()
    except OSError as e:
        raise CatalogError(f"node profile {path}: cannot read file ({e.strerror})") from None
    return _load_profile_cached(str(path.resolve()), st.st_mtime_ns, st.st_size)


@lru_cache(maxsize=256)
def _load_profile_cached(path: str, _mtime_ns: int, _size: int) -> NodeProfile:
    """NodeProfile is immutable, so one parse per file version is shared by all callers."""
    return parse_node_profile(_read_yaml(Path(path), "node profile"), path)


_EXAMPLE_FIELDS = {"gpus", "gpuPartitions", "gpuAllowMultipleAllocations", "nics", "cpuNumaNodes", "cpusPerNumaNode",
                   "extendedResourceName"}


def _parse_example_profile(c: _Ctx, source: str) -> NodeProfile:
    """A node running kubernetes-sigs/dra-example-driver (fields = its Helm values)."""
    c.only({"name", "description", "exampleDriver"})
    name = c.get("name", str)
    if not _DNS_LABEL.match(name):
        c.fail(f"{name!r} must be a DNS label (lower-case letters, digits, '-')", "name")
    e = _Ctx(c.obj, c.data["exampleDriver"], "exampleDriver")
    e.only(_EXAMPLE_FIELDS)
    spec = ExampleDriverSpec(
        gpus=e.get("gpus", int, 8, nonneg=True),
        gpu_partitions=e.get("gpuPartitions", int, 0, nonneg=True),
        gpu_allow_multiple_allocations=e.get("gpuAllowMultipleAllocations", bool, False),
        nics=e.get("nics", int, 0, nonneg=True),
        cpu_numa_nodes=e.get("cpuNumaNodes", int, 0, nonneg=True),
        cpus_per_numa_node=e.get("cpusPerNumaNode", int, 4, nonneg=True),
        extended_resource_name=e.get("extendedResourceName", str, ""),
    )
    defaults = catalog_defaults()
    return NodeProfile(name=name, description=c.get("description", str, ""), mig_mode="none",
                       driver_version=str(defaults["driverVersion"]),
                       cuda_driver_version=str(defaults["cudaDriverVersion"]), sockets=(), pcie_roots=(),
                       pcie_switches=(), nvlink_domains=(), gpus=(), nics=(), source=source, example=spec)


def _parse_profile(c: _Ctx, source: str) -> NodeProfile:
    if "exampleDriver" in c.data:
        return _parse_example_profile(c, source)
    c.only(_PROFILE_FIELDS | {"exampleDriver"})
    name = c.get("name", str)
    if not _DNS_LABEL.match(name):
        c.fail(f"{name!r} must be a DNS label (lower-case letters, digits, '-')", "name")
    mig_mode = c.get("migMode", str, "none")
    if mig_mode not in MIG_MODES:
        c.fail(f"{mig_mode!r} is not one of {', '.join(MIG_MODES)}", "migMode")
    defaults = catalog_defaults()

    sockets: dict[int, int] = {}
    for s in c.items("sockets", required=True):
        s.only({"id", "numaNode"})
        sid = s.get("id", int, nonneg=True)
        if sid in sockets:
            s.fail(f"duplicate socket id {sid}", "id")
        sockets[sid] = s.get("numaNode", int, sid, nonneg=True)

    roots: dict[str, int] = {}
    for r in c.items("pcieRoots"):
        r.only({"id", "socket"})
        rid = r.get("id", str)
        if not _PCIE_ROOT.match(rid):
            r.fail(f"{rid!r} must look like pci0000:00 (pci<domain>:<bus>, lower-case hex)", "id")
        if rid in roots:
            r.fail(f"duplicate PCIe root {rid}", "id")
        sock = r.get("socket", int)
        if sock not in sockets:
            r.fail(f"socket {sock} is not declared in sockets", "socket")
        roots[rid] = sock

    switches: dict[str, str] = {}  # switch -> root
    parents: dict[str, str | None] = {}  # switch -> upstream switch (nested switches)
    for w in c.items("pcieSwitches"):
        w.only({"id", "root", "parent"})
        wid = w.get("id", str)
        if wid in switches:
            w.fail(f"duplicate PCIe switch {wid}", "id")
        root = w.get("root", str, None)
        parent = w.get("parent", str, None)
        if (root is None) == (parent is None):
            w.fail("exactly one of root or parent (an earlier switch) is required")
        if parent is not None:
            if parent not in switches:
                w.fail(f"parent switch {parent!r} must be declared earlier in pcieSwitches", "parent")
            root = switches[parent]
        elif root not in roots:
            w.fail(f"PCIe root {root!r} is not declared in pcieRoots", "root")
        assert root is not None
        switches[wid] = root
        parents[wid] = parent

    domains: dict[str, dict[str, Any]] = {}
    for d in c.items("nvlinkDomains"):
        d.only({"id", "fabric", "generation", "nvswitches", "linksPerGpu", "bandwidthGBps"})
        did = d.get("id", str)
        if did in domains:
            d.fail(f"duplicate NVLink domain {did}", "id")
        fabric = d.get("fabric", str)
        if fabric not in ("nvswitch", "bridge"):
            d.fail(f"{fabric!r} is not one of nvswitch, bridge", "fabric")
        domains[did] = {
            "id": did, "fabric": fabric, "generation": d.get("generation", int, nonneg=True),
            "nvswitches": d.get("nvswitches", int, 0, nonneg=True),
            "linksPerGpu": d.get("linksPerGpu", int, nonneg=True),
            "bandwidthGBps": d.get("bandwidthGBps", int, nonneg=True),
        }

    bus_ids: set[str] = set()

    def place(e: _Ctx) -> tuple[str, str, str | None, int]:
        bus = e.get("pciBusID", str)
        if not _PCI_BUS_ID.match(bus):
            e.fail(f"{bus!r} must look like 0000:4a:00.0 (lower-case hex BDF)", "pciBusID")
        if bus in bus_ids:
            e.fail(f"PCI bus id {bus} is used twice", "pciBusID")
        bus_ids.add(bus)
        sw = e.get("pcieSwitch", str, None)
        root = e.get("pcieRoot", str, None)
        if (sw is None) == (root is None):
            e.fail("exactly one of pcieSwitch or pcieRoot is required")
        if sw is not None:
            if sw not in switches:
                e.fail(f"PCIe switch {sw!r} is not declared in pcieSwitches", "pcieSwitch")
            root = switches[sw]
        elif root not in roots:
            e.fail(f"PCIe root {root!r} is not declared in pcieRoots", "pcieRoot")
        assert root is not None
        if bus[:4] != root[3:7] or int(bus[5:7], 16) < int(root[8:10], 16):
            e.fail(f"bus {bus} cannot sit below root {root} (domain must match, bus >= root bus)", "pciBusID")
        return bus, root, sw, roots[root]

    gpus: list[GpuSlot] = []
    for g in c.items("gpus", required=True):
        g.only({"minor", "model", "pciBusID", "pcieSwitch", "pcieRoot", "nvlinkDomain", "migLayout", "passthrough",
                "gpuModuleID"})
        minor = g.get("minor", int, nonneg=True)
        if any(x.minor == minor for x in gpus):
            g.fail(f"duplicate GPU minor {minor}", "minor")
        model_name = g.get("model", str)
        try:
            model = gpu_model(model_name)
        except CatalogError as e:
            g.fail(str(e), "model")
        bus, root, sw, sock = place(g)
        dom = g.get("nvlinkDomain", str, None)
        if dom is not None and dom not in domains:
            g.fail(f"NVLink domain {dom!r} is not declared in nvlinkDomains", "nvlinkDomain")
        layout = _mig_layout(g, model)
        passthrough = g.get("passthrough", bool, False)
        if passthrough and layout:
            g.fail("a GPU bound to vfio-pci has no MIG devices; remove migLayout or passthrough", "passthrough")
        if passthrough and not (model.pci_device_id and model.addressable_memory_mib):
            g.fail(f"GPU model {model.name} has no pci.deviceID / pci.addressableMemoryMiB in gpus.yaml, which "
                   "a VFIO device publishes; add them or remove passthrough", "passthrough")
        module_id = g.get("gpuModuleID", int, 0, nonneg=True)
        if module_id and any(x.module_id == module_id for x in gpus):
            g.fail(f"gpuModuleID {module_id} is used twice", "gpuModuleID")
        gpus.append(GpuSlot(minor, model, bus, root, sw, sock, sockets[sock], dom, layout, passthrough, module_id))

    nics: list[NicSlot] = []
    for n in c.items("nics"):
        n.only({"index", "model", "pciBusID", "pcieSwitch", "pcieRoot"})
        idx = n.get("index", int, nonneg=True)
        if any(x.index == idx for x in nics):
            n.fail(f"duplicate NIC index {idx}", "index")
        try:
            nmodel = nic_model(n.get("model", str))
        except CatalogError as e:
            n.fail(str(e), "model")
        bus, root, sw, sock = place(n)
        nics.append(NicSlot(idx, nmodel, bus, root, sw, sock, sockets[sock]))

    return NodeProfile(
        name=name,
        description=c.get("description", str, ""),
        mig_mode=mig_mode,
        driver_version=str(c.get("driverVersion", str, defaults["driverVersion"])),
        cuda_driver_version=str(c.get("cudaDriverVersion", str, defaults["cudaDriverVersion"])),
        sockets=tuple({"id": k, "numaNode": v} for k, v in sockets.items()),
        pcie_roots=tuple({"id": k, "socket": v} for k, v in roots.items()),
        pcie_switches=tuple({"id": k, "root": v, "parent": parents[k]} for k, v in switches.items()),
        nvlink_domains=tuple(domains.values()),
        gpus=tuple(gpus),
        nics=tuple(nics),
        source=source,
        addressing_mode=_addressing_mode(c, defaults),
        consumable_shares=_consumable_shares(c),
        iommufd=c.get("iommuFD", bool, False),
        compute_domains=c.get("computeDomains", bool, False),
        fm_partitions=_fm_partitions(c, {g.module_id for g in gpus if g.module_id}),
    )


def _fm_partitions(c: _Ctx, modules: set[int]) -> tuple[tuple[int, tuple[int, ...]], ...]:
    """Fabric Manager's partitions (NVIDIA's FabricManagerPartitioning gate): each an id and the
    gpuModuleIDs of its GPUs; a GPU is in at most one partition of each size, as FM reports them."""
    out: list[tuple[int, tuple[int, ...]]] = []
    seen: dict[tuple[int, int], int] = {}  # (size, module) -> partition id
    for p in c.items("fabricManagerPartitions"):
        p.only({"id", "gpuModuleIDs"})
        pid = p.get("id", int, nonneg=True)
        if any(pid == x for x, _ in out):
            p.fail(f"duplicate partition id {pid}", "id")
        mods = p.get("gpuModuleIDs", list)
        if not mods or not all(isinstance(m, int) and not isinstance(m, bool) for m in mods):
            p.fail("must be a non-empty list of integers (the GPUs' gpuModuleID)", "gpuModuleIDs")
        for m in mods:
            if m not in modules:
                p.fail(f"no GPU has gpuModuleID {m}; set gpuModuleID on the profile's gpus", "gpuModuleIDs")
            if (len(mods), m) in seen:
                p.fail(f"gpuModuleID {m} is already in partition {seen[(len(mods), m)]} of size {len(mods)}",
                       "gpuModuleIDs")
            seen[(len(mods), m)] = pid
        out.append((pid, tuple(mods)))
    return tuple(out)


def _consumable_shares(c: _Ctx) -> str:
    """NVIDIA's --consumable-shares (needs its ConsumableShares feature gate): disabled, memory,
    unlimited, or a positive integer (the number of shares per device)."""
    v = c.get("consumableShares", (str, int), "disabled")
    s = str(v).strip()
    if s in ("disabled", "memory", "unlimited") or (s.isdigit() and int(s) > 0 and not isinstance(v, bool)):
        return s
    c.fail(f"invalid value {v!r} (must be 'disabled', 'memory', 'unlimited', or a positive integer)",
           "consumableShares")
    raise AssertionError  # c.fail raises


def _addressing_mode(c: _Ctx, defaults: dict[str, str]) -> str:
    mode = str(c.get("addressingMode", str, defaults.get("addressingMode", "")))
    if mode not in ("", "HMM", "ATS", "None"):
        c.fail(f"{mode!r} is not one of HMM, ATS, None (or \"\" when the platform has none)", "addressingMode")
    return mode


def _mig_layout(g: _Ctx, model: GpuModel) -> tuple[MigPlacement, ...]:
    entries = g.items("migLayout")
    if not entries:
        return ()
    if not model.mig_capable:
        g.fail(f"GPU model {model.name} does not support MIG; remove migLayout", "migLayout")
    used: dict[int, str] = {}
    counts: dict[str, int] = {}
    compute = 0
    out: list[MigPlacement] = []
    for e in entries:
        e.only({"profile", "placement"})
        pname = e.get("profile", str)
        try:
            prof = model.mig_profile(pname)
        except KeyError as err:
            e.fail(str(err.args[0]), "profile")
        start = e.get("placement", int, nonneg=True)
        if start not in prof.placements:
            e.fail(f"{pname} cannot start at memory slice {start} (valid: {list(prof.placements)})", "placement")
        for s in prof.slices_at(start):
            if s in used:
                e.fail(f"{pname}@{start} overlaps memory slice {s} already used by {used[s]}", "placement")
            used[s] = f"{pname}@{start}"
        counts[pname] = counts.get(pname, 0) + 1
        if counts[pname] > prof.max_instances:
            e.fail(f"more than {prof.max_instances} instance(s) of {pname} on one GPU", "profile")
        compute += prof.compute_slices
        if compute > model.mig_compute_slices:
            e.fail(f"layout needs {compute} compute slices, the GPU has {model.mig_compute_slices}", "profile")
        out.append(MigPlacement(pname, start))
    return tuple(out)
