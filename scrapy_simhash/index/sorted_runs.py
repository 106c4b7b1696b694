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

try:  # the optional C merge (built by pip install where a compiler exists); numpy otherwise
    from ._probe import merge_runs as _native_merge
except ImportError:  # pragma: no cover - depends on the build
    _native_merge = None

GROWTH = 2
"""A run is merged with the newer ones while it is at most this many times their size."""


def scatter_merge(big: np.ndarray, new: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """``big`` and ``new`` as one array, ``new``'s entries at ``positions`` (numpy's merge)."""
    out = np.empty(big.shape[0] + new.shape[0], dtype=big.dtype)
    rest = np.ones(out.shape[0], dtype=bool)
    rest[positions] = False
    out[positions] = new
    out[rest] = big
    return out


def merge_sorted(big: np.ndarray, new: np.ndarray) -> np.ndarray:
    """Two sorted arrays into one sorted array (one pass, no re-sort; ties: ``big``'s first)."""
    if not big.size:
        return new.copy()
    if not new.size:
        return big
    return merge_with_values(big, new)[0]


def merge_with_values(
    a: np.ndarray,
    b: np.ndarray,
    a_values: np.ndarray | None = None,
    b_values: np.ndarray | None = None,
    b_offset: int = 0,
) -> tuple[np.ndarray, np.ndarray | None]:
    """Sorted keys ``a`` and ``b`` merged (ties: ``a``'s first), and the uint32 values beside them
    (``b``'s raised by ``b_offset``) in the same order: one pass in C when built."""
    values = a_values is not None and b_values is not None
    if _native_merge is not None and a.dtype == b.dtype and a.dtype.itemsize in (4, 8):
        out = np.empty(a.shape[0] + b.shape[0], dtype=a.dtype)
        out_values = np.empty(out.shape[0], dtype=np.uint32) if values else None
        _native_merge(
            np.ascontiguousarray(a),
            np.ascontiguousarray(b),
            a.dtype.itemsize,
            out,
            np.ascontiguousarray(a_values, dtype=np.uint32) if values else b"",
            np.ascontiguousarray(b_values, dtype=np.uint32) if values else b"",
            b_offset,
            out_values if out_values is not None else bytearray(),
        )
        return out, out_values
    where = np.searchsorted(a, b, side="right").astype(np.int64) + np.arange(b.shape[0], dtype=np.int64)
    merged = scatter_merge(a, b.astype(a.dtype), where)
    if not values:
        return merged, None
    shifted = b_values.astype(np.uint32) + np.uint32(b_offset)  # type: ignore[union-attr]
    return merged, scatter_merge(a_values.astype(np.uint32), shifted, where)  # type: ignore[union-attr]


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
