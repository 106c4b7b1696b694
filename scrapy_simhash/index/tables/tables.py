"""Sorted permuted tables: one immutable segment of the index, probed with numpy.

All tables of a layout live in *one* sorted array of combined keys
(``table << key_bits | key``), so probing every table for a batch of queries is two
``searchsorted`` calls. Per stored fingerprint a segment holds, per table, the combined key
(4 bytes for the default layout) and a row number (4 bytes), plus the fingerprint and its
sequence number once: 16 * 8 + 16 = 144 bytes with the default 16 tables.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..sorted_runs import merge_with_values
from .batch import popcount64
from .layouts import Layout

try:  # the optional C probe for single queries (built by pip install where a compiler exists)
    from .. import _probe as native
except ImportError:  # pragma: no cover - depends on the build
    native = None

ROW_DTYPE = np.dtype(np.uint32)
MAX_ROWS = int(np.iinfo(ROW_DTYPE).max)


@dataclass
class Hits:
    """Matches found in a segment: query position, sequence number, fingerprint, distance."""

    query: np.ndarray
    seq: np.ndarray
    simhash: np.ndarray
    distance: np.ndarray

    @classmethod
    def empty(cls) -> Hits:
        return cls(
            np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.uint64), np.zeros(0, np.uint8)
        )

    @classmethod
    def concat(cls, parts: list[Hits]) -> Hits:
        parts = [p for p in parts if p.query.size]
        if not parts:
            return cls.empty()
        if len(parts) == 1:
            return parts[0]
        return cls(
            np.concatenate([p.query for p in parts]),
            np.concatenate([p.seq for p in parts]),
            np.concatenate([p.simhash for p in parts]),
            np.concatenate([p.distance for p in parts]),
        )


@dataclass
class Segment:
    """Sorted combined keys with their rows, plus per-row fingerprint and sequence number."""

    keys: np.ndarray
    rows: np.ndarray
    hashes: np.ndarray
    seqs: np.ndarray

    def __len__(self) -> int:
        return int(self.hashes.shape[0])

    @property
    def nbytes(self) -> int:
        return int(self.keys.nbytes + self.rows.nbytes + self.hashes.nbytes + self.seqs.nbytes)

    @classmethod
    def empty(cls, layout: Layout) -> Segment:
        return cls(
            np.zeros(0, layout.combined_dtype),
            np.zeros(0, ROW_DTYPE),
            np.zeros(0, np.uint64),
            np.zeros(0, np.int64),
        )

    @classmethod
    def build(cls, layout: Layout, hashes: np.ndarray, seqs: np.ndarray) -> Segment:
        """Sort the tables of a set of fingerprints (rows in the given order)."""
        hashes = np.ascontiguousarray(hashes, dtype=np.uint64)
        seqs = np.ascontiguousarray(seqs, dtype=np.int64)
        n = hashes.shape[0]
        if n > MAX_ROWS:
            raise ValueError(f"a segment holds at most {MAX_ROWS} fingerprints")
        if n == 0:
            return cls.empty(layout)
        combined = layout.combined_keys(hashes).ravel()  # row-major: row i's tables are adjacent
        rows = np.repeat(np.arange(n, dtype=ROW_DTYPE), layout.num_tables)
        if layout.combined_dtype == np.uint32:
            # a plain sort of key << 32 | row is several times faster than an argsort
            packed = (combined.astype(np.uint64) << np.uint64(32)) | rows
            packed.sort()
            keys = (packed >> np.uint64(32)).astype(np.uint32)
            rows = (packed & np.uint64(0xFFFFFFFF)).astype(ROW_DTYPE)
        else:
            order = np.argsort(combined, kind="stable")
            keys, rows = combined[order], rows[order]
        return cls(keys, rows, hashes, seqs)

    def probe(self, layout: Layout, query: np.ndarray, combined: np.ndarray, k: int) -> Hits:
        """Every row within ``k`` of each query (``combined``: the queries' keys, shape (q, tables))."""
        if not self.keys.shape[0]:
            return Hits.empty()
        flat = combined.ravel()
        position = None
        if flat.shape[0] > 64:
            # searches in ascending order walk the big array in order (a merge, not random probes)
            flat, position = _sorted_with_positions(flat)
        offsets, which = _equal_ranges(self.keys, flat, ascending=position is not None)
        if not offsets.size:
            return Hits.empty()
        if position is not None:
            which = position[which]
        return hits_within(query, which // layout.num_tables, self.rows[offsets], self.hashes, self.seqs, k)

    def probe_one(self, layout: Layout, query: int, k: int) -> list[tuple[int, int, int]]:
        """``(seq, simhash, distance)`` of every row within ``k`` of one query.

        Uses the C probe when built (one call instead of ~15 numpy calls), else :meth:`probe`.
        """
        if not self.keys.shape[0]:
            return []
        if native is not None:
            shift, mask, outs = layout.segment_arrays
            return native.probe(
                self.keys, self.rows, self.hashes, self.seqs, shift, mask, outs,
                self.keys.dtype.itemsize, layout.num_tables, shift.shape[1], layout.key_bits, query, k,
            )  # fmt: skip
        q = np.array([query], dtype=np.uint64)
        hits = self.probe(layout, q, layout.combined_keys(q), k)
        return list(zip(hits.seq.tolist(), hits.simhash.tolist(), hits.distance.tolist(), strict=True))

    def merged(self, layout: Layout, other: Segment, dead: np.ndarray | None = None) -> Segment:
        """This segment plus ``other`` (both sorted), dropping rows whose seq is in ``dead``.

        Linear in the sizes: one merge (:mod:`..sorted_runs`), no re-sort.
        """
        base = self.without(dead) if dead is not None and dead.size else self
        extra = other.without(dead) if dead is not None and dead.size else other
        if not len(extra):
            return base
        if not len(base):
            return extra
        n = len(base)
        if n + len(extra) > MAX_ROWS:
            raise ValueError(f"a segment holds at most {MAX_ROWS} fingerprints")
        keys, rows = merge_with_values(base.keys, extra.keys, base.rows, extra.rows, n)
        assert rows is not None
        return Segment(
            keys, rows, np.concatenate([base.hashes, extra.hashes]), np.concatenate([base.seqs, extra.seqs])
        )

    def without(self, dead: np.ndarray) -> Segment:
        """A copy without the rows whose seq is in ``dead``."""
        alive = ~np.isin(self.seqs, dead)
        if alive.all():
            return self
        renumber = (np.cumsum(alive) - 1).astype(ROW_DTYPE)
        keep = alive[self.rows]
        return Segment(
            np.ascontiguousarray(self.keys[keep]),
            renumber[self.rows[keep]],
            np.ascontiguousarray(self.hashes[alive]),
            np.ascontiguousarray(self.seqs[alive]),
        )

    def check(self, layout: Layout) -> str | None:
        """A reason why this segment is inconsistent, or None (cheap structural checks)."""
        n = len(self)
        if self.seqs.shape != (n,) or self.seqs.dtype != np.int64 or self.hashes.dtype != np.uint64:
            return "fingerprint and sequence arrays disagree"
        if self.keys.shape != (n * layout.num_tables,) or self.rows.shape != self.keys.shape:
            return f"table arrays hold {self.keys.shape[0]} entries, expected {n * layout.num_tables}"
        if self.keys.dtype != layout.combined_dtype or self.rows.dtype != ROW_DTYPE:
            return "table arrays have the wrong type"
        return None


def hits_within(
    query: np.ndarray, qidx: np.ndarray, rows: np.ndarray, hashes: np.ndarray, seqs: np.ndarray, k: int
) -> Hits:
    """The candidates (query ``qidx[i]``, row ``rows[i]`` of ``hashes``/``seqs``) within ``k`` of their
    query, each pair once: a row close to a query is found by several tables."""
    found = hashes[rows]
    dist = popcount64(found ^ query[qidx])
    keep = dist <= k
    if not keep.any():
        return Hits.empty()
    qidx, rows, found, dist = qidx[keep], rows[keep], found[keep], dist[keep]
    if qidx.size > 1:
        ident = qidx.astype(np.int64) * (hashes.shape[0] + 1) + rows.astype(np.int64)
        _, first = np.unique(ident, return_index=True)
        qidx, rows, found, dist = qidx[first], rows[first], found[first], dist[first]
    return Hits(qidx.astype(np.int64), seqs[rows].astype(np.int64), found, dist.astype(np.uint8))


def _sorted_with_positions(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``values`` sorted and the original position of each (a packed sort when it fits)."""
    n = values.shape[0]
    if values.dtype == np.uint32 and n < 1 << 32:
        packed = (values.astype(np.uint64) << np.uint64(32)) | np.arange(n, dtype=np.uint64)
        packed.sort()
        return (packed >> np.uint64(32)).astype(np.uint32), (packed & np.uint64(0xFFFFFFFF)).astype(np.int64)
    order = np.argsort(values, kind="stable")
    return values[order], order


def _lower_bound(keys: np.ndarray, wanted: np.ndarray, ascending: bool) -> np.ndarray:
    """``np.searchsorted(keys, wanted)``; for ascending needles a galloping merge in C when built."""
    if ascending and native is not None and wanted.shape[0] > 1 and keys.dtype == wanted.dtype:
        out = np.empty(wanted.shape[0], dtype=np.int64)
        native.lower_bound_sorted(keys, np.ascontiguousarray(wanted), keys.dtype.itemsize, out)
        return out
    return np.searchsorted(keys, wanted, side="left")


def _equal_ranges(
    keys: np.ndarray, wanted: np.ndarray, ascending: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """Positions in sorted ``keys`` equal to each wanted key, with the index of that key.

    One left binary search per key, then a few steps forward (runs are short for distinct
    fingerprints); long runs (many identical fingerprints) fall back to a right search.
    """
    n = keys.shape[0]
    lo = _lower_bound(keys, wanted, ascending)
    at = np.minimum(lo, n - 1)
    which = np.flatnonzero(keys[at] == wanted)
    if not which.size:
        return which, which
    offsets_parts = [lo[which]]
    which_parts = [which]
    current, current_which = lo[which] + 1, which
    for _ in range(4):
        inside = current < n
        current, current_which = current[inside], current_which[inside]
        same = keys[current] == wanted[current_which]
        if not same.any():
            break
        current, current_which = current[same], current_which[same]
        offsets_parts.append(current)
        which_parts.append(current_which)
        current = current + 1
    else:
        inside = current < n
        current, current_which = current[inside], current_which[inside]
        same = keys[current] == wanted[current_which]
        current, current_which = current[same], current_which[same]
        if current.size:
            hi = np.searchsorted(keys, wanted[current_which], side="right")
            counts = hi - current
            total = int(counts.sum())
            ends = np.cumsum(counts)
            offsets_parts.append(np.arange(total) + np.repeat(current - (ends - counts), counts))
            which_parts.append(np.repeat(current_which, counts))
    return np.concatenate(offsets_parts), np.concatenate(which_parts)


class Pending:
    """The freshest inserts, unsorted (the index's first layer, probed by brute force).

    Kept in arrays grown by doubling, so an insert appends in place and a query reads views: no list
    turned into arrays per query after every insert (that cost grew with the buffer, to ~50 µs).
    """

    def __init__(self, capacity: int = 1024) -> None:
        self._capacity = max(1, capacity)
        self._empty()

    def _empty(self) -> None:
        self._hashes = np.empty(self._capacity, dtype=np.uint64)
        self._seqs = np.empty(self._capacity, dtype=np.int64)
        self._size = 0

    def __len__(self) -> int:
        return self._size

    def append(self, hashes: list[int], seqs: list[int]) -> None:
        start, end = self._size, self._size + len(seqs)
        if end > self._hashes.size:
            hashes_now, seqs_now = self.arrays()
            self._hashes = np.empty(max(end, 2 * self._hashes.size), dtype=np.uint64)
            self._seqs = np.empty(self._hashes.size, dtype=np.int64)
            self._hashes[:start], self._seqs[:start] = hashes_now, seqs_now
        self._hashes[start:end] = hashes
        self._seqs[start:end] = seqs
        self._size = end

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """``(simhashes, seqs)`` as views; appends never write over what a view shows."""
        return self._hashes[: self._size], self._seqs[: self._size]

    def take(self) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`arrays`, and an empty buffer in new arrays (the views stay valid)."""
        arrays = self.arrays()
        self._empty()
        return arrays


def brute_force_one(hashes: np.ndarray, seqs: np.ndarray, query: int, k: int) -> list[tuple[int, int, int]]:
    """``(seq, simhash, distance)`` of every buffered fingerprint within ``k`` of one query."""
    if not hashes.size:
        return []
    if native is not None:
        return native.brute(hashes, seqs, query, k)
    hits = brute_force(hashes, seqs, np.array([query], dtype=np.uint64), k)
    return list(zip(hits.seq.tolist(), hits.simhash.tolist(), hits.distance.tolist(), strict=True))


def brute_force(hashes: np.ndarray, seqs: np.ndarray, query: np.ndarray, k: int) -> Hits:
    """Probe a small unsorted buffer by comparing every pair (the freshest inserts)."""
    if not hashes.size or not query.size:
        return Hits.empty()
    dist = popcount64(query[:, None] ^ hashes[None, :])
    qidx, cols = np.nonzero(dist <= k)
    if not qidx.size:
        return Hits.empty()
    return Hits(qidx.astype(np.int64), seqs[cols], hashes[cols], dist[qidx, cols].astype(np.uint8))


def members(sorted_values: np.ndarray, candidates: np.ndarray) -> np.ndarray:
    """The candidates present in an ascending array (binary search, no full scan)."""
    if not sorted_values.shape[0] or not candidates.size:
        return candidates[:0]
    where = np.searchsorted(sorted_values, candidates)
    where = np.minimum(where, sorted_values.shape[0] - 1)
    return candidates[sorted_values[where] == candidates]
