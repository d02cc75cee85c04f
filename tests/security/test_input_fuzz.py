"""A structure-aware fuzzer over every valid input the kit ships: manifests, cluster profiles, the
fake driver's node profiles, a state dump, traces, CDI specs, kubeconfigs and the driver chart's Helm
values. Each is mutated the way hand-edited files go wrong (a field dropped or retyped, numbers out of
range or not finite, wrong encodings, huge and deep values) and handed to the loader that reads it.
The property: the answer is the input accepted, or a refusal that is a LabkitError (exit 1/2/3, one
line) naming the field; never another exception (exit 70). Helm values have no labkit loader: Helm
checks them against the chart's values.schema.json, so in-process the schema (Python's jsonschema)
judges them and must never crash, and `test_mutated_helm_values_through_helm` hands a fixed sample
to a real `helm template`: rendered, or refused one line per problem, never a Go panic.

Kubeconfigs are read by labkit.cluster.kube.kubeconfig_configuration, which runs an `exec` plugin at
once: the only plugin in the seeds is a shell script in the fuzzer's own directory that prints a
credential, and while a kubeconfig is loaded PATH is an empty directory and any other program the
loader would start fails the run (a mutation cannot name another program: see `_kubeconfig_guard`).
The servers are 127.0.0.1:1 (closed), and loading a kubeconfig connects nowhere.

`test_mutated_inputs_in_process` runs >= 10,000 mutations per run in-process (a fixed seed, so a
run is reproducible; LABKIT_FUZZ_SEED=N explores other ones) and prints the count per loader.
`test_mutated_inputs_through_the_cli` runs a sample through the CLI as typed (forked from one
process, tests/cliserver.py, plus a few through the real console script). Every input that ever
failed is kept in tests/data/fuzz-regressions/ (written there when it fails; commit it) and
replayed by `test_regressions`.
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import copy
import hashlib
import json
import math
import os
import pickle
import random
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path
from typing import Any
from unittest import mock
from urllib.parse import urlsplit

import pytest
import yaml
from jsonschema import Draft7Validator
from kubernetes.config import kube_config

from fake_gpus.catalog.loader import load_node_profile, parse_node_profile
from fake_gpus.errors import FakeGpusError
from fake_gpus.plugin import cdi
from labkit.api import dump, load
from labkit.api.load import LoadError, read_documents
from labkit.cel.validation import validate
from labkit.cluster import connect, kube
from labkit.cluster.backends.kind.driver import helm_values
from labkit.cluster.backends.local.cdi import load_specs, resolve_env
from labkit.cluster.snapshot import snapshot_yaml
from labkit.errors import LabkitError, exit_code, one_line
from labkit.experiments.alibaba import SAMPLE, load_alibaba
from labkit.model.profiles import PACKAGE_CLUSTERS, load_profile, parse_profile
from labkit.model.state import load_state
from tests.cliserver import CliServer
from tests.fake_gpus import test_fake_gpus_helm
from tests.fake_gpus.test_fake_gpus_helm import CHART, run_helm
from tests.paths import REPO

pytestmark = pytest.mark.slow  # heavy: `make check` leaves it out, `make test` runs it

helm = test_fake_gpus_helm.helm  # the session fixture: the cached helm binary (tools/build-helm.sh)

ROOT = REPO
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
    # the fake driver's node profiles (read by fake_gpus.catalog.loader, not labkit's reader), and the one
    # the chart's default values ship in extraProfiles
    defaults = yaml.safe_load((CHART / "values.yaml").read_text())
    nodes = [(str(f.relative_to(ROOT)), yaml.safe_load(f.read_text())) for f in sorted(NODE_PROFILES.glob("*.yaml"))]
    nodes += [(f"{CHART.relative_to(ROOT)}/values.yaml extraProfiles {k}", yaml.safe_load(v))
              for k, v in defaults["extraProfiles"].items()]
    # Helm values: the chart's defaults as a values file, and what the kind backend installs per profile
    values = [(str((CHART / "values.yaml").relative_to(ROOT)), defaults)]
    values += [(f"helm_values({p.stem})", helm_values(load_profile(p), "dra-labkit/fake-gpus:0.1.0"))
               for p in sorted(PACKAGE_CLUSTERS.glob("*.yaml")) if p.stem != "fleet-1000"]
    return {"manifest": manifests, "profile": profiles, "dump": [("sim snapshot of gpu-40gi", dump_objs)],
            "trace": [(str(SAMPLE.relative_to(ROOT)), "".join(trace))], "cdi": specs, "node-profile": nodes,
            "kubeconfig": _kubeconfig_seeds(kube_dir()), "helm": values}


def _yaml(path: Path) -> Any:
    return read_documents(path)[0]


NODE_PROFILES = ROOT / "fake_gpus" / "catalog" / "profiles"
#: the exec credential plugin of the kubeconfig seeds (a shell script; only shell built-ins): a token,
#: or with the argument "cert" a client certificate and key; whatever else it is given, nothing more
EXEC_PLUGIN = r"""#!/bin/sh
v1='"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential"'
pem='-----BEGIN X-----\nZnV6eg==\n-----END X-----\n'
if [ "$1" = cert ]; then
  printf '{%s,"status":{"clientCertificateData":"%s","clientKeyData":"%s"}}\n' "$v1" "$pem" "$pem"
