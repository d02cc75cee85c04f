"""Error messages: the default engine says exactly what Kubernetes 1.37 says.

Each message below is the first line Kubernetes' own code (k8s.io/dynamic-resource-allocation/cel
v0.37.2, through tools/cel-oracle) printed for the expression, evaluated on the device of the
conformance table. ``str(error)`` is compared, so message and hint together must match.
"""

from __future__ import annotations

import pytest

from labkit.cel import CelCompileError, CelRuntimeError, compile_selector, device_input
from tests.cel.test_cel_conformance import DEVICE, DRIVER

KUBERNETES_MESSAGES = [
    ('device.capacity["gpu.nvidia.com"].memory >= quantity("40Gi")',
     "compilation failed: ERROR: <input>:1:42: found no matching overload for '_>=_' applied to '(kubernetes.Quantity, kubernetes.Quantity)'"),
    ('quantity("-5").sign() == -1',
     "compilation failed: ERROR: <input>:1:20: found no matching overload for 'sign' applied to 'kubernetes.Quantity.()'"),
    ('device.attributes["gpu.nvidia.com"].missing == "x"',
     'no such key: missing. consider using CEL optional chaining (.? followed by orValue()) or guarding the check with has() for optional fields'),
    ('device.attributes["other.example.com"].x == 1',
     'no such key: x. consider using CEL optional chaining (.? followed by orValue()) or guarding the check with has() for optional fields'),
    ('9223372036854775807 + 1 > 0',
     'integer overflow'),
    ('device.foo == 1',
     "compilation failed: ERROR: <input>:1:7: undefined field 'foo'"),
    ('has(device.foo)',
     "compilation failed: ERROR: <input>:1:4: undefined field 'foo'"),
    ('1',
     'must evaluate to bool or the unknown type, not int'),
    ('"true"',
     'must evaluate to bool or the unknown type, not string'),
    ('quantity("1")',
     'must evaluate to bool or the unknown type, not kubernetes.Quantity'),
    ('device.attributes["gpu.nvidia.com"].productName',
     "CEL result of type string could not be converted to bool: unsupported native conversion from string to 'bool'"),
    ('device.attributes["gpu.nvidia.com"].driverVersion',
     "CEL result of type kubernetes.Semver could not be converted to bool: type conversion error from 'Semver' to 'bool'"),
    ('true && device.attributes["gpu.nvidia.com"].missing == "x"',
     'no such key: missing. consider using CEL optional chaining (.? followed by orValue()) or guarding the check with has() for optional fields'),
    ('1 / 0 == 1',
     'division by zero'),
    ('[1, 2][5] == 1',
     'index out of bounds: 5'),
    ('device.attributes["gpu.nvidia.com"].productName + 1 == 2',
     'no such overload'),
    ('device.attributes["gpu.nvidia.com"].productName + 1 == "x"',
     "compilation failed: ERROR: <input>:1:53: found no matching overload for '_==_' applied to '(int, string)'"),
    ('true == 1',
     "compilation failed: ERROR: <input>:1:6: found no matching overload for '_==_' applied to '(bool, int)'"),
    ('1 == 1.0',
     "compilation failed: ERROR: <input>:1:3: found no matching overload for '_==_' applied to '(int, double)'"),
    ('2 > 1.5 && device.attributes["gpu.nvidia.com"].missing == 1',
     'no such key: missing. consider using CEL optional chaining (.? followed by orValue()) or guarding the check with has() for optional fields'),
    ('syntax error (',
     "compilation failed: ERROR: <input>:1:8: Syntax error: mismatched input 'error' expecting <EOF>"),
    ('undefinedFunction(1)',
     "compilation failed: ERROR: <input>:1:18: undeclared reference to 'undefinedFunction' (in container '')"),
    ('unknownVariable == 1',
     "compilation failed: ERROR: <input>:1:1: undeclared reference to 'unknownVariable' (in container '')"),
    ('quantity("200K") == quantity("1")',
     "unable to parse quantity's suffix"),
    ('quantity("Three") == quantity("1")',
     "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"),
    ('quantity("9999999999999999999999999999G").asInteger() == 1',
     'cannot convert value to integer'),
    ('quantity("1").div(2) == quantity("500m")',
     "compilation failed: ERROR: <input>:1:18: undeclared reference to 'div' (in container '')"),
    ('quantity("1") < quantity("2")',
     "compilation failed: ERROR: <input>:1:15: found no matching overload for '_<_' applied to '(kubernetes.Quantity, kubernetes.Quantity)'"),
    ('semver("1.2") == semver("1.2.0")',
     'No Major.Minor.Patch elements found'),
    ('semver("01.2.3") == semver("1.2.3")',
     'Major number must not contain leading zeroes "01"'),
    ('semver("1.2-rc", true) == semver("1.2.0")',
     'short version cannot contain PreRelease/Build meta data'),
    ('semver("1.0.0") < semver("2.0.0")',
     "compilation failed: ERROR: <input>:1:17: found no matching overload for '_<_' applied to '(kubernetes.Semver, kubernetes.Semver)'"),
    ('device.attributes["gpu.nvidia.com"].driverVersion > semver("1.0.0")',
     "compilation failed: ERROR: <input>:1:51: found no matching overload for '_>_' applied to '(dyn, kubernetes.Semver)'"),
    ('"abc".reverse() == "cba"',
     "compilation failed: ERROR: <input>:1:14: found no matching overload for 'reverse' applied to 'string.()'"),
    ('[].min() == 1',
     'min called on empty list'),
    ('url("x").getScheme() == ""',
     'URL parse error during conversion from string: parse "x": invalid URI for request'),
    ('cel.bind(v, device.attributes["gpu.nvidia.com"].missing, v == 1)',
     'no such key: missing. consider using CEL optional chaining (.? followed by orValue()) or guarding the check with has() for optional fields'),
    ('[1, 2, 3].slice(2, 1) == []',
     'cannot slice(2, 1), start index must be less than or equal to end index'),
    ('ip("x") == ip("10.0.0.1")',
     'IP Address "x" parse error during conversion from string: ParseAddr("x"): unable to parse IP'),
    ('ip("1.2.3") == ip("10.0.0.1")',
     'IP Address "1.2.3" parse error during conversion from string: ParseAddr("1.2.3"): IPv4 address too short'),
    ('ip("01.2.3.4") == ip("10.0.0.1")',
     'IP Address "01.2.3.4" parse error during conversion from string: ParseAddr("01.2.3.4"): IPv4 field has octet '
     'with leading zero'),
    ('ip("1..2.3") == ip("10.0.0.1")',
     'IP Address "1..2.3" parse error during conversion from string: ParseAddr("1..2.3"): IPv4 field must have at '
     'least one digit (at ".2.3")'),
    ('ip("fe80::1%eth0") == ip("10.0.0.1")', 'IP address "fe80::1%eth0" with zone value is not allowed'),
    ('ip("::ffff:1.2.3.4") == ip("10.0.0.1")', 'IPv4-mapped IPv6 address "::ffff:1.2.3.4" is not allowed'),
    ('cidr("1.2.3.4%eth0/8") == cidr("1.0.0.0/8")',
     'network address parse error during conversion from string: network address parse error during conversion '
     'from string: netip.ParsePrefix("1.2.3.4%eth0/8"): ParseAddr("1.2.3.4%eth0"): unexpected character (at "%eth0")'),
    ('cidr("fe80::1%eth0/64") == cidr("1.0.0.0/8")',
     'network address parse error during conversion from string: network address parse error during conversion '
     'from string: netip.ParsePrefix("fe80::1%eth0/64"): IPv6 zones cannot be present in a prefix'),
    ('ip("10.0.0.1") < ip("10.0.0.2")',
     "compilation failed: ERROR: <input>:1:16: found no matching overload for '_<_' applied to '(net.IP, net.IP)'"),
    ('"abc".matches("(")',
     'compilation failed: ERROR: <input>:1:15: invalid matches argument'),
    ('"abc".find("[") == ""',
     'program instantiation failed: error parsing regexp: missing closing ]: `[`'),
    ('cel.bind(p, "(", "abc".matches(p))',
     'error parsing regexp: missing closing ): `(`'),
    ('lists.range(1000).all(x, lists.range(1000).all(y, true))',
     'operation cancelled: actual cost limit exceeded'),
]


