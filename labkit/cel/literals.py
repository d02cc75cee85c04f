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


def domain_candidates(expr: str) -> frozenset[str]:
    found = {s for s in string_literals(expr) if len(s) <= 253 and _DNS_SUBDOMAIN.match(s)}
    found.update(_SELECTED.findall(strip_strings(expr)))
    return frozenset(found)