else
  printf '{%s,"status":{"token":"fuzz-exec-token","expirationTimestamp":"2999-01-01T00:00:00Z"}}\n' "$v1"
fi
"""
#: how a kept kubeconfig names the seeds' directory (a temporary one, another each run)
KUBE_DIR_MARK = "@KUBEDIR@"


@cache
def kube_dir() -> Path:
    """The kubeconfig seeds' directory: the exec plugin, a tokenFile, a CA file; mutated kubeconfigs are
    written here (a relative path in one is the kubeconfig's directory, as in client-go)."""
    d = Path(tempfile.mkdtemp(prefix="labkit-fuzz-kubeconfig-"))
    atexit.register(shutil.rmtree, d, True)
    (d / "exec-plugin.sh").write_text(EXEC_PLUGIN)
    (d / "exec-plugin.sh").chmod(0o755)
    (d / "token").write_text("fuzz-file-token\n")
    (d / "empty-token").write_text("")  # a projected token being rotated
    (d / "ca.crt").write_text("-----BEGIN CERTIFICATE-----\nZnV6eg==\n-----END CERTIFICATE-----\n")
    (d / "path").mkdir()  # PATH while a kubeconfig is loaded: empty, so no command name is found
    return d


def _kubeconfig_seeds(d: Path) -> list[tuple[str, dict]]:
    """Kubeconfigs as people have them: a token, a client certificate inline, an exec plugin (a token or
    a certificate, with provideClusterInfo), a tokenFile, basic auth, several contexts in one file,
    an http:// server and one without a scheme (no credentials sent), insecure-skip-tls-verify. Every
    server is 127.0.0.1:1, where nothing listens."""
    b64 = base64.b64encode(b"-----BEGIN CERTIFICATE-----\nZnV6eg==\n-----END CERTIFICATE-----\n").decode()
    key = base64.b64encode(b"-----BEGIN PRIVATE KEY-----\nZnV6eg==\n-----END PRIVATE KEY-----\n").decode()
    server = "https://127.0.0.1:1"
    clusters = [
        {"name": "ca-data", "cluster": {"server": server, "certificate-authority-data": b64}},
        {"name": "ca-file", "cluster": {"server": server, "certificate-authority": "ca.crt", "tls-server-name": "kube",
                                        "extensions": [{"name": "client.authentication.k8s.io/exec",
                                                        "extension": {"audience": "fuzz"}}]}},
        {"name": "insecure", "cluster": {"server": server + "/", "insecure-skip-tls-verify": True,
                                         "proxy-url": "http://127.0.0.1:1", "disable-compression": True}},
        {"name": "plain-http", "cluster": {"server": "http://127.0.0.1:1"}},
        {"name": "no-scheme", "cluster": {"server": "127.0.0.1:1"}},
    ]
    users = [
        {"name": "token", "user": {"token": "fuzz-token"}},
        {"name": "cert", "user": {"client-certificate-data": b64, "client-key-data": key}},
        {"name": "exec", "user": {"exec": {
            "apiVersion": "client.authentication.k8s.io/v1", "command": str(d / "exec-plugin.sh"), "args": ["token"],
            "env": [{"name": "FUZZ_ENV", "value": "1"}], "interactiveMode": "Never", "provideClusterInfo": True,
            "installHint": "the fuzzer writes it"}}},
        {"name": "exec-cert", "user": {"exec": {
            "apiVersion": "client.authentication.k8s.io/v1", "command": "./exec-plugin.sh", "args": ["cert"],
            "interactiveMode": "IfAvailable"}}},
        {"name": "token-file", "user": {"tokenFile": "token"}},
        {"name": "basic", "user": {"username": "admin", "password": "fuzz"}},
    ]
    contexts = [
        {"name": "token", "context": {"cluster": "ca-data", "user": "token", "namespace": "lab"}},
        {"name": "cert", "context": {"cluster": "insecure", "user": "cert"}},
        {"name": "exec", "context": {"cluster": "ca-file", "user": "exec"}},
        {"name": "exec-cert", "context": {"cluster": "insecure", "user": "exec-cert"}},
        {"name": "token-file", "context": {"cluster": "ca-data", "user": "token-file"}},
        {"name": "basic", "context": {"cluster": "insecure", "user": "basic"}},
        {"name": "plain-http", "context": {"cluster": "plain-http", "user": "token"}},
        {"name": "no-scheme", "context": {"cluster": "no-scheme", "user": "exec"}},
    ]
    every = {"apiVersion": "v1", "kind": "Config", "preferences": {}, "clusters": clusters, "users": users,
             "contexts": contexts}
    out = [(f"kubeconfig, current-context {c['name']}", {**every, "current-context": c["name"]}) for c in contexts]
    # and one context alone in its file, as a cloud provider writes it
    for name in ("exec", "token-file"):
        ctx = next(c for c in contexts if c["name"] == name)
        alone = {**every, "current-context": name, "contexts": [ctx],
                 "clusters": [c for c in clusters if c["name"] == ctx["context"]["cluster"]],
                 "users": [u for u in users if u["name"] == ctx["context"]["user"]]}
        out.append((f"kubeconfig with only context {name}", alone))
    return out


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


#: a seed's paths (id of the seed document -> its non-empty paths): a seed is mutated hundreds of times
_SEED_PATHS: dict[int, list[tuple]] = {}


_HUGE: list[Callable[[], Any]] = [lambda: "y" * 100_000, lambda: ["z"] * 5_000,
                                  lambda: {f"k{i}": i for i in range(2_000)}]


def mutate(doc: Any, rng: random.Random, seed: bool = False) -> tuple[Any, tuple, str]:
    """One structural mutation of a parsed document: (new document, path, what was done). ``seed``: ``doc``
    is one of seeds()' (never changed: the copy is mutated), whose paths are listed once."""
    if seed:
        if id(doc) not in _SEED_PATHS:
            _SEED_PATHS[id(doc)] = [p for p in _paths(doc) if p]
        paths = _SEED_PATHS[id(doc)]
        doc = _copy(doc)
    else:
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
        parent[key] = rng.choice(_HUGE)()  # made only when drawn
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


def _check_node_profile(data: Any, tmp: Path) -> None:
    """A fake GPU node profile: parsed (as a Helm value's extraProfiles entry is), or read from a file
    (`python -m fake_gpus slices --profile FILE`), one file per content (the loader caches a file's parse)."""
    if not isinstance(data, bytes):
        parse_node_profile(data, "fuzz.yaml")
        return
    f = tmp.parent / f"node-profile-{hashlib.sha256(data).hexdigest()[:16]}.yaml"
    f.write_bytes(data)
    load_node_profile(f)


@contextlib.contextmanager
def _kubeconfig_guard() -> Iterator[None]:
    """While a kubeconfig is loaded: PATH is an empty directory (a command name, which is all a mutation
    can make of `exec.command`, is found nowhere), and the loader starting any program but the seeds' plugin
    is a finding (checked before the program is started; nothing else is run), as is the kubernetes
    client's own exec provider being used at all."""
    plugin = kube_dir() / "exec-plugin.sh"
    real = kube.ExecPlugin._executable
    unbounded: list[Any] = []

    def only_the_plugin(self: kube.ExecPlugin) -> str:
        found = real(self)
        if Path(found) != plugin:
            raise Finding(f"the loader would run {found!r}")
        return found

    def not_the_clients_own(spec: Any, *_: Any) -> None:
        unbounded.append(getattr(spec, "value", spec))  # the client logs and swallows what its provider raises
        raise RuntimeError("not run by the fuzzer")

    try:
        with mock.patch.dict(os.environ, {"PATH": str(kube_dir() / "path")}), \
                mock.patch.object(kube.ExecPlugin, "_executable", only_the_plugin), \
                mock.patch.object(kube_config, "ExecProvider", not_the_clients_own):
            yield
    finally:
        if unbounded:  # its plugin runs without labkit's time limit and bounds (labkit's ExecPlugin)
            raise Finding(f"the kubernetes client's loader would run the exec plugin {str(unbounded[0])[:200]} itself")


def load_kubeconfig(data: Any, name: str = "config") -> Any:
    """The Configuration labkit makes of this kubeconfig (written in the seeds' directory)."""
    f = kube_dir() / name
    if isinstance(data, bytes):
        f.write_bytes(data)
    else:
        f.write_text(json.dumps(data, allow_nan=True), encoding="utf-8", errors="surrogatepass")
    with _kubeconfig_guard():
        cfg, _context = kube.kubeconfig_configuration(f)
    return cfg


def _check_kubeconfig(data: Any) -> None:
    cfg = load_kubeconfig(data)
    # client-go reads a user only for an https server (tools/clientcmd/client_config.go): a plain http
    # one gets no credential, whatever the kubeconfig holds
    if not str(cfg.host).startswith("https://"):
        assert not (cfg.api_key or cfg.cert_file or cfg.username or cfg.refresh_api_key_hook), \
            f"credentials for {cfg.host}"


@cache
def _values_schema() -> tuple[Draft7Validator, dict]:
    """The chart's values.schema.json (draft 7) and its default values."""
    schema = json.loads((CHART / "values.schema.json").read_text())
    return Draft7Validator(schema), yaml.safe_load((CHART / "values.yaml").read_text())


def _coalesce(user: dict, defaults: dict) -> dict:
    """A values file over the chart's defaults, as Helm coalesces them before it checks the schema
    (helm/helm pkg/chart/common/util/coalesce.go): mappings merge, anything else replaces the default,
    a null removes it."""
    out = dict(user)
    for key, default in defaults.items():
        if key not in user:
            out[key] = default
        elif user[key] is None:
            del out[key]
        elif isinstance(user[key], dict) and isinstance(default, dict):
            out[key] = _coalesce(user[key], default)
    return out


def helm_problems(data: Any) -> list[str]:
    """What Helm finds wrong with a values file before rendering, one line each in its form ("at
    '/json/pointer': ..."; helm/helm pkg/chart/common/util/jsonschema.go). A file that is not a mapping
    is refused by Helm's YAML reader."""
    validator, defaults = _values_schema()
    if data is None:
        data = {}
    if not isinstance(data, dict):
        return [f"at '': the values file is a {type(data).__name__}, not a mapping"]
    return [f"at '{''.join(f'/{k}' for k in e.absolute_path)}': {e.message}"
            for e in validator.iter_errors(_coalesce(data, defaults))]


LOADERS: dict[str, Callable[[Any], None]] = {"manifest": _check_manifest, "profile": _check_profile,
                                             "dump": _check_dump, "kubeconfig": _check_kubeconfig}


def _field_named(message: str, path: tuple, kind: str = "", op: str = "") -> bool:
    """A refusal names the field: a key on the mutated path (or paths, joined by "+"), a list index
    on it, the object it is in (a dump's "object N"), or where in the file it is (line, doc). A
    value nested hundreds of levels deep is refused as a whole ("nested too deeply"). A kubeconfig's
    entries are named as kubectl names them: `user "u" was not found for context "c"` (client-go
    tools/clientcmd/validation.go) for a mutation under `users`. A dropped key can make the document
    another kind of itself (a node profile without `exampleDriver` is a full one): the required field
    that kind then misses is named instead."""
    keys = [str(k) for k in path if not isinstance(k, int) and k != "+"]
    idx = [f"[{k}]" for k in path if isinstance(k, int)] + [f"object {k + 1}" for k in path if isinstance(k, int)]
    if "nested too deeply" in message:  # the depth is the problem, wherever it starts
        return True
    if kind == "kubeconfig":
        keys += [f"{k.removesuffix('s')} " for k in keys if k in ("users", "clusters", "contexts")]
    if "drop" in op and "required" in message and "missing" in message:
        return True
    return not path or any(k in message for k in keys + idx) or "line " in message or ":doc " in message


class Finding(Exception):
    """An input that broke the property."""


def run_one(kind: str, data: Any, path: tuple, tmp: Path) -> tuple[bool, str]:
    """(refused?, the one line). Raises Finding when the property does not hold."""
    try:
        if kind == "helm":
            problems = helm_problems(data)
            return bool(problems), problems[0] if problems else ""
        if kind == "trace":
            _check_trace(data, tmp)
        elif kind == "cdi":
            _check_cdi(data, tmp)
        elif kind == "node-profile":
            _check_node_profile(data, tmp)
        else:
            LOADERS[kind](data)
        return False, ""
    except (LabkitError, FakeGpusError) as exc:
        # the fake driver (a program of its own: it imports nothing from labkit) refuses with its own errors
        code = exit_code(exc) if isinstance(exc, LabkitError) or kind != "node-profile" else exc.exit_code
        line = one_line(exc)
        if code == 70 or not line:
            raise Finding(f"exit {code}: {line[:300]!r}") from None
        return True, line
    except RecursionError:
        raise Finding("RecursionError") from None
    except Finding:
        raise
    except Exception as exc:  # noqa: BLE001 - this is what the fuzzer looks for
        raise Finding(f"internal error: {type(exc).__name__}: {str(exc)[:300]}") from None


def _keep(kind: str, data: Any, why: str, path: tuple | None = None, op: str = "") -> Path:
    """Store a failing input as a regression case (kind, the input, why it failed; for a refusal that
    did not name the mutated field, that field's path and the mutation)."""
    REGRESSIONS.mkdir(parents=True, exist_ok=True)
    if kind == "kubeconfig":  # the seeds' directory is another one each run
        data, why = _moved(data, str(kube_dir()), KUBE_DIR_MARK), why.replace(str(kube_dir()), KUBE_DIR_MARK)
    raw = data if isinstance(data, bytes) else json.dumps(data, default=repr, sort_keys=True).encode()
    name = f"{kind}-{hashlib.sha256(raw).hexdigest()[:12]}"
    body: dict[str, Any] = {"kind": kind, "why": why}
    if path is not None:
        body["path"], body["op"] = list(path), op
    if isinstance(data, bytes):
        body["bytes"] = data.hex()
    elif isinstance(data, str):
        body["text"] = data
    else:
        body["json"] = json.loads(json.dumps(data, default=repr))
    path = REGRESSIONS / f"{name}.json"
    path.write_text(json.dumps(body, indent=1, ensure_ascii=True, allow_nan=True) + "\n")
    return path


def _moved(data: Any, old: str, new: str) -> Any:
    """`data` with every `old` in its strings (or its UTF-8 bytes) replaced by `new`."""
    if isinstance(data, bytes):
        return data.replace(old.encode(), new.encode())
    if isinstance(data, str):
        return data.replace(old, new)
    return json.loads(json.dumps(data, default=repr, allow_nan=True).replace(json.dumps(old)[1:-1], json.dumps(new)[1:-1]))


#: how often each kind of input is drawn; CDI specs have no command of their own (the local backend's
#: node agent reads them) and Helm values are Helm's to read, so the CLI sample leaves them out
KINDS = ["manifest"] * 6 + ["profile"] * 2 + ["dump", "trace", "cdi", "node-profile", "kubeconfig", "kubeconfig",
                                              "helm"]
CLI_KINDS = [k for k in KINDS if k not in ("cdi", "helm")]
#: kinds read from a parsed document only (no file of their own in the fuzzer, so no odd encodings)
PARSED_ONLY = ("profile", "helm")


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
        if kind not in PARSED_ONLY and rng.random() < 0.15:  # bytes in an odd encoding
            if kind == "cdi":
                text = yaml.safe_dump(doc) if rng.random() < 0.7 else json.dumps(doc)
            else:
                text = dump(doc, "yaml") if rng.random() < 0.7 else dump(doc, "json")
            data, op = encode(text, rng)
            yield kind, name, data, (), op
            continue
        mutated, path, op = mutate(doc, rng, seed=True)
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
#: what the kubeconfig seeds' contexts give (labkit.cluster.kube: the user's credential for an https
#: server, none for plain http or a server without a scheme, as client-go)
KUBECONFIG_CREDENTIAL = {"token": "Bearer fuzz-token", "exec": "Bearer fuzz-exec-token",
                         "token-file": "Bearer fuzz-file-token", "basic": "Basic YWRtaW46ZnV6eg==",
                         "exec-cert": None, "cert": None, "plain-http": None, "no-scheme": None}


def test_every_kind_of_input_has_valid_seeds(tmp_path: Path) -> None:
    """The fuzzer starts from what the kit ships (and kubeconfigs as people have them), each seed is
    accepted unmutated, and each kubeconfig seed gives its context's credential."""
    pool = seeds()
    assert len(pool["manifest"]) >= 20 and len(pool["profile"]) >= 10 and len(pool["cdi"]) >= 2
    assert len(pool["node-profile"]) > len(list(NODE_PROFILES.glob("*.yaml"))) >= 30
    assert len(pool["kubeconfig"]) >= 10 and len(pool["helm"]) >= 10
    assert set(pool) == set(KINDS)
    for kind, items in pool.items():
        for _name, doc in items:
            if kind != "trace":
                assert run_one(kind, doc, (), tmp_path / "trace.csv") == (False, "")
    for name, doc in pool["kubeconfig"]:
        cfg = load_kubeconfig(doc)
        context = doc["current-context"]
        assert cfg.api_key.get("BearerToken") == KUBECONFIG_CREDENTIAL[context], name
        assert bool(cfg.cert_file) == (context in ("cert", "exec-cert")), name
        assert cfg.host == ("https://127.0.0.1:1" if cfg.api_key or cfg.cert_file else "http://127.0.0.1:1"), name


def test_mutated_inputs_in_process(tmp_path: Path) -> None:
    counts = {"inputs": 0, "refused": 0, "unnamed": 0}
    per_kind: dict[str, int] = dict.fromkeys(sorted(set(KINDS)), 0)
    findings: list[str] = []
    unnamed: list[str] = []
    tmp = tmp_path / "trace.csv"
    for kind, name, data, path, op in generate(IN_PROCESS, SEED):
        counts["inputs"] += 1
        per_kind[kind] += 1
        try:
            refused, line = run_one(kind, data, path, tmp)
        except Finding as exc:
            kept = _keep(kind, data, f"{op} at {path} of {name}: {exc}")
            findings.append(f"{kind} {name} {op} {path}: {exc} (kept as {kept.name})")
            continue
        if refused:
            counts["refused"] += 1
            if not _field_named(line, path, kind, op):
                counts["unnamed"] += 1
                kept = _keep(kind, data, f"{op} at {path} of {name}: refused without naming the field: {line[:300]}",
                             path, op)
                unnamed.append(f"{kind} {name} {op} {path}: {line} (kept as {kept.name})")
    print(f"\nfuzzer (seed {SEED}): {counts['inputs']} mutated inputs in-process, {counts['refused']} refused, "
          f"{counts['inputs'] - counts['refused']} accepted, {len(findings)} internal errors, "
          f"{counts['unnamed']} refusals not naming the mutated field")
    print("  per loader: " + ", ".join(f"{kind} {n}" for kind, n in per_kind.items()))
    for f in findings[:20]:
        print("  finding:", f)
    for u in unnamed[:10]:
        print("  unnamed:", u[:400])
    assert counts["inputs"] >= min(IN_PROCESS, 10_000)
    assert findings == []
    assert unnamed == []


def _write(kind: str, data: Any, d: Path, i: int) -> Path:
    if kind == "trace":
        f = d / f"t{i}.csv"
        f.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8", errors="surrogatepass"))
        return f
    f = (kube_dir() if kind == "kubeconfig" else d) / f"{kind}{i}.yaml"  # beside the files a kubeconfig names
    if isinstance(data, bytes):
        f.write_bytes(data)
    else:
        try:
            f.write_text(json.dumps(data, allow_nan=True) if not isinstance(data, str) else data)
        except (TypeError, ValueError):
            f.write_text(repr(data))
    return f


def _command(kind: str, f: Path) -> tuple[str, list[str]]:
    """(program, arguments): `labkit ...`, or `python -m fake_gpus ...` for a node profile."""
    if kind == "manifest":
        return "labkit", ["simulate", "--profile", "tiny", "-f", str(f)]
    if kind == "profile":
        return "labkit", ["topology", "--profile", str(f)]
    if kind == "dump":
        return "labkit", ["simulate", "--state", str(f), "-f", str(ROOT / "tests/data/scenarios/gpu-40gi.yaml")]
    if kind == "node-profile":
        return "fake_gpus", ["slices", "--profile", str(f), "--node", "node-0"]
    if kind == "kubeconfig":  # reads it, then finds nothing listening at 127.0.0.1:1
        return "labkit", ["snapshot", "--kubeconfig", str(f), "-o", "-"]
    return "labkit", ["experiment", "run", "--fleet", "tiny", "--policy", "whole-gpu", "--trace", str(f)]


def _argv(program: str, args: list[str]) -> list[str]:
    return [LABKIT, *args] if program == "labkit" else [sys.executable, "-m", program, *args]


def _connects_elsewhere(kind: str, data: Any) -> bool:
    """Whether the command would connect to a host other than 127.0.0.1 (a mutated server or proxy name is
    looked up in DNS): such a kubeconfig stays in-process, where nothing connects."""
    if kind != "kubeconfig":
        return False
    try:
        cfg = load_kubeconfig(data, "probe")
    except Exception:  # noqa: BLE001 - refused (or a finding, in-process): the command stops before connecting
        return False
    return any(urlsplit(str(url)).hostname != "127.0.0.1" for url in (cfg.host, cfg.proxy) if url)


def test_mutated_inputs_through_the_cli(tmp_path: Path) -> None:
    """A sample through the commands as typed: no traceback, never exit 70. A kubeconfig's exec plugin
    runs with PATH an empty directory, as in-process."""
    server = CliServer(ENV)
    kube_env = {**ENV, "PATH": str(kube_dir() / "path")}
    bad: list[str] = []
    ran = skipped = 0
    per_kind: dict[str, int] = dict.fromkeys(sorted(set(CLI_KINDS)), 0)
    try:
        for i, (kind, name, data, path, op) in enumerate(generate(CLI_SAMPLE, SEED + 1, CLI_KINDS)):
            if _connects_elsewhere(kind, data):
                skipped += 1
                continue
            f = _write(kind, data, tmp_path, i)
            server.env = kube_env if kind == "kubeconfig" else ENV
            rc, out, err = server.run(*_command(kind, f))
            ran += 1
            per_kind[kind] += 1
            if rc == 70 or "Traceback" in out + err:
                kept = _keep(kind, data, f"{op} at {path} of {name}: CLI exit {rc}")
                bad.append(f"{kind} {name} {op} {path}: exit {rc}: {err.strip()[-300:]} (kept as {kept.name})")
    finally:
        server.close()
    real = 0
    for i, (kind, _name, data, _path, _op) in enumerate(generate(6, SEED + 2, CLI_KINDS)):
        if _connects_elsewhere(kind, data):
            continue
        f = _write(kind, data, tmp_path, 1000 + i)
        proc = subprocess.run(_argv(*_command(kind, f)), cwd=ROOT, capture_output=True, text=True, errors="replace",
                              env=kube_env if kind == "kubeconfig" else ENV, stdin=subprocess.DEVNULL, check=False)
        real += 1
        if proc.returncode == 70 or "Traceback" in proc.stdout + proc.stderr:
            bad.append(f"console script: {kind}: exit {proc.returncode}: {proc.stderr.strip()[-300:]}")
    print(f"\nfuzzer through the CLI: {ran} forked runs ({', '.join(f'{k} {n}' for k, n in per_kind.items())}) + "
          f"{real} console-script runs ({skipped} kubeconfigs naming another host left out), {len(bad)} internal errors")
    assert ran >= CLI_SAMPLE - 4 and real >= 4
    assert bad == []


#: how many mutated values files go through a real `helm template`: accepted by the schema in-process, and
#: refused by it
HELM_ACCEPTED, HELM_REFUSED = 24, 6
#: the lines helm writes when it refuses values (helm/helm pkg/chart/common/util/jsonschema.go: the chart's
#: name, then santhosh-tekuri/jsonschema's findings "- at '/json/pointer': ...", nested by two spaces; a
#: template's `fail` is one "Error: execution error at (...)" line, then a hint about --debug), and its
#: log lines (a value that cannot merge with the chart's default: pkg/chart/common/util/coalesce.go)
HELM_ERROR_LINES = ("Error: ", "fake-gpus:", "- at '", "Use --debug flag to render out invalid YAML", "level=")


def test_mutated_helm_values_through_helm(helm: str, tmp_path: Path) -> None:
    """A fixed sample of mutated values files (most of them accepted by values.schema.json in-process) through
    `helm template`: each renders, or is refused with one line per problem; never a Go panic or trace."""
    sample: dict[bool, list[tuple[str, Any, str]]] = {True: [], False: []}
    for _kind, name, data, _path, op in generate(5_000, SEED + 3, ["helm"]):
        accepted = not helm_problems(data)
        if len(sample[accepted]) < (HELM_ACCEPTED if accepted else HELM_REFUSED):
            sample[accepted].append((name, data, op))
        if len(sample[True]) == HELM_ACCEPTED and len(sample[False]) == HELM_REFUSED:
            break
    bad: list[str] = []
    outcome = {"rendered": 0, "refused by helm": 0, "accepted here, refused by helm's schema check": 0}
    for i, (name, data, op) in enumerate(sample[True] + sample[False]):
        f = tmp_path / f"values{i}.yaml"
        try:
            f.write_text(yaml.safe_dump(data))
        except RecursionError:  # a value hundreds of levels deep: as JSON, which is YAML too
            f.write_text(json.dumps(data, allow_nan=True))
        out = run_helm(helm, "template", "fake-gpus", str(CHART), "--namespace", "fake-gpus", "-f", str(f),
                       check=False)
        if out.returncode == 0:
            outcome["rendered"] += 1
            continue
        outcome["refused by helm"] += 1
        lines = [ln.strip() for ln in out.stderr.splitlines() if ln.strip()]
        errors = [ln for ln in lines if not ln.startswith("level=")]
        if not errors or out.returncode != 1 or not errors[0].startswith("Error: ") \
                or not all(ln.startswith(HELM_ERROR_LINES) for ln in lines) or "goroutine " in out.stderr:
            bad.append(f"{name} {op} (values{i}.yaml): exit {out.returncode}: {out.stderr[-600:]}")
        elif i < HELM_ACCEPTED and "don't meet the specifications of the schema" in errors[0]:
            outcome["accepted here, refused by helm's schema check"] += 1
            print(f"  schema verdicts differ on {name} {op}: {errors[1:3]}")
    print(f"\nhelm template on {HELM_ACCEPTED} mutated values files the schema accepts + {HELM_REFUSED} it refuses: "
          + ", ".join(f"{n} {what}" for what, n in outcome.items()))
    assert len(sample[True]) == HELM_ACCEPTED and len(sample[False]) == HELM_REFUSED
    assert bad == []


def _regressions() -> list[Path]:
    return sorted(REGRESSIONS.glob("*.json")) if REGRESSIONS.is_dir() else []


@pytest.mark.parametrize("case", _regressions(), ids=lambda p: p.stem)
def test_regressions(case: Path, tmp_path: Path) -> None:
    """Every input that ever broke the property, replayed."""
    body = json.loads(case.read_text())
    data: Any = bytes.fromhex(body["bytes"]) if "bytes" in body else body.get("text", body.get("json"))
    if body["kind"] == "kubeconfig":
        data = _moved(data, KUBE_DIR_MARK, str(kube_dir()))
    refused, line = run_one(body["kind"], data, (), tmp_path / "trace.csv")  # raises Finding if it breaks again
    if "path" in body:  # kept as a refusal that did not name the mutated field
        assert not refused or _field_named(line, tuple(body["path"]), body["kind"], body["op"]), line


def test_nan_and_inf_survive_the_regression_format() -> None:
    """Kept inputs hold non-finite numbers (JSON NaN/Infinity) and come back as floats."""
    back = json.loads(json.dumps({"x": float("nan"), "y": float("inf")}, allow_nan=True))
    assert math.isnan(back["x"]) and math.isinf(back["y"])
