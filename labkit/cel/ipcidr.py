"""Kubernetes' CEL IP and CIDR library (``library/ip.go``, ``library/cidr.go``) on Python values.

Addresses are parsed like Go's ``netip.ParseAddr`` / ``netip.ParsePrefix`` with Kubernetes'
extra rules (no zones, no IPv4-mapped IPv6). Values are ``IPAddr`` / ``CIDRPrefix`` (frozen,
compared by canonical text); predicates follow Go's ``netip.Addr`` definitions.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from labkit.cel.k8slib import LibError

_V4_LINK_LOCAL_MC = ipaddress.ip_network("224.0.0.0/24")
_V6_LINK_LOCAL_MC = ipaddress.ip_network("ff02::/16")
_V4_LINK_LOCAL = ipaddress.ip_network("169.254.0.0/16")
_V6_LINK_LOCAL = ipaddress.ip_network("fe80::/10")


@dataclass(frozen=True)
class IPAddr:
    addr: ipaddress.IPv4Address | ipaddress.IPv6Address

    def __str__(self) -> str:
        return str(self.addr)


@dataclass(frozen=True)
class CIDRPrefix:
    addr: ipaddress.IPv4Address | ipaddress.IPv6Address
    bits: int

    def __str__(self) -> str:
        return f"{self.addr}/{self.bits}"


class _ParseError(ValueError):
    """netip could not parse the text (Go wraps these in a "parse error" sentence)."""


def _netip_addr(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    """Go's netip.ParseAddr (zones are returned to the caller via the '%' check)."""
    base = text.partition("%")[0]
    try:
        addr = ipaddress.ip_address(base)
    except ValueError:
        raise _ParseError(f'ParseAddr("{text}"): unable to parse IP') from None
    if "%" in text and addr.version == 4:
        raise _ParseError(f'ParseAddr("{text}"): unexpected character (at "{text[text.index("%"):]}")')
    return addr


def _parse_addr(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    addr = _netip_addr(text)
    if "%" in text:
        raise ValueError(f'IP address "{text}" with zone value is not allowed')
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        raise ValueError(f'IPv4-mapped IPv6 address "{text}" is not allowed')
    return addr


def ip(text: str) -> IPAddr:
    try:
        return IPAddr(_parse_addr(text))
    except _ParseError as exc:
        raise LibError(f'IP Address "{text}" parse error during conversion from string: {exc}') from None
    except ValueError as exc:
        raise LibError(str(exc)) from None


def is_ip(text: str) -> bool:
    try:
        _parse_addr(text)
    except ValueError:
        return False
    return True


def is_canonical(text: str) -> bool:
    return str(ip(text)) == text


def family(a: IPAddr) -> int:
    return a.addr.version


def is_unspecified(a: IPAddr) -> bool:
    return a.addr.is_unspecified


def is_loopback(a: IPAddr) -> bool:
    return a.addr in ipaddress.ip_network("127.0.0.0/8") if a.addr.version == 4 else a.addr == ipaddress.ip_address("::1")


def is_link_local_multicast(a: IPAddr) -> bool:
    return a.addr in (_V4_LINK_LOCAL_MC if a.addr.version == 4 else _V6_LINK_LOCAL_MC)


def is_link_local_unicast(a: IPAddr) -> bool:
    return a.addr in (_V4_LINK_LOCAL if a.addr.version == 4 else _V6_LINK_LOCAL)


def is_global_unicast(a: IPAddr) -> bool:
    """Go's definition: private and ULA addresses count as global unicast."""
    if a.addr.version == 4 and str(a.addr) in ("0.0.0.0", "255.255.255.255"):
        return False
    return not (a.addr.is_unspecified or is_loopback(a) or a.addr.is_multicast or is_link_local_unicast(a))


_CIDR_PARSE = "network address parse error during conversion from string: "


def _parse_prefix(text: str) -> CIDRPrefix:
    addr_text, sep, bits_text = text.partition("/")
    if not sep:
        raise _ParseError(f'netip.ParsePrefix("{text}"): no \'/\'')
    if "%" in addr_text:
        raise _ParseError(f'netip.ParsePrefix("{text}"): IPv6 zones cannot be present in a prefix')
    try:
        addr = _netip_addr(addr_text)
    except _ParseError as exc:
        raise _ParseError(f'netip.ParsePrefix("{text}"): {exc}') from None
    if not bits_text.isdigit() or (len(bits_text) > 1 and bits_text[0] == "0"):
        raise _ParseError(f'netip.ParsePrefix("{text}"): bad bits after slash: "{bits_text}"')
    bits = int(bits_text)
    if bits > addr.max_prefixlen:
        raise _ParseError(f'netip.ParsePrefix("{text}"): prefix length out of range')
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        raise ValueError(f'IPv4-mapped IPv6 address "{text}" is not allowed')
    return CIDRPrefix(addr, bits)


def cidr(text: str) -> CIDRPrefix:
    """Go wraps netip's own errors twice in the "parse error" sentence, its extra checks once."""
    try:
        return _parse_prefix(text)
    except _ParseError as exc:
        raise LibError(f"{_CIDR_PARSE}{_CIDR_PARSE}{exc}") from None
    except ValueError as exc:
        raise LibError(f"{_CIDR_PARSE}{exc}") from None


def is_cidr(text: str) -> bool:
    try:
        _parse_prefix(text)
    except ValueError:
        return False
    return True


def _network(c: CIDRPrefix) -> ipaddress.IPv4Network | ipaddress.IPv6Network:
    return ipaddress.ip_network(f"{c.addr}/{c.bits}", strict=False)


def contains_ip(c: CIDRPrefix, other: IPAddr | str) -> bool:
    a = other if isinstance(other, IPAddr) else ip(other)
    return a.addr.version == c.addr.version and a.addr in _network(c)


def contains_cidr(c: CIDRPrefix, other: CIDRPrefix | str) -> bool:
    o = other if isinstance(other, CIDRPrefix) else cidr(other)
    return o.addr.version == c.addr.version and o.bits >= c.bits and o.addr in _network(c)


def prefix_ip(c: CIDRPrefix) -> IPAddr:
    return IPAddr(c.addr)


def masked(c: CIDRPrefix) -> CIDRPrefix:
    return CIDRPrefix(_network(c).network_address, c.bits)


def prefix_length(c: CIDRPrefix) -> int:
    return c.bits


def parse_text(kind: str, text: str) -> IPAddr | CIDRPrefix:
    """Rebuild a value from its canonical text (the cel-expr-python message payload)."""
    return IPAddr(ipaddress.ip_address(text)) if kind == "ip" else _parse_prefix(text)
