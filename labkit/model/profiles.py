"""Cluster profiles: which nodes a cluster has and what hardware each one carries.

A cluster profile (not a node profile, which is one machine's hardware in fake_gpus, nor a MIG
profile) is YAML, `<name>.yaml` in a profile directory::

    name: workshop
    description: one DGX A100 and two T4 inference nodes
    kubernetesVersion: "1.37"
    featureGates: {DRAPartitionableDevices: true}
    gpuPlugin: dra                # or device-plugin: who serves NVIDIA GPUs (see GPU_PLUGINS)
    nodes:
      - name: dgx-a100-0          # one node ...
        nodeProfile: dgx-a100     # a fake_gpus catalog node profile
        migMode: static           # optional, handed to fake_gpus build_slices(mig_mode=...)
        labels: {pool: training}
        taints: [{key: nvidia.com/gpu, value: present, effect: NoSchedule}]
        allocatable: {cpu: "128", memory: 1Ti, nvidia.com/gpu: "8"}   # optional overrides
      - namePrefix: t4-           # ... or `count` nodes t4-0, t4-1 (zero-padded for sorting)
        count: 2
        nodeProfile: t4-inference

`load_profile` accepts a profile name, a path, a dict, or a ClusterProfile. Names are looked up
in the directories of $LABKIT_CLUSTERS_PATH (a list like PATH, first wins), then `./clusters`,
then the shipped profiles (`PACKAGE_CLUSTERS`): put your own profiles in one of the first two to add
to or override the shipped ones. The shipped profiles live in the repository's top-level
`clusters/` folder (clusters/README.md); the wheel's build copies them into the package as
labkit/model/clusters/ (setup.py), so an installed kit reads them there and a source checkout or an
editable install reads the top-level folder.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict

from fake_gpus.catalog import node_profiles
from labkit.api import names as k8s_names
from labkit.api.features import SUPPORTED_VERSIONS, FeatureGateError, resolve_gates
from labkit.api.load import LoadError, path_problem, read_documents
from labkit.api.problem import Sink, printable_name
from labkit.api.rules_core import TAINT_EFFECTS, check_labels, check_resource_list, check_taints
from labkit.errors import InputError, NotFoundError


def _shipped_clusters() -> Path:
    """The shipped profiles' folder: the installed package's copy (the wheel; setup.py puts it there), else
    the repository's top-level clusters/ (a source checkout or an editable install)."""
    here = Path(__file__).resolve().parent
    packaged = here / "clusters"
    return packaged if packaged.is_dir() else here.parents[1] / "clusters"


#: the profiles shipped with labkit: clusters/ of the repository, labkit/model/clusters/ in the wheel
PACKAGE_CLUSTERS = _shipped_clusters()
#: environment variable: more profile directories, separated like PATH (os.pathsep)
PATH_ENV = "LABKIT_CLUSTERS_PATH"
#: a profile entry's `count` above this is refused (the sim builds every node in memory)
MAX_NODES = 20_000
DEFAULT_ALLOCATABLE = {"cpu": "64", "memory": "512Gi", "pods": "110"}
#: `gpuPlugin`: who serves the NVIDIA GPUs of the profile's nodes. `dra` (the default): NVIDIA's DRA
#: driver with its GPU part on; its DeviceClass gpu.nvidia.com also serves `nvidia.com/gpu` requests
#: (extendedResourceName). `device-plugin`: NVIDIA's supported GB200 set-up: NVIDIA's device plugin
#: advertises `nvidia.com/gpu` in each GPU node's allocatable and the DRA driver runs with its GPU
#: part off (chart value resources.gpus.enabled=false: no GPU slices, no gpu/mig/vfio DeviceClasses);
#: ComputeDomains still come through DRA.
GPU_PLUGINS = ("dra", "device-plugin")
#: the extended resource NVIDIA's device plugin registers (one unit per whole GPU, migStrategy none)
DEVICE_PLUGIN_RESOURCE = "nvidia.com/gpu"


class ProfileError(InputError, ValueError):
    """A cluster profile that cannot be used; the message names file, field path and fix."""


class ProfileNotFound(NotFoundError, ProfileError):
    """No cluster profile of that name in the search path (exit 3)."""


@dataclass(frozen=True)
class NodeSpec:
    name: str
    node_profile: str
    mig_mode: str | None = None
    labels: dict[str, str] = field(default_factory=dict)
    taints: list[dict[str, str]] = field(default_factory=list)
    allocatable: dict[str, str] = field(default_factory=dict)


