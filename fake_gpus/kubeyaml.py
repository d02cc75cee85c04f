"""Input read as Kubernetes reads it, within bounds: files, pipes and YAML.

The one home of these rules for both packages: fake_gpus imports nothing from labkit, so they live here
and ``labkit.api.load`` builds its manifest reader on them (labkit may import fake_gpus).

- Size: one input is read up to :data:`MAX_INPUT_BYTES`; past that the reading stops and the input is
  refused (:func:`read_file`, :func:`read_stream`), so ``-f /dev/urandom`` or an endless pipe never fills
  the memory.
- Files that are not files: a directory, a character or block device (``/dev/zero``, a terminal) or a
  socket is refused before it is opened. A FIFO is opened without waiting: when no program has it open
  for writing it is refused at once (nothing would ever arrive; a process substitution ``<(cmd)`` has its
  writer already), else it is read until its writer closes it.
- YAML scalars: sigs.k8s.io/yaml (what kubectl and the API server use) reads YAML with a fork of
  go-yaml v2, whose plain scalars differ from PyYAML's (:func:`go_scalar`): y/n are booleans, 1e3 a
  float, an integer past uint64 or a float past float64 (1e999) stays a string.
- Aliases: go-yaml counts the nodes it decodes and refuses a document where aliases make up too much of
  them ("document contains excessive aliasing": a billion laughs is refused after a few thousand nodes,
  never expanded); :func:`documents` applies the same count to the composed nodes before constructing.
"""

from __future__ import annotations

import errno
import math
import os
import re
import stat
from collections.abc import Iterator
from typing import IO, Any

import yaml

__all__ = ["MAX_INPUT_BYTES", "GoLoader", "InputRefused", "document", "documents", "go_resolve", "go_scalar",
           "read_file", "read_stream", "too_large"]

#: the most bytes of one input (a manifest or dump file, a profile, standard input) that are read. The API
#: server takes 3 MiB per request (k8s.io/apiserver pkg/server/config.go, MaxRequestBodyBytes) and etcd
#: stores 1.5 MiB per object; a file holds many objects (a dump of a few hundred GPU nodes is tens of MiB),
#: so the bound is well above those, and below what parsing more would take (minutes and gigabytes).
MAX_INPUT_BYTES = 64 * 2**20


class InputRefused(ValueError):
    """Input refused by these bounds; str() says why and what to do (the caller names the file)."""


def too_large(limit: int = MAX_INPUT_BYTES) -> InputRefused:
    return InputRefused(f"larger than {limit // 2**20} MiB, the most labkit reads of one input (the API server "
                        "takes 3 MiB per request); fix: split it into several files")


# -- reading files and streams -------------------------------------------------------------------

def _kind(mode: int) -> str | None:
    """What a file that is not a regular file or a FIFO is, for messages (None: readable)."""
    if stat.S_ISREG(mode) or stat.S_ISFIFO(mode):
        return None
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISCHR(mode):
        return "a character device (like /dev/zero or a terminal)"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def read_file(path: str | os.PathLike[str], limit: int = MAX_INPUT_BYTES) -> bytes:
    """The bytes of the file ``path``, at most ``limit`` of them (more: :class:`InputRefused`).

    A device, a socket or a directory is refused without being opened (:class:`InputRefused`; a missing
    file is the ``OSError`` ``open`` raises). A FIFO with no writer is refused at once instead of waiting
    for one; with a writer it is read until the writer closes it."""
    kind = _kind(os.stat(path).st_mode)
    if kind is not None:
        raise InputRefused(f"is {kind}, not a file; give a file (or '-' to read standard input)")
    # O_NONBLOCK: opening a FIFO does not wait for a writer (a regular file ignores the flag)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags)
    try:
        mode = os.fstat(fd).st_mode
        kind = _kind(mode)
        if kind is not None:  # swapped for something else since the stat above
            raise InputRefused(f"is {kind}, not a file; give a file (or '-' to read standard input)")
        first = b""
        if stat.S_ISFIFO(mode):
            try:
                first = os.read(fd, min(65536, limit + 1))
            except BlockingIOError:  # a writer has it open, nothing written yet
                pass
            else:
                if not first:  # end of file at once: no program has it open for writing
                    raise InputRefused("is a FIFO no program writes to (nothing arrived); fix: start the program "
                                       "that writes it first, or pipe its output to '-f -'")
            os.set_blocking(fd, True)  # there is a writer: from here on, wait for what it writes
        with os.fdopen(os.dup(fd), "rb") as fh:
            return first + _read_upto(fh, limit - len(first), limit)
    finally:
        os.close(fd)