@pytest.fixture(scope="module")
def device():
    return device_input(DRIVER, DEVICE)


@pytest.mark.parametrize(("expr", "message"), KUBERNETES_MESSAGES, ids=[e[:50] for e, _ in KUBERNETES_MESSAGES])
def test_message_matches_kubernetes(device, expr, message):
    with pytest.raises((CelCompileError, CelRuntimeError)) as exc:
        compile_selector(expr).evaluate(device)
    err = exc.value
    # the 1.37 "no such key" hint is part of Kubernetes' message; other hints are labkit's own
    text = str(err) if err.hint.startswith(".") else err.message
    assert text == message


@pytest.mark.parametrize(("expr", "detail"), [
    ('device.capacity["gpu.nvidia.com"].memory >= quantity("40Gi")',
     "compilation failed: ERROR: <input>:1:42: found no matching overload for '_>=_' applied to "
     "'(kubernetes.Quantity, kubernetes.Quantity)'\n"
     ' | device.capacity["gpu.nvidia.com"].memory >= quantity("40Gi")\n'
     " | .........................................^"),
    ('"abc".matches("(")',
     'compilation failed: ERROR: <input>:1:15: invalid matches argument\n | "abc".matches("(")\n | ..............^'),
    ("1", "must evaluate to bool or the unknown type, not int"),
])
def test_compile_error_detail_matches_kubernetes(expr, detail):
    with pytest.raises(CelCompileError) as exc:
        compile_selector(expr)
    assert exc.value.detail == detail