class _NodeFields(TypedDict):
    """NodeSpec's fields but the name: what one `nodes:` entry gives each node it makes."""

    node_profile: str
    mig_mode: str | None
    labels: dict[str, str]
    taints: list[dict[str, str]]
    allocatable: dict[str, str]


@dataclass(frozen=True)
class ClusterProfile:
    name: str
    nodes: list[NodeSpec]
    kubernetes_version: str = "1.37"
    feature_gates: dict[str, bool] = field(default_factory=dict)
    description: str = ""
    source: str = ""
    topology_attributes: bool = False  # publish LabKit's own topology.fake-gpus.dev/* attributes too
    gpu_plugin: str = "dra"  # one of GPU_PLUGINS

    @property
    def device_plugin(self) -> bool:
        """NVIDIA's device plugin serves the GPUs (`gpuPlugin: device-plugin`), not the DRA driver."""
        return self.gpu_plugin == "device-plugin"

    def summary(self) -> str:
        """Multi-line inventory: one line per node profile with counts."""
        groups: dict[tuple[str, str | None], list[str]] = {}
        for n in self.nodes:
            groups.setdefault((n.node_profile, n.mig_mode), []).append(n.name)
        lines = [f"profile {self.name}: {len(self.nodes)} node(s), Kubernetes {self.kubernetes_version}"]
        if self.description:
            lines.append(f"  {self.description}")
        for (prof, mig), names in groups.items():
            shown = ", ".join(names[:3]) + (f", ... ({len(names)} total)" if len(names) > 3 else "")
            lines.append(f"  {len(names):>5} x {prof}{f' (MIG {mig})' if mig else ''}: {shown}")
        if self.device_plugin:
            lines.append(f"  GPUs: NVIDIA device plugin ({DEVICE_PLUGIN_RESOURCE} in node allocatable); "
                         "DRA: ComputeDomains only (GPU part of the DRA driver off)")
        if self.feature_gates:
            gates = ", ".join(f"{k}={str(v).lower()}" for k, v in sorted(self.feature_gates.items()))
            lines.append(f"  feature gates: {gates}")
        return "\n".join(lines)


def search_dirs() -> list[Path]:
    """Where profile names are looked up, first wins: $LABKIT_CLUSTERS_PATH, ./clusters, the shipped ones.
    A folder named twice is kept once, where it comes first (in the repository, ./clusters is the shipped
    folder itself)."""
    dirs = [Path(d) for d in os.environ.get(PATH_ENV, "").split(os.pathsep) if d]
    seen: set[str] = set()
    out: list[Path] = []
    for d in [*dirs, Path.cwd() / "clusters", PACKAGE_CLUSTERS]:
        key = os.path.realpath(d)
        if key not in seen:
            seen.add(key)
            out.append(d)
    return out


def profile_names() -> list[str]:
    """Profiles findable by name."""
    found: set[str] = set()
    for d in search_dirs():
        if d.is_dir():
            found.update(p.stem for p in d.glob("*.yaml"))
    return sorted(found)


def find_profile(name: str) -> Path:
    p = Path(name)
    if p.suffix in (".yaml", ".yml") or os.sep in name:
        problem = path_problem(p, "a cluster profile YAML file")
        if problem is None:
            return p
        raise ProfileError(f"cluster profile {name}: {problem}")
    for d in search_dirs():
        cand = d / f"{name}.yaml"
        if cand.is_file():
            return cand
    known = ", ".join(profile_names()) or "(none found)"
    raise ProfileNotFound(f"cluster profile {name!r} not found; known profiles: {known} (or pass a path to a YAML file, "
                       f"or put {name}.yaml in ./clusters or a directory listed in ${PATH_ENV})")


def load_profile(source: str | Path | dict[str, Any] | ClusterProfile) -> ClusterProfile:
    if isinstance(source, ClusterProfile):
        return source
    if isinstance(source, dict):
        return parse_profile(source, origin="<dict>")
    path = find_profile(str(source))
    try:  # read as Kubernetes reads YAML: duplicate keys, tabs, binary, alias bombs are errors
        docs = [d for d in read_documents(path) if d is not None]
    except LoadError as exc:
        raise ProfileError(exc.problems[0]) from None
    if len(docs) != 1:
        raise ProfileError(f"{path}: a profile is one YAML document, this file has {len(docs)}",
                           fix="keep exactly one document (name, nodes, ...)")
    return parse_profile(docs[0], origin=str(path), default_name=path.stem)


def _err(origin: str, path: str, msg: str) -> ProfileError:
    return ProfileError(f"{origin}: {path}: {msg}")


