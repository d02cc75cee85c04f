"""labkit's validation (`labkit.cel.validation.validate`) against a real kube-apiserver: the local
control plane's, asked with a dry-run create (`dryRun=All`, `fieldValidation=Strict`, what `kubectl
apply --dry-run=server` sends). Both must give the same verdict, accepted or refused, on:

- every DRA object the kit and upstream ship (examples/, tests/data/upstream/, fake_gpus' slices and
  DeviceClasses), as they are;
- boundary mutations of them, the way the API server's own rules draw their lines: each field
  dropped (once per field path), and a fixed-seed sample of values at the edges (names of 63/64/253/
  254 characters, uppercase, slashes, counts 0/-1/16/17/32/33/128/129, lists emptied, repeated,
  grown past their limits);
- a fixed-seed sample of fields the objects do not have, added (every optional field of each
  object's types, from the API schema the kit validates with): empty, minimal (its required
  fields only), repeated, and edge values. A field whose feature gate is off is dropped by the API
  server, and labkit says so (a problem naming the gate): the API server must then store the object.

Pods that use claims are compared the same way, with their claim fields mutated
(`spec.resourceClaims`, each container's `resources.claims`).

This found what the unit tests had written from the API reference instead of from the API server
(request tolerations have no count limit; `a/b/c` is a stored attribute name; a capacity without a
value is stored as 0; 1.37 refuses an uppercase domain in a constraint). A disagreement prints
the object's kind, the mutated field, the value, the API server's answer and ours.
"""

from __future__ import annotations

import copy
import functools
import json
import random
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from fake_gpus.slices import build_slices, device_classes
from labkit.api.problem import as_dict
from labkit.api.schema import MODEL_FOR, model_fields
from labkit.cel.validation import validate
from labkit.cluster.kube import ApiError
from labkit.model.profiles import load_profile
from tests.paths import REPO

pytestmark = [pytest.mark.local, pytest.mark.slow]

ROOT = REPO
V1 = "resource.k8s.io/v1"
PROFILE = "workshop"
PLURAL = {"DeviceClass": "deviceclasses", "ResourceClaim": "resourceclaims",
          "ResourceClaimTemplate": "resourceclaimtemplates", "ResourceSlice": "resourceslices"}
NAMESPACED = {"ResourceClaim", "ResourceClaimTemplate"}
NAMESPACE = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}}  # no admin-access label
#: node profiles whose slices seed the mutations: full GPUs, MIG with counters, consumable shares,
#: partitions, NICs, a rack tray
SLICE_PROFILES = (("dgx-h100", None), ("dgx-a100", "dynamic"), ("h100-shares", None),
                  ("example-partitionable", None), ("example-multi", None), ("example-net", None),
                  ("gb200-nvl72-tray", None))
STRINGS = ["", "A", "a", "a" * 32, "a" * 33, "a" * 63, "a" * 64, "a" * 253, "a" * 254, "a.b", "-a", "a-", "a_b",
           "a/b", "a/b/c", "x.io/a", "X.io/a", "1.2.3", "v1.2.3", "0", "*", "a b", "é", "a" * 1025]
INTS = [0, -1, 1, 2, 16, 17, 31, 32, 33, 127, 128, 129, 2**31, 2**63 - 1, -2**63]
PER_SEED = 40  # sampled value mutations per seed object (all field drops come on top)
ADDED_PER_SEED = 25  # sampled added fields per seed object
PER_POD = 15  # sampled claim-field values per Pod
ADDED_STRINGS = ["", "a", "A", "a" * 64, "a" * 254, "a/b", "a.b/c", "1Gi", "-1", "NoSchedule", "NoExecute", "None",
                 "All", "ExactCount", "Exists", "gpu.example.com", "node-1", "2026-01-01T00:00:00Z", "1.2.3",
                 "device.driver == 'x'", "bad("]
DROP = object()


@functools.cache
def _shipped() -> tuple[dict, ...]:
    """Every YAML document of examples/ and tests/data/upstream/ (files that do not parse are left out;
    each caller copies what it changes)."""
    docs: list[Any] = []
    for f in sorted([*ROOT.glob("examples/**/*.yaml"), *ROOT.glob("tests/data/upstream/**/*.yaml")]):
        try:
            docs += yaml.safe_load_all(f.read_text())
        except yaml.YAMLError:
            continue
    return tuple(d for d in docs if isinstance(d, dict))


def _label(path: tuple, value: Any) -> str:
    shown = json.dumps(value)
    return f"{'.'.join(map(str, path))} = {shown if len(shown) <= 60 else shown[:57] + '...'}"


