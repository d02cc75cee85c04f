"""The real Alibaba cluster-trace-gpu-v2023 ("openb") shipped with the kit, loaded as the paper's
simulator reads it (see data/openb/NOTICE.md for the source and the terms of use).

- `openb_nodes()`: the 1,213 GPU nodes of `openb_node_list_gpu_node.csv`; `openb_fleet()` turns
  them into a sim cluster profile: one node each, its CPU and memory as allocatable, its GPUs a
  fake_gpus node profile `openb-<model>-x<count>` (catalog models in fake_gpus/catalog/gpus.yaml:
  V100M16 -> V100-SXM2-16GB, V100M32 -> V100-SXM2-32GB, P100 -> P100-PCIE-16GB, T4, A10, and the
  undisclosed G2/G3 -> OPENB-G2/OPENB-G3). The node profiles publish every GPU with
  --consumable-shares=1000 (DRA consumable capacity: a `shares` capacity of 1000 per GPU).
- `openb_pods(variant)`: every pod list (`default`, `cpu050`, `gpushare40`, `multigpu20`,
  `gpuspec33`, ...; `VARIANTS`) or a path, as `OpenbPod`s: cpu_milli, memory_mib, num_gpu,
  gpu_milli (per GPU) and gpu_spec (the allowed models, "" = any).

Every shipped file is checked against data/openb/SHA256SUMS when read.
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import io
import random
from dataclasses import dataclass, replace
from functools import cache, lru_cache
from pathlib import Path
from typing import Any, Protocol

from fake_gpus.kubeyaml import MAX_INPUT_BYTES, InputRefused, read_file, too_large
from labkit.errors import InputError

DATA = Path(__file__).parent / "data" / "openb"
#: trace model -> fake_gpus catalog model
MODELS = {"V100M16": "V100-SXM2-16GB", "V100M32": "V100-SXM2-32GB", "P100": "P100-PCIE-16GB", "T4": "T4",
          "A10": "A10", "G2": "OPENB-G2", "G3": "OPENB-G3"}
#: the pod lists of cluster-trace-gpu-v2023 (openb_pod_list_<variant>.csv)
VARIANTS = ("default", "cpu0", "cpu037", "cpu050", "cpu072", "cpu100", "cpu200", "cpu235", "cpu250", "cpu300",
            "gpushare20", "gpushare40", "gpushare60", "gpushare80", "gpushare100",
            "multigpu20", "multigpu30", "multigpu40", "multigpu50",
            "gpuspec05", "gpuspec10", "gpuspec20", "gpuspec25", "gpuspec33")
NODE_HEADER = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
#: the columns read (gpu_spec is optional: the multigpu* lists have only these five)
POD_COLUMNS = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli")


class OpenbError(InputError, ValueError):
    """A missing or damaged trace file, or a bad trace/fleet name; one line with the fix."""


@dataclass(frozen=True)
class OpenbNode:
    name: str
    cpu_milli: int
    memory_mib: int
    gpus: int
    model: str  # the trace's code: V100M16, G2, ...


@dataclass(frozen=True)
class OpenbPod:
    name: str
    cpu_milli: int
    memory_mib: int
    num_gpu: int
    gpu_milli: int  # per GPU: < 1000 only for a one-GPU share; 0 for CPU-only tasks
    gpu_spec: tuple[str, ...] = ()  # allowed trace models; () = any
    #: the gpu_spec cell as the simulator keeps it (its parts joined by "|", repeats kept, e.g.
    #: V100M16|V100M32|V100M32); "" = any. Only `--rng go` uses it: the key of a typical pod's GPU type
    gpu_spec_text: str = ""

    @property
    def milli_total(self) -> int:
        return self.num_gpu * self.gpu_milli


@cache
def _checksums() -> dict[str, str]:
    out = {}
    for line in (DATA / "SHA256SUMS").read_text().splitlines():
        digest, name = line.split()
        out[name.lstrip("*")] = digest
    return out


def _text(path: str | Path) -> tuple[str, str]:
    """(file name for messages, its text); a shipped file's checksum is verified."""
    p = Path(path)
    try:
        raw = read_file(p)  # at most MAX_INPUT_BYTES (the shipped files are under 1 MiB); no device, no idle FIFO
    except InputRefused as exc:
        raise OpenbError(f"{p}: {exc}") from None
    except OSError as exc:
        raise OpenbError(f"{p}: cannot read ({exc.strerror}); give a cluster-trace-gpu-v2023 csv file") from None
    want = _checksums().get(p.name) if p.parent.resolve() == DATA.resolve() else None
    if want is not None and hashlib.sha256(raw).hexdigest() != want:
        raise OpenbError(f"{p}: sha256 does not match data/openb/SHA256SUMS; reinstall dra-labkit")
    if p.suffix == ".gz":
        try:
            with gzip.GzipFile(fileobj=io.BytesIO(raw)) as fh:
                raw = fh.read(MAX_INPUT_BYTES + 1)  # a gzip bomb stops here
        except (OSError, EOFError) as exc:
            raise OpenbError(f"{p}: not a gzip file ({exc}); give the .csv or a .csv.gz") from None
        if len(raw) > MAX_INPUT_BYTES:
            raise OpenbError(f"{p}: unpacked, {too_large()}")
    try:
        return str(p), raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise OpenbError(f"{p}: not UTF-8 text ({exc.reason} at byte {exc.start}); a trace is a CSV file") from None


