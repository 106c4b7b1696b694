"""The MinHash-LSH's recent buckets as sorted runs: a write costs its batch, not the recent entries.

Each batch's band entries (sorted) become a run of :class:`~.lsh_buckets.SortedBuckets`; the newest
runs are merged geometrically (:func:`~..sorted_runs.runs_to_merge`), never more than a cap of
entries at once, so no write re-sorts or copies everything written since the last generation. A
merge of more than :data:`INLINE_MAX` entries runs in a thread (:class:`~..sorted_runs.BackgroundMerge`)
and a later write publishes it: no write waits for one. A query looks up every run.
"""

from __future__ import annotations

import numpy as np

from ..sorted_runs import MergedRuns, merge_sorted
from .lsh_buckets import SortedBuckets

INLINE_MAX = 1 << 20
"""The most entries a write merges itself (8 MiB, ~10 ms); larger merges run in a thread of their own."""


class BucketRuns(MergedRuns[SortedBuckets]):
    """Sorted runs of bucket entries, oldest (largest) first."""

    def __init__(self) -> None:
        super().__init__([], INLINE_MAX)

    def __len__(self) -> int:
        return len(self.runs)

    @property
    def nbytes(self) -> int:
        return sum(run.nbytes for run in self.runs)

    def size(self, run: SortedBuckets) -> int:
        return run.entries.shape[0]

    def add(self, entries: np.ndarray, cap: int) -> None:
        """Sorted new ``entries`` as the newest run (merged as
        :meth:`~..sorted_runs.MergedRuns.add_run` says, at most ``cap`` entries at once)."""
        self.add_run(SortedBuckets(entries), cap, _merged_buckets)

    def take(self) -> np.ndarray | None:
        """Every run as one sorted array (None: no runs), the runs emptied (a compaction's work)."""
        self.drop_merge()
        if not self.runs:
            return None
        merged = merged_runs([run.entries for run in self.runs])
        self.runs = []
        return merged


def _merged_buckets(runs: list[SortedBuckets]) -> SortedBuckets:
    return SortedBuckets(merged_runs([run.entries for run in runs]))


def merged_runs(arrays: list[np.ndarray]) -> np.ndarray:
    """Sorted runs (oldest, largest first) as one, merged newest first: the small ones are copied
    again, the large ones once."""
    merged = arrays[-1]
    for older in reversed(arrays[:-1]):
        merged = merge_sorted(older, merged)
    return merged