def _seeds() -> list[dict]:
    found = [d for d in _shipped() if d.get("apiVersion") == V1 and d.get("kind") in PLURAL]
    for profile, mig in SLICE_PROFILES:
        found += build_slices(profile, "node-1", mig_mode=mig)
    found += device_classes()
    unique = {json.dumps(d, sort_keys=True): d for d in found}
    seeds = []
    for i, obj in enumerate(unique.values()):
        obj = copy.deepcopy(obj)
        meta = obj.setdefault("metadata", {})
        meta.pop("generateName", None)
        meta["name"] = f"seed-{i}"
        if obj["kind"] in NAMESPACED:
            meta["namespace"] = "default"
        else:
            meta.pop("namespace", None)
        seeds.append(obj)
    return seeds


def _fields(obj: Any, path: tuple = ()) -> Iterator[tuple[tuple, Any]]:
    yield path, obj
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _fields(v, (*path, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _fields(v, (*path, i))


def _values(v: Any) -> list[Any]:
    if isinstance(v, bool):
        return [not v]
    if isinstance(v, int):
        return INTS
    if isinstance(v, str):
        return [*STRINGS, v + "x", v.upper()]
    if isinstance(v, list):
        return [[]] + ([v + v[:1], (v * 130)[:129], (v * 40)[:33], (v * 20)[:17]] if v else [])
    if isinstance(v, dict):
        return [{}]
    return []


def _with(obj: dict, path: tuple, value: Any) -> dict:
    out = copy.deepcopy(obj)
    here = out
    for p in path[:-1]:
        here = here[p]
    if value is DROP:
        del here[path[-1]]
    else:
        here[path[-1]] = value
    return out


def _minimal(model: str, depth: int = 0) -> dict:
    """An instance of `model` with its required fields only (strings "a", numbers 1, ...)."""
    return {name: _one(code, depth + 1) for name, code, required in model_fields(model) if required}


def _one(code: str, depth: int) -> Any:
    scalars = {"s": "a", "b": True, "i": 1, "t": "2026-01-01T00:00:00Z"}
    if code in scalars:
        return scalars[code]
    if depth > 6:
        return {} if code[:1] in "M{" else []
    if code.startswith("M:"):
        return _minimal(code[2:], depth)
    if code.startswith("[M:"):
        return [_minimal(code[3:], depth)]
    if code.startswith("{M:"):
        return {"a": _minimal(code[3:], depth)}
    return {"a": "b"} if code.startswith("{") else ["a"]


def _added(code: str) -> list[Any]:
    """Values to give a field of type `code` that the object does not have."""
    if code in ("s", "b", "i", "t"):
        return {"s": ADDED_STRINGS, "b": [True, False], "i": INTS, "t": ["2026-01-01T00:00:00Z", "yesterday"]}[code]
    if code.startswith("M:"):
        return [{}, _minimal(code[2:])]
    if code.startswith("[M:"):
        m = _minimal(code[3:])
        return [[], [{}], [m], [m, copy.deepcopy(m)], [m] * 33]
    if code.startswith("{M:"):
        m = _minimal(code[3:])
        return [{}, {"a": m}, {"A": m}, {"x.io/a": m}, {"a/b/c": m}, {"a" * 33: m}]
    if code == "[s":
        return [[], ["a"], ["a", "a"], ["A"], ["a"] * 33, [""]]
    return [{}, {"a": "b"}, {"A/B": "x"}] if code.startswith("{") else []


def _absent(obj: Any, model: str, path: tuple = ()) -> Iterator[tuple[tuple, Any]]:
    """(path, value) for each field of `model` that `obj` lacks, in `obj` and the objects inside it."""
    if not isinstance(obj, dict):
        return
    for name, code, _required in model_fields(model):
        if name not in obj:
            yield from (((*path, name), v) for v in _added(code))
        elif code.startswith("M:"):
            yield from _absent(obj[name], code[2:], (*path, name))
        elif code.startswith("[M:") and isinstance(obj[name], list):
            for i, item in enumerate(obj[name][:2]):
                yield from _absent(item, code[3:], (*path, name, i))
        elif code.startswith("{M:") and isinstance(obj[name], dict):
            for key in list(obj[name])[:2]:
                yield from _absent(obj[name][key], code[3:], (*path, name, key))


def _cases() -> list[tuple[str, dict]]:
    """(what was changed, object): each seed as is, each field path dropped once, a sample of values."""
    rng = random.Random(20261202)
    cases: list[tuple[str, dict]] = []
    dropped: set[tuple] = set()
    for seed in _seeds():
        cases.append(("as shipped", seed))
        values = []
        for path, v in _fields(seed):
            if not path or path[0] in ("apiVersion", "kind", "status") or path[:2] == ("metadata", "namespace"):
                continue
            shape = (seed["kind"], tuple("*" if isinstance(p, int) else p for p in path))
            if shape not in dropped:
                dropped.add(shape)
                cases.append((f"{'.'.join(map(str, path))} dropped", _with(seed, path, DROP)))
            values += [(path, x) for x in _values(v)]
        added = [(p, x) for p, x in _absent(seed, MODEL_FOR[(V1, seed["kind"])]) if p[0] not in ("metadata", "status")]
        for path, x in [*rng.sample(values, min(PER_SEED, len(values))),
                        *rng.sample(added, min(ADDED_PER_SEED, len(added)))]:
            cases.append((_label(path, x), _with(seed, path, x)))
    return cases


@pytest.fixture(scope="module")
def apiserver(local_workshop):
    """The local lane's workshop cluster (tests/conftest.py): every request here is a dry run."""
    return local_workshop


def _pod_cases() -> list[tuple[str, dict]]:
    """Pods of examples/ and upstream that use claims: each claim field dropped, and a fixed-seed
    sample of edge values for them."""
    rng = random.Random(20261202)
    pods = [d for d in _shipped() if d.get("kind") == "Pod" and d.get("apiVersion") == "v1"
            and as_dict(d.get("spec")).get("resourceClaims")]
    cases: list[tuple[str, dict]] = []
    for i, pod in enumerate(pods):
        pod = copy.deepcopy(pod)
        pod["metadata"] = {"name": f"pod-{i}", "namespace": "default"}
        cases.append(("as shipped", pod))
        values = []
        for path, v in _fields(pod):
            if "resourceClaims" not in path and "claims" not in path:
                continue
            cases.append((f"{'.'.join(map(str, path))} dropped", _with(pod, path, DROP)))
            values += [(path, x) for x in _values(v)]
        for path, x in rng.sample(values, min(PER_POD, len(values))):
            cases.append((_label(path, x), _with(pod, path, x)))
    return cases


def _server_verdict(c, obj: dict) -> str | None:
    """None when the API server would store `obj`, else its message."""
    namespace = "namespaces/default/" if obj["kind"] in NAMESPACED else ""
    url = "/api/v1/namespaces/default/pods" if obj["kind"] == "Pod" else f"/apis/{V1}/{namespace}{PLURAL[obj['kind']]}"
    try:
        c.kube.request("POST", url, obj, params={"dryRun": "All", "fieldValidation": "Strict"})
    except ApiError as e:
        if e.status not in (400, 409, 422):
            raise
        return f"{e.status} {e.message}"
    return None


@pytest.mark.parametrize("which", ["DRA objects", "Pods"])
def test_validation_gives_the_api_servers_verdict(apiserver, which):
    version = apiserver.kube.request("GET", "/version")
    kubernetes_version = f"{version['major']}.{version['minor'].rstrip('+')}"
    gates = dict(load_profile(PROFILE).feature_gates)  # what the local control plane was started with
    cases = _cases() if which == "DRA objects" else _pod_cases()
    disagree = []
    refused = 0
    for what, obj in cases:
        server = _server_verdict(apiserver, obj)
        ours = validate(obj, kubernetes_version=kubernetes_version, feature_gates=gates, existing=[NAMESPACE])
        refused += server is not None
        # a field whose gate is off: the API server drops it and stores the rest; labkit refuses,
        # naming the gate. Only such problems = the API server's "stored".
        ours = [p for p in ours if not p.message.startswith("Forbidden: needs feature gate")]
        if (server is None) != (not ours):
            disagree.append(f"{obj['kind']} {as_dict(obj.get('metadata')).get('name')!r}, {what}:\n"
                            f"    API server: {server or 'stored'}\n"
                            f"    labkit:     {'; '.join(str(p) for p in ours[:2]) or 'valid'}")
    print(f"{len(cases)} cases against kube-apiserver {kubernetes_version}: {refused} refused by it, "
          f"{len(cases) - refused} stored; {len(disagree)} disagreements")
    assert len(cases) > 2000 and 500 < refused < len(cases) - 500  # both verdicts well represented
    assert not disagree, f"{len(disagree)} of {len(cases)} verdicts differ:\n" + "\n".join(disagree[:25])
