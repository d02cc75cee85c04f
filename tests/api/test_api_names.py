"""labkit.api.names: the name syntaxes, at their edges."""

from __future__ import annotations

import pytest

from labkit.api import names


@pytest.mark.parametrize(("value", "ok"), [
    ("gpu-0", True), ("a", True), ("0", True), ("a" * 63, True), ("a" * 64, False), ("-a", False),
    ("a-", False), ("A", False), ("a.b", False), ("a_b", False), ("", False),
])
def test_dns_label(value: str, ok: bool) -> None:
    assert (names.dns_label(value) == []) is ok


@pytest.mark.parametrize(("value", "ok"), [
    ("gpu.nvidia.com", True), ("a", True), (".a", False), ("a..b", False), ("a." * 126 + "a", True),
    ("a." * 126 + "ab", False), ("Gpu.com", False), ("a-.b", False),
])
def test_dns_subdomain(value: str, ok: bool) -> None:
    assert (names.dns_subdomain(value) == []) is ok


def test_driver_name_is_csi_style() -> None:
    assert names.driver_name("gpu.nvidia.com") == []
    assert names.driver_name("GPU.Example.com") == []  # checked lowercased, like CSI driver names
    assert names.driver_name("x" * 64) == ["must be no more than 63 characters"]
    assert names.driver_name("") == ["Required value"]
    assert names.driver_name("bad_driver") != []


@pytest.mark.parametrize(("value", "ok"), [
    ("memory", True), ("_x1", True), ("1x", False), ("a" * 32, True), ("a" * 33, False),
    ("gpu.nvidia.com/memory", True), ("/memory", False), ("gpu.nvidia.com/", False),
    ("a/b/c", True),  # two slashes: every API server 1.34-1.37 stores it (its rule checks 1 and 2 parts)
    ("Bad_Domain/x", False), ("x" * 64 + "/a", False), ("with-dash", False),
])
def test_qualified_name(value: str, ok: bool) -> None:
    assert (names.qualified_name(value) == []) is ok


def test_lowercase_domain_is_asked_for_only_when_told() -> None:
    # attribute names: the domain is checked lowercased (driver-name rules); 1.37's constraints
    # also want it lowercase
    assert names.qualified_name("GPU.example.com/x") == []
    assert names.fully_qualified_name("GPU.example.com/x", lowercase_domain=True)[0].startswith(
        "prefix: a lowercase RFC 1123 subdomain")
    assert names.fully_qualified_name("gpu.example.com/x", lowercase_domain=True) == []


def test_fully_qualified_name_needs_domain() -> None:
    assert names.fully_qualified_name("gpu.nvidia.com/uuid") == []
    assert names.fully_qualified_name("uuid") == [
        "a fully qualified name must be a domain and a name separated by a slash"]


@pytest.mark.parametrize(("value", "ok"), [
    ("example.com/key", True), ("key", True), ("Key_1.x", True), ("a/b/c", False), ("/k", False),
    ("example.com/", False), ("k" * 64, False), ("-k", False), ("", False),
])
def test_label_key(value: str, ok: bool) -> None:
    assert (names.label_key(value) == []) is ok


@pytest.mark.parametrize(("value", "ok"), [("", True), ("v1.0", True), ("-v", False), ("v" * 64, False)])
def test_label_value(value: str, ok: bool) -> None:
    assert (names.label_value(value) == []) is ok


@pytest.mark.parametrize(("value", "ok"), [
    ("1.0.0", True), ("550.163.1", True), ("1.0.0-rc.1+build.5", True), ("1.0.0-0a", True),
    ("1.0", False), ("01.0.0", False), ("1.0.0-01", False), ("v1.0.0", False), ("1.0.0+", False),
    ("1.0.0-" + "a" * 60, False),
])
def test_semver(value: str, ok: bool) -> None:
    assert (names.semver(value) == []) is ok


def test_pool_name() -> None:
    assert names.pool_name("rack-a/node-1") == []
    assert names.pool_name("") == ["Required value"]
    assert names.pool_name("a//b") != []
    assert names.pool_name("a" * 254) != []
