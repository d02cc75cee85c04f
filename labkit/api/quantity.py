"""Kubernetes resource quantities (``k8s.io/apimachinery/pkg/api/resource``), exact.

Values are held as :class:`fractions.Fraction` so that ``1Gi == 1024Mi`` and sums never drift.
Parsing rounds up to nano precision like Go's ``ParseQuantity``; :meth:`Quantity.canonical`
prints the string Go's ``Quantity.String()`` prints (what ``kubectl`` and the API server show),
which matters because allocation results are compared byte for byte with the Go allocator.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache, total_ordering
from typing import Literal

from labkit.errors import InputError

__all__ = ["Quantity", "QuantityError", "parse_quantity"]

_BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_DECIMAL_BY_EXP = {v: k for k, v in _DECIMAL.items()}
_BINARY_BY_EXP = {v: k for k, v in _BINARY.items()}

# sign, integer digits, optional fraction, suffix (validated separately)
_SYNTAX = re.compile(r"^([+-]?)([0-9]*)(?:\.([0-9]*))?(.*)$")
_EXPONENT = re.compile(r"^[eE]([+-]?[0-9]+)$")
_NANO = Fraction(1, 10**9)
_MAX_INT64_FACTORS = 18

BINARY_SI = "BinarySI"
DECIMAL_SI = "DecimalSI"
DECIMAL_EXPONENT = "DecimalExponent"


class QuantityError(InputError, ValueError):
    """A string that Kubernetes would not accept as a quantity."""


def _round_up_to_nano(value: Fraction) -> Fraction:
    """Go rounds away from zero (inf.RoundUp) to 9 decimal places."""
    scaled = value / _NANO
    if scaled.denominator == 1:
        return value
    magnitude = math.ceil(abs(scaled))
    return Fraction(magnitude if scaled > 0 else -magnitude) * _NANO


@total_ordering
@dataclass(frozen=True, eq=False)
class Quantity:
    """An exact quantity plus the format Kubernetes remembers for printing."""

    value: Fraction
    format: str = DECIMAL_SI
    #: the input string when Go would keep it verbatim (it already was canonical)
    original: str | None = None
    #: Go's internal form: ``(value, scale)`` for its int64Amount (value * 10**scale), None for
    #: its arbitrary-precision inf.Dec form, "auto" = derive from ``value``. It decides what
    #: CEL's ``isInteger()``/``asInteger()`` say: Go asks the form, not the number, so
    #: ``quantity("1000m")`` (1000 * 10**-3) is not an integer there.
    go_amount: tuple[int, int] | None | Literal["auto"] = "auto"

    # -- construction -------------------------------------------------------------------------
    @classmethod
    def parse(cls, text: str) -> Quantity:
        return parse_quantity(text)

    @classmethod
    def from_int(cls, value: int, fmt: str = DECIMAL_SI) -> Quantity:
        return cls(Fraction(value), fmt)

    # -- arithmetic and comparison --------------------------------------------------------------
    def __eq__(self, other: object) -> bool:
        if isinstance(other, Quantity):
            return self.value == other.value
        if isinstance(other, int | Fraction):
            return self.value == other
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.value)

    def __lt__(self, other: Quantity | int) -> bool:
        return self.value < (other.value if isinstance(other, Quantity) else other)

    def __add__(self, other: Quantity | int) -> Quantity:
        o = other.value if isinstance(other, Quantity) else Fraction(other)
        return Quantity(self.value + o, self.format)

    def __sub__(self, other: Quantity | int) -> Quantity:
        o = other.value if isinstance(other, Quantity) else Fraction(other)
        return Quantity(self.value - o, self.format)

    def __neg__(self) -> Quantity:
        return Quantity(-self.value, self.format)

    def compare(self, other: Quantity) -> int:
        return (self.value > other.value) - (self.value < other.value)

    def sign(self) -> int:
        return (self.value > 0) - (self.value < 0)

    def is_integer(self) -> bool:
        return self.value.denominator == 1

    def go_int64_amount(self) -> tuple[int, int] | None:
        """Go's int64Amount ``(value, scale)``, or None when Go holds an inf.Dec."""
        if self.go_amount != "auto":
            return self.go_amount
        v = self.value
        if v.denominator == 1 and _INT64_MIN <= v <= _INT64_MAX:
            return int(v), 0
        return None

    def go_as_int64(self) -> int | None:
        """Go's ``Quantity.AsInt64()``: the integer, or None where Go says "not ok"."""
        amount = self.go_int64_amount()
        if amount is None:
            return None
        value, scale = amount
        if scale == 0:
            return value
        if scale < 0:
            return None  # Go does not reduce factors
        return _scaled_int64(value, scale)

    def go_add(self, other: Quantity) -> Quantity:
        """``q.Add(other)`` as Go does it: int64Amount arithmetic while it fits, else inf.Dec."""
        a, b = self.go_int64_amount(), other.go_int64_amount()
        fmt = other.format if self.value == 0 else self.format
        amount = _int64_amount_add(a, b) if a is not None and b is not None else None
        return Quantity(self.value + other.value, fmt, None, amount)

    def go_neg(self) -> Quantity:
        amount = self.go_int64_amount()
        if amount is not None:
            amount = None if amount[0] == _INT64_MIN else (-amount[0], amount[1])
        return Quantity(-self.value, self.format, None, amount)

    def as_int(self) -> int:
        return int(self.value)

    def as_float(self) -> float:
        return float(self.value)

    # -- printing -----------------------------------------------------------------------------
    def canonical(self) -> str:
        """The string Go's ``Quantity.String()`` returns."""
        if self.original is not None:
            return self.original
        value = self.value
        if value == 0:
            return "0"
        fmt = self.format
        if fmt == BINARY_SI and (-1024 < value < 1024 or value.denominator != 1):
            fmt = DECIMAL_SI
        if fmt == BINARY_SI:
            mantissa, exp = int(value), 0
            while abs(mantissa) >= 1024 and mantissa % 1024 == 0 and exp < 6:
                mantissa //= 1024
                exp += 1
            return f"{mantissa}{_BINARY_BY_EXP.get(exp * 10, '')}"
        # decimal: mantissa * 10**exponent with an integer mantissa and exponent % 3 == 0
        exponent = -9
        mantissa = int(value / _NANO)  # exact after rounding to nano
        while abs(mantissa) >= 10 and mantissa % 10 == 0:
            mantissa //= 10
            exponent += 1
        shift = exponent % 3
        mantissa *= 10**shift
        exponent -= shift
        if exponent == 0:
            return str(mantissa)
        if fmt == DECIMAL_SI and exponent in _DECIMAL_BY_EXP:
            return f"{mantissa}{_DECIMAL_BY_EXP[exponent]}"
        return f"{mantissa}e{exponent}"

    def __str__(self) -> str:
        return self.canonical()

    def __repr__(self) -> str:
        return f"Quantity({self.canonical()!r})"


