"""Batch mode: every near-duplicate pair of a collection at once, without an index.

For reprocessing a large collection (a WARC archive, a dump of fingerprints) it is much
cheaper to sort the whole array once per table than to query an index item by item. Each
table sorts ``key << idx_bits | position`` with numpy's vectorised sort, pairs up equal
keys and keeps the pairs within distance k. A pair found by several tables is kept only in
the first table where its keys agree, so no deduplication pass over the output is needed.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from .layouts import Layout, resolve

_EMPTY_PAIRS = np.zeros((0, 2), dtype=np.int64)


def as_hash_array(hashes: Iterable[int] | np.ndarray) -> np.ndarray:
    """A uint64 array of fingerprints (Python ints up to 2**64 - 1 or any integer array)."""
    if isinstance(hashes, np.ndarray):
        if hashes.dtype == np.uint64:
            return hashes.ravel()
        if hashes.dtype.kind not in "iu":
            raise TypeError(f"fingerprints must be integers, not {hashes.dtype}")
        if hashes.dtype.kind == "i" and hashes.size and hashes.min() < 0:
            raise ValueError("fingerprints are unsigned 64-bit integers; got negative values")
        return hashes.astype(np.uint64).ravel()
    values = list(hashes)
    try:
        return np.array(values, dtype=np.uint64).ravel()
    except OverflowError:
        raise ValueError("fingerprints are unsigned 64-bit integers (0 .. 2**64 - 1)") from None


def popcount64(values: np.ndarray) -> np.ndarray:
    """Set bits per uint64 (numpy >= 2 has a native ufunc; SWAR arithmetic otherwise)."""
    if hasattr(np, "bitwise_count"):
        return np.bitwise_count(values)
    return popcount64_swar(values)


def popcount64_swar(values: np.ndarray) -> np.ndarray:
    """The portable popcount for numpy < 2 (uint64 arithmetic wraps, as SWAR needs)."""
    x = values.astype(np.uint64, copy=True)
    x -= (x >> np.uint64(1)) & np.uint64(0x5555555555555555)
    x = (x & np.uint64(0x3333333333333333)) + ((x >> np.uint64(2)) & np.uint64(0x3333333333333333))
    x = (x + (x >> np.uint64(4))) & np.uint64(0x0F0F0F0F0F0F0F0F)
    return ((x * np.uint64(0x0101010101010101)) >> np.uint64(56)).astype(np.uint8)


def batch_layout(k: int, blocks: int | None = None, layout: str | Layout | None = None) -> Layout:
    """The tables for a batch run: ``blocks`` blocks choosing ``blocks - k`` (default k + 2)."""
    if layout is not None:
        if blocks is not None:
            raise ValueError("give either blocks or layout, not both")
        return resolve(layout, k)
    if blocks is None:
        if k == 0:
            return resolve("blocks:1:1", 0)
        blocks = k + 2
    return resolve(f"blocks:{blocks}", k)


def _equal_key_pairs(sorted_keys: np.ndarray, order: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """All pairs of positions whose keys are equal, given keys sorted and their positions.

    Walks offsets d = 1, 2, ... over only the positions still inside a run of equal keys,
    so the work is proportional to the number of pairs, not to n times the longest run.
    """
    n = sorted_keys.shape[0]
    active = np.flatnonzero(sorted_keys[1:] == sorted_keys[:-1])
    firsts, seconds = [], []
    d = 1
    while active.size:
        firsts.append(order[active])
        seconds.append(order[active + d])
        d += 1
        active = active[active + d < n]
        active = active[sorted_keys[active + d] == sorted_keys[active]]
    if not firsts:
        return np.zeros(0, dtype=order.dtype), np.zeros(0, dtype=order.dtype)
    return np.concatenate(firsts), np.concatenate(seconds)


def _sorted_by_key(keys: np.ndarray, key_bits: int) -> tuple[np.ndarray, np.ndarray]:
    """(keys sorted, positions in that order). Packs key and position into one uint64 when
    they fit, because a plain sort is several times faster than an argsort."""
    n = keys.shape[0]
    idx_bits = max(1, (n - 1).bit_length())
    if key_bits + idx_bits <= 64:
        packed = (keys << np.uint64(idx_bits)) | np.arange(n, dtype=np.uint64)
        packed.sort()
        return packed >> np.uint64(idx_bits), (packed & np.uint64((1 << idx_bits) - 1)).astype(np.int64)
    order = np.argsort(keys, kind="stable")
    return keys[order], order


def find_all(
    hashes: Iterable[int] | np.ndarray,
    k: int = 3,
    *,
    blocks: int | None = None,
    layout: str | Layout | None = None,
) -> np.ndarray:
    """Every pair ``(i, j)``, ``i < j``, of input positions whose fingerprints are within ``k``.

    Identical fingerprints and distance exactly ``k`` are included. Returns an int64 array
    of shape ``(pairs, 2)`` sorted by ``i`` then ``j``. ``blocks`` (default ``k + 2``) picks
    the "choose blocks - k of blocks" layout; ``layout`` takes any spec of
    :mod:`~scrapy_simhash.index.tables.layouts` instead.
    """
    h = as_hash_array(hashes)
    table_layout = batch_layout(k, blocks, layout)
    n = h.shape[0]
    if n < 2:
        return _EMPTY_PAIRS.copy()
    found_i, found_j = [], []
    for t in range(table_layout.num_tables):
        keys = table_layout.table_keys(h, t)
        sorted_keys, order = _sorted_by_key(keys, len(table_layout.tables[t]))
        a, b = _equal_key_pairs(sorted_keys, order)
        if not a.size:
            continue
        close = popcount64(h[a] ^ h[b]) <= k
        a, b = a[close], b[close]
        # keep a pair only in the first table where its keys agree
        for earlier in range(t):
            if not a.size:
                break
            fresh = table_layout.table_keys(h[a], earlier) != table_layout.table_keys(h[b], earlier)
            a, b = a[fresh], b[fresh]
        found_i.append(a)
        found_j.append(b)
    if not found_i:
        return _EMPTY_PAIRS.copy()
    a = np.concatenate(found_i).astype(np.int64)
    b = np.concatenate(found_j).astype(np.int64)
    pairs = np.stack([np.minimum(a, b), np.maximum(a, b)], axis=1)
    order = np.lexsort((pairs[:, 1], pairs[:, 0]))
    return pairs[order]


def clusters(
    hashes: Iterable[int] | np.ndarray | None = None,
    k: int = 3,
    *,
    pairs: np.ndarray | None = None,
    n: int | None = None,
    blocks: int | None = None,
    layout: str | Layout | None = None,
) -> np.ndarray:
    """Group near-duplicates: ``labels[i]`` is the smallest position in ``i``'s cluster.

    Clusters are the connected components of the "within k" graph (union-find, so
    near-duplicates are chained: a~b and b~c puts a, b, c together). ``labels[i] == i``
    marks the first member of each cluster, i.e. the item to keep when deduplicating.
    Pass ``hashes`` (pairs are computed with :func:`find_all`) or precomputed ``pairs``
    with ``n`` items.
    """
    if pairs is None:
        if hashes is None:
            raise ValueError("give hashes, or pairs and n")
        h = as_hash_array(hashes)
        n = h.shape[0]
        pairs = find_all(h, k, blocks=blocks, layout=layout)
    elif n is None:
        if hashes is None:
            raise ValueError("with pairs, give n (the number of items) or hashes")
        n = as_hash_array(hashes).shape[0]
    pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    if pairs.size and (pairs.min() < 0 or pairs.max() >= n):
        raise ValueError(f"pair positions must be in 0..{n - 1}")
    return _components(n, pairs[:, 0], pairs[:, 1])


def _components(n: int, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Connected components by vectorised min-label propagation with pointer jumping."""
    parent = np.arange(n, dtype=np.int64)
    while True:
        pa, pb = parent[a], parent[b]
        differ = pa != pb
        if not differ.any():
            break
        lo = np.minimum(pa[differ], pb[differ])
        hi = np.maximum(pa[differ], pb[differ])
        np.minimum.at(parent, hi, lo)
        while True:  # pointer jumping: every node points at its root
            grand = parent[parent]
            if np.array_equal(grand, parent):
                break
            parent = grand
    return parent


def cluster_groups(labels: np.ndarray) -> list[np.ndarray]:
    """The clusters with two or more members, as arrays of positions (ascending)."""
    labels = np.asarray(labels)
    order = np.argsort(labels, kind="stable")
    sorted_labels = labels[order]
    starts = np.flatnonzero(np.r_[True, sorted_labels[1:] != sorted_labels[:-1]])
    groups = np.split(order, starts[1:])
    return [g for g in groups if g.size > 1]
