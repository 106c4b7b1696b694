"""The simhash tables' in-memory delta as sorted runs: a write costs its batch, not the delta.

Each merge of the pending buffer adds a :class:`~.tables.Segment` of its own (a *run*); runs are
merged geometrically (:func:`~..sorted_runs.runs_to_merge`), never more than :data:`RUN_CAP`
fingerprints at once, so the longest write does not grow with the delta (which grows with the
index: a quarter of the base). A query probes every run: about ``len / RUN_CAP + 5`` of them.
"""

from __future__ import annotations

import numpy as np

from ..sorted_runs import runs_to_merge
from .layouts import Layout
from .tables import Hits, Segment

RUN_CAP = 1 << 18
"""The most fingerprints a write merges at once (16 tables: 4M entries, 32 MiB)."""


class DeltaRuns:
    """Sorted runs of fingerprints, oldest first (rows of each run in seq order)."""

    def __init__(self, runs: list[Segment] | None = None, cap: int | None = None) -> None:
        self.runs = [run for run in runs or [] if len(run)]
        self.cap = RUN_CAP if cap is None else cap
        self.rows_copied = 0
        """Fingerprints sorted or copied by :meth:`add` (a batch's own, and the runs it merged)."""

    def __len__(self) -> int:
        return sum(len(run) for run in self.runs)

    @property
    def nbytes(self) -> int:
        return sum(run.nbytes for run in self.runs)

    def add(self, layout: Layout, fresh: Segment) -> None:
        """``fresh`` (newer than every run) as the newest run, merged with the newer runs while
        they are of a size."""
        if not len(fresh):
            return
        runs = [*self.runs, fresh]
        self.rows_copied += len(fresh)
        k = runs_to_merge([len(run) for run in runs], self.cap)
        if k > 1:
            merged = _merged(layout, runs[-k:])
            self.rows_copied += len(merged)
            runs[-k:] = [merged]
        self.runs = runs

    def whole(self, layout: Layout) -> Segment:
        """Every run as one segment (a generation's merge, in the background)."""
        return _merged(layout, self.runs) if self.runs else Segment.empty(layout)

    def probe(self, layout: Layout, queries: np.ndarray, combined: np.ndarray, k: int) -> Hits:
        return Hits.concat([run.probe(layout, queries, combined, k) for run in self.runs])

    def probe_one(self, layout: Layout, query: int, k: int) -> list[tuple[int, int, int]]:
        found: list[tuple[int, int, int]] = []
        for run in self.runs:
            found += run.probe_one(layout, query, k)
        return found


def _merged(layout: Layout, runs: list[Segment]) -> Segment:
    """Runs (oldest first) as one segment, merged newest first: the small ones are copied again,
    the large ones once."""
    merged = runs[-1]
    for older in reversed(runs[:-1]):
        merged = older.merged(layout, merged)
    return merged
