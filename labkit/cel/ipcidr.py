"""Kubernetes' CEL IP and CIDR library (``library/ip.go``, ``library/cidr.go``) on Python values.

Addresses are parsed like Go's ``netip.ParseAddr`` / ``netip.ParsePrefix`` with Kubernetes'
extra rules (no zones, no IPv4-mapped IPv6). Values are ``IPAddr`` / ``CIDRPrefix`` (frozen,
compared by canonical text); predicates follow Go's ``netip.Addr`` definitions.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from labkit.cel.k8slib import LibError
from labkit.errors import InputError

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


class _ParseError(InputError, ValueError):
    """netip could not parse the text (Go wraps these in a "parse error" sentence)."""


def _go_quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _addr_error(text: str, msg: str, at: str = "") -> _ParseError:
    """Go's parseAddrError text."""
    tail = f" (at {_go_quote(at)})" if at else ""
    return _ParseError(f"ParseAddr({_go_quote(text)}): {msg}{tail}")


def _ipv4(text: str) -> ipaddress.IPv4Address:
    """Go's parseIPv4 with its messages."""
    fields: list[int] = []
    val, digits = 0, 0
    for i, c in enumerate(text):
        if "0" <= c <= "9":
            if digits == 1 and val == 0:
                raise _addr_error(text, "IPv4 field has octet with leading zero")
            val, digits = val * 10 + ord(c) - 48, digits + 1
            if val > 255:
                raise _addr_error(text, "IPv4 field has value >255")
        elif c == ".":
            if i == 0 or i == len(text) - 1 or text[i - 1] == ".":
                raise _addr_error(text, "IPv4 field must have at least one digit", text[i:])
            if len(fields) == 3:
                raise _addr_error(text, "IPv4 address too long")
            fields.append(val)
            val, digits = 0, 0
        else:
            raise _addr_error(text, "unexpected character", text[i:])
    if len(fields) < 3:
        raise _addr_error(text, "IPv4 address too short")
    return ipaddress.IPv4Address(".".join(map(str, [*fields, val])))


def _netip_addr(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    """Go's netip.ParseAddr: IPv4 with Go's own messages; IPv6 via ipaddress (one generic message)."""
    for c in text:
        if c == ".":
            return _ipv4(text)
        if c == ":":
            try:
                return ipaddress.IPv6Address(text.partition("%")[0])
            except ValueError:
                raise _addr_error(text, "unable to parse IP") from None
        if c == "%":
            raise _addr_error(text, "missing IPv6 address")
    raise _addr_error(text, "unable to parse IP")


def _parse_addr(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    addr = _netip_addr(text)
    if "%" in text:
        raise ValueError(f"IP address {_go_quote(text)} with zone value is not allowed")
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        raise ValueError(f"IPv4-mapped IPv6 address {_go_quote(text)} is not allowed")
    return addr


def ip(text: str) -> IPAddr:
    try:
        return IPAddr(_parse_addr(text))
    except _ParseError as exc:
        raise LibError(f"IP Address {_go_quote(text)} parse error during conversion from string: {exc}") from None
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
    """Go's netip.ParsePrefix (then Kubernetes' no-IPv4-mapped rule)."""
    where = f"netip.ParsePrefix({_go_quote(text)})"
    addr_text, sep, bits_text = text.rpartition("/")
    if not sep:
        raise _ParseError(f"{where}: no '/'")
    try:
        addr = _netip_addr(addr_text)
    except _ParseError as exc:
        raise _ParseError(f"{where}: {exc}") from None
    if "%" in addr_text:
        raise _ParseError(f"{where}: IPv6 zones cannot be present in a prefix")
    if not bits_text.isdigit() or (len(bits_text) > 1 and bits_text[0] == "0"):
        raise _ParseError(f"{where}: bad bits after slash: {_go_quote(bits_text)}")
    bits = int(bits_text)
    if bits > addr.max_prefixlen:
        raise _ParseError(f"{where}: prefix length out of range")
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        raise ValueError(f"IPv4-mapped IPv6 address {_go_quote(text)} is not allowed")
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