_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def _fits(v: int) -> bool:
    return _INT64_MIN <= v <= _INT64_MAX


def _scaled_int64(value: int, scale: int) -> int | None:
    """value * 10**scale for scale >= 0, None on int64 overflow (Go's positiveScaleInt64)."""
    if value == 0:
        return 0
    if scale > 18:  # 10**19 > 2**63: overflows whatever the value (and 10**scale is never built)
        return None
    result = value * 10**scale
    return result if _fits(result) else None


def _int64_amount_add(a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int] | None:
    """Go's int64Amount.Add: align to the smaller scale; None when it overflows (Go -> inf.Dec)."""
    if b[0] == 0:
        return a
    if a[0] == 0:
        return b
    if a[1] == b[1]:
        total = a[0] + b[0]
        return (total, a[1]) if _fits(total) else None
    lo, hi = (a, b) if a[1] < b[1] else (b, a)
    shifted = _scaled_int64(hi[0], hi[1] - lo[1])
    if shifted is None:
        return None
    total = shifted + lo[0]
    return (total, lo[1]) if _fits(total) else None


def _go_parsed_amount(fmt: str, num: str, denom: str, exponent: int, negative: bool) -> tuple[int, int] | None:
    """The int64Amount Go's ParseQuantity builds on its fast path, None when it takes inf.Dec."""
    num = num.lstrip("0") or "0"
    mantissa = 1
    if fmt == BINARY_SI:
        if exponent < 0 or denom:
            return None
        mantissa = 1 << exponent
        precision = 15 - len(num) - int(exponent * 3 / 10) - 1
        scale = 0
    else:
        precision = _MAX_INT64_FACTORS - (len(num) + len(denom))
        scale = exponent
    if precision < 0:
        return None
    scale -= len(denom)
    if scale < -9:
        return None
    shifted = int(num + denom)
    if not _fits(shifted):
        return None
    result = shifted * mantissa
    if not _fits(result):
        return None
    return (-result if negative else result), scale


def parse_quantity(text: str) -> Quantity:
    """Parse like Go's ``resource.ParseQuantity``; raise :class:`QuantityError` otherwise."""
    if type(text) is str:
        # Quantity is immutable and the same few strings ("80Gi", "1") recur on every device
        return _parse_str_cached(text)
    return _parse(text)


@lru_cache(maxsize=8192)
def _parse_str_cached(text: str) -> Quantity:
    return _parse(text)


#: the most significant digits, and the most digits before the decimal point, of a quantity labkit computes
#: with: it holds values exactly (Fractions), and 10**999999999 would take hours. Go keeps such a number
#: as a mantissa and a scale, but Kubernetes documents quantities up to 2**63-1 (quantity.go) and its own
#: comparisons of one would expand it too.
MAX_QUANTITY_DIGITS = 1000
#: Go's scale is an int32: ParseQuantity refuses an exponent past +-2147483647 ("unable to parse
#: quantity's suffix", suffix.go since kubernetes/kubernetes#141203; earlier releases wrapped it)
_MAX_EXPONENT = 2**31 - 1