def _str_map(origin: str, path: str, v: Any) -> dict[str, str]:
    if v is None:
        return {}
    if not isinstance(v, dict):
        raise _err(origin, path, "must be a mapping of strings, e.g. {key: value}")
    return {str(k): "" if x is None else str(x) for k, x in v.items()}


def _taints(origin: str, path: str, v: Any) -> list[dict[str, str]]:
    if v is None:
        return []
    if not isinstance(v, list):
        raise _err(origin, path, "must be a list of {key, value, effect}")
    out = []
    for i, t in enumerate(v):
        p = f"{path}[{i}]"
        if not isinstance(t, dict) or not t.get("key"):
            raise _err(origin, f"{p}.key", "required: each taint needs a key")
        if t.get("effect") not in TAINT_EFFECTS:
            raise _err(origin, f"{p}.effect", f"must be one of {', '.join(TAINT_EFFECTS)} (got {t.get('effect')!r})")
        taint = {"key": str(t["key"]), "effect": t["effect"]}
        if t.get("value") not in (None, ""):
            taint["value"] = str(t["value"])
        out.append(taint)
    return out


def _node_rules(origin: str, path: str, node_name: str, n: dict[str, Any]) -> None:
    """The rules kube-apiserver applies to the Node this entry becomes: its name, labels, taints
    and allocatable (labkit.api.rules_core), refused with file, node, field path and fix."""
    sink = Sink("Node", node_name)
    sink.names(f"{path}.name", node_name, k8s_names.dns_subdomain(node_name))
    check_labels(sink, f"{path}.labels", n.get("labels"))
    check_taints(sink, f"{path}.taints", n.get("taints"))
    check_resource_list(sink, f"{path}.allocatable", n.get("allocatable"), container=False)
    if sink.problems:
        first = sink.problems[0]
        more = f" (and {len(sink.problems) - 1} more)" if len(sink.problems) > 1 else ""
        raise ProfileError(f"{origin}: {first.path}: node {printable_name(node_name)}: {first.message}{more}",
                           fix="write it as a Node's field would be (the API server refuses it there too)")


def _device_plugin_rules(origin: str, path: str, n: dict[str, Any]) -> None:
    """Under gpuPlugin: device-plugin the plugin serves whole GPUs (migStrategy none) and itself
    registers how many (one per GPU of the node profile): no migMode, no nvidia.com/gpu override."""
    if n.get("migMode") not in (None, "", "none"):
        raise _err(origin, f"{path}.migMode", "gpuPlugin: device-plugin serves whole GPUs (nvidia.com/gpu); "
                   "MIG devices need gpuPlugin: dra (remove migMode or the gpuPlugin line)")
    if isinstance(n.get("allocatable"), dict) and DEVICE_PLUGIN_RESOURCE in n["allocatable"]:
        raise _err(origin, f"{path}.allocatable.{DEVICE_PLUGIN_RESOURCE}",
                   "under gpuPlugin: device-plugin the device plugin registers it (one per GPU of the node "
                   "profile); remove it")


def _known_node_profiles() -> list[str] | None:
    try:
        return list(node_profiles())
    except Exception:  # a catalog problem is reported when slices are built
        return None


def parse_profile(doc: Any, origin: str = "<profile>", default_name: str = "") -> ClusterProfile:
    try:
        return _parse_profile(doc, origin, default_name)
    except RecursionError:  # a value nested hundreds of levels deep (a dict handed in, not a file)
        raise ProfileError(f"{origin}: nested too deeply to read", fix="flatten the profile") from None


