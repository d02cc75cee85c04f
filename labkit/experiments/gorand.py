"""Go's math/rand, seeded as the FGD authors' simulator seeds it (`rand.Seed(S)`), for `--rng go`.

The simulator draws its arrival order, its workload inflation and its nodes' name prefixes from Go's
global math/rand stream. To replay its runs exactly, `GoRand` produces the same values as Go's
`rand.New(rand.NewSource(seed))` (and the pre-1.20 global source after `rand.Seed(seed)`), written from
the algorithm's published facts:

- the source is an additive lagged Fibonacci generator, x[n] = x[n-607] + x[n-273] mod 2**64, over a
  607-word register; Seed fills the register from a Park-Miller (48271, mod 2**31-1) stream, three draws
  per word (shifted by 40, 20, 0 bits), XORed with the "cooked" table;
- the cooked table (Go's math/rand/gen_cooked.go) is the same register seeded with srand(1) (three
  draws per word, shifted by 20, 10, 0 bits) after 7.8e12 steps. It is computed here, not copied: the
  recurrence is linear, so the state 7.8e12 steps on is x**N mod the characteristic polynomial
  x**607 - x**334 - 1 (coefficients mod 2**64) applied to the first 1,214 terms;
- Int63 = the 64-bit word with its top bit cleared; Int31 = Int63 >> 32; Uint32 = Int63 >> 31;
  Int31n rejects above the largest multiple of n (power of two: a mask); Intn = Int31n below 2**31;
  Float64 = Int63 / 2**63 (drawn again on 1.0); Shuffle swaps i (n-1 down to 1) with Lemire's
  multiply-shift int31n(i + 1); Perm builds the permutation inside-out with Intn(i + 1).
"""

from __future__ import annotations

from collections.abc import Callable, MutableSequence
from functools import cache
from typing import Any

import numpy as np

LEN = 607  # register length
TAP = 273  # tap distance
MASK64 = (1 << 64) - 1
MASK63 = (1 << 63) - 1
INT32MAX = (1 << 31) - 1
#: gen_cooked.go: vrand() steps after srand(1) (the loop bound 7.8e12, a uint64)
COOKED_STEPS = 7_800_000_000_000
SEED_ZERO = 89482311  # what a seed of 0 (mod 2**31-1) becomes


def _seedrand(x: int) -> int:
    """x[n+1] = 48271 x[n] mod (2**31 - 1), by Schrage's method as Go computes it (x > 0)."""
    hi, lo = divmod(x, 44488)
    x = 48271 * lo - 3399 * hi
    return x + INT32MAX if x < 0 else x


def _register(seed: int, shifts: tuple[int, int], cooked: tuple[int, ...] | None) -> list[int]:
    """The 607 words Seed (shifts 40, 20 and the cooked table) or gen_cooked's srand (20, 10) fills."""
    seed = int(np.fmod(seed, INT32MAX))  # Go's % truncates toward zero
    if seed < 0:
        seed += INT32MAX
    if seed == 0:
        seed = SEED_ZERO
    x, vec = seed, []
    for i in range(-20, LEN):
        x = _seedrand(x)
        if i >= 0:
            u = (x << shifts[0]) & MASK64
            x = _seedrand(x)
            u ^= x << shifts[1]
            x = _seedrand(x)
            u ^= x
            vec.append(u ^ cooked[i] if cooked is not None else u)
    return vec


