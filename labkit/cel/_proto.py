"""Protobuf messages that carry Kubernetes' opaque CEL types through cel-expr-python.

cel-expr-python cannot hold arbitrary Python objects, so Quantity, Semver and URL travel
as messages named like cel-go's types (``kubernetes.Quantity`` ...). Each message has a single
string field holding a canonical text, so that CEL's field-wise message equality is value
equality (``1Gi == 1024Mi``; semver equality ignores build metadata).
"""

from __future__ import annotations

from fractions import Fraction
from functools import lru_cache
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from labkit.api.quantity import Quantity
from labkit.cel.ipcidr import CIDRPrefix, IPAddr, parse_text
from labkit.cel.k8slib import url
from labkit.cel.semver import Semver, parse_semver

FIELD = "labkitValue"
QUANTITY, SEMVER, URL = "kubernetes.Quantity", "kubernetes.Semver", "kubernetes.URL"
NAMED_FORMAT = "kubernetes.NamedFormat"
IP, CIDR = "net.IP", "net.CIDR"


def _build_pool() -> descriptor_pool.DescriptorPool:
    fdp = descriptor_pb2.FileDescriptorProto(
        name="labkit/cel/kubernetes_types.proto", package="kubernetes", syntax="proto3"
    )
    for name in ("Quantity", "Semver", "URL", "NamedFormat"):
        msg = fdp.message_type.add(name=name)
        msg.field.add(
            name=FIELD,
            number=1,
            type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING,
            label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL,
        )
    net = descriptor_pb2.FileDescriptorProto(name="labkit/cel/net_types.proto", package="net", syntax="proto3")
    for name in ("IP", "CIDR"):
        msg = net.message_type.add(name=name)
        msg.field.add(
            name=FIELD,
            number=1,
            type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING,
            label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL,
        )
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    pool.Add(net)
    return pool


POOL = _build_pool()
QuantityMsg: Any = message_factory.GetMessageClass(POOL.FindMessageTypeByName(QUANTITY))
SemverMsg: Any = message_factory.GetMessageClass(POOL.FindMessageTypeByName(SEMVER))
UrlMsg: Any = message_factory.GetMessageClass(POOL.FindMessageTypeByName(URL))
FormatMsg: Any = message_factory.GetMessageClass(POOL.FindMessageTypeByName(NAMED_FORMAT))
IpMsg: Any = message_factory.GetMessageClass(POOL.FindMessageTypeByName(IP))
CidrMsg: Any = message_factory.GetMessageClass(POOL.FindMessageTypeByName(CIDR))


def q_to_msg(q: Quantity) -> Any:
    v = q.value
    return QuantityMsg(labkitValue=f"{v.numerator}/{v.denominator}")


def s_to_msg(s: Semver) -> Any:
    return _semver_msg(s.key())


@lru_cache(maxsize=4096)
def _semver_msg(key: str) -> Any:
    """One message per version text: building one costs tens of microseconds, and every GPU of
    a fleet carries the same few versions (activations only read them)."""
    return SemverMsg(labkitValue=key)


@lru_cache(maxsize=4096)
def _q_from_text(text: str) -> Quantity:
    return Quantity(Fraction(text))


@lru_cache(maxsize=4096)
def _s_from_text(text: str) -> Semver:
    return parse_semver(text)


def type_name(msg: Any) -> str:
    name: str = msg.DESCRIPTOR.full_name
    return name


def from_msg(msg: Any) -> Any:
    """Quantity/Semver message -> Python value; URL message -> its text; else unchanged."""
    desc = getattr(msg, "DESCRIPTOR", None)
    if desc is None:
        return msg
    name = desc.full_name
    if name == QUANTITY:
        return _q_from_text(msg.labkitValue)
    if name == SEMVER:
        return _s_from_text(msg.labkitValue)
    if name == IP:
        return _net_from_text("ip", msg.labkitValue)
    if name == CIDR:
        return _net_from_text("cidr", msg.labkitValue)
    return msg.labkitValue


@lru_cache(maxsize=1024)
def _net_from_text(kind: str, text: str) -> Any:
    return parse_text(kind, text)


def to_cel(value: Any) -> Any:
    if isinstance(value, Quantity):
        return q_to_msg(value)
    if isinstance(value, Semver):
        return s_to_msg(value)
    if isinstance(value, list):
        return [to_cel(v) for v in value]
    if isinstance(value, IPAddr):
        return IpMsg(labkitValue=str(value))
    if isinstance(value, CIDRPrefix):
        return CidrMsg(labkitValue=str(value))
    return value


def url_msg(text: str) -> Any:
    """``url(s)``: validate like Kubernetes, then carry the text in a kubernetes.URL message."""
    return UrlMsg(labkitValue=url(text))
