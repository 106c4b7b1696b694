"""Sorted runs: merging sorted arrays in linear time, and when to merge a layer's runs.

The in-memory layers that take writes (the simhash tables' delta, the MinHash-LSH's recent buckets)
keep each batch as a sorted *run* instead of inserting it into one big sorted array: an insertion
copies the whole array, so a batch would cost time proportional to the layer, not to the batch.
Runs are merged geometrically (:func:`runs_to_merge`, like a binary counter): each entry is copied
about log2(cap / batch) times, no merge copies more than ``cap`` entries, and a query probes a
bounded number of runs. A merge larger than a few batches runs in a thread of its own
(:class:`BackgroundMerge`): the write that starts it returns at once, queries go on probing the runs
it reads (they are immutable), and a later write puts its result in their place. Both layers keep
their runs in a :class:`MergedRuns`, which decides which merges run where.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar

import numpy as np

try:  # the optional C merge (built by pip install where a compiler exists); numpy otherwise
    from ._probe import merge_runs as _native_merge
except ImportError:  # pragma: no cover - depends on the build
    _native_merge = None

logger = logging.getLogger(__name__)

Run = TypeVar("Run")

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


class MergedRuns(Generic[Run]):
    """A layer's immutable runs (oldest, largest first) and the merges that keep them few.

    A new run is merged with the newer ones while they are of a size (:func:`runs_to_merge`): by
    the writer when that copies at most ``inline_max`` entries, else by a :class:`BackgroundMerge`
    (one at a time) that a later write publishes. What a run is and how runs merge is the owner's:
    :meth:`size` and the ``merge`` given to :meth:`add_run`."""

    def __init__(self, runs: Sequence[Run], inline_max: int) -> None:
        self.runs: list[Run] = list(runs)
        self.inline_max = inline_max
        self.copied_here = 0
        """Entries sorted or copied by :meth:`add_run` in the writer's thread (a batch's own, and
        the runs it merged)."""
        self.copied_in_background = 0
        """Entries copied by merges in their own thread (published or not)."""
        self._merge: BackgroundMerge | None = None

    def size(self, run: Run) -> int:
        """How many entries ``run`` holds (what a merge of it copies)."""
        raise NotImplementedError

    def add_run(self, fresh: Run, cap: int, merge: Callable[[list[Run]], Run]) -> None:
        """``fresh`` (newer than every run) as the newest run, merged with the newer runs while they
        are of a size (never more than ``cap`` entries copied): here when that is small, else in a
        thread (one at a time)."""
        self.publish()
        runs = [*self.runs, fresh]
        self.copied_here += self.size(fresh)
        k = runs_to_merge([self.size(run) for run in runs], cap) if self._merge is None else 1
        if k > 1:
            size = sum(self.size(run) for run in runs[-k:])
            if size <= self.inline_max:
                runs[-k:] = [merge(runs[-k:])]
                self.copied_here += size
            else:
                self._merge = BackgroundMerge(runs[-k:], merge)
                self.copied_in_background += size
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

    def drop_merge(self) -> None:
        """Forget a merge under way (its result would replace runs the owner took away)."""
        self._merge = None

    def __getstate__(self) -> dict[str, object]:
        """Pickled with any merge under way finished and published (a thread does not pickle)."""
        self.publish(wait=True)
        return self.__dict__.copy()
