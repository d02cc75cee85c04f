"""Name syntaxes used by Kubernetes validation; each check returns a list of messages (empty = ok)."""

from __future__ import annotations

import re

__all__ = [
    "c_identifier", "dns_label", "dns_subdomain", "driver_name", "fully_qualified_name",
    "label_key", "label_value", "pool_name", "qualified_name", "semver",
]

_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_C_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_LABEL_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")

_NUM = r"(0|[1-9][0-9]*)"
_PRE = r"(0|[1-9][0-9]*|[0-9]*[A-Za-z-][0-9A-Za-z-]*)"
_BUILD = r"[0-9A-Za-z-]+"
_SEMVER = re.compile(
    rf"{_NUM}\.{_NUM}\.{_NUM}(-{_PRE}(\.{_PRE})*)?(\+{_BUILD}(\.{_BUILD})*)?"
)
#: 1.38 (kubernetes#142964): numbers of at most 18 digits, so that every version fits an int64
_NUM18 = r"(0|[1-9][0-9]{0,17})"
_PRE18 = rf"({_NUM18}|[0-9]*[A-Za-z-][0-9A-Za-z-]*)"
_SEMVER18 = re.compile(
    rf"{_NUM18}\.{_NUM18}\.{_NUM18}(-{_PRE18}(\.{_PRE18})*)?(\+{_BUILD}(\.{_BUILD})*)?"
)

DNS_LABEL_MAX = 63
DNS_SUBDOMAIN_MAX = 253
C_IDENTIFIER_MAX = 32  # DeviceMaxIDLength
DOMAIN_MAX = 63        # DeviceMaxDomainLength (driver name rules)
POOL_NAME_MAX = 253
ATTRIBUTE_VALUE_MAX = 64


def dns_label(value: str) -> list[str]:
    """RFC 1123 label: request, device, counter and namespace names."""
    msgs = []
    if len(value) > DNS_LABEL_MAX:
        msgs.append(f"must be no more than {DNS_LABEL_MAX} characters")
    if not _LABEL.fullmatch(value):
        msgs.append("must be a DNS label: lowercase letters, digits and '-', starting and ending "
                    "with a letter or digit (e.g. 'gpu-0')")
    return msgs


def dns_subdomain(value: str) -> list[str]:
    """RFC 1123 subdomain: most object names, device class names, node names."""
    msgs = []
    if len(value) > DNS_SUBDOMAIN_MAX:
        msgs.append(f"must be no more than {DNS_SUBDOMAIN_MAX} characters")
    if not _SUBDOMAIN.fullmatch(value):
        # the API server's own words (apimachinery IsDNS1123Subdomain)
        msgs.append("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
                    "and must start and end with an alphanumeric character (e.g. 'example.com', regex used for "
                    f"validation is '{_SUBDOMAIN.pattern}')")
    return msgs


def driver_name(value: str) -> list[str]:
    """CSI driver name rules: ≤63 characters, a DNS subdomain once lowercased."""
    if not value:
        return ["Required value"]
    msgs = []
    if len(value) > DOMAIN_MAX:
        msgs.append(f"must be no more than {DOMAIN_MAX} characters")
    if not _SUBDOMAIN.fullmatch(value.lower()):
        msgs.append("must be a DNS subdomain: letters, digits, '-' and '.', starting and ending "
                    "with a letter or digit (e.g. 'gpu.nvidia.com')")
    return msgs


def pool_name(value: str) -> list[str]:
    """One or more DNS subdomains joined by '/', ≤253 characters in total."""
    if not value:
        return ["Required value"]
    msgs = []
    if len(value) > POOL_NAME_MAX:
        msgs.append(f"must be no more than {POOL_NAME_MAX} characters")
    if any(not _SUBDOMAIN.fullmatch(part) or len(part) > DNS_SUBDOMAIN_MAX for part in value.split("/")):
        msgs.append("must be one or more DNS subdomains separated by '/' (e.g. 'node-1' or 'rack-a/node-1')")
    return msgs


