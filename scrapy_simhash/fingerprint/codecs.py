"""Text forms of a 64-bit fingerprint: base32 (canonical) and hex."""

from __future__ import annotations

import base64
import binascii

_MASK64 = (1 << 64) - 1
_ALPHABET = "abcdefghijklmnopqrstuvwxyz234567"


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
    """Parse the base32 form; either case, optional ``=`` padding."""
    if not isinstance(s, str):
        raise TypeError(f"expected str, got {type(s).__name__}")
    body = s.strip().rstrip("=")
    if len(body) != 13:
        raise ValueError(f"a base32 simhash has 13 characters (without padding), got {len(body)}: {s!r}")
    try:
        raw = base64.b32decode(body.upper() + "===", casefold=False)
    except binascii.Error:
        raise ValueError(f"not RFC 4648 base32 (letters a-z and digits 2-7 only): {s!r}") from None
    # 13 characters carry 65 bits; the last one, the low bit of the last character, must be 0.
    if _ALPHABET.index(body[-1].lower()) & 1:
        raise ValueError(f"the unused last bit of a base32 simhash must be 0: {s!r}")
    return int.from_bytes(raw, "big")


def to_hex(h: int) -> str:
    """16 lowercase hex digits."""
    _check_int(h)
    return f"{h:016x}"


def from_hex(s: str) -> int:
    """Parse 16 hex digits (either case, optional ``0x``)."""
    if not isinstance(s, str):
        raise TypeError(f"expected str, got {type(s).__name__}")
    body = s.strip()
    if body[:2].lower() == "0x":
        body = body[2:]
    if len(body) != 16:
        raise ValueError(f"a hex simhash has 16 digits, got {len(body)}: {s!r}")
    try:
        return int(body, 16)
    except ValueError:
        raise ValueError(f"not hexadecimal: {s!r}") from None


def parse(s: str) -> int:
    """Parse either text form, told apart by length (13 base32, 16 hex)."""
    body = s.strip()
    if len(body) == 16 or body[:2].lower() == "0x":
        return from_hex(s)
    return from_base32(s)
