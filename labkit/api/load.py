"""Read Kubernetes manifests (YAML/JSON, files, stdin, dicts) into plain dicts and print them back.

Objects keep the key order and values they were written with: no defaults are injected, quantities
stay the strings the user wrote, timestamps stay strings (as in the JSON form the API server uses).
The one change ``load`` makes is to fill ``metadata.namespace`` of namespaced kinds that have none.
"""

from __future__ import annotations

import copy
import json
import math
import os
import stat
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from fake_gpus.kubeyaml import (
    MAX_INPUT_BYTES,
    GoLoader,
    InputRefused,
    documents,
    go_resolve,
    go_scalar,
    read_file,
    read_stream,
    too_large,
)
from labkit.errors import InputError

__all__ = ["MAX_INPUT_BYTES", "LoadError", "NAMESPACED_KINDS", "dump", "go_scalar", "input_path", "load", "load_files",
           "read_documents", "read_stdin"]

#: kinds LabKit knows to be namespaced; everything else is left without a namespace
NAMESPACED_KINDS = frozenset({
    "ResourceClaim", "ResourceClaimTemplate", "Pod", "Deployment", "Job", "PodGroup",
    "ReplicaSet", "StatefulSet", "DaemonSet", "ConfigMap", "Secret", "ServiceAccount",
})


class LoadError(InputError, ValueError):
    """Input that cannot be read or parsed; ``problems`` holds one line per problem."""

    def __init__(self, problems: list[str] | str):
        self.problems = [problems] if isinstance(problems, str) else list(problems)
        super().__init__("\n".join(self.problems))


# -- YAML flavour: as Kubernetes reads it (fake_gpus.kubeyaml: go-yaml's plain scalars, aliases bounded
# as go-yaml bounds them), duplicate keys are errors -------------------------------------------------

_TAG = "tag:yaml.org,2002:"
if TYPE_CHECKING:  # mypy needs a class as the base: SafeDumper stands for both (same representer and resolver)
    _BaseDumper = yaml.SafeDumper
else:  # libyaml's emitter where PyYAML was built with it
    _BaseDumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class _Loader(GoLoader):
    pass


def _go_key(key: Any) -> Any:
    """sigs.k8s.io/yaml turns non-string map keys into JSON strings (``y:`` becomes "true")."""
    if isinstance(key, bool):
        return "true" if key else "false"
    if isinstance(key, int):
        return str(key)
    if isinstance(key, float):
        return repr(key)
    return key


def _unshare(doc: Any) -> Any:
    """Aliased parts as independent copies (JSON has no sharing); kubeyaml.documents has bounded the
    expansion as go-yaml does and refused recursive aliases."""
    if isinstance(doc, dict):
        return {k: _unshare(v) for k, v in doc.items()}
    if isinstance(doc, list):
        return [_unshare(v) for v in doc]
    return doc


def _construct_mapping(loader: _Loader, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
    written = sum(1 for key_node, _ in node.value if key_node.tag != _TAG + "merge")
    loader.flatten_mapping(node)  # merged pairs (<<: *anchor) first, then the written ones
    merged = len(node.value) - written
    result: dict[Any, Any] = {}
    own: set[Any] = set()
    for index, (key_node, value_node) in enumerate(node.value):
        key = _go_key(loader.construct_object(key_node, deep=True))
        try:
            hash(key)
        except TypeError:
            raise yaml.constructor.ConstructorError(
                None, None, "mapping keys must be strings", key_node.start_mark) from None
        if index >= merged:  # a written key may override a merged one, not another written one
            if key in own:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r}; fix: keep one (the API server refuses "
                    "duplicate fields)", key_node.start_mark)
            own.add(key)
        result[key] = loader.construct_object(value_node, deep=deep)
    return result


def _construct_yaml_map(loader: _Loader, node: yaml.MappingNode) -> Iterator[dict[Any, Any]]:
    data: dict[Any, Any] = {}
    yield data
    data.update(_construct_mapping(loader, node))