def _rows(name: str, text: str, header: tuple[str, ...],
          optional: tuple[str, ...] = ()) -> list[tuple[int, dict[str, str]]]:
    """(line number, {column: stripped value}) of each row of the CSV `text`, for the columns `header` (all
    required) and `optional` (those the file has); a short row reads "" for a missing cell, blank lines are
    skipped."""
    reader = csv.reader(io.StringIO(text))
    have = {h.strip(): i for i, h in enumerate(next(reader, []))}  # a repeated column: its last one
    missing = [h for h in header if h not in have]
    if missing:
        raise OpenbError(f"{name}:1: header: missing {', '.join(missing)}; expected columns {','.join(header)}")
    cols = [(h, have[h]) for h in (*header, *optional) if h in have]
    width = max(i for _, i in cols) + 1
    out = []
    for row in reader:
        if not row:
            continue
        if len(row) < width:
            row = row + [""] * (width - len(row))
        out.append((reader.line_num, {h: row[i].strip() for h, i in cols}))
    return out


def _int(name: str, line: int, col: str, value: str, lo: int = 0, hi: int | None = None) -> int:
    try:
        x = int(value)
    except ValueError:
        raise OpenbError(f"{name}:{line}: column {col}: {value!r} is not a whole number") from None
    if x < lo or (hi is not None and x > hi):
        raise OpenbError(f"{name}:{line}: column {col}: {x} is out of range [{lo}, {hi if hi is not None else 'inf'}]")
    return x


def trace_path(variant: str) -> Path:
    """The shipped file of a pod-list variant (`default`, `gpuspec33`, ...)."""
    v = variant.strip()
    if v.startswith("openb_pod_list_"):
        v = v[len("openb_pod_list_"):].removesuffix(".csv").removesuffix(".gz").removesuffix(".csv")
    if v not in VARIANTS:
        raise OpenbError(f"openb trace {variant!r}: unknown; use one of {', '.join(VARIANTS)} or a csv path")
    return DATA / f"openb_pod_list_{v}.csv.gz"


NODES_PATH = DATA / "openb_node_list_gpu_node.csv.gz"


def openb_nodes(path: str | Path = NODES_PATH) -> list[OpenbNode]:
    """The GPU nodes of a cluster-trace-gpu-v2023 node list (rows with 0 GPUs are skipped)."""
    return list(_parse_nodes(*_text(path)))


# Parsed files are kept by their text (a file read again is parsed once: a notebook's cells and the policies of
# one experiment read the same lists many times); an edited file has another text, so it is parsed again.
@lru_cache(maxsize=4)
def _parse_nodes(name: str, text: str) -> tuple[OpenbNode, ...]:
    out = []
    for line, r in _rows(name, text, NODE_HEADER):
        gpus = _int(name, line, "gpu", r["gpu"], 0, 8)
        if gpus == 0:
            continue
        if r["model"] not in MODELS:
            raise OpenbError(f"{name}:{line}: column model: {r['model']!r}; use one of {', '.join(MODELS)}")
        out.append(OpenbNode(r["sn"], _int(name, line, "cpu_milli", r["cpu_milli"], 1),
                             _int(name, line, "memory_mib", r["memory_mib"], 1), gpus, r["model"]))
    if not out:
        raise OpenbError(f"{name}: no GPU nodes; give openb_node_list_gpu_node.csv")
    return tuple(out)


def node_profile_name(model: str, gpus: int) -> str:
    return f"openb-{model.lower()}-x{gpus}"


def sample_nodes(nodes: list[OpenbNode], every: int) -> list[OpenbNode]:
    """Every `every`-th node of each (model, GPU count) group, at least one per group: a smaller
    cluster with the same mix (`every=1`: all of them)."""
    if every < 1:
        raise OpenbError(f"fleet sample 1/{every}: give a whole number >= 1")
    groups: dict[tuple[str, int], list[OpenbNode]] = {}
    for n in nodes:
        groups.setdefault((n.model, n.gpus), []).append(n)
    keep = {n.name for g in groups.values() for n in g[::every]}
    return [n for n in nodes if n.name in keep]


