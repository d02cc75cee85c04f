"""The DRA CEL conformance table: what Kubernetes 1.37 does with each selector.

Every row was checked against the real ``k8s.io/dynamic-resource-allocation/cel`` v0.37.2
(scheduler view: ``CompileCELExpression`` + ``DeviceMatches``).

Columns: expression | Kubernetes result | cel-python result (only where it differs) | note.
Results: True / False / COMPILE (compile error) / RUNTIME (runtime error) / UNSUPPORTED
(cel-python refuses with "not supported by the cel-python engine").

Both engines run every row.

Each row says what Kubernetes 1.37 does; both engines must do the same, except that the
cel-python engine must refuse constructs it cannot run with a clear "not supported" error.
Rows in KNOWN_DEVIATIONS are strict xfails: they fail loudly once fixed (see there for the two
that would run for minutes).

The Kubernetes column itself is re-checked against the real Kubernetes code: the Go oracle
(tools/cel-oracle; LABKIT_CEL_ORACLE, or built here when Go is installed).
"""

from __future__ import annotations

from typing import NamedTuple

import pytest

from labkit.cel import CelCompileError, CelRuntimeError, compile_selector, device_input

COMPILE, RUNTIME, UNSUPPORTED = "compile error", "runtime error", "unsupported"
DRIVER = "gpu.nvidia.com"

#: the device every row is evaluated on (a ResourceSlice spec.devices[] entry of DRIVER)
DEVICE = {
    "name": "gpu-0",
    "attributes": {
        "productName": {"string": "NVIDIA A100-SXM4-80GB"},
        "type": {"string": "gpu"},
        "index": {"int": 0},
        "uuid": {"string": "GPU-4f3a"},
        "migEnabled": {"bool": False},
        "driverVersion": {"version": "550.54.15"},
        "cudaComputeCapability": {"version": "8.0.0"},
        "cudaDriverVersion": {"version": "12.4.0-rc.1"},
        "resource.kubernetes.io/pcieRoot": {"string": "pci0000:00"},
        "links": {"ints": [16, 8, 8]},
        "features": {"strings": ["nvlink", "mig", "hmm"]},
    },
    "capacity": {
        "memory": {"value": "80Gi"},
        "multiprocessors": {"value": "108"},
        "example.com/bandwidth": {"value": "1600G"},
    },
}

A = 'device.attributes["gpu.nvidia.com"]'
C = 'device.capacity["gpu.nvidia.com"]'


class Row(NamedTuple):
    expr: str
    k8s: object
    celpy: object = None  # None: same as k8s
    note: str = ""


