"""Pure-Python reference of minhash-doc/1: shingle hashes, one-permutation binning, densification.

The C extension ``_minhash`` is tested against this module bit for bit; it is
also the fallback where the extension is not built.  Written for reading
(docs/minhash-doc-1.md describes the same steps), not for speed, but for the
densification's probes: taken for all empty bins at once, since a sparse
sketch of thousands of bins needs millions of them.
"""

from __future__ import annotations

import numpy as np

from ._purepy import jenkins64
from .tokenizer import shingles, tokens

SHINGLE = 3
"""Tokens per shingle (docs/minhash-doc-1.md, "Shingle size" says why 3)."""

SEED = 0x6D696E6861736831
"""Mixed into every densification probe: ASCII "minhash1"."""

MAX_PROBES = 1024
"""Random probes per empty bin before the cyclic fallback (reached with probability < 0.0005 per bin)."""

EMPTY = 0xFFFFFFFF
"""The value of every position of the sketch of a text without tokens."""

_M32 = 0xFFFFFFFF
_M64 = (1 << 64) - 1


def mix64(z: int) -> int:
    """The output function of splitmix64 (Steele, Lea & Flood 2014): a bijection of 64-bit ints."""
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _M64
    return z ^ (z >> 31)


def probe(i: int, t: int, num_values: int) -> int:
    """The bin an empty bin ``i`` looks at on its ``t``-th try (t = 1, 2, ...)."""
    return mix64(SEED ^ (i << 32) ^ t) % num_values


def shingle_texts(text: str) -> list[str]:
    """SHINGLE consecutive tokens joined by one space (a shorter text: all its tokens, one shingle)."""
    return shingles(tokens(text), SHINGLE)


def shingle_hashes(text: str) -> list[int]:
    """lookup3 ``jenkins64`` of each shingle's UTF-8 bytes, in text order, repeats included."""
    return [jenkins64(s.encode("utf-8")) for s in shingle_texts(text)]


def sketch_of_hashes(hashes: list[int], num_values: int) -> np.ndarray:
    """One-permutation MinHash with optimal densification (Shrivastava 2017) of 64-bit feature hashes.

    A hash h = c | b << 32 goes to bin (b * k) >> 32 and offers the value c; each bin keeps
    its smallest value.  An empty bin then copies the value of the first non-empty bin among
    its probes (bin ``probe(i, t)`` for t = 1 .. MAX_PROBES, then i+1, i+2, ... cyclically).
    """
    k = num_values
    values = [EMPTY] * k
    filled = [False] * k
    for h in hashes:
        i = ((h >> 32) * k) >> 32
        c = h & _M32
        if not filled[i] or c < values[i]:
            values[i], filled[i] = c, True
    if not any(filled):
        return np.full(k, EMPTY, dtype=np.uint32)
    return np.array(values, dtype=np.uint32)[_sources(np.array(filled), k)]


def _sources(filled: np.ndarray, k: int) -> np.ndarray:
    """The bin each bin copies its value from: itself if filled, else the first filled bin among its
    probes ``probe(i, 1), probe(i, 2), ...``, else the next filled bin cyclically.

    Try ``t`` is made for every bin still waiting at once (the bins :func:`probe` gives one at a time):
    a sparse sketch of thousands of bins takes millions of probes, seconds one Python call at a time."""
    source = np.arange(k)
    waiting = np.flatnonzero(~filled)
    seeds = (waiting.astype(np.uint64) << np.uint64(32)) ^ np.uint64(SEED)
    for t in range(1, MAX_PROBES + 1):
        if not waiting.size:
            break
        j = (_mix64_array(seeds ^ np.uint64(t)) % np.uint64(k)).astype(np.intp)
        hit = filled[j]
        source[waiting[hit]] = j[hit]
        waiting, seeds = waiting[~hit], seeds[~hit]
    if waiting.size:  # the cyclic fallback: the first filled bin after i, wrapping around to the start
        full = np.flatnonzero(filled)
        source[waiting] = full[np.searchsorted(full, waiting + 1) % full.size]
    return source


def _mix64_array(z: np.ndarray) -> np.ndarray:
    """:func:`mix64` of each uint64 (numpy's uint64 products wrap modulo 2**64, as ``& _M64`` does)."""
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def sketch(text: str, num_values: int) -> tuple[np.ndarray, int]:
    """``(values, token count)`` of ``text``."""
    found = tokens(text)
    hashes = [jenkins64(s.encode("utf-8")) for s in shingles(found, SHINGLE)]
    return sketch_of_hashes(hashes, num_values), len(found)
