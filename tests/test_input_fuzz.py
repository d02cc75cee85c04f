"""A structure-aware fuzzer over every valid input the kit ships: manifests, cluster profiles, a
state dump, traces. Each is mutated the way hand-edited files go wrong (a field dropped or retyped,
numbers out of range or not finite, wrong encodings, huge and deep values) and handed to the
loader that reads it. The property: the answer is the input accepted, or a refusal that is a
LabkitError (exit 2/3, one line) naming the field; never another exception (exit 70).

`test_mutated_inputs_in_process` runs >= 10,000 mutations per run in-process (a fixed seed, so a
run is reproducible; LABKIT_FUZZ_SEED=N explores other ones) and prints the count.
`test_mutated_inputs_through_the_cli` runs a sample through the CLI as typed (forked from one
process, tests/cliserver.py, plus a few through the real console script). Every input that ever
failed is kept in tests/data/fuzz-regressions/ (written there when it fails; commit it) and
replayed by `test_regressions`.
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
import os
import pickle
import random
import subprocess
import sys
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from fake_gpus.plugin import cdi
from labkit.api import dump, load
from labkit.api.load import LoadError, read_documents
from labkit.cel.validation import validate
from labkit.cluster import connect
from labkit.cluster.local.cdi import load_specs, resolve_env
from labkit.cluster.snapshot import snapshot_yaml
from labkit.errors import LabkitError, exit_code, one_line
from labkit.experiments.alibaba import SAMPLE, load_alibaba
from labkit.model.profiles import PACKAGE_CLUSTERS, parse_profile
from labkit.model.state import load_state
from tests.cliserver import CliServer

ROOT = Path(__file__).resolve().parents[1]
REGRESSIONS = ROOT / "tests" / "data" / "fuzz-regressions"
SEED = int(os.environ.get("LABKIT_FUZZ_SEED", "28"))
IN_PROCESS = int(os.environ.get("LABKIT_FUZZ_N", "10500"))  # the goal is >= 10,000 per run
CLI_SAMPLE = 48
LABKIT = str(Path(sys.executable).parent / "labkit")
ENV = {**os.environ, "LABKIT_DEBUG": "", "PYTHONDONTWRITEBYTECODE": "1"}


# -- the valid inputs the kit ships --------------------------------------------------------------
def _manifest_files() -> list[Path]:
    files = sorted((ROOT / "examples").rglob("*.yaml")) + sorted((ROOT / "tests/data/scenarios").glob("*.yaml")) \
        + sorted((ROOT / "tests/data/api").glob("*.yaml"))
    out = []
    for f in files:
        try:
            objs = load(f)
        except LoadError:
            continue
        if objs and not validate(objs):  # valid ones only: the bad examples are bad on purpose
            out.append(f)
    return out


@cache
def seeds() -> dict[str, list[tuple[str, Any]]]:
    """kind of input -> [(name, parsed document)]: manifests (object lists), profiles (mappings),
    a dump (object list, taken from a sim), traces (CSV text)."""
    manifests = [(str(f.relative_to(ROOT)), load(f)) for f in _manifest_files()]
    profiles = [(str(p.relative_to(ROOT)), _yaml(p)) for p in sorted(PACKAGE_CLUSTERS.glob("*.yaml"))
                if p.stem != "fleet-1000"]  # 1,000 nodes: every mutation would rebuild them
    cluster = connect("sim", "tiny", progress=False)
    cluster.apply(ROOT / "tests/data/scenarios/gpu-40gi.yaml")
    cluster.wait()
    dump_objs = load(snapshot_yaml(cluster), default_namespace=None)
    trace = SAMPLE.read_text().splitlines(keepends=True)[:40]
    # CDI specs as the fake driver writes them when it prepares the allocated claim (NVIDIA's
    # personality), and the example driver's per-node spec
    slices = cluster.list("ResourceSlice")
    specs = [(f"CDI spec of {c['metadata']['name']}", cdi.prepare(c, r["driver"], slices)[0])
             for c in cluster.list("ResourceClaim") if (c.get("status") or {}).get("allocation")
             for r in c["status"]["allocation"]["devices"]["results"][:1]]
    specs.append(("CDI spec of the example driver's common device", cdi.common_spec("gpu.example.com", "node-0")))
    return {"manifest": manifests, "profile": profiles, "dump": [("sim snapshot of gpu-40gi", dump_objs)],
            "trace": [(str(SAMPLE.relative_to(ROOT)), "".join(trace))], "cdi": specs}


def _yaml(path: Path) -> Any:
    return read_documents(path)[0]


# -- mutations -------------------------------------------------------------------------------------
ODD_VALUES: list[Any] = [None, True, 0, -1, 2**63, -(2**63) - 1, 1e308, float("nan"), float("inf"), -float("inf"),
                         "", " ", "-1", "NaN", "1e400", "9Ei9", "\u0007", "a\nb", "\ufeffx", "x" * 300,
                         [], {}, [1, "a"], {"a": {"b": None}}, 3.5]


def _paths(obj: Any) -> Iterator[tuple]:
    """Every path in ``obj``, parents before children, in key and index order (a stack, not nested
    generators: those pass each path up through every level, and mutated documents are deep)."""
    stack: list[tuple[Any, tuple]] = [(obj, ())]
    while stack:
        node, prefix = stack.pop()
        yield prefix
        if isinstance(node, dict):
            stack.extend(((v, (*prefix, k)) for k, v in reversed(node.items())))
        elif isinstance(node, list):
            stack.extend((node[i], (*prefix, i)) for i in range(len(node) - 1, -1, -1))


def _copy(doc: Any) -> Any:
    """A deep copy of a parsed document (shared parts stay shared, as with copy.deepcopy), made by
    pickle's C code: a tenth of deepcopy's CPU."""
    return pickle.loads(pickle.dumps(doc, pickle.HIGHEST_PROTOCOL))


def _deep(depth: int) -> Any:
    value: Any = "leaf"
    for i in range(depth):
        value = [value] if i % 2 else {"k": value}
    return value


def mutate(doc: Any, rng: random.Random) -> tuple[Any, tuple, str]:
    """One structural mutation of a parsed document: (new document, path, what was done)."""
    doc = _copy(doc)
    paths = [p for p in _paths(doc) if p]
    if not paths:
        return ODD_VALUES[rng.randrange(len(ODD_VALUES))], (), "replaced the document"
    path = paths[rng.randrange(len(paths))]
    parent = doc
    for key in path[:-1]:
        parent = parent[key]
    key = path[-1]
    op = rng.choice(["drop", "retype", "retype", "number", "huge", "deep", "dup"])
    if op == "drop":
        del parent[key]
    elif op == "retype":
        parent[key] = copy.deepcopy(ODD_VALUES[rng.randrange(len(ODD_VALUES))])
    elif op == "number":
        parent[key] = rng.choice([-1, 0, 2**31, 2**63, 10**30, -0.5, 1e308, float("nan"), float("inf")])
    elif op == "huge":
        parent[key] = rng.choice(["y" * 100_000, ["z"] * 5_000, {f"k{i}": i for i in range(2_000)}])
    elif op == "deep":
        parent[key] = _deep(rng.choice([50, 400]))
    else:  # the value twice: a list entry repeated, or a mapping's value put in a sibling list
        if isinstance(parent, list):
            parent.insert(key, copy.deepcopy(parent[key]))
        else:
            parent[key] = [copy.deepcopy(parent[key])] * 2
    return doc, path, op


def encode(text: str, rng: random.Random) -> tuple[bytes, str]:
    """The text in an encoding kubectl may or may not read, or with bytes broken."""
    op = rng.choice(["utf-16", "utf-16-nobom", "latin-1", "bom-twice", "truncate", "nul", "crlf"])
    if op == "utf-16":
        return text.encode("utf-16"), op
    if op == "utf-16-nobom":
        return text.encode("utf-16-le"), op
    if op == "latin-1":
        return (text + "# caf\u00e9\n").encode("latin-1", errors="replace"), op
    if op == "bom-twice":
        return b"\xef\xbb\xbf" + "\ufeff".encode() + text.encode(), op
    if op == "truncate":
        data = text.encode()
        return data[: rng.randrange(1, max(2, len(data)))], op
    if op == "nul":
        data = bytearray(text.encode())
        data.insert(rng.randrange(len(data) + 1), 0)
        return bytes(data), op
    return text.replace("\n", "\r\n").encode(), op


# -- the loaders and the property ---------------------------------------------------------------------
def _check_manifest(data: Any) -> None:
    # load() reads a str as a path or YAML text and bytes as a file's content; a document the
    # mutation replaced by a scalar is handed over as what it is: one (bad) object
    objs = load(data if isinstance(data, bytes | list | dict) else [data])
    for p in validate(objs):
        assert "\n" not in str(p), str(p)


def _check_profile(data: Any) -> None:
    parse_profile(data, origin="fuzz.yaml")


def _check_dump(data: Any) -> None:
    load_state(data)


def _check_trace(text: str, tmp: Path) -> None:
    tmp.write_text(text, encoding="utf-8", errors="surrogatepass") if isinstance(text, str) else tmp.write_bytes(text)
    load_alibaba(tmp)


def _check_cdi(data: Any, tmp: Path) -> None:
    """A spec file in a node's CDI dir, as the local backend's runtime reads it."""
    d = tmp.parent / "cdi"
    d.mkdir(exist_ok=True)
    for old in d.iterdir():
        old.unlink()
    f = d / "k8s.gpu.nvidia.com-claim_fuzz.yaml"
    if isinstance(data, bytes):
        f.write_bytes(data)
    else:
        f.write_text(json.dumps(data, allow_nan=True), encoding="utf-8", errors="surrogatepass")
    ids = [f"{spec['kind']}={dev['name']}" for spec in load_specs([d]) for dev in spec["devices"]]
    resolve_env(ids, [d])  # what a container that gets every device sees


LOADERS: dict[str, Callable[[Any], None]] = {"manifest": _check_manifest, "profile": _check_profile,
                                             "dump": _check_dump}


def _field_named(message: str, path: tuple) -> bool:
    """A refusal names the field: a key on the mutated path (or paths, joined by "+"), a list index
    on it, the object it is in (a dump's "object N"), or where in the file it is (line, doc). A
    value nested hundreds of levels deep is refused as a whole ("nested too deeply")."""
    keys = [str(k) for k in path if not isinstance(k, int) and k != "+"]
    idx = [f"[{k}]" for k in path if isinstance(k, int)] + [f"object {k + 1}" for k in path if isinstance(k, int)]
    if "nested too deeply" in message:  # the depth is the problem, wherever it starts
        return True
    return not path or any(k in message for k in keys + idx) or "line " in message or ":doc " in message


class Finding(Exception):
    """An input that broke the property."""


def run_one(kind: str, data: Any, path: tuple, tmp: Path) -> tuple[bool, str]:
    """(refused?, the one line). Raises Finding when the property does not hold."""
    try:
        if kind == "trace":
            _check_trace(data, tmp)
        elif kind == "cdi":
            _check_cdi(data, tmp)
        else:
            LOADERS[kind](data)
        return False, ""
    except LabkitError as exc:
        code, line = exit_code(exc), one_line(exc)
        if code == 70 or not line:
            raise Finding(f"exit {code}: {line!r}") from None
        return True, line
    except RecursionError:
        raise Finding("RecursionError") from None
    except Exception as exc:  # noqa: BLE001 - this is what the fuzzer looks for
        raise Finding(f"internal error: {type(exc).__name__}: {exc}") from None


def _keep(kind: str, data: Any, why: str) -> Path:
    """Store a failing input as a regression case (kind, the input, why it failed)."""
    REGRESSIONS.mkdir(parents=True, exist_ok=True)
    raw = data if isinstance(data, bytes) else json.dumps(data, default=repr, sort_keys=True).encode()
    name = f"{kind}-{hashlib.sha256(raw).hexdigest()[:12]}"
    body = {"kind": kind, "why": why}
    if isinstance(data, bytes):
        body["bytes"] = data.hex()
    elif isinstance(data, str):
        body["text"] = data
    else:
        body["json"] = json.loads(json.dumps(data, default=repr))
    path = REGRESSIONS / f"{name}.json"
    path.write_text(json.dumps(body, indent=1, ensure_ascii=True, allow_nan=True) + "\n")
    return path


#: how often each kind of input is drawn; CDI specs have no command of their own (the local backend's
#: node agent reads them), so the CLI sample leaves them out
KINDS = ["manifest"] * 6 + ["profile"] * 2 + ["dump", "trace", "cdi"]
CLI_KINDS = [k for k in KINDS if k != "cdi"]


def generate(n: int, seed: int, kinds: list[str] = KINDS) -> Iterator[tuple[str, str, Any, tuple, str]]:
    """n mutated inputs: (kind, seed name, input, mutated path, what was done)."""
    rng = random.Random(seed)
    pool = seeds()
    for _ in range(n):
        kind = rng.choice(kinds)
        name, doc = pool[kind][rng.randrange(len(pool[kind]))]
        if kind == "trace":
            yield kind, name, _mutate_csv(doc, rng), (), "csv"
            continue
        if kind != "profile" and rng.random() < 0.15:  # bytes in an odd encoding
            if kind == "cdi":
                text = yaml.safe_dump(doc) if rng.random() < 0.7 else json.dumps(doc)
            else:
                text = dump(doc, "yaml") if rng.random() < 0.7 else dump(doc, "json")
            data, op = encode(text, rng)
            yield kind, name, data, (), op
            continue
        mutated, path, op = mutate(doc, rng)
        if rng.random() < 0.3:  # a second mutation on top: the refusal may name either
            mutated, path2, op2 = mutate(mutated, rng)
            path, op = (*path, "+", *path2), f"{op}+{op2}"
        yield kind, name, mutated, path, op


def _mutate_csv(text: str, rng: random.Random) -> str | bytes:
    rows = [r.split(",") for r in text.splitlines()]
    op = rng.choice(["cell", "cell", "cell", "drop-col", "extra-col", "encoding", "quote"])
    if op == "encoding":
        return encode(text, rng)[0]
    r = rng.randrange(len(rows))
    c = rng.randrange(len(rows[r]))
    if op == "cell":
        rows[r][c] = rng.choice(["nan", "inf", "-inf", "1e400", "1e15", "-1", "", "x", "9" * 400, "0x10",
                                 "1_000", " 5 ", "\u0007", "\u00e9", "2.5"])
    elif op == "drop-col":
        del rows[r][c]
    elif op == "extra-col":
        rows[r].insert(c, "1")
    else:
        rows[r][c] = '"' + rows[r][c]
    return "\n".join(",".join(row) for row in rows) + "\n"


# -- the tests ---------------------------------------------------------------------------------------
def test_every_kind_of_input_has_valid_seeds(tmp_path: Path) -> None:
    """The fuzzer starts from what the kit ships, and each seed is accepted unmutated."""
    pool = seeds()
    assert len(pool["manifest"]) >= 20 and len(pool["profile"]) >= 10 and len(pool["cdi"]) >= 2
    assert set(pool) == set(KINDS)
    for kind, items in pool.items():
        for _name, doc in items:
            if kind != "trace":
                assert run_one(kind, doc, (), tmp_path / "trace.csv") == (False, "")


def test_mutated_inputs_in_process(tmp_path: Path) -> None:
    counts = {"inputs": 0, "refused": 0, "unnamed": 0}
    findings: list[str] = []
    unnamed: list[str] = []
    tmp = tmp_path / "trace.csv"
    for kind, name, data, path, op in generate(IN_PROCESS, SEED):
        counts["inputs"] += 1
        try:
            refused, line = run_one(kind, data, path, tmp)
        except Finding as exc:
            kept = _keep(kind, data, f"{op} at {path} of {name}: {exc}")
            findings.append(f"{kind} {name} {op} {path}: {exc} (kept as {kept.name})")
            continue
        if refused:
            counts["refused"] += 1
            if not _field_named(line, path):
                counts["unnamed"] += 1
                unnamed.append(f"{kind} {name} {op} {path}: {line}")
    print(f"\nfuzzer (seed {SEED}): {counts['inputs']} mutated inputs in-process, {counts['refused']} refused, "
          f"{counts['inputs'] - counts['refused']} accepted, {len(findings)} internal errors, "
          f"{counts['unnamed']} refusals not naming the mutated field")
    for f in findings[:20]:
        print("  finding:", f)
    for u in unnamed[:10]:
        print("  unnamed:", u)
    assert counts["inputs"] >= min(IN_PROCESS, 10_000)
    assert findings == []
    assert unnamed == []


def _write(kind: str, data: Any, d: Path, i: int) -> Path:
    if kind == "trace":
        f = d / f"t{i}.csv"
        f.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8", errors="surrogatepass"))
        return f
    f = d / f"{kind}{i}.yaml"
    if isinstance(data, bytes):
        f.write_bytes(data)
    else:
        try:
            f.write_text(json.dumps(data, allow_nan=True) if not isinstance(data, str) else data)
        except (TypeError, ValueError):
            f.write_text(repr(data))
    return f


def _command(kind: str, f: Path) -> list[str]:
    if kind == "manifest":
        return ["simulate", "--profile", "tiny", "-f", str(f)]
    if kind == "profile":
        return ["topology", "--profile", str(f)]
    if kind == "dump":
        return ["simulate", "--state", str(f), "-f", str(ROOT / "tests/data/scenarios/gpu-40gi.yaml")]
    return ["experiment", "run", "--fleet", "tiny", "--policy", "whole-gpu", "--trace", str(f)]


def test_mutated_inputs_through_the_cli(tmp_path: Path) -> None:
    """A sample through the commands as typed: no traceback, never exit 70."""
    server = CliServer(ENV)
    bad: list[str] = []
    ran = 0
    try:
        for i, (kind, name, data, path, op) in enumerate(generate(CLI_SAMPLE, SEED + 1, CLI_KINDS)):
            f = _write(kind, data, tmp_path, i)
            rc, out, err = server.run("labkit", _command(kind, f))
            ran += 1
            if rc == 70 or "Traceback" in out + err:
                kept = _keep(kind, data, f"{op} at {path} of {name}: CLI exit {rc}")
                bad.append(f"{kind} {name} {op} {path}: exit {rc}: {err.strip()[-300:]} (kept as {kept.name})")
    finally:
        server.close()
    real = 0
    for i, (kind, _name, data, _path, _op) in enumerate(generate(4, SEED + 2, CLI_KINDS)):
        f = _write(kind, data, tmp_path, 1000 + i)
        proc = subprocess.run([LABKIT, *_command(kind, f)], cwd=ROOT, capture_output=True, text=True, env=ENV,
                              errors="replace", stdin=subprocess.DEVNULL, check=False)
        real += 1
        if proc.returncode == 70 or "Traceback" in proc.stdout + proc.stderr:
            bad.append(f"console script: {kind}: exit {proc.returncode}: {proc.stderr.strip()[-300:]}")
    print(f"\nfuzzer through the CLI: {ran} forked runs + {real} console-script runs, {len(bad)} internal errors")
    assert bad == []


def _regressions() -> list[Path]:
    return sorted(REGRESSIONS.glob("*.json")) if REGRESSIONS.is_dir() else []


@pytest.mark.parametrize("case", _regressions(), ids=lambda p: p.stem)
def test_regressions(case: Path, tmp_path: Path) -> None:
    """Every input that ever broke the property, replayed."""
    body = json.loads(case.read_text())
    data: Any = bytes.fromhex(body["bytes"]) if "bytes" in body else body.get("text", body.get("json"))
    run_one(body["kind"], data, (), tmp_path / "trace.csv")  # raises Finding if it breaks again


def test_nan_and_inf_survive_the_regression_format() -> None:
    """Kept inputs hold non-finite numbers (JSON NaN/Infinity) and come back as floats."""
    back = json.loads(json.dumps({"x": float("nan"), "y": float("inf")}, allow_nan=True))
    assert math.isnan(back["x"]) and math.isinf(back["y"])
