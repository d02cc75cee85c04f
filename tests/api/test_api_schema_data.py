"""The structure checks run on the schema as data (labkit/api/schema_<version>.json), without the
kubernetes client: the file is what tools/gen_schema.py writes from the client, and its checks give
the client's (pydantic's) own errors, in the same order, on every manifest of the course and the
tests and on mutations of each of their fields."""

from __future__ import annotations

import copy
import functools
import random
import subprocess
import sys

import kubernetes.client
import pytest
import yaml

from labkit.api.schema import MODEL_FOR, SCHEMA_VERSION, type_errors
from tests.paths import REPO

pytestmark = pytest.mark.slow  # heavy: `make check` leaves it out, `make test` runs it

ROOT = REPO
BAD_VALUES = [5.5, 7, True, "x", "2", [], {}, None, float("nan"), {"a": 1}, ["a"], 1, "true"]
#: libyaml where PyYAML has it: the corpus is every manifest under examples/ and tests/data/ (the same
#: objects as the pure-Python loader's, at a twentieth of the CPU)
LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@functools.cache
def _objects() -> list[dict]:
    out = []
    for path in sorted([*ROOT.glob("examples/**/*.yaml"), *ROOT.glob("tests/data/**/*.yaml")]):
        if path.stat().st_size > 100_000:
            continue
        try:
            docs = list(yaml.load_all(path.read_text(), Loader=LOADER))  # noqa: S506 - a safe loader
        except (yaml.YAMLError, UnicodeDecodeError, RecursionError):
            continue
        out += [d for d in docs if isinstance(d, dict) and (str(d.get("apiVersion")), str(d.get("kind"))) in MODEL_FOR]
    return out


def _leaves(value: object, path: tuple = ()) -> list[tuple]:
    if isinstance(value, dict):
        return [path] + [p for k, v in value.items() for p in _leaves(v, path + (k,))]
    if isinstance(value, list):
        return [path] + [p for i, v in enumerate(value) for p in _leaves(v, path + (i,))]
    return [path]


def _set(obj: object, path: tuple, value: object) -> None:
    for part in path[:-1]:
        obj = obj[part]  # type: ignore[index]
    obj[path[-1]] = value  # type: ignore[index]


def _client_errors(obj: dict) -> list[tuple]:
    model = getattr(kubernetes.client, MODEL_FOR[(obj["apiVersion"], obj["kind"])])
    try:
        model.model_validate(obj)
    except Exception as exc:  # noqa: BLE001 - pydantic.ValidationError
        return [(e["type"], tuple(e["loc"])) for e in exc.errors() if e["type"] != "extra_forbidden"]
    return []


def _data_errors(obj: dict) -> list[tuple]:
    return [(e["type"], e["loc"]) for e in type_errors(obj, MODEL_FOR[(obj["apiVersion"], obj["kind"])])]


def test_schema_file_is_generated_from_the_client() -> None:
    out = subprocess.run([sys.executable, "tools/gen_schema.py", "--check"], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"1.{kubernetes.__version__.split('.')[0]}" == SCHEMA_VERSION


def test_corpus_is_large() -> None:
    assert len(_objects()) > 50


def test_type_errors_match_the_client() -> None:
    rng = random.Random(0)
    compared = mismatches = 0
    for obj in _objects():
        assert _data_errors(obj) == _client_errors(obj)
        for path in rng.sample(_leaves(obj)[1:], min(6, len(_leaves(obj)) - 1)):
            if path[:1] in (("apiVersion",), ("kind",)):
                continue
            bad = copy.deepcopy(obj)
            _set(bad, path, rng.choice(BAD_VALUES))
            compared += 1
            if _data_errors(bad) != _client_errors(bad):
                mismatches += 1
                assert _data_errors(bad) == _client_errors(bad), path
    assert compared > 200 and mismatches == 0
