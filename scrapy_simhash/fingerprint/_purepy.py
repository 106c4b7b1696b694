"""Pure-Python hot path: lookup3 ``hashlittle2`` and the 64 counters.

The reference against which the C extension is tested, and the fallback on
platforms where the extension cannot be built.  Same functions, same results.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable

_M32 = 0xFFFFFFFF
_UNPACK3 = struct.Struct("<3I").unpack_from


def _rot(x: int, k: int) -> int:
    return ((x << k) | (x >> (32 - k))) & _M32


def jenkins64(data: bytes) -> int:
    """lookup3 ``hashlittle2(data, len, 0, 0)`` combined as ``c | b << 32``."""
    length = len(data)
    a = b = c = (0xDEADBEEF + length) & _M32
    if length == 0:
        return c | (b << 32)
    # Zero padding of the last block adds nothing to the partial words, so
    # every block, including the last, can be read as three little-endian words.
    padded = bytes(data) + b"\0" * (-length % 12)
    last = len(padded) - 12
    for offset in range(0, last, 12):
        x, y, z = _UNPACK3(padded, offset)
        a = (a + x) & _M32
        b = (b + y) & _M32
        c = (c + z) & _M32
        # mix(a, b, c)
        a = (a - c) & _M32
        a ^= _rot(c, 4)
        c = (c + b) & _M32
        b = (b - a) & _M32
        b ^= _rot(a, 6)
        a = (a + c) & _M32
        c = (c - b) & _M32
        c ^= _rot(b, 8)
        b = (b + a) & _M32
        a = (a - c) & _M32
        a ^= _rot(c, 16)
        c = (c + b) & _M32
        b = (b - a) & _M32
        b ^= _rot(a, 19)
        a = (a + c) & _M32
        c = (c - b) & _M32
        c ^= _rot(b, 4)
        b = (b + a) & _M32
    x, y, z = _UNPACK3(padded, last)
    a = (a + x) & _M32
    b = (b + y) & _M32
    c = (c + z) & _M32
    # final(a, b, c)
    c ^= b
    c = (c - _rot(b, 14)) & _M32
    a ^= c
    a = (a - _rot(c, 11)) & _M32
    b ^= a
    b = (b - _rot(a, 25)) & _M32
    c ^= b
    c = (c - _rot(b, 16)) & _M32
    a ^= c
    a = (a - _rot(c, 4)) & _M32
    b ^= a
    b = (b - _rot(a, 14)) & _M32
    c ^= b
    c = (c - _rot(b, 24)) & _M32
    return c | (b << 32)


def _fold(counters: list[float]) -> int:
    result = 0
    for bit, value in enumerate(counters):
        if value > 0:
            result |= 1 << bit
    return result


def _add(counters: list[float], h: int, weight: float) -> None:
    for bit in range(64):
        counters[bit] += weight if (h >> bit) & 1 else -weight


def simhash_features(features: Iterable[str]) -> int:
    """Simhash of ``features``, each one of weight 1 (the caller makes them distinct)."""
    counters: list[float] = [0] * 64
    for feature in features:
        if not isinstance(feature, str):
            raise TypeError(f"features must be str, not {type(feature).__name__}")
        _add(counters, jenkins64(feature.encode("utf-8")), 1)
    return _fold(counters)


def simhash_weighted(pairs: Iterable[tuple[str, float]]) -> int:
    """Simhash of ``(feature, weight)`` pairs."""
    counters: list[float] = [0.0] * 64
    for pair in pairs:
        if not isinstance(pair, tuple) or len(pair) != 2:
            raise TypeError("weighted features must be (str, weight) pairs")
        feature, weight = pair
        if not isinstance(feature, str):
            raise TypeError(f"features must be str, not {type(feature).__name__}")
        _add(counters, jenkins64(feature.encode("utf-8")), float(weight))
    return _fold(counters)
