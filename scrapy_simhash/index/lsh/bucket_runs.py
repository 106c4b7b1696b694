"""The MinHash-LSH's recent buckets as sorted runs: a write costs its batch, not the recent entries.

Each batch's band entries (sorted) become a run of :class:`~.lsh_buckets.SortedBuckets`; the newest
runs are merged geometrically (:func:`~..sorted_runs.runs_to_merge`), never more than a cap of
entries at once, so no write re-sorts or copies everything written since the last generation. A
query looks up every run (:attr:`BucketRuns.levels`).
"""

from __future__ import annotations

import numpy as np

from ..sorted_runs import merge_sorted, runs_to_merge
from .lsh_buckets import SortedBuckets


class BucketRuns:
    """Sorted runs of bucket entries, oldest (largest) first."""

    def __init__(self) -> None:
        self.runs: list[SortedBuckets] = []
        self.entries_sorted = 0
        """Entries sorted or copied by :meth:`add` (a batch's own, and the runs it merged)."""

    def __len__(self) -> int:
        return len(self.runs)

    @property
    def nbytes(self) -> int:
        return sum(run.nbytes for run in self.runs)

    def add(self, entries: np.ndarray, cap: int) -> None:
        """Sorted new ``entries`` as the newest run, merged with the newer runs while they are of a
        size: never more than ``cap`` entries copied."""
        arrays = [*(run.entries for run in self.runs), entries]
        self.entries_sorted += entries.shape[0]
        k = runs_to_merge([a.shape[0] for a in arrays], cap)
        merged = merged_runs(arrays[-k:])
        if k > 1:
            self.entries_sorted += merged.shape[0]
        self.runs = [*self.runs[: len(arrays) - k], SortedBuckets(merged)]

    def take(self) -> np.ndarray | None:
        """Every run as one sorted array (None: no runs), the runs emptied (a compaction's work)."""
        if not self.runs:
            return None
        merged = merged_runs([run.entries for run in self.runs])
        self.runs = []
        return merged


def merged_runs(arrays: list[np.ndarray]) -> np.ndarray:
    """Sorted runs (oldest, largest first) as one, merged newest first: the small ones are copied
    again, the large ones once."""
    merged = arrays[-1]
    for older in reversed(arrays[:-1]):
        merged = merge_sorted(older, merged)
    return merged
