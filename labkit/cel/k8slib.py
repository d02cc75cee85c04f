"""Kubernetes' CEL library functions (quantity, semver, lists, regex, URLs) on Python values.

Engine-neutral: both engines call these with plain Python values (``Quantity``, ``Semver``,
``int``, ``str``, lists). A failure raises :class:`LibError` with the message cel-go gives.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from labkit.api.quantity import DECIMAL_SI, Quantity, QuantityError, parse_quantity
from labkit.cel.regex import re2
from labkit.cel.regexcheck import go_regex_error
from labkit.cel.semver import Semver, SemverError, is_semver, parse_semver
from labkit.errors import InputError

if TYPE_CHECKING:
    from urllib.parse import SplitResult

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


class LibError(InputError):
    """A runtime error raised by a library function."""


# -- quantity -------------------------------------------------------------------------------------
_QUANTITY_SHAPE = re2.compile(r"^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$")


def quantity(text: str) -> Quantity:
    """Parse like Go's ``resource.ParseQuantity``, with Go's error messages."""
    try:
        return parse_quantity(text)
    except QuantityError:
        if _QUANTITY_SHAPE.match(text):
            raise LibError("unable to parse quantity's suffix") from None
        raise LibError(
            "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
        ) from None


def is_quantity(text: str) -> bool:
    try:
        parse_quantity(text)
    except QuantityError:
        return False
    return True


def q_is_integer(q: Quantity) -> bool:
    """Go's AsInt64 "ok": it depends on how the quantity is held (1000m is not an integer)."""
    return q.go_as_int64() is not None


def q_as_integer(q: Quantity) -> int:
    value = q.go_as_int64()
    if value is None:
        raise LibError("cannot convert value to integer")
    return value


def q_as_float(q: Quantity) -> float:
    try:
        return float(q.value)
    except OverflowError:
        return math.inf if q.value > 0 else -math.inf


def _as_quantity(other: Quantity | int) -> Quantity:
    # Kubernetes: add(int) adds resource.NewQuantity(int, DecimalSI)
    return other if isinstance(other, Quantity) else Quantity(Fraction(other), DECIMAL_SI, None, (other, 0))


def q_add(q: Quantity, other: Quantity | int) -> Quantity:
    return q.go_add(_as_quantity(other))


def q_sub(q: Quantity, other: Quantity | int) -> Quantity:
    return q.go_add(_as_quantity(other).go_neg())


# -- semver ---------------------------------------------------------------------------------------
def semver(text: str, normalize: bool = False) -> Semver:
    try:
        return parse_semver(text, normalize)
    except SemverError as exc:
        raise LibError(str(exc)) from None


def is_semver_(text: str, normalize: bool = False) -> bool:
    return is_semver(text, normalize)


# -- generic comparisons used by both kinds -------------------------------------------------------
def compare_to(a: Quantity | Semver, b: Quantity | Semver) -> int:
    if type(a) is not type(b):
        raise LibError("no such overload")
    return a.compare(b)  # type: ignore[arg-type]  # b: a's type (checked above)


def is_greater_than(a: Quantity | Semver, b: Quantity | Semver) -> bool:
    return compare_to(a, b) == 1


def is_less_than(a: Quantity | Semver, b: Quantity | Semver) -> bool:
    return compare_to(a, b) == -1


# -- lists ----------------------------------------------------------------------------------------
def _cmp(a: Any, b: Any) -> int:
    if isinstance(a, bool) != isinstance(b, bool) or isinstance(a, str) != isinstance(b, str):
        raise LibError("no such overload")
    order: int = (a > b) - (a < b)  # a and b are CEL scalars: bool - bool
    return order


def is_sorted(items: list[Any]) -> bool:
    return all(_cmp(items[i], items[i + 1]) <= 0 for i in range(len(items) - 1))


def list_sum(items: list[Any]) -> Any:
    total: Any = 0
    for x in items:
        if isinstance(x, bool | str):
            raise LibError("no such overload")
        total = total + x
        if isinstance(total, int) and not INT64_MIN <= total <= INT64_MAX:
            raise LibError("integer overflow")
    if not items:
        return 0
    return total


def list_min(items: list[Any]) -> Any:
    if not items:
        raise LibError("min called on empty list")
    best = items[0]
    for x in items[1:]:
        if _cmp(best, x) == 1:
            best = x
    return best


def list_max(items: list[Any]) -> Any:
    if not items:
        raise LibError("max called on empty list")
    best = items[0]
    for x in items[1:]:
        if _cmp(best, x) == -1:
            best = x
    return best


