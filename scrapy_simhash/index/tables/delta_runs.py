"""The simhash tables' in-memory delta as sorted runs: a write costs its batch, not the delta.

Each merge of the pending buffer adds a :class:`~.tables.Segment` of its own (a *run*); runs are
merged geometrically (:func:`~..sorted_runs.runs_to_merge`), never more than :data:`RUN_CAP`
fingerprints at once, so the longest write does not grow with the delta (which grows with the
index: a quarter of the base). A merge of more than :data:`INLINE_MAX` fingerprints runs in a thread
(:class:`~..sorted_runs.BackgroundMerge`) and a later write publishes it: no write waits for one. A
query probes every run: about ``len / RUN_CAP + 5`` of them (a few more while a merge runs).
"""

from __future__ import annotations

import numpy as np

from ..sorted_runs import MergedRuns
from .layouts import Layout
from .tables import Hits, Segment

RUN_CAP = 1 << 18
"""The most fingerprints a write merges at once (16 tables: 4M entries, 32 MiB)."""
INLINE_MAX = 1 << 16
"""The most fingerprints a write merges itself (16 tables: 1M entries, ~10 ms); larger merges run
in a thread of their own."""


class DeltaRuns(MergedRuns[Segment]):
    """Sorted runs of fingerprints, oldest first (rows of each run in seq order)."""

    def __init__(self, runs: list[Segment] | None = None, cap: int | None = None) -> None:
        super().__init__([run for run in runs or [] if len(run)], INLINE_MAX)
        self.cap = RUN_CAP if cap is None else cap

    def __len__(self) -> int:
        return sum(len(run) for run in self.runs)

    @property
    def nbytes(self) -> int:
        return sum(run.nbytes for run in self.runs)

    def size(self, run: Segment) -> int:
        return len(run)

    def add(self, layout: Layout, fresh: Segment) -> None:
        """``fresh`` (newer than every run) as the newest run (merged as
        :meth:`~..sorted_runs.MergedRuns.add_run` says, at most :attr:`cap` fingerprints at once)."""
        if len(fresh):
            self.add_run(fresh, self.cap, lambda parts: _merged(layout, parts))

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