ROWS: list[Row] = [
    # --- the 35 cases of ecosystem-notes §1 ---------------------------------------------------------
    Row(f'{C}.memory >= quantity("40Gi")', COMPILE, note="Quantity has no relational operators"),
    Row(f'{C}.memory.compareTo(quantity("40Gi")) >= 0', True),
    Row(f'{C}.memory.isGreaterThan(quantity("40Gi"))', True),
    Row(f'{C}.memory.isLessThan(quantity("100Gi"))', True),
    Row('isQuantity("1.5G")', True),
    Row(f'{C}.multiprocessors.asInteger() == 108', True),
    Row(f'{C}.memory.asApproximateFloat() > 80000000000.0', True),
    Row(f'{C}.memory.add(quantity("1Gi")) == quantity("81Gi")', True),
    Row(f'{C}.memory.sub(1073741824) == quantity("79Gi")', True),
    Row(f'{C}.memory == quantity("81920Mi")', True, note="== compares values"),
    Row('sign(quantity("-5")) == -1', True, note="sign is global"),
    Row('quantity("-5").sign() == -1', COMPILE, note="sign is not a member"),
    Row(f'{A}.driverVersion.isGreaterThan(semver("7.5.0"))', True),
    Row(f'{A}.cudaComputeCapability.compareTo(semver("7.5.0")) > 0', True),
    Row(f'{A}.driverVersion.major() == 550', True),
    Row('semver("1.0.0-alpha").isLessThan(semver("1.0.0"))', True, note="prerelease sorts first"),
    Row('semver("v1.2", true) == semver("1.2.0")', True, note="normalisation"),
    Row(f'{A}.missing == "x"', RUNTIME, note="no such key"),
    Row('device.attributes["other.example.com"].x == 1', RUNTIME, note="missing domain = empty map"),
    Row(f'"missing" in {A}', False),
    Row(f'has({A}.missing)', False),
    Row('"x" in device.attributes["other.example.com"]', False, note="missing domain = empty map"),
    Row(f'{A}.productName.startsWith("NVIDIA")', True),
    Row(f'{A}.productName.matches("A100")', True),
    Row(f'{A}.productName.lowerAscii().contains("a100")', True),
    Row(f'{A}.productName.split("-").size() == 3', True),
    Row(f'{A}.type in ["gpu", "mig"]', True),
    Row(f'{A}.links.exists(l, l == 16)', True),
    Row('[3, 1, 2].max() == 3', True),
    Row(f'{A}.productName.find("A[0-9]+") == "A100"', True),
    Row(f'{A}.?addressingMode.orValue("none") == "none"', True),
    Row(f'cel.bind(a, {A}, a.index == 0 && a.type == "gpu")', True),
    Row(f'{A}.index < 1.5', True, note="cross-type numeric comparison"),
    Row(f'{A}.index == "zero"', False, note="heterogeneous equality"),
    Row('9223372036854775807 + 1 > 0', RUNTIME, note="integer overflow"),
    # --- device variable -----------------------------------------------------------------------------
    Row('device.driver == "gpu.nvidia.com"', True),
    Row('device.driver.endsWith(".com")', True),
    Row(f'{A}.productName == device.attributes["gpu.nvidia.com"]["productName"]', True,
        note="select == index"),
    Row('device.attributes["resource.kubernetes.io"].pcieRoot == "pci0000:00"', True),
    Row(f'"pcieRoot" in {A}', False, note="qualified names live in their own domain"),
    Row('device.capacity["example.com"].bandwidth.compareTo(quantity("1.6T")) == 0', True),
    Row('device.foo == 1', COMPILE, note="undefined field"),
    Row('device.allowMultipleAllocations == false', True),
    Row('has(device.driver)', True),
    Row('has(device.attributes) && has(device.capacity) && has(device.allowMultipleAllocations)', True),
    Row('has(device.foo)', COMPILE),
    Row('"gpu.nvidia.com" in device.attributes', True),
    Row('"other.example.com" in device.attributes', False, note="in is honest on the outer map"),
    Row('has(device.attributes.gpu)', True, note="Find on the outer map says found"),
    Row('has(device.attributes.other)', True, note="missing domain: Find returns the empty map"),
    Row('device.attributes["other.example.com"].size() == 0', True),
    Row('device.capacity["other.example.com"].size() == 0', True),
    Row('["other.example.com", "gpu.nvidia.com"].exists(d, "index" in device.attributes[d])', True,
        note="domain from a comprehension variable"),
    Row('cel.bind(d, device, d.driver == "gpu.nvidia.com" && has(d.attributes))', True,
        note="device itself as a value"),
    Row('cel.bind(d, "other.example.com", "x" in device.attributes[d])', False),
    Row(f'has({A}.index)', True),
    Row(f'{A}.migEnabled == false', True),
    Row(f'!{A}.migEnabled', True),
    Row(f'{A}.uuid.size() == 8', True),
    Row(f'{A}.links.size() == 3', True),
    Row(f'{A}.links == [16, 8, 8]', True),
    Row(f'{A}.links == 16', False, note="list vs int: heterogeneous equality"),
    # --- result type ------------------------------------------------------------------------------------
    Row('1', COMPILE, note="must evaluate to bool"),
    Row('"true"', COMPILE),
    Row('quantity("1")', COMPILE),
    Row(f'{A}.productName', RUNTIME, note="dyn result: conversion error at run time"),
    Row(f'{A}.migEnabled', False),
    Row(f'{A}.driverVersion', RUNTIME),
    # --- logic and errors -------------------------------------------------------------------------------
    Row(f'false && {A}.missing == "x"', False, note="commutative error absorption"),
    Row(f'{A}.missing == "x" && false', False),
    Row(f'true || {A}.missing == "x"', True),
    Row(f'{A}.missing == "x" || true', True),
    Row(f'true && {A}.missing == "x"', RUNTIME),
    Row('device.driver == "other" && device.attributes["other"].type == "gpu"', False,
        note="class selector on another driver's device"),
    Row('1 / 0 == 1', RUNTIME, note="division by zero"),
    Row('[1, 2][5] == 1', RUNTIME, note="index out of range"),
    Row(f'{A}.index + 1 == 1', True),
    Row(f'{A}.productName + 1 == 2', RUNTIME, note="no such overload (dyn operand)"),
    Row(f'{A}.productName + 1 == "x"', COMPILE, note="dyn + int is int: int == string"),
    Row('true == 1', COMPILE),
    Row('true ? true : false', True),
    Row('(1 == 1) != false', True),
    Row('1 == 1.0', COMPILE, note="typed literals: no _==_(int, double)"),
    Row('dyn(1) == 1.0', True),
    Row('1 < 1.5 && 2u > 1 && 2.5 >= 2', True, note="cross-type numeric literals"),
    Row(f'1 < 1.5 && {C}.memory.compareTo(quantity("80Gi")) == 0 && "x" in device.attributes["o.com"]', False,
        note="literal cross-type comparison next to device lookups"),
    Row(f'2 > 1.5 && {A}.missing == 1', RUNTIME),
    Row('syntax error (', COMPILE),
    Row('undefinedFunction(1)', COMPILE),
    Row('unknownVariable == 1', COMPILE),
    # --- quantity library -----------------------------------------------------------------------------
    Row('quantity("200M").compareTo(quantity("0.2G")) == 0', True),
    Row('quantity("50M").compareTo(quantity("50Mi")) == -1', True),
    Row('quantity("1Gi") == quantity("1024Mi")', True),
    Row('quantity("200K") == quantity("1")', RUNTIME, note="bad suffix"),
    Row('quantity("Three") == quantity("1")', RUNTIME),
    Row('isQuantity("1,3G")', False),
    Row('quantity("50k").isInteger()', True),
    Row('quantity("1.5").isInteger()', False),
    Row('quantity("9999999999999999999999999999G").isInteger()', False),
    Row('quantity("9999999999999999999999999999G").asInteger() == 1', RUNTIME),
    Row('quantity("1000m").asInteger() == 1', RUNTIME, note="Go: AsInt64 fails for a negative scale"),
    Row('quantity("80Gi").asInteger() == 85899345920', True),
    Row('quantity("50k").add(20).sub(quantity("100k")).sub(-50000) == quantity("20")', True),
    Row('sign(quantity("0")) == 0', True),
    Row('quantity("1").div(2) == quantity("500m")', COMPILE, note="div/mul are not in 1.37"),
    Row('quantity("1") < quantity("2")', COMPILE),
    # --- semver library -------------------------------------------------------------------------------
    Row('semver("1.2.3").compareTo(semver("1.2.3")) == 0', True),
    Row('semver("1.2.3").compareTo(semver("2.0.0")) == -1', True),
    Row('semver("1.2.3").minor() == 2 && semver("1.2.3").patch() == 3', True),
    Row('semver("1.0.0") == semver("1.0.0+build.5")', True, note="build metadata ignored"),
    Row('semver("1.0.0-alpha.1").isLessThan(semver("1.0.0-alpha.beta"))', True),
    Row('semver("1.0.0-beta.2").isLessThan(semver("1.0.0-beta.11"))', True),
    Row('semver("1.2") == semver("1.2.0")', RUNTIME, note="strict without normalize"),
    Row('semver("01.2.3") == semver("1.2.3")', RUNTIME),
    Row('semver("v01.02.03", true).minor() == 2', True),
    Row('semver("1.2-rc", true) == semver("1.2.0")', RUNTIME),
    Row('isSemver("1.2.3") && !isSemver("1.2") && isSemver("1.2", true)', True),
    Row(f'{A}.cudaDriverVersion.isLessThan(semver("12.4.0"))', True),
    Row('semver("1.0.0") < semver("2.0.0")', COMPILE),
    Row(f'{A}.driverVersion > semver("1.0.0")', COMPILE),
    # --- strings (ext strings v2) ---------------------------------------------------------------------
    Row('"abc".charAt(1) == "b"', True),
    Row('"abcabc".indexOf("c") == 2 && "abcabc".lastIndexOf("c") == 5', True),
    Row('"ABC".lowerAscii() == "abc" && "abc".upperAscii() == "ABC"', True),
    Row('"aaa".replace("a", "b", 2) == "bba"', True),
    Row('"a,b,c".split(",", 2) == ["a", "b,c"]', True),
    Row('"abcdef".substring(2, 4) == "cd"', True),
    Row('"  x ".trim() == "x"', True),
    Row('["a", "b"].join("-") == "a-b"', True),
    Row('"%s has %d GPUs at %.1f".format(["node", 8, 1.5]) == "node has 8 GPUs at 1.5"', True),
    Row('strings.quote("a\\"b") == "\\"a\\\\\\"b\\""', True),
    Row('"abc".reverse() == "cba"', COMPILE, note="reverse is strings v3"),
    Row('"abc".substring(5) == ""', RUNTIME),
    # --- lists, regex, sets, URLs --------------------------------------------------------------------
    Row('[1, 2, 3].isSorted() && !["b", "a"].isSorted()', True),
    Row('[1, 2, 3].sum() == 6 && [1.5, 2.5].sum() == 4.0', True),
    Row('[3, 1, 2].min() == 1', True),
    Row('[].min() == 1', RUNTIME, note="min called on empty list"),
    Row('[1, 2, 2].indexOf(2) == 1 && [1, 2, 2].lastIndexOf(2) == 2 && [1].indexOf(5) == -1', True),
    Row(f'{A}.links.sum() == 32', True),
    Row(f'{A}.features.exists(f, f == "mig")', True),
    Row('"a1b22c333".findAll("[0-9]+") == ["1", "22", "333"]', True),
    Row('"a1b22c333".findAll("[0-9]+", 2) == ["1", "22"]', True),
    Row('"abc".find("x") == ""', True),
    Row('"abc".matches("^a.c$")', True),
    Row('sets.contains([1, 2, 3], [2, 3])', True),
    Row('sets.equivalent([1, 2], [2, 1, 1])', True),
    Row('sets.intersects([1, 2], [3])', False),
    Row('url("https://example.com:8080/a%20b?x=1&x=2").getQuery()["x"] == ["1", "2"]', True),
    Row('url("https://example.com:8080/p").getHost() == "example.com:8080"', True),
    Row('url("https://[::1]:80/").getHostname() == "::1"', True),
    Row('url("https://example.com:8080/").getPort() == "8080"', True),
    Row('url("https://example.com/").getScheme() == "https"', True),
    Row('isURL("/path") && !isURL("x")', True),
    Row('url("x").getScheme() == ""', RUNTIME),
    # --- comprehensions ---------------------------------------------------------------------------------
    Row('[1, 2, 3].all(x, x > 0)', True),
    Row('[1, 2, 3].exists_one(x, x == 2)', True),
    Row('[1, 2, 3].filter(x, x > 1).size() == 2', True),
    Row('[1, 2, 3].map(x, x * 2) == [2, 4, 6]', True),
    Row(f'{A}.links.map(l, l * 2).sum() == 64', True),
    Row('{"a": 1}.all(k, k == "a")', True),
    # --- optional types -----------------------------------------------------------------------------------
    Row(f'{A}.?index.orValue(7) == 0', True),
    Row(f'{A}[?"index"].hasValue()', True),
    Row('device.attributes[?"other.example.com"].hasValue()', True,
        note="missing domain is found (as an empty map)"),
    Row('optional.of(1).value() == 1 && !optional.none().hasValue()', True, UNSUPPORTED),
    Row(f'{A}.?index.value() == 0', True, UNSUPPORTED),
    Row('device.attributes.?other.?x.orValue(1) == 1', True, UNSUPPORTED, note="chained optionals"),
    Row(f'{A}[?"missing"].orValue("d") == "d"', True),
    Row('{"a": 1}[?"b"].orValue(5) == 5', True),
    Row(f'cel.bind(v, {A}.driverVersion, v.major() > 500 && v.minor() >= 54)', True),
    Row(f'cel.bind(v, {A}.missing, true)', True, note="cel.bind is lazy: an unused error does not matter"),
    Row(f'cel.bind(v, {A}.missing, v == 1)', RUNTIME),
    Row(f'cel.bind(v, {A}.index, cel.bind(w, v + 1, w == 1))', True),
    # --- ext lists (in the 1.37 base environment) -----------------------------------------------------
    Row('lists.range(3) == [0, 1, 2]', True),
    Row('[3, 1, 2].sort() == [1, 2, 3]', True),
    Row('[1, 2, 3].slice(1, 2) == [2]', True),
    Row('[[1], [2, 3]].flatten() == [1, 2, 3]', True),
    Row('[1, 1, 2].distinct() == [1, 2]', True),
    Row('[1, 2].reverse() == [2, 1]', True),
    Row('[1, 2, 3].slice(2, 1) == []', RUNTIME),
    Row('lists.range(2000000).size() > 0', RUNTIME, note="size exceeds maximum allowed (1000000)"),
    Row('[1, 2].first() == optional.of(1)', True, UNSUPPORTED),
    # --- IP / CIDR ------------------------------------------------------------------------------------------
    Row('isIP("10.0.0.1") && ip("10.0.0.1").family() == 4 && ip("::1").family() == 6', True),
    Row('!isIP("10.0.0.01") && !isIP("fe80::1%eth0") && !isIP("::ffff:1.2.3.4")', True),
    Row('ip("::1").isLoopback() && ip("fe80::1").isLinkLocalUnicast() && ip("0.0.0.0").isUnspecified()', True),
    Row('ip("10.0.0.1").isGlobalUnicast() && ip("224.0.0.1").isLinkLocalMulticast()', True,
        note="Go: private addresses are global unicast"),
    Row('ip.isCanonical("10.0.0.1") && !ip.isCanonical("2001:DB8::1")', True),
    Row('ip("10.0.0.1") == ip("10.0.0.1")', True),
    Row('ip("x") == ip("10.0.0.1")', RUNTIME),
    Row('ip("10.0.0.1") < ip("10.0.0.2")', COMPILE),
    Row('cidr("10.0.0.0/8").containsIP(ip("10.1.2.3")) && cidr("10.0.0.0/8").containsIP("10.0.0.1")', True),
    Row('cidr("10.0.0.0/8").containsCIDR(cidr("10.1.0.0/16")) && !cidr("10.0.0.0/8").containsCIDR("10.0.0.0/7")',
        True),
    Row('cidr("10.1.0.0/8").masked() == cidr("10.0.0.0/8") && cidr("10.1.0.0/8").ip() == ip("10.1.0.0")', True),
    Row('cidr("10.0.0.0/8").prefixLength() == 8 && isCIDR("::/0") && !isCIDR("10.0.0.0/33")', True),
    Row('string(ip("10.0.0.1")) == "10.0.0.1"', True),
    # --- regular expressions are checked when compiling ------------------------------------------------
    Row('"abc".matches("(")', COMPILE, note="invalid matches argument"),
    Row('"abc".find("[") == ""', COMPILE, note="program instantiation failed"),
    Row('cel.bind(p, "(", "abc".matches(p))', RUNTIME, note="pattern not constant"),
    # --- limits -------------------------------------------------------------------------------------------
    Row('lists.range(1000).all(x, lists.range(1000).all(y, true))', RUNTIME,
        note="actual cost limit 1,000,000 exceeded"),
    Row('lists.range(100).all(x, lists.range(100).all(y, true))', True,
        note="cel-cpp stops at 10,000 iterations; estimated cost 41,612 is within the limit, so cel-python finishes it"),
    Row("lists.range(1000).all(x, x >= 0 || lists.range(1000).all(y, true))", True,
        note="estimated above the limit, but the inner loop never runs: no limit error at run time"),
    # --- two-variable comprehensions and sortBy (cel-python refuses them) ---------------------------
    Row('[1, 2].all(i, v, i < v)', True, UNSUPPORTED, note="two-variable comprehension"),
    Row('[1, 2].transformList(i, v, v * 2) == [2, 4]', True, UNSUPPORTED),
    Row('{"a": 1, "b": 2}.exists(k, v, k == "b" && v == 2)', True, UNSUPPORTED),
    Row('[5, 6].existsOne(i, v, i == 1 && v == 6)', True, UNSUPPORTED),
    Row('{"a": 1}.transformList(k, v, k + string(v)) == ["a1"]', True, UNSUPPORTED),
    Row(f'{A}.productName.split(" ").all(i, w, i >= 0 && w != "")', True, UNSUPPORTED),
    Row('{"a": 1, "b": 2}.transformMap(k, v, v > 1, v * 2) == {"b": 4}', True, UNSUPPORTED),
    Row('[10, 20].transformMap(i, v, v + i) == {0: 10, 1: 21}', True, UNSUPPORTED),
    Row('[10, 20].transformMapEntry(i, v, {string(v): i}) == {"10": 0, "20": 1}', True, UNSUPPORTED),
    Row('[1, 1].transformMapEntry(i, v, {string(v): i}).size() == 1', RUNTIME, UNSUPPORTED,
        note="insert failed: key 1 already exists"),
    Row('[3, 1].sortBy(x, -x) == [3, 1]', True, UNSUPPORTED),
    Row('[1, 2, 3].sortBy(x, x % 2) == [2, 1, 3]', True, UNSUPPORTED, note="stable for equal keys"),
    Row('[[1], [2]].sortBy(x, x) == [[1], [2]]', COMPILE, UNSUPPORTED, note="keys must be orderable"),
    Row(f'{A}.productName.split("-").sortBy(w, w.size()) == ["SXM4", "80GB", "NVIDIA A100"]', True, UNSUPPORTED),
    # --- quantity integers follow Go's internal form, not the number ---------------------------------
    Row('quantity("1k").isInteger() && quantity("1Ki").isInteger() && quantity("1Ti").isInteger()', True),
    Row('quantity("1.0").isInteger() || quantity("0.5Ki").isInteger() || quantity("1Pi").isInteger()', False,
        note="fraction digits, binary fractions and >= 1Pi leave Go's int64 fast path"),
    Row('quantity("1000m").add(1).isInteger() || quantity("1500m").add(quantity("500m")).isInteger()', False),
    Row('quantity("1").add(quantity("2")).asInteger() == 3 && quantity("1000m") == quantity("1")', True),
    # --- checks Kubernetes' type checker makes (labkit.cel.typecheck for cel-expr-python) -----------
    Row('{"a": 1, "b": "x"}.size() == 2', COMPILE, note="map values must share a type"),
    Row('[1, dyn(2.0)].size() == 2', COMPILE, note="expected type 'int' but found 'dyn'"),
    Row(f'[{A}.productName, "a"].size() == 2', COMPILE, note="an attribute value is 'dyn' (stored view)"),
    Row('[[], [1]].size() == 2 && [optional.of(1), optional.none()].size() == 2', True, UNSUPPORTED),
    Row('[1, 2].indexOf(1.0) == 0', COMPILE),
    Row('["a"].indexOf(dyn(1)) == -1', True),
    # --- IP / CIDR error texts ------------------------------------------------------------------------
    Row('string(cidr("10.0.0.1/8")) == "10.0.0.1/8" && [ip("1.2.3.4")].map(x, string(x)) == ["1.2.3.4"]', True),
    Row('ip("::ffff:1.2.3.4") == ip("1.2.3.4")', RUNTIME, note="IPv4-mapped IPv6 address is not allowed"),
    Row('ip("fe80::1%eth0") == ip("fe80::1")', RUNTIME, note="zone value is not allowed"),
    Row('cidr("10.0.0.1") == cidr("10.0.0.0/8")', RUNTIME, note="no '/'"),
    # --- the format library (cel-python refuses it), and type rules -----------------------------------
    Row('format.dns1123Label().validate("abc").hasValue() == false', True, UNSUPPORTED),
    Row('format.dns1123Label().validate("a.b").value() == ["must not contain dots"]', True, UNSUPPORTED),
    Row('format.named("labelValue").value().validate("ok_1") == optional.none() && !format.named("x").hasValue()',
        True, UNSUPPORTED),
    Row(f'format.qualifiedName().validate({A}.productName).hasValue()', True, UNSUPPORTED,
        note="a space is not allowed in a qualified name"),
    Row('[1, 2.0].size() == 2', COMPILE, note="list literal elements must share a type"),
    Row('["a"].indexOf(1) == 0', COMPILE),
]

