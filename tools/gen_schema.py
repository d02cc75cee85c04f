"""Write labkit/api/schema_<version>.json: the structure of the kinds labkit validates, as data.

Read from the ``kubernetes`` client's models (its major version N describes Kubernetes 1.N): per model
its fields in the client's order, as [camelCase name, snake_case name when the client also accepts it,
type, required]. Types: ``s``/``S`` string (strict / lax), ``i``/``I`` integer, ``b``/``B`` boolean,
``t`` RFC 3339 time, ``a`` anything, ``|`` + leaves (a union such as IntOrString), ``M:<model>``, ``[`` + type (a list), ``{`` + type (a map).
:mod:`labkit.api.schema` checks manifests against this file, so the kit needs no ``kubernetes``
client (nor pydantic) to validate: a browser, or a lighter install.

    .venv/bin/python tools/gen_schema.py           # regenerate (tests/test_api_schema_data.py checks it)
    .venv/bin/python tools/gen_schema.py --check   # exit 1 when the committed file is stale
"""

from __future__ import annotations

import datetime
import json
import sys
import typing
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


def main() -> int:
    version, text = generate()
    path = schema_path(version)
    if "--check" in sys.argv[1:]:
        if not path.exists() or path.read_text() != text:
            print(f"{path.relative_to(ROOT)} is stale: run .venv/bin/python tools/gen_schema.py")
            return 1
        return 0
    path.write_text(text)
    print(f"wrote {path.relative_to(ROOT)} ({len(text):,} bytes, {len(json.loads(text)['models'])} models)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