def cel_equal(a: Any, b: Any) -> bool:
    """CEL heterogeneous equality: numbers compare by value, other kinds must match."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    num = (int, float)
    if isinstance(a, num) and isinstance(b, num):
        return a == b
    if type(a) is not type(b) and not (isinstance(a, list) and isinstance(b, list)):
        return False
    if isinstance(a, list):
        return len(a) == len(b) and all(cel_equal(x, y) for x, y in zip(a, b))
    return bool(a == b)


def index_of(items: list[Any], item: Any) -> int:
    for i, x in enumerate(items):
        if cel_equal(x, item):
            return i
    return -1


def last_index_of(items: list[Any], item: Any) -> int:
    for i in range(len(items) - 1, -1, -1):
        if cel_equal(items[i], item):
            return i
    return -1


def includes(target: Any, item: Any) -> bool:
    if isinstance(target, list):
        return any(cel_equal(x, item) for x in target)
    return cel_equal(target, item)


# -- regex ----------------------------------------------------------------------------------------
_RE_CACHE: dict[str, Any] = {}


def _compile(pattern: str) -> Any:
    rx = _RE_CACHE.get(pattern)
    if rx is None:
        try:
            rx = re2.compile(pattern)
        except Exception as exc:  # re2.error has no stable public class across versions
            raise LibError(go_regex_error(exc)) from None
        _RE_CACHE[pattern] = rx
    return rx


def matches(text: str, pattern: str) -> bool:
    return _compile(pattern).search(text) is not None


def find(text: str, pattern: str) -> str:
    m = _compile(pattern).search(text)
    return m.group(0) if m else ""


def find_all(text: str, pattern: str, limit: int = -1) -> list[str]:
    if limit == 0:
        return []
    out = [m.group(0) for m in _compile(pattern).finditer(text)]
    return out if limit < 0 else out[:limit]


# -- URLs (Go's url.ParseRequestURI semantics, approximated with urllib) --------------------------
_SCHEME = re2.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*$")


def _split_url(text: str) -> SplitResult:
    from urllib.parse import urlsplit

    bad = any(ord(c) < 0x21 or ord(c) == 0x7F for c in text)
    scheme, sep, _ = text.partition(":")
    absolute = bool(sep) and _SCHEME.match(scheme) is not None
    if bad or not (absolute or text.startswith("/")):
        raise LibError(f'URL parse error during conversion from string: parse "{text}": invalid URI for request')
    try:
        return urlsplit(text)
    except ValueError as exc:
        raise LibError(f'URL parse error during conversion from string: parse "{text}": {exc}') from None


def url(text: str) -> str:
    _split_url(text)
    return text


def is_url(text: str) -> bool:
    try:
        _split_url(text)
    except LibError:
        return False
    return True


def url_scheme(text: str) -> str:
    return _split_url(text).scheme


def url_host(text: str) -> str:
    return _split_url(text).netloc.rpartition("@")[2]


def url_hostname(text: str) -> str:
    host = url_host(text)
    if host.startswith("["):
        return host[1:].partition("]")[0]
    return host.partition(":")[0]


def url_port(text: str) -> str:
    host = url_host(text)
    if host.startswith("["):
        host = host.partition("]")[2]
    return host.partition(":")[2]


def url_escaped_path(text: str) -> str:
    from urllib.parse import quote, unquote

    path = _split_url(text).path
    return quote(unquote(path), safe="/!$&'()*+,;=:@-._~")


def url_query(text: str) -> dict[str, list[str]]:
    from urllib.parse import parse_qs

    return parse_qs(_split_url(text).query, keep_blank_values=True)


# -- sets (cel-go ext.Sets) -----------------------------------------------------------------------
def sets_contains(a: list[Any], b: list[Any]) -> bool:
    return all(any(cel_equal(x, y) for x in a) for y in b)


def sets_equivalent(a: list[Any], b: list[Any]) -> bool:
    return sets_contains(a, b) and sets_contains(b, a)


def sets_intersects(a: list[Any], b: list[Any]) -> bool:
    return any(any(cel_equal(x, y) for x in a) for y in b)


# -- cel-go ext.Lists (in the Kubernetes 1.37 base environment) ----------------------------------
def lists_range(n: int) -> list[int]:
    """cel-go ext/lists.go genRange: 0..n-1, n at most 1,000,000."""
    if n < 0:
        raise LibError(f"lists.range: size must be non-negative, got {n}")
    if n > 1_000_000:
        raise LibError(f"lists.range: size {n} exceeds maximum allowed (1000000)")
    return list(range(n))


def list_sort(items: list[Any]) -> list[Any]:
    import functools

    return sorted(items, key=functools.cmp_to_key(_cmp))


def _insert_key_text(key: Any) -> str:
    if isinstance(key, bool):
        return "true" if key else "false"
    return str(key)


def zip_map(keys: list[Any], values: list[Any]) -> dict[Any, Any]:
    """transformMap(): the map from the i-th key to the i-th value."""
    return dict(zip(keys, values, strict=True))


def merge_map_entries(entries: list[dict[Any, Any]]) -> dict[Any, Any]:
    """transformMapEntry(): one map from the entry maps; a key seen twice is Go's insert error."""
    out: dict[Any, Any] = {}
    for entry in entries:
        for key, value in entry.items():
            if key in out:
                raise LibError(f"insert failed: key {_insert_key_text(key)} already exists")
            out[key] = value
    return out


def sort_by_keys(items: list[Any], keys: list[Any]) -> list[Any]:
    """sortBy(): items in the (stable) order of their keys."""
    import functools

    def by_key(i: int, j: int) -> int:
        return _cmp(keys[i], keys[j])

    order = sorted(range(len(items)), key=functools.cmp_to_key(by_key))
    return [items[i] for i in order]


def list_slice(items: list[Any], start: int, end: int) -> list[Any]:
    if start < 0 or end < 0:
        raise LibError(f"cannot slice({start}, {end}), negative indexes not supported")
    if start > end:
        raise LibError(f"cannot slice({start}, {end}), start index must be less than or equal to end index")
    if end > len(items):
        raise LibError(f"cannot slice({start}, {end}), list is length {len(items)}")
    return items[start:end]


def list_flatten(items: list[Any], depth: int = 1) -> list[Any]:
    if depth < 0:
        raise LibError("level must be non-negative")
    out: list[Any] = []
    for x in items:
        if isinstance(x, list) and depth > 0:
            out.extend(list_flatten(x, depth - 1))
        else:
            out.append(x)
    return out


def list_distinct(items: list[Any]) -> list[Any]:
    out: list[Any] = []
    for x in items:
        if not any(cel_equal(x, y) for y in out):
            out.append(x)
    return out


def list_reverse(items: list[Any]) -> list[Any]:
    return list(reversed(items))
