"""labkit.cel.formats: Kubernetes' CEL format library (format.<name>().validate(s), format.named(n)).

Hand cases pin Go's texts; with the Go oracle (tests/conftest.py cel_oracle) the validators are compared with Kubernetes'
own on every (format, input) pair below."""

from __future__ import annotations

import json

import pytest

from labkit.cel import CelCompileError, compile_selector, device_input
from labkit.cel.formats import FORMATS, validate

_LABEL_RE = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"

INPUTS = [
    "abc", "ABC", "a.b", "-a", "a-", "a--", "1abc", "a" * 63, "a" * 64, "", "a_b", "example.com", "a..b", "-",
    "ab-", "my.name/key", "/key", "a/", "a/b/c", "MyName", "my_value", "x" * 64, "a/" + "b" * 64, "A-",
    "http://example.com", "/path", "foo", "mailto:x", "1http://x", "://x", "*", "http://a b", "http://a:x/",
    "http://%41/", "http://a?b", "123e4567-e89b-12d3-a456-426614174000", "123E4567E89B12D3A456426614174000",
    "aGVsbG8=", "aGVsbG8", "YQ==", "====", "2021-01-01", "2021-02-29", "2020-02-29", "2021-13-01",
    "2021-01-01T00:00:00Z", "2021-01-01t00:00:00z", "2021-01-01T24:00:00Z", "2021-01-01T00:00:00",
    "2021-01-01T00:00:00.123+01:00", "2021-01-01 00:00:00Z", "é", "a" * 253, "a." * 127 + "a", "x" * 254,
]


def test_go_texts() -> None:
    assert validate("dns1123Label", "a.b") == ["must not contain dots"]
    assert validate("dns1123Label", "ABC") == [  # Go writes two spaces before "or"
        "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start "
        "and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is "
        f"'{_LABEL_RE}')"]
    assert validate("dns1123LabelPrefix", "abc-") == []  # a generateName prefix may end with '-'
    assert validate("qualifiedName", "/key") == ["prefix part must be non-empty"]
    assert validate("labelValue", "x" * 64)[0] == "must be no more than 63 bytes"
    assert validate("uri", "foo") == ['parse "foo": invalid URI for request']
    assert validate("uuid", "nope") == ["does not match the UUID format"]
    assert validate("date", "2021-02-29") == ["invalid date"]
    assert validate("datetime", "2021-01-01T00:00:00Z") == []


@pytest.mark.parametrize(("expr", "want"), [
    ('format.dns1123Label().validate("abc") == optional.none()', True),
    ('format.dns1123Label().validate("a.b").value() == ["must not contain dots"]', True),
    ('format.named("uuid").value().validate("x").hasValue()', True),
    ('format.named("nope").hasValue()', False),
    ('format.named("byte").hasValue() && format.byte().validate("YQ==").orValue([]).size() == 0', True),
])
def test_selectors(expr: str, want: bool) -> None:
    assert compile_selector(expr).evaluate(device_input("d", {"name": "x"})) is want


def test_cel_python_refuses_it_clearly() -> None:
    with pytest.raises(CelCompileError, match="not supported by the cel-python engine"):
        compile_selector('format.uuid().validate("x").hasValue()', engine="cel-python")


@pytest.mark.oracle
def test_validators_match_kubernetes(cel_oracle) -> None:
    cases = [(name, s) for name in FORMATS for s in INPUTS]
    lines = []
    for name, s in cases:
        mine = validate(name, s)
        want = f"optional.of({json.dumps(mine)})" if mine else "optional.none()"
        lines.append({"expr": f"format.{name}().validate({json.dumps(s)}) == {want}", "driver": "d"})
    wrong = [f"{name}({s!r}): labkit {validate(name, s)}" for (name, s), answer in zip(cases, cel_oracle(lines), strict=True)
             if answer["result"] != "true"]
    assert len(cases) > 700
    assert not wrong, "\n".join(wrong)