_Loader.add_constructor("tag:yaml.org,2002:map", _construct_yaml_map)


class _Dumper(_BaseDumper):
    # quote exactly the strings a Go reader would take for something else ("y", "1e3", "0o17")
    resolve = go_resolve


_LINE_BREAKS_YAML_ONLY = ("\x85", "\u2028", "\u2029", "\r")


def _represent_str(dumper: _Dumper, value: str) -> yaml.ScalarNode:
    # YAML treats NEL/LS/PS/CR as line breaks inside plain and block scalars: escape them
    if any(ch in value for ch in _LINE_BREAKS_YAML_ONLY):
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style='"')
    if "\n" in value:
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|")
    return dumper.represent_scalar("tag:yaml.org,2002:str", value)


_Dumper.add_representer(str, _represent_str)


# -- parsing ----------------------------------------------------------------------------------

def _mark_text(err: yaml.YAMLError, line_offset: int, text: str = "") -> str:
    mark = getattr(err, "problem_mark", None) or getattr(err, "context_mark", None)
    problem = getattr(err, "problem", None) or str(err).splitlines()[0]
    context = getattr(err, "context", None)
    msg = f"{context}, {problem}" if context and problem and context not in problem else str(problem)
    if mark is not None:
        lines = text.splitlines()
        line = lines[mark.line] if 0 <= mark.line < len(lines) else ""
        if "\t" in line[: mark.column + 1]:
            msg += "; fix: indent with spaces, YAML does not allow tabs there"
        return f"line {mark.line + 1 + line_offset}: {msg}"
    return msg


def _split_documents(text: str) -> list[tuple[int, str]]:
    """Split on ``---`` lines, returning (first line index, text) pairs; used only for errors."""
    docs: list[tuple[int, str]] = []
    start = 0
    buf: list[str] = []
    for i, line in enumerate(text.splitlines(keepends=True)):
        if line.startswith("---") and line[3:].strip() in ("", "|", ">") or line.rstrip() == "...":
            docs.append((start, "".join(buf)))
            start, buf = i + 1, []
            if line.rstrip() == "...":
                continue
            rest = line[3:]
            if rest.strip():
                buf.append(rest)
                start = i
        else:
            buf.append(line)
    docs.append((start, "".join(buf)))
    return docs


_TOO_DEEP = ("nested too deeply to read (hundreds of levels of lists or mappings); "
             "fix: flatten the document")


def _too_deep(exc: yaml.YAMLError) -> bool:
    """libyaml's own limit (PyYAML 6.0.4 wheels): "exceeded maximum nesting depth" (the pure
    Python parser hits RecursionError instead)."""
    return "maximum nesting depth" in str(exc)


class _JSONDuplicate(ValueError):
    pass


def _json_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise _JSONDuplicate(key)
        result[key] = value
    return result


def _json_constant(name: str) -> Any:
    """NaN / Infinity are not JSON (Go's encoding/json refuses them)."""
    raise json.JSONDecodeError(f"{name} is not a JSON value", name, 0)


class _JSONRange(ValueError):
    pass


def _json_float(text: str) -> float:
    """A JSON number as a float64; one past its range (1e999) is refused, as Go's strconv.ParseFloat
    refuses it (k8s.io/apimachinery/pkg/util/json, which kubectl decodes JSON with)."""
    value = float(text)
    if not math.isfinite(value):
        raise _JSONRange(text)
    return value


def _json_int(text: str) -> int | float:
    """A JSON integer: exact up to 20 digits (all of int64 and uint64), a float64 past that (kubectl's
    JSON decoder does the same), never int() of thousands of digits."""
    return int(text) if len(text.lstrip("-")) <= 20 else _json_float(text)


def _shown(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text):,} characters)"


