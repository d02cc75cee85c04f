"""labkit.cel.re2_pure (the regex engine where google-re2 cannot be installed, e.g. a browser) against
google-re2 itself: the same patterns refused with the same message, the same matches for the rest.
Kubernetes' CEL refuses backreferences and lookaround (RE2 syntax); Python's re alone would accept them."""

from __future__ import annotations

import re2

from labkit.cel import re2_pure

PATS = ["(", "a)", "[a", "\\1", "(a)\\1", "(?=a)", "(?!a)", "(?<=a)", "(?<!a)", "a**", "a{1001}", "x{2,1}", "\\", "(?P<n>a)", "(?<n>a)", "(?P=n)", "[[:alpha:]]+", "\\Qa.b\\E", "a\\z", "\\Z", "(?>a)", "(?#c)", "[z-a]", "*", "a|*", "(?i)x", "\\8", "\\e", "\\cA","\\x{41}", "\\0", "\\012", "[[:foo:]]", "a{,3}", "(?x) a", "\\G", "(?m)^a$", "\\h",
 "^a$", "a$", "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", "\\d+", "\\w+", "\\s", "\\bfoo\\b", "[^\\d]", "[\\D]", "[\\Wa]", "[^\\Wa]", "a+?", "a*?b", "a??", "a*??", "a{2}{3}", "(?i:AB)c", "(?i)é", "(?s).", ".", "(?-i)a", "(?i-s:a.)", "(?)", "(?-)", "(?i-)", "(?:)", "()", "a|", "|a", "(|a)", "^*", "$+", "x{2}", "x{2,}", "x{2,5}", "x{,}", "x{", "{", "}", "]", "[]a]", "[^]a]", "[a-]", "[-a]", "\\.", "\\-", "\\_", "\\/", "[\\]]", "[\\-]", "\\x4", "\\x{}", "\\x{110000}", "\\x41", "(?P<>a)", "(?P<a-b>x)", "(?P<n>", "\\pN", "[[:^alpha:]]", "ab|cd", "(a|b)*c", "a\\.b", "\\t\\n", "\\a", "GPU|gpu", "nvidia\\.com/.*", "^[A-Z]{3}-\\d{2,4}$", "\\7", "\\17", "[\\d-z]", "(?U)a", "\\C", "\\A\\z", "\\B", "a{0}", "(a)(b)(?:c)", "a++", "a?+", "a+?+", " ", "[ ]", "é+", "[é-ü]", "\\x{1F600}", "[\\x00-\\x{10FFFF}]",
]
TEXTS = ["", "a", "A", "ab", "AB", "abc", "aaa", "a\n", "foo bar", "é", "É", "123", "x.y", "a.b", "gpu-0", "GPU", "nvidia.com/gpu", "ABC-123", "a{,3}", "]a", "-", "\t\n", "xx", "xxxxx", "\n", "a\nb", "😀", "a-b", "{", "ab|cd"]
#: RE2 runs these; the fallback refuses them with a one-line "not supported" instead of a wrong answer
UNSUPPORTED = {"\\pN", "(?U)a", "\\C"}


def _native(pattern: str) -> tuple[object, str | None]:
    try:
        return re2.compile(pattern), None
    except Exception as exc:  # noqa: BLE001 - re2.error
        text = exc.args[0]
        return None, text.decode() if isinstance(text, bytes) else text


def _pure(pattern: str) -> tuple[object, str | None]:
    try:
        return re2_pure.compile(pattern), None
    except re2_pure.error as exc:
        return None, str(exc)


def test_refused_patterns_have_re2s_messages() -> None:
    refused = 0
    for pattern in PATS:
        native, native_error = _native(pattern)
        pure, pure_error = _pure(pattern)
        if pattern in UNSUPPORTED:
            assert native_error is None and pure_error is not None
            assert pure_error.startswith("not supported by labkit's pure-Python regular expressions"), pure_error
            continue
        assert pure_error == native_error, pattern
        refused += native_error is not None
    assert refused >= 30  # backreferences, lookaround, bad repetitions, bad classes ...


def test_accepted_patterns_match_like_re2() -> None:
    for pattern in PATS:
        native, _ = _native(pattern)
        pure, _ = _pure(pattern)
        if native is None or pure is None:
            continue
        for text in TEXTS:
            for fn in ("search", "match", "fullmatch"):
                a, b = getattr(native, fn)(text), getattr(pure, fn)(text)
                assert (a and (a.span(), a.groups())) == (b and (b.span(), b.groups())), (pattern, fn, text)
            if native.search("") is None:  # findall of empty matches differs between RE2's wrapper, Go and re
                assert [m.span() for m in native.finditer(text)] == [m.span() for m in pure.finditer(text)]


def test_backreferences_and_lookaround_are_refused() -> None:
    for pattern, message in ((r"(a)\1", r"invalid escape sequence: \1"), ("x(?=y)", "invalid perl operator: (?="),
                             ("(?<!x)y", "invalid perl operator: (?<!"), ("(?>a)", "invalid perl operator: (?>")):
        assert _pure(pattern)[1] == message