def openb_fleet(path: str | Path = NODES_PATH, every: int = 1) -> dict:
    """A sim cluster profile (dict) of the node list: one node per row, allocatable CPU and memory
    from the row, the GPUs from the fake_gpus profile `openb-<model>-x<count>`."""
    nodes = sample_nodes(openb_nodes(path), every)
    label = "openb" if every == 1 else f"openb-1in{every}"
    return {"name": label, "kubernetesVersion": "1.37",
            "description": f"cluster-trace-gpu-v2023 GPU nodes{'' if every == 1 else f' (1 in {every})'}: "
                           f"{len(nodes)} nodes, {sum(n.gpus for n in nodes)} GPUs",
            "nodes": [{"name": n.name, "nodeProfile": node_profile_name(n.model, n.gpus),
                       "labels": {"labkit.dev/openb-model": n.model},
                       "allocatable": {"cpu": f"{n.cpu_milli}m", "memory": f"{n.memory_mib}Mi", "pods": "1001"}}
                      for n in nodes]}


def openb_pods(trace: str | Path = "default") -> list[OpenbPod]:
    """The pods of a pod list: a variant name (`VARIANTS`) or a path to a v2023 pod-list csv(.gz)."""
    path = Path(trace) if (isinstance(trace, Path) or "/" in str(trace) or str(trace).endswith((".csv", ".gz"))) \
        else trace_path(str(trace))
    return list(_parse_pods(*_text(path)))


@lru_cache(maxsize=8)
def _parse_pods(name: str, text: str) -> tuple[OpenbPod, ...]:
    out = []
    for line, r in _rows(name, text, POD_COLUMNS, ("gpu_spec",)):
        num = _int(name, line, "num_gpu", r["num_gpu"], 0, 8)
        milli = _int(name, line, "gpu_milli", r["gpu_milli"], 0, 1000)
        if num == 0 and milli:
            raise OpenbError(f"{name}:{line}: column gpu_milli: {milli} with num_gpu 0; a CPU-only task has gpu_milli 0")
        if num and not milli:
            raise OpenbError(f"{name}:{line}: column gpu_milli: 0 with num_gpu {num}; use 1-1000")
        if num > 1 and milli != 1000:
            raise OpenbError(f"{name}:{line}: column gpu_milli: {milli} with num_gpu {num}; multi-GPU tasks take whole GPUs")
        parts = [s for s in r.get("gpu_spec", "").split("|") if s and s != "nan"]
        spec = tuple(dict.fromkeys(parts))
        bad = [s for s in spec if s not in MODELS]
        if bad:
            raise OpenbError(f"{name}:{line}: column gpu_spec: {bad[0]!r}; use models from {', '.join(MODELS)}")
        out.append(OpenbPod(r["name"], _int(name, line, "cpu_milli", r["cpu_milli"]),
                            _int(name, line, "memory_mib", r["memory_mib"]), num, milli, spec,
                            "|".join(parts) if num else ""))
    if not out:
        raise OpenbError(f"{name}: no pods; give a pod list with rows after the header")
    return tuple(out)


class Draws(Protocol):
    """What `inflate` draws with: a random.Random, or gorand.GoRand (Go's Shuffle and Intn)."""

    def shuffle(self, x: list[Any], /) -> None: ...

    def randrange(self, n: int, /) -> int: ...


def inflate(pods: list[OpenbPod], capacity_milli: int, ratio: float = 1.3, seed: int = 42,
            rng: Draws | None = None) -> list[OpenbPod]:
    """The paper's arrival list: its simulator's shuffle, then its workload tuning (inflation).

    As the simulator's core.go runs them, in this order: the pod list is sorted by name and
    shuffled (SortClusterPods with shufflePod); then pods are drawn with replacement from the
    name-sorted list (a copy named `<name>-tuned-<i>`) and appended, in the order drawn, while
    the total GPU request stays within `ratio` x the cluster's GPU capacity (checked, as the
    simulator does, with the drawn pod's per-GPU milli); a list already above the target loses
    random pods instead. So the original tasks arrive first, each once, and the inflation's
    draws after them. Same method as the simulator, with Python's random.Random(seed) (or `rng`,
    to go on drawing from it) instead of Go's math/rand: the draws differ, not their law. With
    `rng=gorand.GoRand(seed)` (already past the draws before SortClusterPods), the simulator's own."""
    if ratio <= 0:
        raise OpenbError(f"inflation ratio {ratio}: give a number > 0, e.g. 1.3")
    rng = rng or random.Random(seed)
    by_name = sorted(pods, key=lambda p: p.name)
    out = list(by_name)
    rng.shuffle(out)
    total = sum(p.milli_total for p in out)
    target = ratio * capacity_milli
    if total < target:
        i = 0
        while True:
            p = by_name[rng.randrange(len(by_name))]
            if total + p.gpu_milli > target:
                break
            out.append(replace(p, name=f"{p.name}-tuned-{i}"))
            total += p.milli_total
            i += 1
    else:
        while total > target and out:
            total -= out.pop(rng.randrange(len(out))).milli_total
    return out
