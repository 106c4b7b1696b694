"""Batch mode for MinHash sketches: every pair at or above a Jaccard threshold, and clusters.

The counterpart of :mod:`.batch` (simhash) for an array of sketches ``(n, num_values)``: per
band, sort the band keys once and pair up equal keys, then verify each candidate pair (the band
really equal, estimated Jaccard >= threshold). A pair found in several bands is kept only in
the first band where it is equal, so no deduplication pass is needed. Same semantics as
:class:`~.lsh.MinHashLSH` queries: exactly the pairs that share a band and pass the threshold.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...fingerprint.bbit import ValueBits
from ..tables.batch import _equal_key_pairs, _sorted_by_key, clusters
from .lsh_bands import DEFAULT_WEIGHTS, BandHasher, as_sketch_batch, resolve_params

PAIR_DTYPE = np.dtype([("i", np.int64), ("j", np.int64), ("similarity", np.float64)])
"""Rows of :func:`minhash_pairs`: positions ``i < j`` and their estimated Jaccard."""

_CHUNK = 1 << 18  # candidate pairs verified at once (bounds the temporary equality matrix)


def _pairs_array(
    i: np.ndarray, j: np.ndarray, counts: np.ndarray, num_values: int, bits: ValueBits
) -> np.ndarray:
    out = np.empty(i.shape[0], dtype=PAIR_DTYPE)
    out["i"], out["j"], out["similarity"] = i, j, bits.similarity(counts, num_values)
    return out[np.lexsort((out["j"], out["i"]))]


def minhash_pairs(
    sketches: Any,
    threshold: float,
    bands: int | None = None,
    rows: int | None = None,
    *,
    exact: bool = False,
    weights: tuple[float, float] = DEFAULT_WEIGHTS,
    value_bits: int = 32,
) -> np.ndarray:
    """Every pair ``i < j`` of positions whose sketches share a band and estimate Jaccard >= threshold.

    Returns a structured array (:data:`PAIR_DTYPE`: ``i``, ``j``, ``similarity``) sorted by
    ``i`` then ``j``. Bands and rows are derived from the threshold as for
    :class:`~.lsh.MinHashLSH` unless given. ``exact=True`` compares every pair instead
    (O(n**2), for small inputs): all pairs with estimated Jaccard >= threshold, LSH misses
    included, which is how the LSH answer's recall is checked. ``value_bits``: compare only the low
    bits of each value, as :class:`~.lsh.MinHashLSH` does.
    """
    bits = ValueBits(value_bits)
    s = bits.reduce(as_sketch_batch(sketches))
    n, num_values = s.shape
    b, r = resolve_params(threshold, num_values, bands, rows, weights)
    m = bits.min_equal(threshold, num_values)
    if exact:
        return _brute_force(s, m, bits)
    if n < 2:
        return np.zeros(0, dtype=PAIR_DTYPE)
    keys = BandHasher(b, r).keys_many(s)
    idx_bits = max(1, (n - 1).bit_length())
    found_i, found_j, found_c = [], [], []
    for t in range(b):
        # the key's high bits beside the position in one uint64: a plain sort; a collision of
        # the truncated keys only adds a candidate, dropped by the band check below
        sorted_keys, order = _sorted_by_key(keys[:, t] >> np.uint64(idx_bits), 64 - idx_bits)
        a, c = _equal_key_pairs(sorted_keys, order)
        for start in range(0, a.shape[0], _CHUNK):
            pa, pc = a[start : start + _CHUNK], c[start : start + _CHUNK]
            eq = s[pa] == s[pc]
            counts = eq.sum(axis=1)
            ok = (counts >= m) & eq[:, t * r : (t + 1) * r].all(axis=1)
            if t:  # keep a pair only in the first band where it is equal
                ok &= ~eq[:, : t * r].reshape(-1, t, r).all(axis=2).any(axis=1)
            found_i.append(np.minimum(pa[ok], pc[ok]))
            found_j.append(np.maximum(pa[ok], pc[ok]))
            found_c.append(counts[ok])
    if not found_i:
        return np.zeros(0, dtype=PAIR_DTYPE)
    return _pairs_array(
        np.concatenate(found_i), np.concatenate(found_j), np.concatenate(found_c), num_values, bits
    )


def _brute_force(s: np.ndarray, min_matches: int, bits: ValueBits, block: int = 64) -> np.ndarray:
    n, num_values = s.shape
    found_i, found_j, found_c = [], [], []
    for start in range(0, n, block):
        top = s[start : start + block]
        counts = (top[:, None, :] == s[None, :, :]).sum(axis=2)
        ii, jj = np.nonzero(counts >= min_matches)
        ii += start
        keep = jj > ii
        found_i.append(ii[keep])
        found_j.append(jj[keep])
        found_c.append(counts[ii[keep] - start, jj[keep]])
    if not found_i:
        return np.zeros(0, dtype=PAIR_DTYPE)
    return _pairs_array(
        np.concatenate(found_i), np.concatenate(found_j), np.concatenate(found_c), num_values, bits
    )


def minhash_clusters(
    sketches: Any,
    threshold: float,
    bands: int | None = None,
    rows: int | None = None,
    *,
    exact: bool = False,
    weights: tuple[float, float] = DEFAULT_WEIGHTS,
    value_bits: int = 32,
) -> np.ndarray:
    """Group near-duplicates: ``labels[i]`` is the smallest position in ``i``'s cluster.

    Clusters are the connected components of the :func:`minhash_pairs` graph (chained:
    a~b and b~c puts a, b, c together); ``labels[i] == i`` marks the item to keep.
    """
    s = as_sketch_batch(sketches)
    pairs = minhash_pairs(s, threshold, bands, rows, exact=exact, weights=weights, value_bits=value_bits)
    return clusters(pairs=np.stack([pairs["i"], pairs["j"]], axis=1), n=s.shape[0])
