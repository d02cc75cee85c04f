"""Cheap lexical facts about an expression, used by both engines.

``domain_candidates`` finds the strings an expression may use as attribute/capacity domains
(string literals and ``attributes.x`` selections); the cel-expr-python engine pre-fills
them with empty maps, because that engine has no hook for Kubernetes' "missing domain is an
empty map" rule.
"""

from __future__ import annotations

import re

_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_SELECTED = re.compile(r"\b(?:attributes|capacity)\s*\.\s*([A-Za-z_][A-Za-z0-9_]*)")
_STRING = re.compile(
    r"""[rR]?(?:'''(?:\\.|[^\\])*?'''|\"\"\"(?:\\.|[^\\])*?\"\"\"|'(?:\\.|[^'\\\n])*'|"(?:\\.|[^"\\\n])*")""",
    re.S,
)


def string_literals(expr: str) -> list[str]:
    """The (unescaped enough for domain names) contents of the string literals in ``expr``."""
    out = []
    for m in _STRING.finditer(expr):
        text = m.group(0).lstrip("rR")
        quote = 3 if text[:3] in ("'''", '"""') else 1
        out.append(text[quote:-quote])
    return out


def strip_strings(expr: str) -> str:
    """``expr`` with every string literal replaced by ``""`` (for lexical checks)."""
    return _STRING.sub('""', expr)


_STR = r"""(?:'(?:\\.|[^'\\\n])*'|"(?:\\.|[^"\\\n])*")"""
_INDEXED = re.compile(r"\b(?:attributes|capacity)\s*\[\s*\??\s*(" + _STR + r")\s*\]")
_OPT_SELECTED = re.compile(r"\b(?:attributes|capacity)\s*\.\s*\??\s*([A-Za-z_][A-Za-z0-9_]*)")
_PRESENCE = re.compile(r"(" + _STR + r")\s+in\s+device\s*\.\s*(?:attributes|capacity)\b(?!\s*[\[.])")
_VARIABLE_INDEX = re.compile(r"\b(?:attributes|capacity)\s*\[\s*\??\s*(?!device\s*\.\s*driver\b)[A-Za-z_]")
_DRIVER_INDEX = re.compile(r"\b(?:attributes|capacity)\s*\[\s*\??\s*device\s*\.\s*driver\s*\]")


def domain_candidates(expr: str) -> frozenset[str]:
    """Domains the expression looks up in ``device.attributes``/``device.capacity``.

    ``"d" in device.attributes`` is an honest membership test in Kubernetes, so a domain that
    the expression tests that way is left out (it must not be pre-filled). The returned
    set may contain the marker ``DRIVER`` for ``attributes[device.driver]``.
    """
    found = {m[1:-1] for m in _INDEXED.findall(expr)}
    if _VARIABLE_INDEX.search(strip_strings(expr)):
        # attributes[d] with d bound by cel.bind or a comprehension: any literal may be the domain
        found.update(s for s in string_literals(expr) if len(s) <= 253 and _DNS_SUBDOMAIN.match(s))
    found.update(_OPT_SELECTED.findall(strip_strings(expr)))
    found.difference_update(m[1:-1] for m in _PRESENCE.findall(expr))
    if _DRIVER_INDEX.search(expr):
        found.add(DRIVER)
    return frozenset(found)


DRIVER = "\x00driver"
