"""Kubernetes' CEL format library (``format.dns1123Label().validate(s)``, ``format.named(n)``).

Each named format validates a string and returns Go's messages (empty list = valid), as
``k8s.io/apiserver/pkg/cel/library`` 1.37 does: the DNS/label formats with apimachinery's texts,
``uri`` like Go's ``url.ParseRequestURI``, and kube-openapi's ``uuid``/``byte``/``date``/
``datetime`` checks.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Callable

__all__ = ["FORMATS", "validate"]

_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_SUBDOMAIN_FMT = _LABEL_FMT + "(\\." + _LABEL_FMT + ")*"
_DNS1035_FMT = "[a-z]([-a-z0-9]*[a-z0-9])?"
_KEY_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_VALUE_FMT = "(" + _KEY_FMT + ")?"

_LABEL_MSG = ("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must "
              "start and end with an alphanumeric character")
_SUBDOMAIN_MSG = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
                  "'.', and must start and end with an alphanumeric character")
_DNS1035_MSG = ("a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
                "alphabetic character, and end with an alphanumeric character")
_KEY_MSG = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
_VALUE_MSG = ("a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
              "and must start and end with an alphanumeric character")


def _regex_error(msg: str, fmt: str, *examples: str) -> str:
    if not examples:
        return f"{msg} (regex used for validation is '{fmt}')"
    shown = " or ".join(f"'{e}', " for e in examples)
    return f"{msg} (e.g. {shown}regex used for validation is '{fmt}')"


def _full(fmt: str) -> re.Pattern[str]:
    return re.compile(f"(?:{fmt})\\Z")


_LABEL, _SUBDOMAIN, _DNS1035 = _full(_LABEL_FMT), _full(_SUBDOMAIN_FMT), _full(_DNS1035_FMT)
_KEY, _VALUE = _full(_KEY_FMT), _full(_VALUE_FMT)


def _length(s: str) -> int:
    return len(s.encode())  # Go's len() counts bytes


def dns1123_label(s: str, *, unit: str = "characters") -> list[str]:
    errs = []
    if _length(s) > 63:
        errs.append(f"must be no more than 63 {unit}")
    if not _LABEL.match(s):
        errs.append("must not contain dots" if _SUBDOMAIN.match(s)
                    else _regex_error(_LABEL_MSG, _LABEL_FMT, "my-name", "123-abc"))
    return errs


def dns1123_subdomain(s: str, *, unit: str = "characters") -> list[str]:
    errs = []
    if _length(s) > 253:
        errs.append(f"must be no more than 253 {unit}")
    if not _SUBDOMAIN.match(s):
        errs.append(_regex_error(_SUBDOMAIN_MSG, _SUBDOMAIN_FMT, "example.com"))
    return errs


def dns1035_label(s: str) -> list[str]:
    errs = []
    if _length(s) > 63:
        errs.append("must be no more than 63 characters")
    if not _DNS1035.match(s):
        errs.append(_regex_error(_DNS1035_MSG, _DNS1035_FMT, "my-name", "abc-123"))
    return errs


def _mask_trailing_dash(s: str) -> str:
    """apimachinery's maskTrailingDash: a generateName prefix may end in '-' (Go drops two bytes)."""
    if len(s) > 1 and s.endswith("-"):
        return s[:-2] + "a"
    return s