def _parse_text(text: str, origin: str) -> list[Any]:
    """Parse YAML or JSON text into documents; raise LoadError with all problems found."""
    stripped = text.lstrip()
    if stripped.startswith(("{", "[")):
        try:
            return [json.loads(text, object_pairs_hook=_json_object, parse_constant=_json_constant,
                               parse_float=_json_float, parse_int=_json_int)]
        except _JSONDuplicate as exc:
            raise LoadError(f"{origin}:doc 1: duplicate key {exc.args[0]!r}; fix: keep one "
                            "(the API server refuses duplicate fields)") from None
        except _JSONRange as exc:
            raise LoadError(f"{origin}:doc 1: number {_shown(exc.args[0])} is out of range of a 64-bit float "
                            "(kubectl and the API server cannot decode it); fix: quote it to make it a "
                            "string, or give a smaller number") from None
        except RecursionError:
            raise LoadError(f"{origin}:doc 1: {_TOO_DEEP}") from None
        except json.JSONDecodeError as exc:
            # JSON-looking YAML (flow style) is still YAML: fall through, keep the JSON error
            json_error = f"{origin}:doc 1: line {exc.lineno}: invalid JSON: {exc.msg}"
        else:  # pragma: no cover - returned above
            json_error = ""
    else:
        json_error = ""
    docs: list[Any] = []
    try:
        for doc, shared in documents(text, _Loader):
            docs.append(_unshare(doc) if shared else doc)
        return docs
    except yaml.YAMLError as exc:
        if _too_deep(exc):
            raise LoadError(f"{origin}: {_TOO_DEEP}") from None
    except InputRefused as exc:  # aliases go-yaml refuses, in the document after those read
        raise LoadError(f"{origin}:doc {len(docs) + 1}: {exc}") from None
    except LoadError:
        raise
    except RecursionError:
        raise LoadError(f"{origin}: {_TOO_DEEP}") from None
    except (ValueError, TypeError) as exc:  # odd input
        raise LoadError(f"{origin}:doc 1: {exc}") from None
    if json_error:
        raise LoadError(json_error)
    problems: list[str] = []
    for number, (offset, chunk) in enumerate(_split_documents(text), start=1):
        try:
            list(documents(chunk, _Loader))
        except yaml.YAMLError as exc:
            problems.append(f"{origin}:doc {number}: {_mark_text(exc, offset, chunk)}")
        except (ValueError, RecursionError, TypeError) as exc:
            problems.append(f"{origin}:doc {number}: {exc}")
    if not problems:  # splitting hid the problem (e.g. a '---' inside a block scalar)
        try:
            list(documents(text, _Loader))
        except yaml.YAMLError as exc:
            problems.append(f"{origin}: {_mark_text(exc, 0, text)}")
        except (ValueError, RecursionError, TypeError) as exc:
            problems.append(f"{origin}: {exc}")
    return_problems = problems or [f"{origin}: unparsable YAML"]
    raise LoadError(return_problems)


def _looks_like_text(source: str) -> bool:
    """Whether a str handed to load() is YAML/JSON text rather than a path (the Python API's guess;
    the commands pass Path objects, so a file named ``a: b.yaml`` is read as a file there). Empty or
    blank text is text: no documents, never Path("") (the working folder)."""
    if not source.strip() or "\n" in source or source.lstrip().startswith(("{", "[")):
        return True
    return ": " in source or source.rstrip().endswith(":")


#: leaves copy_of returns as they are (exact types: the fast path; subclasses go the slow one)
_LEAVES = frozenset((str, int, float, bool, type(None)))


