"""Sorted runs: merging sorted arrays in linear time, and when to merge a layer's runs.

The in-memory layers that take writes (the simhash tables' delta, the MinHash-LSH's recent buckets)
keep each batch as a sorted *run* instead of inserting it into one big sorted array: an insertion
copies the whole array, so a batch would cost time proportional to the layer, not to the batch.
Runs are merged geometrically (:func:`runs_to_merge`, like a binary counter): each entry is copied
about log2(cap / batch) times, no merge copies more than ``cap`` entries, and a query probes a
bounded number of runs.
"""

from __future__ import annotations

import numpy as np

try:  # the optional C search (built by pip install where a compiler exists); numpy otherwise
    from ._probe import lower_bound_sorted as _native_lower_bound
except ImportError:  # pragma: no cover - depends on the build
    _native_lower_bound = None

GROWTH = 2
"""A run is merged with the newer ones while it is at most this many times their size."""


def merge_positions(big: np.ndarray, new: np.ndarray) -> np.ndarray:
    """Where each entry of sorted ``new`` lands when merged into sorted ``big`` (ties: ``new``
    first). A galloping search in C when built: the needles are ascending, so it walks ``big`` once
    (a binary search per needle misses the cache at every level)."""
    m = new.shape[0]
    if _native_lower_bound is not None and m > 1 and big.dtype == new.dtype and big.dtype.itemsize in (4, 8):
        out = np.empty(m, dtype=np.int64)
        _native_lower_bound(np.ascontiguousarray(big), np.ascontiguousarray(new), big.dtype.itemsize, out)
    else:
        out = np.searchsorted(big, new, side="left").astype(np.int64)
    out += np.arange(m, dtype=np.int64)
    return out


def scatter_merge(big: np.ndarray, new: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """``big`` and ``new`` as one array, ``new``'s entries at ``positions`` (:func:`merge_positions`)."""
    out = np.empty(big.shape[0] + new.shape[0], dtype=big.dtype)
    rest = np.ones(out.shape[0], dtype=bool)
    rest[positions] = False
    out[positions] = new
    out[rest] = big
    return out


def merge_sorted(big: np.ndarray, new: np.ndarray) -> np.ndarray:
    """Two sorted arrays into one sorted array (one pass, no re-sort)."""
    if not big.size:
        return new.copy()
    if not new.size:
        return big
    return scatter_merge(big, new, merge_positions(big, new))


def runs_to_merge(sizes: list[int], cap: int) -> int:
    """How many of the newest runs (``sizes``, oldest first) to merge into one after a run was
    added: while the next older run is at most :data:`GROWTH` times the newer ones together and the
    merge stays within ``cap`` entries (1: none). So sizes grow geometrically towards the oldest and
    a layer of ``n`` entries has about ``n / cap + log2(cap / batch)`` runs."""
    k, total = 1, sizes[-1] if sizes else 0
    while k < len(sizes):
        older = sizes[-k - 1]
        if older > GROWTH * total or older + total > cap:
            break
        total += older
        k += 1
    return k
