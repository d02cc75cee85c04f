"""cel-cpp type names -> cel-go type names, and cel-go's non-bool conversion messages."""

from __future__ import annotations

import re

_SIMPLE = {
    "INT": "int", "UINT": "uint", "DOUBLE": "double", "STRING": "string", "BOOL": "bool",
    "BYTES": "bytes", "NULL": "null_type", "NULL_TYPE": "null_type", "DYN": "dyn",
    "DURATION": "google.protobuf.Duration", "TIMESTAMP": "google.protobuf.Timestamp",
    "LIST": "list", "MAP": "map", "TYPE": "type", "ERROR": "error",
}
_TOKEN = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*|[<>,]|\s+")


def go_type_name(cpp: str) -> str:
    """``MAP<STRING, LIST<INT>>`` -> ``map(string, list(int))``."""
    out = []
    for tok in _TOKEN.findall(cpp):
        if tok == "<":
            out.append("(")
        elif tok == ">":
            out.append(")")
        elif tok.strip() == "":
            continue
        elif tok == ",":
            out.append(", ")
        else:
            out.append(_SIMPLE.get(tok, tok.lower() if tok.isupper() else tok))
    return "".join(out)


_CONVERSION = {
    "string": "unsupported native conversion from string to 'bool'",
    "int": "unsupported type conversion from 'int' to bool",
    "uint": "unsupported type conversion from 'uint' to bool",
    "double": "type conversion error from Double to 'bool'",
    "list": "type conversion error from list to 'bool'",
    "map": "type conversion error from map to 'bool'",
    "null_type": "type conversion error from 'null_type' to 'bool'",
}


def runtime_non_bool(go_name: str) -> str:
    """The message Kubernetes gives when a selector returns a non-bool value at run time."""
    short = go_name.rpartition(".")[2]
    detail = _CONVERSION.get(go_name, f"type conversion error from '{short}' to 'bool'")
    return f"CEL result of type {go_name} could not be converted to bool: {detail}"
