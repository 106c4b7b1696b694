"""Unsigned 64-bit simhash <-> Spark LongType (signed two's complement)."""

from __future__ import annotations

_MASK = (1 << 64) - 1
_SIGN = 1 << 63


def to_signed(value: int) -> int:
    """The LongType value of an unsigned fingerprint (0 .. 2**64 - 1): same 64 bits, read as signed."""
    if not 0 <= value <= _MASK:
        raise ValueError(f"a simhash is an unsigned 64-bit integer, got {value}")
    return value - (1 << 64) if value & _SIGN else value


def to_unsigned(value: int) -> int:
    """The unsigned fingerprint of a LongType value (-2**63 .. 2**63 - 1)."""
    if not -_SIGN <= value < _SIGN:
        raise ValueError(f"a Spark long is a signed 64-bit integer, got {value}")
    return value & _MASK