def copy_of(obj: Any) -> Any:
    """Deep copy of plain JSON-like data (dicts, lists, scalars); much faster than copy.deepcopy,
    which it falls back to for anything else. Shared parts are copied once per reference."""
    t = type(obj)
    if t is dict:  # the common case, without a call per leaf
        return {k: v if type(v) in _LEAVES else copy_of(v) for k, v in obj.items()}
    if t is list:
        return [v if type(v) in _LEAVES else copy_of(v) for v in obj]
    if t in _LEAVES:
        return obj
    if isinstance(obj, dict):
        return {k: copy_of(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [copy_of(v) for v in obj]
    if isinstance(obj, (str, int, float, bool)) or obj is None:
        return obj
    return copy.deepcopy(obj)


def _read_source(source: Any) -> tuple[list[Any], str]:
    """Return (documents, origin) for any accepted source."""
    try:
        if isinstance(source, dict):
            return [copy_of(source)], "<dict>"
        if isinstance(source, list | tuple):
            return [copy_of(item) for item in source], "<list>"
    except RecursionError:  # what a file cannot hold (the YAML reader stops earlier), a dict can
        raise LoadError(f"<{type(source).__name__}>: nested too deeply to read (hundreds of levels of lists "
                        "or mappings); fix: flatten the document") from None
    if isinstance(source, bytes):
        return _parse_text(decode_text(source, "<bytes>"), "<string>"), "<string>"
    if isinstance(source, os.PathLike):
        return _read_file(Path(source))
    if isinstance(source, str):
        if source == "-":
            return _parse_text(read_stdin(), "<stdin>"), "<stdin>"
        if _looks_like_text(source):
            return _parse_text(source, "<string>"), "<string>"
        return _read_file(Path(source))
    raise LoadError(f"cannot load objects from a {type(source).__name__}; "
                    "pass a path, '-', YAML/JSON text, a dict or a list of dicts")


_MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")


def _read_file(path: Path) -> tuple[list[Any], str]:
    """Read one file, or every .yaml/.yml/.json file directly in a directory (like kubectl -f DIR)."""
    origin = str(path)
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.suffix in _MANIFEST_SUFFIXES and p.is_file())
        if not files:
            raise LoadError(f"{origin}: directory has no .yaml, .yml or .json files")
        docs: list[Any] = []
        problems: list[str] = []
        for file in files:
            try:
                docs.extend(_read_file(file)[0])
            except LoadError as exc:
                problems.extend(exc.problems)
        if problems:
            raise LoadError(problems)
        return docs, origin
    try:
        data = read_file(path)  # at most MAX_INPUT_BYTES; a device refused, a FIFO without writer too
    except InputRefused as exc:
        raise LoadError(f"{origin}: {exc}") from None
    except FileNotFoundError:
        raise LoadError(f"{origin}: no such file") from None
    except IsADirectoryError:
        raise LoadError(f"{origin}: is a directory; pass the manifest files in it") from None
    except OSError as exc:
        raise LoadError(f"{origin}: cannot read: {exc.strerror or exc}") from None
    return _parse_text(decode_text(data, origin), origin), origin


def read_stdin() -> str:
    """Standard input as text (decoded as a file is: UTF-8, or the encoding a byte order mark names), at
    most MAX_INPUT_BYTES of it: an endless stream (``yes | labkit validate -f -``) is refused, not read
    until the memory runs out."""
    binary = getattr(sys.stdin, "buffer", None)
    try:
        if binary is None:  # a text stream put in place of stdin (a notebook, a test)
            text = sys.stdin.read(MAX_INPUT_BYTES + 1)
            if len(text) > MAX_INPUT_BYTES:
                raise InputRefused(str(too_large()))
            return text
        return decode_text(read_stream(binary), "<stdin>")
    except InputRefused as exc:
        raise LoadError(f"<stdin>: {exc}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise LoadError(f"<stdin>: cannot read: {exc}") from None


def input_path(arg: str | os.PathLike[str]) -> Path:
    """A ``-f``/``--state`` argument as the Path it names, whatever characters it holds (``a: b.yaml``,
    ``{x}.yaml``, a newline). "" is refused: Path("") would be the working folder."""
    if not os.fspath(arg):
        raise LoadError("'': an empty file name; fix: give the path of a file ('-' reads standard input)")
    return Path(arg)


_BOMS = ((b"\xef\xbb\xbf", "utf-8"), (b"\xff\xfe", "utf-16-le"), (b"\xfe\xff", "utf-16-be"))


def decode_text(data: bytes, origin: str) -> str:
    """Bytes as kubectl decodes a manifest (cli-runtime's FileVisitor, BOMOverride over UTF-8): a
    UTF-8, UTF-16LE or UTF-16BE byte order mark picks that encoding and is dropped; without one
    the text is UTF-8. Anything else is a :class:`LoadError` naming the byte."""
    for bom, codec in _BOMS:
        if data.startswith(bom):
            body = data[len(bom):]
            try:
                return body.decode(codec)
            except UnicodeDecodeError as exc:
                raise LoadError(f"{origin}: not {codec.upper()} text after its byte order mark ({exc.reason} "
                                f"at byte {exc.start + len(bom)}); fix: save the file as UTF-8") from None
    utf16 = len(data) >= 4 and data.count(b"\x00") * 3 >= len(data)
    hint = ("; it looks like UTF-16 without a byte order mark: save it as UTF-8 (kubectl reads UTF-16 "
            "only after a BOM)" if utf16 else "")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise LoadError(f"{origin}: not UTF-8 text ({exc.reason} at byte {exc.start}){hint}") from None
    if utf16:
        nul = data.index(b"\x00")
        raise LoadError(f"{origin}: not UTF-8 text (NUL at byte {nul}){hint}")
    return text


def path_problem(path: str | os.PathLike[str], what: str = "a YAML file") -> str | None:
    """Why ``path`` cannot be read as one file (None when it can): missing, a directory, or not a
    regular file (``/dev/null``, a FIFO, a socket). The one place these messages are worded."""
    p = Path(path)
    try:
        st = p.stat()
    except FileNotFoundError:
        return f"no such file; give {what}"
    except OSError as exc:
        return f"cannot read: {exc.strerror or exc}"
    if stat.S_ISDIR(st.st_mode):
        return f"is a directory, not a file; give {what}"
    if not stat.S_ISREG(st.st_mode):
        kind = "a character device" if stat.S_ISCHR(st.st_mode) else "a FIFO" if stat.S_ISFIFO(st.st_mode) \
            else "a socket" if stat.S_ISSOCK(st.st_mode) else "not a regular file"
        return f"is {kind}, not a regular file (it has no content to read); give {what}"
    return None


def read_documents(path: str | os.PathLike[str]) -> list[Any]:
    """The YAML/JSON documents of one file, read as Kubernetes reads them (for profiles, kubeconfigs and
    other non-object files): at most MAX_INPUT_BYTES, go-yaml's scalars and alias bound; a device, a FIFO
    without writer, duplicate keys, alias bombs, tabs, binary are :class:`LoadError` lines naming the file."""
    return _read_file(input_path(path))[0]


def _is_list_kind(doc: dict[str, Any]) -> bool:
    kind = doc.get("kind")
    return isinstance(kind, str) and kind.endswith("List") and isinstance(doc.get("items"), list)


def _flatten(doc: dict[str, Any], origin: str, number: int, problems: list[str]) -> Iterator[dict[str, Any]]:
    if not _is_list_kind(doc):
        yield doc
        return
    kind = doc["kind"]
    item_kind = kind[: -len("List")] if kind != "List" else None
    for i, item in enumerate(doc["items"]):
        if not isinstance(item, dict):
            problems.append(f"{origin}:doc {number}: items[{i}]: expected an object, got "
                            f"{type(item).__name__}")
            continue
        if item_kind and ("apiVersion" not in item or "kind" not in item):
            filled = {"apiVersion": item.get("apiVersion", doc.get("apiVersion")),
                      "kind": item.get("kind", item_kind)}
            filled.update({k: v for k, v in item.items() if k not in filled})
            item = filled
        yield from _flatten(item, origin, number, problems)


def _set_namespace(obj: dict[str, Any], default_namespace: str | None) -> None:
    kind = obj.get("kind")
    if not default_namespace or not isinstance(kind, str) or kind not in NAMESPACED_KINDS:
        return
    meta = obj.get("metadata")
    if isinstance(meta, dict) and not meta.get("namespace"):
        meta["namespace"] = default_namespace


def _objects(documents: Iterable[Any], origin: str, default_namespace: str | None,
             problems: list[str], within: str = "") -> list[dict[str, Any]]:
    objs: list[dict[str, Any]] = []
    for number, doc in enumerate(documents, start=1):
        where = f"{within}[{number - 1}]" if within else f"doc {number}"
        if doc is None:
            continue
        if isinstance(doc, list):  # a bare JSON/YAML array of objects
            nested = _objects(doc, origin, default_namespace, problems, where)
            objs.extend(nested)
            continue
        if not isinstance(doc, dict):
            problems.append(f"{origin}:{where}: expected a Kubernetes object (a mapping with "
                            f"apiVersion, kind, metadata), got {type(doc).__name__}")
            continue
        bad_keys = [k for k in doc if not isinstance(k, str)]
        if bad_keys:
            problems.append(f"{origin}:{where}: top-level keys must be strings, got {bad_keys[0]!r}")
            continue
        for obj in _flatten(doc, origin, number, problems):
            _set_namespace(obj, default_namespace)
            objs.append(obj)
    return objs


def load(source: Any, *, default_namespace: str | None = "default") -> list[dict[str, Any]]:
    """Load Kubernetes objects from a path, ``"-"``, YAML/JSON text, a dict or a list of dicts.

    Lists (``kind: List``, ``<Kind>List``) are flattened; namespaced kinds without a namespace
    get ``default_namespace`` (``None`` leaves them alone). Raises :class:`LoadError`.
    """
    documents, origin = _read_source(source)
    problems: list[str] = []
    objs = _objects(documents, origin, default_namespace, problems)
    if problems:
        raise LoadError(problems)
    return objs


def load_files(paths: Iterable[str | os.PathLike[str]], *,
               default_namespace: str | None = "default") -> list[dict[str, Any]]:
    """Load several files (``"-"`` = stdin) in order; all problems are reported together.

    Input with no object at all is an error, as for ``kubectl apply``.
    """
    paths = list(paths)
    objs: list[dict[str, Any]] = []
    problems: list[str] = []
    for path in paths:
        try:
            docs, origin = (_read_source(path) if str(path) == "-" else _read_file(input_path(path)))
        except LoadError as exc:
            problems.extend(exc.problems)
            continue
        objs.extend(_objects(docs, origin, default_namespace, problems))
    if problems:
        raise LoadError(problems)
    if not objs:
        names = ", ".join(str(p) for p in paths) or "<no files>"
        raise LoadError(f"{names}: no objects (the input is empty or only comments); fix: give "
                        "a manifest with apiVersion, kind and metadata (kubectl refuses it too)")
    return objs


def dump(objs: dict[str, Any] | Iterable[dict[str, Any]], fmt: str = "yaml") -> str:
    """Print objects as multi-document YAML or JSON (one object, or a ``kind: List``)."""
    items = [objs] if isinstance(objs, dict) else list(objs)
    if fmt == "json":
        if len(items) == 1:
            return json.dumps(items[0], indent=2, ensure_ascii=False) + "\n"
        return json.dumps({"apiVersion": "v1", "kind": "List", "items": items},
                          indent=2, ensure_ascii=False) + "\n"
    if fmt == "yaml":
        return yaml.dump_all(items, Dumper=_Dumper, sort_keys=False, default_flow_style=False,
                             allow_unicode=True, explicit_start=len(items) > 1, width=10**6)
    raise LoadError(f"unknown output format {fmt!r}; fix: use 'yaml' or 'json'")
