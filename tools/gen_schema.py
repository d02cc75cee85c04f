"""Write labkit/api/schema_<version>.json: the structure of the kinds labkit validates, as data.

Read from the ``kubernetes`` client's models (its major version N describes Kubernetes 1.N): per model
its fields in the client's order, as [camelCase name, snake_case name when the client also accepts it,
type, required]. Types: ``s``/``S`` string (strict / lax), ``i``/``I`` integer, ``b``/``B`` boolean,
``t`` RFC 3339 time, ``a`` anything, ``|`` + leaves (a union such as IntOrString), ``M:<model>``, ``[`` + type (a list), ``{`` + type (a map).
:mod:`labkit.api.schema` checks manifests against this file, so the kit needs no ``kubernetes``
client (nor pydantic) to validate: a browser, or a lighter install.

    .venv/bin/python tools/gen_schema.py           # regenerate (tests/api/test_api_schema_data.py checks it)
    .venv/bin/python tools/gen_schema.py --check   # exit 1 when the committed file is stale

The older versions the profiles offer (1.34 to 1.36) come from the client releases of those versions
(OLD_CLIENTS), read from their wheels without importing them: their models are the OpenAPI generator's
plain classes (``openapi_types``, ``attribute_map``), so a field's set, name and nesting come from its
version's client, and a field that the newest schema also has keeps the newest schema's entry (its type
code, strict or lax, and whether it is required: the checks' rules stay the same across versions); a
field only the older version has gets a lax code from its OpenAPI type.

    .venv/bin/python tools/gen_schema.py --old     # pip-downloads OLD_CLIENTS, writes schema_1.34..1.36

A version newer than the newest client (1.38 while its ``kubernetes`` client does not exist) is derived:
its schema is the client's plus the API changes of that release, written out in DERIVED (read from the Go
types of ``k8s.io/api`` and ``k8s.io/apimachinery`` at the release pinned in tools/kubernetes-releases.env:
diff ``{core,resource}/v1/types.go`` and ``pkg/apis/meta/v1/types.go`` against the client's release,
comments stripped). The plain run writes and ``--check`` checks it too; once the client of that version
is installed, the plain run generates the version from the client and DERIVED's entry is dropped.
"""

from __future__ import annotations

import ast
import datetime
import json
import re
import subprocess
import sys
import tempfile
import typing
import zipfile
from pathlib import Path

import kubernetes
import kubernetes.client as client

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from labkit.api.schema import MODEL_FOR, schema_path  # noqa: E402

_LEAVES = {str: "s", int: "i", bool: "b"}


def _type(tp: typing.Any, models: dict[str, typing.Any]) -> str:
    while typing.get_origin(tp) is typing.Union:
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) > 1:  # IntOrString: a union of leaves
            members = [_type(a, models) for a in args]
            if any(len(m) != 1 for m in members):
                raise SystemExit(f"a union of {args}: extend tools/gen_schema.py")
            return "|" + "".join(members)
        tp = args[0]
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        base, *meta = typing.get_args(tp)
        strict = any(getattr(m, "strict", False) for m in meta)
        code = _LEAVES[base]
        return code if strict else code.upper()
    if origin is list:
        return "[" + _type(typing.get_args(tp)[0], models)
    if origin is dict:
        return "{" + _type(typing.get_args(tp)[1], models)
    if isinstance(tp, type) and hasattr(tp, "model_fields"):
        _visit(tp, models)
        return "M:" + tp.__name__
    if tp in _LEAVES:
        return _LEAVES[tp].upper()
    if tp is datetime.datetime:
        return "t"
    if tp is typing.Any or tp is object:
        return "a"
    raise SystemExit(f"unknown annotation {tp!r}: extend tools/gen_schema.py")


def _visit(model: typing.Any, models: dict[str, typing.Any]) -> None:
    if model.__name__ in models:
        return
    models[model.__name__] = fields = []
    for name, info in model.model_fields.items():
        alias = info.serialization_alias or name
        code = _type(info.annotation, models)
        if any(getattr(m, "strict", False) for m in info.metadata) and not code.startswith(("M:", "[M:", "{M:")):
            code = code.lower()  # Field(strict=True): the leaves are strict
        fields.append([alias, name if name != alias else "", code, info.is_required()])