def c_identifier(value: str) -> list[str]:
    msgs = []
    if len(value) > C_IDENTIFIER_MAX:
        msgs.append(f"must be no more than {C_IDENTIFIER_MAX} characters")
    if not _C_IDENT.fullmatch(value):
        msgs.append("must be a C identifier: letters, digits and '_', not starting with a digit "
                    "(e.g. 'memory' or 'productName')")
    return msgs


def qualified_name(value: str, *, lowercase_domain: bool = False, one_slash: bool = False) -> list[str]:
    """Attribute/capacity name: ``ident`` or ``domain/ident`` (domain: driver-name rules, or with
    `lowercase_domain` also a lowercase DNS subdomain).

    A name with two or more slashes is accepted, as every API server 1.34-1.37 accepts it (its
    validation checks one and two parts only; upstream keeps it so for stored objects). CEL then
    reads the domain up to the first slash. ``one_slash`` (1.38, kubernetes#141644): refused."""
    parts = value.split("/")
    if len(parts) == 1:
        return c_identifier(value)
    if len(parts) > 2:
        return ["must not contain more than one slash"] if one_slash else []
    domain, ident = parts
    msgs = []
    if not domain:
        msgs.append("the domain must not be empty")
    else:
        msgs.extend(f"domain {domain!r}: {m}" for m in driver_name(domain))
        if lowercase_domain and not msgs:
            msgs.extend(f"prefix: {m}" for m in dns_subdomain(domain))
    if not ident:
        msgs.append("the name must not be empty")
    else:
        msgs.extend(c_identifier(ident))
    return msgs


def fully_qualified_name(value: str, *, lowercase_domain: bool = False, one_slash: bool = False) -> list[str]:
    """Like :func:`qualified_name`, but the domain is mandatory (constraints)."""
    msgs = qualified_name(value, lowercase_domain=lowercase_domain, one_slash=one_slash)
    if "/" not in value:
        msgs.append("a fully qualified name must be a domain and a name separated by a slash")
    return msgs


def label_key(value: str) -> list[str]:
    """Label/annotation key, taint and toleration key: optional DNS-subdomain prefix + name ≤63."""
    if not value:
        return ["Required value"]
    if value.count("/") > 1:
        return ["a qualified name must be 'name' or 'prefix/name' with at most one '/'"]
    prefix, sep, name = value.rpartition("/")
    msgs = []
    if sep:
        if not prefix:
            msgs.append("prefix part must be non-empty")
        else:
            msgs.extend(f"prefix part {m}" for m in dns_subdomain(prefix))
    if not name:
        msgs.append("name part must be non-empty")
    elif len(name) > DNS_LABEL_MAX or not _LABEL_NAME.fullmatch(name):
        msgs.append("name part must be at most 63 letters, digits, '-', '_' or '.', starting and "
                    "ending with a letter or digit (e.g. 'example.com/my-key')")
    return msgs


def label_value(value: str) -> list[str]:
    if value == "":
        return []
    if len(value) > DNS_LABEL_MAX or not _LABEL_NAME.fullmatch(value):
        return ["must be empty or at most 63 letters, digits, '-', '_' or '.', starting and "
                "ending with a letter or digit"]
    return []


def semver(value: str, *, max_18_digits: bool = False) -> list[str]:
    """A version attribute's value; ``max_18_digits``: 1.38's rule and words (kubernetes#142964)."""
    msgs = []
    if max_18_digits and not _SEMVER18.fullmatch(value):
        msgs.append("must be a string compatible with semver.org spec 2.0.0, with at most 18 digits in numbers")
    elif not max_18_digits and not _SEMVER.fullmatch(value):
        msgs.append("must be a string compatible with semver.org spec 2.0.0")
    if len(value) > ATTRIBUTE_VALUE_MAX:
        msgs.append(f"Too long: may not be more than {ATTRIBUTE_VALUE_MAX} bytes")
    return msgs
