"""Pure-Python reference of minhash-doc/1: shingle hashes, permutation coefficients, the sketch.

The C extension ``_minhash`` is tested against this module bit for bit; it is
also the fallback where the extension is not built.  numpy does the
``num_values x shingles`` arithmetic (uint64 wraps modulo 2**64, as the
scheme wants); everything before that is plain Python.
"""

from __future__ import annotations

import functools

import numpy as np

from ._purepy import jenkins64
from .tokenizer import shingles, tokens

SHINGLE = 3
"""Tokens per shingle (docs/minhash-doc-1.md, "Shingle size" says why 3)."""

SEED = 0x6D696E6861736831
"""Start state of the splitmix64 stream the coefficients come from: ASCII "minhash1"."""

EMPTY = 0xFFFFFFFF
"""The value of every position of the sketch of a text without tokens."""

_M64 = (1 << 64) - 1
_CHUNK = 4096  # shingles per numpy block: bounds the num_values x chunk temporary


def splitmix64(state: int, count: int) -> list[int]:
    """The first ``count`` outputs of splitmix64 started at ``state`` (Steele, Lea & Flood 2014)."""
    out = []
    for _ in range(count):
        state = (state + 0x9E3779B97F4A7C15) & _M64
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _M64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _M64
        out.append(z ^ (z >> 31))
    return out


@functools.cache
def coefficients(num_values: int) -> tuple[np.ndarray, np.ndarray]:
    """``(a, b)``, uint64 arrays of ``num_values``: a_i = s[2i] | 1, b_i = s[2i+1] of the seeded stream.

    Position i depends on i only, so a sketch of k values is the first k values of a longer one.
    """
    stream = splitmix64(SEED, 2 * num_values)
    a = np.array([stream[2 * i] | 1 for i in range(num_values)], dtype=np.uint64)
    b = np.array([stream[2 * i + 1] for i in range(num_values)], dtype=np.uint64)
    a.flags.writeable = b.flags.writeable = False
    return a, b


def shingle_texts(text: str) -> list[str]:
    """SHINGLE consecutive tokens joined by one space (a shorter text: all its tokens, one shingle)."""
    return shingles(tokens(text), SHINGLE)


def shingle_hashes(text: str) -> list[int]:
    """lookup3 ``jenkins64`` of each shingle's UTF-8 bytes, in text order, repeats included."""
    return [jenkins64(s.encode("utf-8")) for s in shingle_texts(text)]


def sketch_of_hashes(hashes: list[int], num_values: int) -> np.ndarray:
    """value_i = min over h of ((a_i * x + b_i) mod 2**64) >> 32 with x = h mod 2**32; EMPTY without hashes.

    x is lookup3's primary 32-bit hash ``c``; with 64-bit a_i, b_i and a 32-bit key this is
    Dietzfelbinger's strongly universal multiply-add-shift.
    """
    a, b = coefficients(num_values)
    out = np.full(num_values, EMPTY, dtype=np.uint32)
    for start in range(0, len(hashes), _CHUNK):
        x = np.array(hashes[start : start + _CHUNK], dtype=np.uint64) & np.uint64(0xFFFFFFFF)
        with np.errstate(over="ignore"):
            permuted = (a[:, None] * x[None, :] + b[:, None]) >> np.uint64(32)
        np.minimum(out, permuted.min(axis=1).astype(np.uint32), out=out)
    return out


def sketch(text: str, num_values: int) -> tuple[np.ndarray, int]:
    """``(values, token count)`` of ``text``."""
    found = tokens(text)
    hashes = [jenkins64(s.encode("utf-8")) for s in shingles(found, SHINGLE)]
    return sketch_of_hashes(hashes, num_values), len(found)