def _parse_profile(doc: Any, origin: str, default_name: str) -> ClusterProfile:
    if not isinstance(doc, dict):
        raise ProfileError(f"{origin}: must be a YAML mapping with `nodes:` (got {type(doc).__name__})")
    allowed = {"apiVersion", "kind", "name", "description", "kubernetesVersion", "featureGates", "nodes",
               "topologyAttributes", "gpuPlugin"}
    for k in doc:
        if k not in allowed:
            raise _err(origin, str(k), f"unknown field; allowed: {', '.join(sorted(allowed))}")
    version = str(doc.get("kubernetesVersion", "1.37"))
    parts = version.split(".")
    if len(parts) != 2 or not all(p.isdigit() for p in parts):
        raise _err(origin, "kubernetesVersion", f'must look like "1.37" (got {version!r}); quote it in YAML')
    if version not in SUPPORTED_VERSIONS:
        quote = (f'; YAML read the number {doc["kubernetesVersion"]!r}: quote it, e.g. "1.30"'
                 if isinstance(doc.get("kubernetesVersion"), float) else "")
        raise _err(origin, "kubernetesVersion",
                   f"{version} is not supported; use one of {', '.join(SUPPORTED_VERSIONS)}{quote}")
    gates = doc.get("featureGates") or {}
    if not isinstance(gates, dict) or not all(isinstance(v, bool) for v in gates.values()):
        raise _err(origin, "featureGates", "must map gate names to true/false, e.g. {DRAPrioritizedList: true}")
    try:
        resolve_gates(version, gates, strict=True)  # a cluster's kube-scheduler refuses a locked gate set otherwise
    except FeatureGateError as exc:
        raise _err(origin, "featureGates", str(exc)) from None
    topo = doc.get("topologyAttributes", False)
    if not isinstance(topo, bool):
        raise _err(origin, "topologyAttributes", f"must be true or false (got {topo!r})")
    gpu_plugin = doc.get("gpuPlugin", "dra")
    if gpu_plugin not in GPU_PLUGINS:
        raise _err(origin, "gpuPlugin", "must be dra (NVIDIA's DRA driver serves the GPUs, the default) or "
                   f"device-plugin (NVIDIA's device plugin serves {DEVICE_PLUGIN_RESOURCE}, DRA only ComputeDomains) "
                   f"(got {gpu_plugin!r})")
    raw_nodes = doc.get("nodes")
    if not isinstance(raw_nodes, list) or not raw_nodes:
        raise _err(origin, "nodes", "required: a non-empty list of {name | namePrefix+count, nodeProfile}")
    known = _known_node_profiles()
    node_fields = {"name", "namePrefix", "count", "nodeProfile", "migMode", "labels", "taints", "allocatable"}
    nodes: list[NodeSpec] = []
    seen: set[str] = set()
    for i, n in enumerate(raw_nodes):
        p = f"nodes[{i}]"
        if not isinstance(n, dict):
            raise _err(origin, p, "must be a mapping with name (or namePrefix + count) and nodeProfile")
        for k in n:
            if k not in node_fields:
                raise _err(origin, f"{p}.{k}", f"unknown field; allowed: {', '.join(sorted(node_fields))}")
        prof = n.get("nodeProfile")
        if not isinstance(prof, str) or not prof:
            raise _err(origin, f"{p}.nodeProfile", "required: a fake_gpus node profile name, e.g. dgx-a100")
        if known is not None and prof not in known and not Path(prof).suffix:
            raise _err(origin, f"{p}.nodeProfile", f"unknown node profile {prof!r}; known: {', '.join(known)}")
        count = n.get("count", 1)
        if not isinstance(count, int) or isinstance(count, bool) or count < 1:
            raise _err(origin, f"{p}.count", f"must be a positive integer (got {count!r})")
        if count > MAX_NODES:
            raise _err(origin, f"{p}.count", f"at most {MAX_NODES:,} nodes (got {count:,})")
        if n.get("name") and n.get("namePrefix"):
            raise _err(origin, p, "set either name or namePrefix, not both")
        if n.get("name"):
            if count != 1:
                raise _err(origin, f"{p}.count", "only with namePrefix: use namePrefix to make several nodes")
            node_names = [str(n["name"])]
        elif n.get("namePrefix"):
            width = len(str(count - 1))
            node_names = [f"{n['namePrefix']}{j:0{width}d}" for j in range(count)]
        else:
            raise _err(origin, f"{p}.name", "required: set name (one node) or namePrefix and count")
        for name in node_names[:1] + node_names[-1:]:  # the rest differ only in the counter
            _node_rules(origin, p, name, n)
        mig = n.get("migMode")
        if gpu_plugin == "device-plugin":
            _device_plugin_rules(origin, p, n)
        spec_common: _NodeFields = dict(
            node_profile=prof,
            mig_mode=None if mig in (None, "", "none") else str(mig),
            labels=_str_map(origin, f"{p}.labels", n.get("labels")),
            taints=_taints(origin, f"{p}.taints", n.get("taints")),
            allocatable=_str_map(origin, f"{p}.allocatable", n.get("allocatable")),
        )
        for name in node_names:
            if name in seen:
                raise _err(origin, f"{p}.name", f"node name {name!r} is used twice; node names must be unique")
            seen.add(name)
            nodes.append(NodeSpec(name=name, **spec_common))
    return ClusterProfile(
        name=str(doc.get("name") or default_name or "custom"),
        nodes=nodes,
        kubernetes_version=version,
        feature_gates=dict(gates),
        description=str(doc.get("description", "")),
        source=origin,
        topology_attributes=topo,
        gpu_plugin=gpu_plugin,
    )