def read_stream(stream: IO[bytes], limit: int = MAX_INPUT_BYTES) -> bytes:
    """What the binary ``stream`` holds (standard input), at most ``limit`` bytes (more: :class:`InputRefused`)."""
    return _read_upto(stream, limit, limit)


def _read_upto(stream: IO[bytes], budget: int, limit: int) -> bytes:
    """The rest of ``stream`` when it holds at most ``budget`` bytes; reading stops one byte past that."""
    chunks: list[bytes] = []
    got = 0
    while got <= budget:
        try:
            chunk = stream.read(min(1 << 20, budget + 1 - got))
        except InterruptedError:  # pragma: no cover - PEP 475 retries; kept for odd streams
            continue
        except OSError as exc:
            if exc.errno == errno.EAGAIN:  # pragma: no cover - a non-blocking stream handed in
                raise InputRefused("cannot be read without waiting (a non-blocking stream)") from None
            raise
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        got += len(chunk)
    raise too_large(limit)


# -- plain scalars read as Kubernetes reads them ----------------------------------------------------
# kubectl and the API server turn YAML into JSON with sigs.k8s.io/yaml, whose YAML 1.1 reader (a fork of
# go-yaml v2, resolve.go) differs from PyYAML's: y/Y/n/N are booleans, 1e3 is a float, 0o17 an octal int,
# 1:20 a string (no base 60), "=" a string; timestamps stay strings. An integer is strconv.ParseInt(s, 0, 64),
# else ParseUint(s, 0, 64) (no sign), else a float when it looks like one and ParseFloat succeeds (1e999
# and 20-digit integers past uint64 that overflow float64 do not: they stay strings).

_TAG = "tag:yaml.org,2002:"
_GO_BOOL = {**dict.fromkeys(("y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE",
                             "on", "On", "ON"), True),
            **dict.fromkeys(("n", "N", "no", "No", "NO", "false", "False", "FALSE",
                             "off", "Off", "OFF"), False)}
_GO_NULL = frozenset(("", "~", "null", "Null", "NULL"))
_GO_SPECIAL_FLOAT = {**dict.fromkeys((".nan", ".NaN", ".NAN"), float("nan")),
                     **dict.fromkeys((".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF"),
                                     float("inf")),
                     **dict.fromkeys(("-.inf", "-.Inf", "-.INF"), float("-inf"))}
_GO_FLOAT = re.compile(r"^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$")
_GO_INT = re.compile(r"^[-+]?(0[xX][0-9a-fA-F]+|0[oO][0-7]+|0[bB][01]+|0[0-7]*|[1-9][0-9]*)$")
_GO_TIMESTAMP = re.compile(r"^[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}([Tt ][0-9]{1,2}:[0-9]{1,2}:[0-9]{1,2}"
                           r"(\.[0-9]+)?(Z|[-+][0-9]{2}:[0-9]{2})?)?$")
_INT64_MIN, _INT64_MAX, _UINT64_MAX = -(2**63), 2**63 - 1, 2**64 - 1
#: digits of the largest uint64 in each base: a longer number is past 64 bits (and int() is never asked
#: to convert thousands of decimal digits)
_MAX_DIGITS = {2: 64, 8: 22, 10: 20, 16: 16}


def _go_int(text: str) -> int | None:
    """``strconv.ParseInt(text, 0, 64)``, else ``ParseUint(text, 0, 64)``; None when neither takes it."""
    if not _GO_INT.match(text):
        return None
    signed = text[0] in "+-"
    digits = text.lstrip("+-")
    base = 10
    if len(digits) > 1 and digits[0] == "0":
        prefix = digits[1].lower()
        base, digits = {"x": (16, digits[2:]), "o": (8, digits[2:]), "b": (2, digits[2:])}.get(prefix, (8, digits[1:]))
    significant = digits.lstrip("0")
    if len(significant) > _MAX_DIGITS[base]:
        return None
    value = int(significant or "0", base) * (-1 if text[0] == "-" else 1)
    if _INT64_MIN <= value <= _INT64_MAX or (not signed and value <= _UINT64_MAX):
        return value
    return None


