"""The MinHash-LSH's recent buckets as sorted runs: a write costs its batch, not the recent entries.

Each batch's band entries (sorted) become a run of :class:`~.lsh_buckets.SortedBuckets`; the newest
runs are merged geometrically (:func:`~..sorted_runs.runs_to_merge`), never more than a cap of
entries at once, so no write re-sorts or copies everything written since the last generation. A
merge of more than :data:`INLINE_MAX` entries runs in a thread (:class:`~..sorted_runs.BackgroundMerge`)
and a later write publishes it: no write waits for one. A query looks up every run.
"""

from __future__ import annotations

import numpy as np

from ..sorted_runs import BackgroundMerge, merge_sorted, runs_to_merge
from .lsh_buckets import SortedBuckets

INLINE_MAX = 1 << 20
"""The most entries a write merges itself (8 MiB, ~10 ms); larger merges run in a thread of their own."""


class BucketRuns:
    """Sorted runs of bucket entries, oldest (largest) first."""

    def __init__(self) -> None:
        self.runs: list[SortedBuckets] = []
        self.inline_max = INLINE_MAX
        self.entries_sorted = 0
        """Entries sorted or copied by :meth:`add` in the writer's thread (a batch's own, and the runs
        it merged)."""
        self.entries_merged_in_background = 0
        """Entries copied by merges in their own thread (published or not)."""
        self._merge: BackgroundMerge | None = None

    def __len__(self) -> int:
        return len(self.runs)

    @property
    def nbytes(self) -> int:
        return sum(run.nbytes for run in self.runs)

    def add(self, entries: np.ndarray, cap: int) -> None:
        """Sorted new ``entries`` as the newest run, merged with the newer runs while they are of a
        size (never more than ``cap`` entries copied): here when that is small, else in a thread
        (one at a time)."""
        self.publish()
        runs = [*self.runs, SortedBuckets(entries)]
        self.entries_sorted += entries.shape[0]
        k = runs_to_merge([run.entries.shape[0] for run in runs], cap) if self._merge is None else 1
        if k > 1:
            size = sum(run.entries.shape[0] for run in runs[-k:])
            if size <= self.inline_max:
                runs[-k:] = [SortedBuckets(merged_runs([run.entries for run in runs[-k:]]))]
                self.entries_sorted += size
            else:
                self._merge = BackgroundMerge(
                    runs[-k:], lambda parts: SortedBuckets(merged_runs([run.entries for run in parts]))
                )
                self.entries_merged_in_background += size
        self.runs = runs

    def publish(self, wait: bool = False) -> None:
        """Put a finished background merge's result in place of its runs (``wait``: for it to finish)."""
        merge = self._merge
        if merge is None or not (wait or merge.done()):
            return
        merge.wait()
        self._merge = None
        runs = merge.publish(self.runs)
        if runs is not None:
            self.runs = runs

    def __getstate__(self) -> dict[str, object]:
        """Pickled (a ``MinHashLSH`` of the user's) with any merge under way finished and published."""
        self.publish(wait=True)
        return self.__dict__.copy()

    def take(self) -> np.ndarray | None:
        """Every run as one sorted array (None: no runs), the runs emptied (a compaction's work)."""
        self._merge = None  # its result would replace runs that are gone
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