def _shown(text: str) -> str:
    """``text`` quoted for a message, cut short (a quantity may be megabytes of digits)."""
    return repr(text if len(text) <= 40 else f"{text[:40]}...")


def _too_large(text: str) -> QuantityError:
    return QuantityError(
        f"quantity {_shown(text)}: more than {MAX_QUANTITY_DIGITS:,} digits, past what labkit computes (Kubernetes "
        "documents quantities up to 2^63-1, about 9.2e18); fix: give a smaller value, with a suffix (Ki..Ei, k..E)")


def _value(text: str, num: str, denom: str, base: int, exponent: int, negative: bool) -> Fraction:
    """The value Go's ParseQuantity gives the parts of ``text``, rounded up to nano (away from zero), BinarySI
    capped at 2**63-1, computed without ever building a number of more than MAX_QUANTITY_DIGITS digits."""
    significant = (num + denom).lstrip("0")
    if not significant:
        return Fraction(0)
    if len(significant) > MAX_QUANTITY_DIGITS:
        raise _too_large(text)
    point = -len(denom) + (exponent if base == 10 else 0)  # value = int(significant) * 10**point (* 2**exponent)
    magnitude = len(significant) + point  # value < 10**magnitude before the binary factor (< 2**60 < 10**19)
    sign = -1 if negative else 1
    if magnitude <= -28:  # below 1n even times 2**60: Go rounds it up to 1n
        return sign * _NANO
    if base == 2 and magnitude > 40:  # past 2**63 for sure: Go caps it
        return Fraction(sign * _INT64_MAX)
    if magnitude > MAX_QUANTITY_DIGITS:
        raise _too_large(text)
    value = Fraction(int(significant)) * Fraction(10) ** point
    if base == 2:
        value = value * 2**exponent
    value = _round_up_to_nano(value)
    if base == 2 and value > _INT64_MAX:  # quantity.go: "The max is just a simple cap." (BinarySI only)
        value = Fraction(_INT64_MAX)
    return sign * value


def _parse(text: str) -> Quantity:
    if not isinstance(text, str):
        if isinstance(text, bool):
            raise QuantityError(f"quantities must be strings or numbers, not {text!r}")
        if isinstance(text, int):
            if abs(text).bit_length() > 3 * MAX_QUANTITY_DIGITS:  # no str() of thousands of digits
                raise _too_large(f"{text:x}"[:40])
            text = str(text)
        elif isinstance(text, float) and math.isfinite(text):
            text = repr(text)
        else:
            raise QuantityError(f"quantities must be strings or numbers, not {text!r}")
    if not text:
        raise QuantityError("quantities must match the regular expression "
                            "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'")
    m = _SYNTAX.match(text)
    if not m:
        raise _syntax_error(text)
    sign, num, denom, suffix = m.group(1), m.group(2), m.group(3), m.group(4)
    denom = denom or ""
    if not num and not denom:
        raise _syntax_error(text)
    if suffix in _BINARY:
        fmt, base, exponent = BINARY_SI, 2, _BINARY[suffix]
    elif suffix in _DECIMAL:
        fmt, base, exponent = DECIMAL_SI, 10, _DECIMAL[suffix]
    else:
        em = _EXPONENT.match(suffix)
        if not em:
            raise _syntax_error(text)
        digits = em.group(1).lstrip("+-").lstrip("0")
        if len(digits) > 10 or int(digits or "0") > _MAX_EXPONENT:
            raise QuantityError(f"quantity {_shown(text)}: unable to parse quantity's suffix (an exponent is at "
                                f"most {_MAX_EXPONENT:,} either way, as Go's int32 scale)")
        fmt, base, exponent = DECIMAL_EXPONENT, 10, int(em.group(1))
    value = _value(text, num, denom, base, exponent, sign == "-")
    original = text if _go_keeps_string(fmt, num, denom, exponent, value) else None
    return Quantity(value, fmt, original, _go_parsed_amount(fmt, num, denom, exponent, sign == "-"))


def _go_keeps_string(fmt: str, num: str, denom: str, exponent: int, value: Fraction) -> bool:
    """Go caches the input string when its fast path sees a canonical form (see ParseQuantity)."""
    num = num or "0"
    if fmt == BINARY_SI:
        if denom or exponent < 0:
            return False
        precision = 15 - len(num) - int(exponent * 3 / 10) - 1
        if precision < 0:
            return False
        mantissa_value = int(num)
        if mantissa_value.bit_length() + exponent > 62:
            return False
        return exponent % 10 == 0 and (mantissa_value & 0x07) != 0
    precision = _MAX_INT64_FACTORS - (len(num) + len(denom))
    if precision < 0:
        return False
    scale = exponent - len(denom)
    if scale < -9:
        return False
    shifted = num + denom
    if int(shifted) >= 2**63:
        return False
    return scale % 3 == 0 and not shifted.endswith("000") and shifted[0] != "0"


def _syntax_error(text: str) -> QuantityError:
    return QuantityError(
        f"quantity {_shown(text)}: quantities must match the regular expression "
        "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$' (e.g. 40Gi, 500m, 1e3)"
    )