def _go_float(text: str) -> float | None:
    """``strconv.ParseFloat(text, 64)`` for text that matched _GO_FLOAT; None when it overflows (Go: ErrRange)."""
    value = float(text)
    return value if math.isfinite(value) else None


def go_scalar(text: str) -> tuple[str, Any]:
    """How go-yaml v2 resolves an unquoted scalar: (``bool|null|int|float|str``, value)."""
    if text in _GO_BOOL:
        return "bool", _GO_BOOL[text]
    if text in _GO_NULL:
        return "null", None
    if text in _GO_SPECIAL_FLOAT:
        return "float", _GO_SPECIAL_FLOAT[text]
    first = text[0]
    if first == "." and _GO_FLOAT.match(text):
        value = _go_float(text)
        return ("str", text) if value is None else ("float", value)
    if first in "+-0123456789":
        if _GO_TIMESTAMP.match(text):
            return "str", text  # go-yaml keeps timestamps as strings in untyped maps
        plain = text.replace("_", "")
        number = _go_int(plain)
        if number is not None:
            return "int", number
        if _GO_FLOAT.match(plain):
            value = _go_float(plain)
            if value is not None:
                return "float", value
    return "str", text


def go_resolve(self: Any, kind: type, value: str, implicit: tuple[bool, bool]) -> str:
    """A resolver's ``resolve`` that tags plain scalars as go-yaml does (also for a dumper: it then quotes
    exactly the strings a Go reader would take for something else, such as "y", "1e3" or "0o17")."""
    if kind is yaml.ScalarNode and implicit[0]:
        if value == "<<":
            return _TAG + "merge"
        return _TAG + go_scalar(value)[0]
    return yaml.resolver.Resolver.resolve(self, kind, value, (False, False)
                                          if kind is yaml.ScalarNode else implicit)


def _go_scalar_constructor(want: str) -> Any:
    def construct(loader: Any, node: yaml.ScalarNode) -> Any:
        kind, value = go_scalar(loader.construct_scalar(node))
        if kind == want:
            return value
        if want == "float" and kind == "int":
            return float(value)
        raise yaml.constructor.ConstructorError(
            None, None, f"cannot decode {node.value!r} as !!{want}", node.start_mark)
    return construct


# libyaml when present (about 10x faster); the same behaviour either way
_BaseLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class GoLoader(_BaseLoader):  # type: ignore[misc,valid-type]  # the base is picked at import
    """PyYAML's safe loader with go-yaml's plain scalars (:func:`go_scalar`); use it through
    :func:`documents` or :func:`document`, which bound the aliases."""


GoLoader.resolve = go_resolve  # type: ignore[method-assign]  # go-yaml's plain scalars
for _kind_name in ("bool", "int", "float"):
    GoLoader.add_constructor(_TAG + _kind_name, _go_scalar_constructor(_kind_name))


# -- aliases bounded as go-yaml bounds them -------------------------------------------------------------
# go-yaml (v2 decode.go, which sigs.k8s.io/yaml's goyaml.v2 forks; v3 the same) counts each node it
# decodes, and those decoded inside an alias; past 1,000 decodes and 100 alias decodes it fails when the
# alias share exceeds allowedAliasRatio: 99% up to 400,000 decodes, falling to 10% at 4,000,000.

_RATIO_LOW, _RATIO_HIGH = 400_000, 4_000_000


def _allowed_alias_ratio(decodes: int) -> float:
    if decodes <= _RATIO_LOW:
        return 0.99
    if decodes >= _RATIO_HIGH:
        return 0.10
    return 0.99 - 0.89 * (decodes - _RATIO_LOW) / (_RATIO_HIGH - _RATIO_LOW)


EXCESSIVE_ALIASING = ("document contains excessive aliasing (go-yaml, which kubectl and the API server read "
                      "YAML with, refuses it); fix: write the repeated parts out or use fewer aliases")
RECURSIVE_ALIAS = ("an alias refers to its own anchor (a recursive structure); "
                   "fix: remove the self-reference")


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [child for pair in node.value for child in pair]
    return []


