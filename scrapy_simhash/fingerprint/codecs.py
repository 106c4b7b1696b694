"""Text forms of a 64-bit fingerprint: base32 (canonical) and hex."""

from __future__ import annotations

import base64
import re

_MASK64 = (1 << 64) - 1
_ALPHABET = "abcdefghijklmnopqrstuvwxyz234567"
# Explicit ASCII classes: \d and str.isdigit() would also take Arabic-Indic and other Unicode digits.
_HEX = re.compile(r"(?:0[xX])?(?P<body>[0-9a-fA-F]{16})")
_BASE32 = re.compile(r"(?P<body>[a-zA-Z2-7]{13})(?:===)?")


def _check_int(h: int) -> None:
    if not isinstance(h, int) or isinstance(h, bool):
        raise TypeError(f"a fingerprint is an int, not {type(h).__name__}")
    if not 0 <= h <= _MASK64:
        raise ValueError(f"a fingerprint is an unsigned 64-bit integer, got {h}")


def to_base32(h: int) -> str:
    """13 lowercase RFC 4648 base32 characters of the big-endian bytes, no padding."""
    _check_int(h)
    return base64.b32encode(h.to_bytes(8, "big")).decode("ascii").rstrip("=").lower()


def from_base32(s: str) -> int:
    """Parse the base32 form: exactly 13 ASCII base32 characters, either case, optionally padded
    with exactly ``===``; no whitespace or other characters (a stray one is an error, not ignored)."""
    if not isinstance(s, str):
        raise TypeError(f"expected str, got {type(s).__name__}")
    match = _BASE32.fullmatch(s)
    if match is None:
        raise ValueError(
            f"a base32 simhash is 13 characters a-z/A-Z and 2-7 (optionally followed by '==='): {s!r}"
        )
    body = match["body"]
    raw = base64.b32decode(body.upper() + "===", casefold=False)
    # 13 characters carry 65 bits; the last one, the low bit of the last character, must be 0.
    if _ALPHABET.index(body[-1].lower()) & 1:
        raise ValueError(f"the unused last bit of a base32 simhash must be 0: {s!r}")
    return int.from_bytes(raw, "big")


def to_hex(h: int) -> str:
    """16 lowercase hex digits."""
    _check_int(h)
    return f"{h:016x}"


def from_hex(s: str) -> int:
    """Parse exactly 16 ASCII hex digits, either case, with an optional ``0x``/``0X`` prefix (the form
    Python and most tools print). Signs, whitespace, underscores and non-ASCII digits are refused:
    ``int(s, 16)`` alone would accept all of them."""
    if not isinstance(s, str):
        raise TypeError(f"expected str, got {type(s).__name__}")
    match = _HEX.fullmatch(s)
    if match is None:
        raise ValueError(f"a hex simhash is exactly 16 digits 0-9/a-f (optionally after 0x): {s!r}")
    return int(match["body"], 16)


def parse(s: str) -> int:
    """Parse either text form, told apart by length (13 or 16 base32, 16 or 18 hex)."""
    if not isinstance(s, str):
        raise TypeError(f"expected str, got {type(s).__name__}")
    if (len(s) == 16 and not s.endswith("=")) or s[:2] in ("0x", "0X"):
        return from_hex(s)
    return from_base32(s)