def qualified_name(s: str) -> list[str]:
    """apimachinery content.IsLabelKey (its messages say "bytes")."""
    errs: list[str] = []
    parts = s.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errs.append("prefix part must be non-empty")
        else:
            errs.extend("prefix part " + m for m in dns1123_subdomain(prefix, unit="bytes"))
    else:
        return ["a valid label key " + _regex_error(_KEY_MSG, _KEY_FMT, "MyName", "my.name", "123-abc")
                + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"]
    if not name:
        errs.append("name part must be non-empty")
    elif _length(name) > 63:
        errs.append("name part must be no more than 63 bytes")
    if not _KEY.match(name):
        errs.append("name part " + _regex_error(_KEY_MSG, _KEY_FMT, "MyName", "my.name", "123-abc"))
    return errs


def label_value(s: str) -> list[str]:
    errs = []
    if _length(s) > 63:
        errs.append("must be no more than 63 bytes")
    if not _VALUE.match(s):
        errs.append(_regex_error(_VALUE_MSG, _VALUE_FMT, "MyValue", "my_value", "12345"))
    return errs


def _scheme(s: str) -> tuple[str, str] | str:
    """Go's getScheme: (scheme, rest), or an error text."""
    for i, c in enumerate(s):
        if c.isascii() and c.isalpha():
            continue
        if c.isascii() and (c.isdigit() or c in "+-."):
            if i == 0:
                return "", s
            continue
        if c == ":":
            return "missing protocol scheme" if i == 0 else (s[:i], s[i + 1:])
        return "", s
    return "", s


_HOST_OK = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~!$&'()*+,;=:[]<>\"%")


def _authority_error(authority: str) -> str | None:
    """The common errors of Go's parseAuthority/parseHost (IPv6 literals are not checked)."""
    host = authority.rpartition("@")[2]
    if host.startswith("["):
        return None
    colon = host.rfind(":")
    if colon >= 0 and not host[colon + 1:].isdigit() and host[colon + 1:] != "":
        return f'invalid port "{host[colon:]}" after host'
    for i, c in enumerate(host):
        if c == "%":
            esc = host[i:i + 3]
            if len(esc) < 3 or not all(h in "0123456789abcdefABCDEF" for h in esc[1:]):
                return f'invalid URL escape "{esc}"'
            if int(esc[1], 16) < 8 and esc != "%25":
                return f'invalid URL escape "{esc}"'
        elif ord(c) < 0x80 and c not in _HOST_OK:
            return f'invalid character "{c}" in host name'
    return None


def uri(s: str) -> list[str]:
    """Go's url.ParseRequestURI: an absolute URI or an absolute path (IPv6 hosts are not checked)."""
    def fail(why: str) -> list[str]:
        return [f'parse "{s}": {why}']

    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in s):
        return fail("net/url: invalid control character in URL")
    if s == "":
        return fail("empty url")
    if s == "*":
        return []
    parsed = _scheme(s)
    if isinstance(parsed, str):
        return fail(parsed)
    scheme, rest = parsed
    if not scheme and not rest.startswith("/"):
        return fail("invalid URI for request")
    if scheme and rest.startswith("//"):
        authority = rest.split("?", 1)[0][2:].split("/", 1)[0]
        why = _authority_error(authority)
        if why:
            return fail(why)
    return []


_UUID = re.compile(r"(?i)[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}\Z")
_BASE64 = re.compile(r"(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=|[A-Za-z0-9+/]{4})\Z")
_DATE = re.compile(r"(\d{4})-(\d{2})-(\d{2})\Z")
_TIME = re.compile(r"([0-9]{2}):([0-9]{2}):([0-9]{2})(.[0-9]+)?(z|([+-][0-9]{2}:[0-9]{2}))\Z")


def _is_date(s: str) -> bool:
    """Go's time.Parse("2006-01-02", s)."""
    m = _DATE.match(s)
    if not m:
        return False
    year, month, day = (int(g) for g in m.groups())
    return 1 <= month <= 12 and 1 <= day <= calendar.monthrange(year, month)[1]


def _is_datetime(s: str) -> bool:
    """kube-openapi strfmt IsDateTime: a date, 't', and hh:mm:ss[.frac](z|±hh:mm) compared as text."""
    if len(s) < 4:
        return False
    parts = s.lower().split("t")
    if len(parts) < 2 or not _is_date(parts[0]):
        return False
    m = _TIME.match(parts[1])
    if not m:
        return False
    return m.group(1) <= "23" and m.group(2) <= "59" and m.group(3) <= "59"


def _check(ok: Callable[[str], bool], message: str) -> Callable[[str], list[str]]:
    return lambda s: [] if ok(s) else [message]


#: format name (as in ``format.named``) -> validator
FORMATS: dict[str, Callable[[str], list[str]]] = {
    "dns1123Label": dns1123_label,
    "dns1123Subdomain": dns1123_subdomain,
    "dns1035Label": dns1035_label,
    "qualifiedName": qualified_name,
    "dns1123LabelPrefix": lambda s: dns1123_label(_mask_trailing_dash(s)),
    "dns1123SubdomainPrefix": lambda s: dns1123_subdomain(_mask_trailing_dash(s)),
    "dns1035LabelPrefix": lambda s: dns1035_label(_mask_trailing_dash(s)),
    "labelValue": label_value,
    "uri": uri,
    "uuid": _check(lambda s: bool(_UUID.match(s)), "does not match the UUID format"),
    "byte": _check(lambda s: bool(_BASE64.match(s)), "invalid base64"),
    "date": _check(_is_date, "invalid date"),
    "datetime": _check(_is_datetime, "invalid datetime"),
}


def validate(name: str, value: str) -> list[str]:
    return FORMATS[name](value)