def _alias_slots(root: yaml.Node) -> set[tuple[int, int]]:
    """The (id(parent), position) of every place an alias stands, in document order: a node met again
    after its anchor. A node met again while its own children are read is a recursive alias."""
    seen = {id(root)}
    open_nodes: set[int] = set()
    aliases: set[tuple[int, int]] = set()
    # (parent, position in it, node, whether this entry marks the end of node's children)
    stack: list[tuple[yaml.Node | None, int, yaml.Node, bool]] = [(None, 0, root, False)]
    while stack:
        parent, pos, node, done = stack.pop()
        if done:
            open_nodes.discard(id(node))
            continue
        if parent is not None:
            if id(node) in seen:
                if id(node) in open_nodes:
                    raise InputRefused(RECURSIVE_ALIAS)
                aliases.add((id(parent), pos))
                continue
            seen.add(id(node))
        children = _children(node)
        if children:
            open_nodes.add(id(node))
            stack.append((None, 0, node, True))
            stack.extend((node, i, children[i], False) for i in range(len(children) - 1, -1, -1))
    return aliases


def _check_alias_ratio(root: yaml.Node, aliases: set[tuple[int, int]]) -> None:
    """Count the decodes as go-yaml's decoder.unmarshal does (document node included; an alias counts
    once itself, then its target's nodes count as alias decodes) and fail where it would."""
    decodes, alias_decodes = 1, 0  # the document node
    merge_tag = _TAG + "merge"
    # (node, alias depth, is an alias node standing for node)
    stack: list[tuple[yaml.Node, int, bool]] = [(root, 0, False)]

    def slot(parent: yaml.Node, pos: int, child: yaml.Node, depth: int) -> tuple[yaml.Node, int, bool]:
        return child, depth, (id(parent), pos) in aliases

    while stack:
        node, depth, is_alias = stack.pop()
        decodes += 1
        if depth:
            alias_decodes += 1
        if alias_decodes > 100 and decodes > 1000 and alias_decodes / decodes > _allowed_alias_ratio(decodes):
            raise InputRefused(EXCESSIVE_ALIASING)
        if is_alias:  # the alias node itself was counted: now its target, one alias level deeper
            stack.append((node, depth + 1, False))
            continue
        todo: list[tuple[yaml.Node, int, bool]] = []
        if isinstance(node, yaml.SequenceNode):
            todo = [slot(node, i, child, depth) for i, child in enumerate(node.value)]
        elif isinstance(node, yaml.MappingNode):
            for i, (key, value) in enumerate(node.value):
                key_alias = (id(node), 2 * i) in aliases
                if key.tag == merge_tag and not key_alias:  # go-yaml's merge(): the key is not decoded
                    if (id(node), 2 * i + 1) in aliases or isinstance(value, yaml.MappingNode):
                        todo.append(slot(node, 2 * i + 1, value, depth))
                    elif isinstance(value, yaml.SequenceNode):  # each mapping, the last first
                        todo.extend(slot(value, j, value.value[j], depth) for j in range(len(value.value) - 1, -1, -1))
                    continue
                todo += [(key, depth, key_alias), slot(node, 2 * i + 1, value, depth)]
        stack.extend(reversed(todo))


def _check_aliases(root: yaml.Node) -> bool:
    """Raise :class:`InputRefused` where go-yaml refuses the document's aliases; True when it has any."""
    aliases = _alias_slots(root)
    if aliases:
        _check_alias_ratio(root, aliases)
    return bool(aliases)


def documents(text: str, loader: type = GoLoader) -> Iterator[tuple[Any, bool]]:
    """The documents of the YAML ``text``, each with whether it uses aliases (its values may then be shared:
    copy it before changing it). Raises yaml.YAMLError for bad YAML and :class:`InputRefused` for aliases
    go-yaml refuses, before the document is built."""
    anchors = "&" in text  # without an anchor there is no alias: nothing to count
    reader = loader(text)
    try:
        while reader.check_node():
            node = reader.get_node()
            shared = anchors and node is not None and _check_aliases(node)
            yield reader.construct_document(node), shared
    finally:
        reader.dispose()


def document(text: str, loader: type = GoLoader) -> Any:
    """The one document of ``text`` (None when empty), as ``yaml.load`` reads it, aliases bounded as in
    :func:`documents`."""
    reader = loader(text)
    try:
        node = reader.get_single_node()
        if node is None:
            return None
        if "&" in text:
            _check_aliases(node)
        return reader.construct_document(node)
    finally:
        reader.dispose()