#: rows labkit knows it gets wrong, by engine: {expr: reason}; asserted as strict xfail, or, for a
#: "norun:" reason (the row would run for minutes), compiled and the engine held to saying that it
#: has no runtime cost limit (Program.cost_limit)
KNOWN_DEVIATIONS: dict[str, dict[str, str]] = {
    "cel-expr-python": {},
    "cel-python": {},
}


# --- the tests -----------------------------------------------------------------------------------

ENGINES = ("cel-expr-python", "cel-python")


@pytest.fixture(scope="module")
def device():
    return device_input(DRIVER, DEVICE)


def outcome(expr: str, engine: str, device) -> tuple[object, str]:
    try:
        program = compile_selector(expr, engine=engine)
    except CelCompileError as exc:
        if "not supported by the cel-python engine" in exc.message:
            return UNSUPPORTED, str(exc)
        return COMPILE, str(exc)
    try:
        return program.evaluate(device), ""
    except CelRuntimeError as exc:
        return RUNTIME, str(exc)


def _params():
    for engine in ENGINES:
        for row in ROWS:
            marks = []
            reason = KNOWN_DEVIATIONS[engine].get(row.expr)
            if reason and not reason.startswith("norun: "):
                marks.append(pytest.mark.xfail(reason=reason, strict=True))
            yield pytest.param(engine, row, marks=marks, id=f"{engine}:{row.expr[:60]}")