def _polymulmod(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a * b mod (x**607 - x**334 - 1), uint64 coefficients (numpy's integer arithmetic wraps mod 2**64)."""
    c = np.convolve(a, b)
    while len(c) > LEN:  # x**607 = x**334 + 1
        hi = c[LEN:]
        out = np.zeros(max(LEN, LEN - TAP + len(hi)), dtype=np.uint64)
        out[:LEN] += c[:LEN]
        out[:len(hi)] += hi
        out[LEN - TAP:LEN - TAP + len(hi)] += hi
        c = out
    return np.concatenate([c, np.zeros(LEN - len(c), dtype=np.uint64)])


@cache
def cooked() -> tuple[int, ...]:
    """gen_cooked.go's table: the register of srand(1) after COOKED_STEPS steps, as 64-bit words.

    Word m of the sequence (m < 607: the seeded register) sits at register index (333 - m) mod 607 (the
    generator walks the register downwards from feed = 334), and s[m] = s[m-607] + s[m-273]; the
    terms N .. N+606 are the coefficients of x**N mod the characteristic polynomial applied to
    s[0..1213]. About 0.1 s, once per process."""
    with np.errstate(over="ignore"):
        vec = _register(1, (20, 10), None)
        s = [vec[(LEN - TAP - 1 - m) % LEN] for m in range(LEN)]
        for m in range(LEN, 2 * LEN - 1):
            s.append((s[m - LEN] + s[m - TAP]) & MASK64)
        power = np.zeros(LEN, dtype=np.uint64)
        power[0] = 1
        base = np.zeros(LEN, dtype=np.uint64)
        base[1] = 1
        n = COOKED_STEPS
        while n:
            if n & 1:
                power = _polymulmod(power, base)
            n >>= 1
            if n:
                base = _polymulmod(base, base)
        seq = np.array(s, dtype=np.uint64)
        hankel = np.lib.stride_tricks.sliding_window_view(seq, LEN)  # row j: s[j .. j+606]
        later = hankel @ power  # s[N + j], j = 0..606
    out = [0] * LEN
    for j, v in enumerate(later.tolist()):
        out[(LEN - TAP - 1 - (COOKED_STEPS + j)) % LEN] = int(v)
    return tuple(out)


class GoRand:
    """Go's `rand.New(rand.NewSource(seed))`: the same values, method by method (Go's names in
    lower case). `shuffle(list)` and `randrange(n)` make it usable where a `random.Random` draws
    an order (`openb.inflate`): Go's Shuffle and Intn."""

    def __init__(self, seed: int) -> None:
        self.seed(seed)

    def seed(self, seed: int) -> None:
        self._vec = _register(seed, (40, 20), cooked())
        self._tap, self._feed = 0, LEN - TAP

    def uint64(self) -> int:
        self._tap = self._tap - 1 if self._tap else LEN - 1
        self._feed = self._feed - 1 if self._feed else LEN - 1
        x = (self._vec[self._feed] + self._vec[self._tap]) & MASK64
        self._vec[self._feed] = x
        return x

    def int63(self) -> int:
        return self.uint64() & MASK63

    def int_(self) -> int:
        """rand.Int() on a 64-bit platform (the same bits as Int63)."""
        return self.int63()

    def int31(self) -> int:
        return self.int63() >> 32

    def uint32(self) -> int:
        return (self.int63() >> 31) & 0xFFFFFFFF

    def int63n(self, n: int) -> int:
        if n <= 0:
            raise ValueError(f"Int63n({n}): n must be > 0")
        if n & (n - 1) == 0:
            return self.int63() & (n - 1)
        top = MASK63 - (1 << 63) % n
        v = self.int63()
        while v > top:
            v = self.int63()
        return v % n

    def int31n(self, n: int) -> int:
        if n <= 0:
            raise ValueError(f"Int31n({n}): n must be > 0")
        if n & (n - 1) == 0:
            return self.int31() & (n - 1)
        top = INT32MAX - (1 << 31) % n
        v = self.int31()
        while v > top:
            v = self.int31()
        return v % n

    def _int31n(self, n: int) -> int:
        """The multiply-shift (Lemire) variant Shuffle uses: another stream than Int31n."""
        prod = self.uint32() * n
        if prod & 0xFFFFFFFF < n:
            thresh = ((1 << 32) - n) % n
            while prod & 0xFFFFFFFF < thresh:
                prod = self.uint32() * n
        return prod >> 32

    def intn(self, n: int) -> int:
        return self.int31n(n) if n <= INT32MAX else self.int63n(n)

    def float64(self) -> float:
        while True:
            f = float(self.int63()) / (1 << 63)
            if f != 1.0:
                return f

    def shuffle_n(self, n: int, swap: Callable[[int, int], Any]) -> None:
        """rand.Shuffle(n, swap)."""
        if n < 0:
            raise ValueError(f"Shuffle({n}): n must be >= 0")
        i = n - 1
        while i > INT32MAX - 1:
            swap(i, self.int63n(i + 1))
            i -= 1
        while i > 0:
            swap(i, self._int31n(i + 1))
            i -= 1

    def perm(self, n: int) -> list[int]:
        m = [0] * n
        for i in range(n):
            j = self.intn(i + 1)
            m[i] = m[j]
            m[j] = i
        return m

    # -- the random.Random methods openb.inflate draws with -----------------------------
    def shuffle(self, x: MutableSequence[Any]) -> None:
        def swap(i: int, j: int) -> None:
            x[i], x[j] = x[j], x[i]

        self.shuffle_n(len(x), swap)

    def randrange(self, n: int) -> int:
        return self.intn(n)
