"""Strict text forms of a fingerprint: exactly 16 ASCII hex digits (optional 0x), 13 base32 characters.

``int(s, 16)`` accepts signs, surrounding whitespace, underscores and any Unicode
decimal digit; a fingerprint parser must not, or two different strings name the
same fingerprint and typos pass silently.
"""

from __future__ import annotations

import string

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scrapy_simhash import fingerprint as fp
from scrapy_simhash.report.values import parse_simhash

HEX_DIGITS = frozenset(string.hexdigits)  # ASCII only: 0-9 a-f A-F
BASE32_CHARS = frozenset(string.ascii_letters + "234567")
FINGERPRINTS = st.integers(min_value=0, max_value=(1 << 64) - 1)


def _is_hex_form(s: str) -> bool:
    """The spec, written independently of the parser: optional 0x/0X, then 16 ASCII hex digits."""
    body = s[2:] if s[:2] in ("0x", "0X") else s
    return len(body) == 16 and all(c in HEX_DIGITS for c in body)


@pytest.mark.parametrize(
    "bad",
    [
        "-fffffffffffffff",  # the sign took one digit's place: int() says -0xfffffffffffffff
        "+000000000000001",
        " +0000000000000001",
        " 0000000000000001",
        "0000000000000001 ",
        "0000000000000001\n",
        "0000_0000_0000_01",
        "00000000_00000001",
        "\u0660" * 16,  # Arabic-Indic zeros: int("٠"*16, 16) == 0
        "000000000000000\u0661",
        "\uff10" * 16,  # fullwidth zeros
        "0x-fffffffffffffff",
        "0x 000000000000001",
        "0o00000000000001",
        "00x0000000000000001",
        "",
        "0x",
    ],
)
def test_from_hex_refuses_what_int_would_accept(bad: str) -> None:
    with pytest.raises(ValueError, match="hex simhash is exactly 16 digits"):
        fp.from_hex(bad)
    with pytest.raises(ValueError):
        fp.parse(bad)


def test_from_hex_accepts_case_and_the_0x_prefix() -> None:
    assert fp.from_hex("E2F5C59183172276") == fp.from_hex("e2f5c59183172276") == 0xE2F5C59183172276
    assert fp.from_hex("0xe2f5c59183172276") == fp.from_hex("0XE2F5C59183172276") == 0xE2F5C59183172276
    assert fp.parse("0xe2f5c59183172276") == 0xE2F5C59183172276


@pytest.mark.parametrize(
    "bad", [" 4l24lemdc4rhm", "4l24lemdc4rhm\n", "4l24lemdc4rhm=", "4l24lemdc4rhm====", "4l24lemdc4rh\u0662"]
)
def test_from_base32_refuses_whitespace_odd_padding_and_non_ascii(bad: str) -> None:
    with pytest.raises(ValueError):
        fp.from_base32(bad)
    with pytest.raises(ValueError):
        fp.parse(bad)


@given(FINGERPRINTS, st.sampled_from(["", "0x", "0X"]), st.booleans())
def test_hex_round_trip_in_either_case_with_or_without_prefix(h: int, prefix: str, upper: bool) -> None:
    text = fp.to_hex(h)
    assert len(text) == 16 and _is_hex_form(text)
    text = prefix + (text.upper() if upper else text)
    assert fp.from_hex(text) == h
    assert fp.parse(text) == h


@given(st.text(max_size=24))
def test_from_hex_accepts_exactly_the_hex_form(s: str) -> None:
    if _is_hex_form(s):
        assert fp.to_hex(fp.from_hex(s)) == s.removeprefix("0x").removeprefix("0X").lower()
    else:
        with pytest.raises(ValueError):
            fp.from_hex(s)


@given(
    FINGERPRINTS,
    st.integers(min_value=0, max_value=16),
    st.sampled_from(["-", "+", " ", "\t", "\n", "_", "\u0660", "\u0966", "\uff11", "g", "0", "x", "=", "é"]),
)
def test_from_hex_refuses_a_valid_form_with_one_character_inserted(h: int, where: int, extra: str) -> None:
    text = fp.to_hex(h)
    bad = text[:where] + extra + text[where:]
    with pytest.raises(ValueError):
        fp.from_hex(bad)


@given(st.text(alphabet=st.characters(codec="utf-8"), min_size=13, max_size=16))
def test_from_base32_takes_only_ascii_base32(s: str) -> None:
    body = s.removesuffix("===")
    valid = len(body) == 13 and all(c in BASE32_CHARS for c in body)
    if not valid:
        with pytest.raises(ValueError):
            fp.from_base32(s)


_NEAR_MISSES = [
    *"=xX0189 \t\n_-+.",
    "\u00a0",
    "\u3000",
    "\u212a",
    "\u0130",
    "\u0131",
    "\u017f",
    "\uff41",
    "\u0660",
]
"""Characters a lenient decoder might fold, skip or read as digits (Kelvin sign, dotless i, long s, ...)."""


def _canonical_of(s: str) -> str | None:
    """``s`` in canonical form if it is a documented text form (spelled out apart from the parsers)."""
    hex_body = s[2:] if s[:2] in ("0x", "0X") else s
    if len(hex_body) == 16 and all(c in HEX_DIGITS for c in hex_body):
        return hex_body.lower()
    body = s.removesuffix("===")
    if len(body) == 13 and all(c in BASE32_CHARS for c in body):
        return body.lower()
    return None


@given(
    st.text(
        alphabet=st.sampled_from([*sorted(BASE32_CHARS | HEX_DIGITS), *_NEAR_MISSES]),
        min_size=11,
        max_size=19,
    )
)
def test_any_text_is_refused_or_a_documented_form(s: str) -> None:
    canonical = _canonical_of(s)
    for parser in (fp.parse, fp.from_base32, fp.from_hex, parse_simhash):
        try:
            value = parser(s)
        except ValueError:
            continue
        assert canonical is not None, (parser.__name__, s)
        assert canonical in (fp.to_hex(value), fp.to_base32(value)), (parser.__name__, s)


@given(FINGERPRINTS, st.integers(min_value=0, max_value=13), st.sampled_from(_NEAR_MISSES))
def test_base32_refuses_a_valid_form_with_one_character_inserted(h: int, where: int, extra: str) -> None:
    text = fp.to_base32(h)
    bad = text[:where] + extra + text[where:]  # 14 characters: no documented form has that length
    for parser in (fp.parse, fp.from_base32, parse_simhash):
        with pytest.raises(ValueError):
            parser(bad)