def generate() -> tuple[str, str]:
    version = f"1.{kubernetes.__version__.split('.')[0]}"
    models: dict[str, typing.Any] = {}
    for name in sorted(set(MODEL_FOR.values())):
        _visit(getattr(client, name), models)
    data = {"kubernetes": version, "client": kubernetes.__version__,
            "models": {k: models[k] for k in sorted(models)}}
    return version, json.dumps(data, separators=(",", ":"), sort_keys=False) + "\n"


#: the client release of each older Kubernetes version (its major version N describes Kubernetes 1.N)
OLD_CLIENTS = ("34.1.0", "35.0.0", "36.0.3")
_OPENAPI_LEAVES = {"str": "S", "int": "I", "bool": "B", "float": "a", "datetime": "t", "date": "t", "object": "a"}


def _old_models(wheel: Path) -> dict[str, list[tuple[str, str, str, bool]]]:
    """class name -> [(camelCase, snake_case, OpenAPI type, required)] of every model of an old-style client."""
    out = {}
    with zipfile.ZipFile(wheel) as zf:
        for name in zf.namelist():
            if not re.fullmatch(r"kubernetes/client/models/\w+\.py", name) or name.endswith("__init__.py"):
                continue
            tree = ast.parse(zf.read(name))
            for cls in (n for n in tree.body if isinstance(n, ast.ClassDef)):
                values = {t.id: ast.literal_eval(a.value) for a in cls.body if isinstance(a, ast.Assign)
                          for t in a.targets if isinstance(t, ast.Name) and t.id in ("openapi_types", "attribute_map")}
                if "openapi_types" not in values:
                    continue
                required = set(re.findall(r"Invalid value for `(\w+)`, must not be `None`", ast.get_source_segment(
                    zf.read(name).decode(), cls) or ""))
                out[cls.name] = [(values["attribute_map"][snake], snake, tp, snake in required)
                                 for snake, tp in values["openapi_types"].items()]
    return out


def _old_code(tp: str, old: dict, newest: dict, models: dict) -> str:
    if tp.startswith("list[") and tp.endswith("]"):
        return "[" + _old_code(tp[5:-1], old, newest, models)
    if tp.startswith(("dict(str, ", "dict[str, ")) and tp.endswith((")", "]")):
        return "{" + _old_code(tp[10:-1], old, newest, models)
    if tp in _OPENAPI_LEAVES:
        return _OPENAPI_LEAVES[tp]
    if tp in old:
        _old_visit(tp, old, newest, models)
        return "M:" + tp
    raise SystemExit(f"unknown OpenAPI type {tp!r}: extend tools/gen_schema.py")


def _old_visit(model: str, old: dict, newest: dict, models: dict) -> None:
    if model in models:
        return
    models[model] = fields = []
    known = {entry[0]: entry for entry in newest.get(model, [])}
    for alias, snake, tp, required in old[model]:
        code = _old_code(tp, old, newest, models)  # visits the nested models of this version's client
        if alias in known:
            fields.append(list(known[alias]))
        else:
            fields.append([alias, snake if snake != alias else "", code, required])


def generate_old(wheel: Path) -> tuple[str, str]:
    """The schema of the Kubernetes version of an old-style client's wheel (kubernetes-N.x.y-...whl)."""
    client_version = wheel.name.split("-")[1]
    version = f"1.{client_version.split('.')[0]}"
    old = _old_models(wheel)
    newest = json.loads(schema_path(f"1.{kubernetes.__version__.split('.')[0]}").read_text())["models"]
    models: dict[str, list] = {}
    for name in sorted(set(MODEL_FOR.values()) & set(old)):  # a kind this version does not serve: left out
        _old_visit(name, old, newest, models)
    data = {"kubernetes": version, "client": client_version, "models": {k: models[k] for k in sorted(models)}}
    return version, json.dumps(data, separators=(",", ":"), sort_keys=False) + "\n"


