"""Sorted runs: merging sorted arrays in linear time, and when to merge a layer's runs.

The in-memory layers that take writes (the simhash tables' delta, the MinHash-LSH's recent buckets)
keep each batch as a sorted *run* instead of inserting it into one big sorted array: an insertion
copies the whole array, so a batch would cost time proportional to the layer, not to the batch.
Runs are merged geometrically (:func:`runs_to_merge`, like a binary counter): each entry is copied
about log2(cap / batch) times, no merge copies more than ``cap`` entries, and a query probes a
bounded number of runs. A merge larger than a few batches runs in a thread of its own
(:class:`BackgroundMerge`): the write that starts it returns at once, queries go on probing the runs
it reads (they are immutable), and a later write puts its result in their place.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

try:  # the optional C merge (built by pip install where a compiler exists); numpy otherwise
    from ._probe import merge_runs as _native_merge
except ImportError:  # pragma: no cover - depends on the build
    _native_merge = None

logger = logging.getLogger(__name__)

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


class BackgroundMerge:
    """One merge of immutable runs (``inputs``, oldest first) in a thread of its own.

    Nothing is changed in place: :meth:`publish` returns a list of runs with the result in place of
    the inputs, once the thread is done; until then (and if it failed, or the inputs are gone:
    another merge took them) the inputs stay the runs, so answers are the same either way."""

    def __init__(self, inputs: Sequence[Any], merge: Callable[[list[Any]], Any]) -> None:
        self.inputs = list(inputs)
        self.entries = 0
        """What the merge copies (set by the owner, for its counters)."""
        self._result: Any = None
        self._thread = threading.Thread(
            target=self._run, args=(merge,), name="scrapy-simhash-run-merge", daemon=True
        )
        self._thread.start()

    def _run(self, merge: Callable[[list[Any]], Any]) -> None:
        try:
            self._result = merge(self.inputs)
        except Exception:  # e.g. MemoryError's cousins: the runs stay as they are, nothing is lost
            logger.exception("a merge of sorted runs failed; the runs stay unmerged")

    def done(self) -> bool:
        return not self._thread.is_alive()

    def wait(self) -> None:
        self._thread.join()

    def publish(self, runs: list[Any]) -> list[Any] | None:
        """``runs`` with the finished merge's result in place of its inputs; None when it failed or
        ``runs`` no longer hold its inputs side by side (the caller then drops it)."""
        n = len(self.inputs)
        if self._result is None or not n:
            return None
        for i in range(len(runs) - n + 1):
            if all(a is b for a, b in zip(runs[i : i + n], self.inputs, strict=True)):
                return [*runs[:i], self._result, *runs[i + n :]]
        return None