def test_table_is_big_enough():
    assert len(ROWS) >= 90
    assert len({r.expr for r in ROWS}) == len(ROWS), "duplicate rows"


@pytest.mark.parametrize(("engine", "row"), list(_params()))
def test_row(engine, row, device):
    if KNOWN_DEVIATIONS[engine].get(row.expr, "").startswith("norun: "):
        program = compile_selector(row.expr, engine=engine)
        assert program.cost_limit.startswith("no runtime cost limit"), program.cost_limit
        return
    want = row.k8s if engine == "cel-expr-python" or row.celpy is None else row.celpy
    got, message = outcome(row.expr, engine, device)
    assert got == want, f"{row.expr!r} on {engine}: want {want}, got {got} {message}"
    if got == UNSUPPORTED:
        assert "use engine='cel-expr-python'" in message
    if got in (COMPILE, RUNTIME, UNSUPPORTED):
        assert "\n" not in message and "Traceback" not in message and message


@pytest.mark.oracle
def test_kubernetes_column_against_oracle(cel_oracle):
    answers = cel_oracle([{"expr": r.expr, "driver": DRIVER, "attributes": DEVICE["attributes"],
                           "capacity": DEVICE["capacity"], "consumableCapacity": True} for r in ROWS])
    names = {"true": True, "false": False, "compile": COMPILE, "runtime": RUNTIME}
    wrong = []
    for row, answer in zip(ROWS, answers, strict=True):
        got = names[answer["result"]]
        if got != row.k8s:
            wrong.append(f"{row.expr}: table {row.k8s}, Kubernetes {got}")
    assert not wrong, "\n".join(wrong)