#: version -> (the version it is derived from, {model: fields added, in the client's field form}); a new
#: model is a key whose fields are all new. 1.38, from k8s.io/api@v0.38.0-beta.0 against v0.37.2:
#: resource/{v1,v1beta2,v1beta1,v1alpha3}/types.go add no field (only the constant
#: MaxCapacityRequirements = 32, a validation rule: labkit/api/rules_*.py); core/v1/types.go adds
#: SeccompProfile.oci (SecurityProfileOCI: ref, baseProfile) and its two types; apimachinery's
#: meta/v1 adds two CauseType constants only.
DERIVED: dict[str, tuple[str, dict[str, list[list[typing.Any]]]]] = {
    "1.38": ("1.37", {
        "V1SeccompProfile": [["oci", "", "M:V1SecurityProfileOCI", False]],
        "V1SecurityProfileOCI": [["baseProfile", "base_profile", "M:V1SecurityProfileOCIBase", False],
                                 ["ref", "", "s", True]],
        "V1SecurityProfileOCIBase": [["localhostProfile", "localhost_profile", "s", False], ["type", "", "s", True]],
    }),
}
RELEASES = ROOT / "tools" / "kubernetes-releases.env"


def release(version: str) -> str:
    """The Kubernetes release pinned for ``version`` ("1.38" -> "v1.38.0-beta.0"), tools/kubernetes-releases.env."""
    key = "KUBE_" + version.replace(".", "_") + "="
    for line in RELEASES.read_text().splitlines():
        if line.startswith(key):
            return line.removeprefix(key).strip()
    raise SystemExit(f"{RELEASES.relative_to(ROOT)}: no {key[:-1]} line")


def generate_derived(version: str) -> tuple[str, str]:
    """The schema of ``version`` (DERIVED): its base version's file plus the fields that release adds."""
    base, added = DERIVED[version]
    data = json.loads(schema_path(base).read_text())
    models = data["models"]
    for model, fields in added.items():
        have = models.setdefault(model, [])
        if {f[0] for f in have} & {f[0] for f in fields}:
            raise SystemExit(f"{version}: {model} already has a field of {fields}: update DERIVED")
        have.extend(fields)
        have.sort(key=lambda f: f[0])  # the client orders a model's fields by their camelCase name
    staging = "v0." + release(version).removeprefix("v1.")
    out = {"kubernetes": version, "client": f"{data['client']} + k8s.io/api@{staging}",
           "models": {k: models[k] for k in sorted(models)}}
    return version, json.dumps(out, separators=(",", ":"), sort_keys=False) + "\n"


def _old_wheels(folder: Path) -> list[Path]:
    for v in OLD_CLIENTS:  # one at a time: pip resolves the names of one command together
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", str(folder), f"kubernetes=={v}"],
                       check=True)
    return sorted(folder.glob("kubernetes-*.whl"))


def _write(version: str, text: str, check: bool) -> int:
    path = schema_path(version)
    if check:
        if not path.exists() or path.read_text() != text:
            print(f"{path.relative_to(ROOT)} is stale: run .venv/bin/python tools/gen_schema.py")
            return 1
        return 0
    path.write_text(text)
    print(f"wrote {path.relative_to(ROOT)} ({len(text):,} bytes, {len(json.loads(text)['models'])} models)")
    return 0


def main() -> int:
    check = "--check" in sys.argv[1:]
    if "--old" in sys.argv[1:]:
        with tempfile.TemporaryDirectory() as tmp:
            return max(_write(*generate_old(w), check) for w in _old_wheels(Path(tmp)))
    version, text = generate()
    status = _write(version, text, check)
    for derived in sorted(DERIVED, key=lambda v: tuple(map(int, v.split(".")))):
        if tuple(map(int, derived.split("."))) > tuple(map(int, version.split("."))):
            status = max(status, _write(*generate_derived(derived), check))
    return status


if __name__ == "__main__":
    sys.exit(main())
