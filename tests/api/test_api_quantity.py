"""labkit.api.quantity: canonical strings as Go's resource.Quantity prints them, and rejections."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from labkit.api.quantity import Quantity, QuantityError, parse_quantity


@pytest.mark.parametrize(("text", "canonical"), [
    ("1024Mi", "1Gi"), ("0.5Gi", "512Mi"), ("1000", "1k"), ("0.1", "100m"), ("1.5", "1500m"),
    ("81920Mi", "80Gi"), ("1E3", "1E3"), ("1e3", "1e3"), ("40Gi", "40Gi"), ("100m", "100m"),
    ("1000m", "1"), ("0", "0"), ("0.0", "0"), ("1023", "1023"), ("1.5Gi", "1536Mi"), ("1000000", "1M"),
    ("0.0000000001", "1n"), ("9856Mi", "9856Mi"), (".5", "500m"), ("01", "1"), ("-0.5Gi", "-512Mi"),
    ("1e19", "10e18"), ("1.5Ki", "1536"), ("2.5e3", "2500"), ("+1", "+1"), ("1e+3", "1e+3"),
    ("9223372036854775808", "9223372036854775808"),
])
def test_canonical_matches_go(text: str, canonical: str) -> None:
    assert parse_quantity(text).canonical() == canonical


@pytest.mark.parametrize("text", ["", "abc", "1.2.3", "Gi", "1 Gi", "1gi", "1KB", "--1", "1e", "e3",
                                  "1.5e3Mi", " 1", "1 ", ".", "+", "1Ki2", "1e-", "Infinity", "nan", "0x10",
                                  "1_000", "\u0661"])
def test_invalid_strings_rejected(text: str) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(text)


def test_non_strings() -> None:
    assert parse_quantity(3).value == 3
    assert parse_quantity(0.5).value == Fraction(1, 2)
    for bad in (True, None, float("inf"), [1]):
        with pytest.raises(QuantityError):
            parse_quantity(bad)  # type: ignore[arg-type]


def test_exact_arithmetic_and_order() -> None:
    assert parse_quantity("1Gi") == parse_quantity("1024Mi")
    assert parse_quantity("500m") < parse_quantity("1")
    total = parse_quantity("40Gi") + parse_quantity("40Gi")
    assert total.canonical() == "80Gi"
    assert (parse_quantity("1") - parse_quantity("1500m")).canonical() == "-500m"
    assert parse_quantity("1.5").compare(parse_quantity("1500m")) == 0
    assert Quantity.from_int(2048, "BinarySI").canonical() == "2Ki"


def test_rounds_up_to_nano() -> None:
    assert parse_quantity("0.0000000015").value == Fraction(2, 10**9)
    assert parse_quantity("-0.0000000015").value == Fraction(-2, 10**9)


@given(st.integers(min_value=0, max_value=2**40), st.sampled_from(["", "k", "M", "G", "Ki", "Mi", "Gi", "m"]))
def test_reparse_canonical_is_stable(n: int, suffix: str) -> None:
    q = parse_quantity(f"{n}{suffix}")
    again = parse_quantity(q.canonical())
    assert again == q
    assert again.canonical() == q.canonical()
