"""The bulk of an embedded index's MinHash-LSH on disk: one immutable, memory-mapped segment.

The verified index keeps its sketches' LSH like its simhash tables (:mod:`.layers`): the bulk in files
written with each table generation (:mod:`.manifest`) and mapped at open, the pages written since in
memory (a :class:`~.lsh.MinHashLSH`). So opening maps files instead of reading every row's sketch and
rebuilding the buckets (at 1M pages: seconds and ~900 bytes of heap a page, linear in the index).

A segment is four arrays, positions ("ids") in seq order:

- ``entries``: 4 bytes a band and page, the band key's prefix split between the directory's cell and a
  tag beside the page's id (:mod:`..packed_buckets`);
- ``directory``: where each cell's entries start, so that it is not rebuilt at open;
- ``filter``: the low :data:`FILTER_BITS` bits of each page's sketch values, four values a byte;
- ``seqs``: each id's row in the database (ascending), by which a candidate's row is read;
- ``dead``: the ids whose rows were removed or replaced before the segment was written (carried by a
  merge until they are a fair share of it: :meth:`LSHSegment.merged`).

Pages removed or replaced since the segment was written are marked dead in memory (one byte a page),
from the database's records at open and from each write after.

A segment finds *candidates* (live pages sharing a band key's prefix with a query) and keeps no copy
of the sketches (the pages' rows hold them): a candidate is verified (:func:`verify`) against the
sketch in its own row, which the caller reads with the row it needs anyway to name the match. The
``filter`` spares the rows of almost every other candidate, exactly: values equal in 8 bits are
equal in their low 2, so a page whose 2-bit values do not pass the rule (a whole band equal, at
least ``min_matches`` values equal) cannot pass it in 8 bits. A page sharing a band key's 33-bit
prefix by chance (about one per lookup at 10M pages) or one band of 4 values by chance passes it
with a chance of about 1e-11 (32 of 128 values equal on average, 65 needed by default). 32 bytes a
page, where a copy of the sketches took 128 (generations written with one, ``lsh_sketches``, have no
filter: the index reads the rows instead, and a writer writes the files again, once).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from ..array_files import MemoryParts, Parts, live_slices, seq_dtype
from ..packed_buckets import MAX_PAGES, BucketParts, PackedBuckets, prefix_bits, renumbering, sort_form
from .lsh_bands import BandHasher, keys_in_slices
from .lsh_state import LSHState

try:
    from .._probe import lsh_query as _native_query
    from .._probe import sketch_verify as _native_verify
except ImportError:  # pragma: no cover - depends on the build
    _native_query = _native_verify = None

PARTS = ("lsh_entries", "lsh_directory", "lsh_filter", "lsh_seqs", "lsh_dead")
"""The segment's files in a table generation (``tables-NNNNNN.<part>.npy``)."""
FILTER_BITS = 2
"""Bits of each sketch value the segment keeps (:func:`filter_rows`)."""
_SHIFTS = np.array([0, 2, 4, 6], dtype=np.uint8)
DEAD_SHARE = 8
"""A merge drops the dead pages it carries once they are more than 1/DEAD_SHARE of the segment."""


_CHUNK = 1 << 16


class LSHSegment:
    """An immutable LSH level over pages in seq order, answering with candidates by seq."""

    def __init__(
        self, buckets: PackedBuckets, filtered: np.ndarray, seqs: np.ndarray, num_values: int
    ) -> None:
        if filtered.shape != (seqs.shape[0], filter_width(num_values)):
            raise ValueError(f"a filter of shape {filtered.shape} for {seqs.shape[0]} pages of {num_values}")
        if buckets.pages != seqs.shape[0] and buckets.size:
            raise ValueError(f"buckets numbered for {buckets.pages} pages, not {seqs.shape[0]}")
        self.buckets, self.filter, self.seqs, self.num_values = buckets, filtered, seqs, num_values
        self.alive = np.ones(seqs.shape[0], dtype=bool)
        self.dead = 0

    @classmethod
    def empty(cls, num_values: int) -> LSHSegment:
        filtered = np.zeros((0, filter_width(num_values)), dtype=np.uint8)
        return cls(PackedBuckets.empty(), filtered, np.zeros(0, dtype=np.int64), num_values)

    @classmethod
    def build(cls, hasher: BandHasher, sketches: np.ndarray, seqs: np.ndarray) -> LSHSegment:
        """The segment of pages ``seqs`` (ascending) with these sketches (rows)."""
        if sketches.shape[0] != seqs.shape[0]:
            raise ValueError(f"{sketches.shape[0]} sketches for {seqs.shape[0]} seqs")
        n, prefix = sketches.shape[0], prefix_bits(hasher.bands)
        _check_pages(n)
        form = sort_form(keys_in_slices(hasher, sketches), 0, n, prefix)
        buckets = PackedBuckets.from_sort_form(form, n, prefix)
        return cls(buckets, filter_rows(sketches), seqs, sketches.shape[1])

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray], num_values: int, prefix: int) -> LSHSegment:
        """A segment over its files' arrays (memory-mapped), checked for shape: a damaged file
        raises ValueError, never gives a wrong answer later."""
        seqs, flat, width = arrays["lsh_seqs"], arrays["lsh_filter"], filter_width(num_values)
        if flat.size != seqs.size * width:
            raise ValueError(f"{flat.size} filter bytes for {seqs.size} pages of {num_values} values")
        # seqs stay as mapped (uint32 while they fit: 4 bytes a page, no copy at open)
        if seqs.size > 1 and not bool((seqs[1:] > seqs[:-1]).all()):
            raise ValueError("the segment's seqs are not ascending")
        buckets = PackedBuckets(arrays["lsh_entries"], arrays["lsh_directory"], int(seqs.size), prefix)
        segment = cls(buckets, flat.reshape(seqs.size, width), seqs, num_values)
        dead = arrays["lsh_dead"]
        if dead.size:
            if int(dead.min()) < 0 or int(dead.max()) >= seqs.size:
                raise ValueError("a dead id past the segment's pages")
            segment.alive[dead] = False
            segment.dead = int(np.count_nonzero(~segment.alive))
        return segment

    def arrays(self) -> dict[str, np.ndarray]:
        """What the files hold (the dead pages' ids listed)."""
        seqs = self.seqs.astype(seq_dtype(int(self.seqs[-1]) if self.seqs.size else 0))
        return {
            "lsh_entries": self.buckets.entries,
            "lsh_directory": self.buckets.directory,
            "lsh_filter": self.filter.reshape(-1),
            "lsh_seqs": seqs,
            "lsh_dead": np.flatnonzero(~self.alive).astype(np.int64),
        }

    def __len__(self) -> int:
        """Live pages."""
        return int(self.seqs.shape[0]) - self.dead

    @property
    def nbytes(self) -> int:
        return self.buckets.nbytes + int(self.filter.nbytes + self.seqs.nbytes + self.alive.nbytes)

    def snapshot(self) -> LSHSegment:
        """The same files with a copy of which pages are alive: a merge in another thread reads it
        while kills go on marking this one (they are applied to the merge's result afterwards)."""
        out = LSHSegment(self.buckets, self.filter, self.seqs, self.num_values)
        out.alive, out.dead = self.alive.copy(), self.dead
        return out

    def live_seqs(self) -> np.ndarray:
        """The live pages' seqs, ascending."""
        return np.asarray(self.seqs)[self.alive].astype(np.int64)

    # -- what changed since it was written ------------------------------------------------------------
    def kill(self, seqs: Iterable[int] | np.ndarray) -> None:
        """These rows were removed or replaced (seqs the segment does not hold are ignored)."""
        wanted = np.asarray(seqs if isinstance(seqs, np.ndarray) else list(seqs), dtype=np.int64)
        if not wanted.size or not self.seqs.size:
            return
        if self.seqs.dtype != wanted.dtype:  # narrow seqs: compare in their type, never widen the segment's
            wanted = wanted[(wanted >= 0) & (wanted <= np.iinfo(self.seqs.dtype).max)].astype(self.seqs.dtype)
            if not wanted.size:
                return
        at = np.searchsorted(self.seqs, wanted)
        inside = at < self.seqs.size
        at, wanted = at[inside], wanted[inside]
        at = np.unique(at[self.seqs[at] == wanted])
        fresh = at[self.alive[at]]
        self.alive[fresh] = False
        self.dead += int(fresh.size)

    def merged(self, hasher: BandHasher, sketches: np.ndarray, seqs: np.ndarray) -> LSHSegment:
        """:meth:`write_merged` into arrays: the new segment in memory."""
        parts = MemoryParts()
        info = self.write_merged(parts, hasher, sketches, seqs)
        arrays = dict(parts.arrays)
        arrays["lsh_seqs"] = arrays["lsh_seqs"].astype(np.int64)
        return LSHSegment.from_arrays(arrays, self.num_values, info["prefix_bits"])

    def write_merged(
        self, parts: Parts, hasher: BandHasher, sketches: np.ndarray, seqs: np.ndarray
    ) -> dict[str, int]:
        """A new segment, put as its parts (:data:`PARTS`): this one's pages, then the pages ``seqs``
        (above all of this one's) with ``sketches``; its ``count`` and ``prefix_bits``. A slice at a
        time: the heap holds the new pages' entries, not this segment's.

        While at most an eighth of this one's pages are dead they are carried along, still dead
        (:data:`DEAD_SHARE`): the merge then writes each entry again for the larger segment's split
        of its prefix (linear, nothing hashed again) and inserts the new ones, instead of renumbering
        every id; past that share they are dropped and the ids renumbered (order kept)."""
        n = int(self.seqs.shape[0])
        alive, renumber = None, None
        if self.dead * DEAD_SHARE > n:
            alive = self.alive
            renumber = renumbering(alive)
        kept = n if alive is None else int(np.count_nonzero(alive))
        total, prefix = kept + sketches.shape[0], self.buckets.prefix if n else prefix_bits(hasher.bands)
        _check_pages(total)
        fresh = np.zeros(0, np.uint64)
        if sketches.shape[0]:
            fresh = sort_form(keys_in_slices(hasher, sketches), kept, total, prefix)
        forms = self.buckets.merged_forms(fresh, total, renumber) if n else iter([fresh])
        BucketParts(total * hasher.bands, total, prefix).put(parts, "lsh_entries", "lsh_directory", forms)
        rows = live_slices(self.filter, alive, filter_rows(sketches).reshape(-1, self.filter.shape[1]))
        parts.put_slices("lsh_filter", np.dtype(np.uint8), total * self.filter.shape[1], rows)
        highest = max(int(self.seqs[-1]) if n else 0, int(seqs.max()) if seqs.size else 0)
        parts.put_slices("lsh_seqs", seq_dtype(highest), total, live_slices(self.seqs, alive, seqs))
        dead = np.flatnonzero(~self.alive) if alive is None else np.zeros(0, np.int64)
        parts.put("lsh_dead", dead.astype(np.int64))
        return {"count": total, "prefix_bits": prefix}

    # -- candidates ----------------------------------------------------------------------------------
    def candidates(
        self, values: np.ndarray, band_keys: np.ndarray, bands: int, rows: int, min_matches: int
    ) -> np.ndarray:
        """The seqs (ascending) of the live pages sharing a band key's prefix with one query (its
        sketch ``values`` and ``band_keys``) whose filter passes the rule (see the module's notes)."""
        if not len(self):
            return _NO_SEQS
        if _native_query is not None:  # the lookup, the live check and the filter in one C call
            found, _ = _native_query(
                np.ascontiguousarray(band_keys, dtype=np.uint64),
                [self.buckets.native_args()],
                b"",
                self.filter,
                self.alive,
                self.num_values,
                np.ascontiguousarray(values, dtype=np.uint8),
                bands,
                rows,
                min_matches,
                0,
            )
            if not found:  # most lookups
                return _NO_SEQS
            ids = np.sort(np.array(found, dtype=np.int64))
        else:
            ids = self._filtered(
                np.ascontiguousarray(band_keys, dtype=np.uint64), values, bands, rows, min_matches
            )
        return self.seqs[ids].astype(np.int64)

    def _filtered(
        self, band_keys: np.ndarray, values: np.ndarray, bands: int, rows: int, min_matches: int
    ) -> np.ndarray:
        """:meth:`candidates`' ids without the C extension."""
        _, ids = self.buckets.lookup(band_keys.ravel())
        if ids.size:
            ids = np.unique(ids)
            ids = ids[self.alive[ids]]
        if ids.size:
            counts = verify(self._low_bits(ids), _QUERY_ZERO, _low(values[None, :]), bands, rows, min_matches)
            ids = ids[counts >= 0]
        return ids

    def candidates_many(
        self, values: np.ndarray, band_keys: np.ndarray, rows: int, min_matches: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """``(query, seq)`` of every live page sharing a band key's prefix with a query of the batch
        (``values``: a row a query; ``band_keys``: a row of ``bands`` keys a query) whose filter
        passes the rule, each pair once, ordered by query then seq."""
        if not len(self) or not band_keys.shape[0]:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        bands = band_keys.shape[1]
        flat = np.ascontiguousarray(band_keys, dtype=np.uint64).ravel()
        parts_q, parts_ids = [], []
        for start in range(0, flat.shape[0], _CHUNK):  # bounds the lookups' temporary arrays
            k, found = self.buckets.lookup(flat[start : start + _CHUNK])
            parts_q.append((k + start) // bands)
            parts_ids.append(found)
        q, ids = np.concatenate(parts_q), np.concatenate(parts_ids)
        pairs = np.unique((q << 32) | ids)
        q, ids = pairs >> 32, pairs & 0xFFFFFFFF
        live = self.alive[ids]
        q, ids = q[live], ids[live]
        if ids.size:
            if _native_verify is not None:  # the filter's rows read in place
                out = _native_verify(
                    self.filter,
                    self.num_values,
                    np.ascontiguousarray(ids, dtype=np.int64),
                    np.ascontiguousarray(q, dtype=np.int64),
                    np.ascontiguousarray(values, dtype=np.uint8),
                    bands,
                    rows,
                    min_matches,
                    0,
                )
                counts = np.frombuffer(out, dtype=np.int32)
            else:
                counts = verify(self._low_bits(ids), q, _low(values), bands, rows, min_matches)
            passed = counts >= 0
            q, ids = q[passed], ids[passed]
        return q, np.asarray(self.seqs)[ids].astype(np.int64)

    def _low_bits(self, ids: np.ndarray) -> np.ndarray:
        """The filter's values of pages ``ids``, a byte a value."""
        packed = np.asarray(self.filter[ids])
        return ((packed[:, :, None] >> _SHIFTS) & 3).reshape(ids.size, -1)[:, : self.num_values]


_QUERY_ZERO = np.zeros(0, np.int64)
"""``query_of`` for one query (:func:`verify` asks query 0 for every candidate)."""
_NO_SEQS = np.zeros(0, np.int64)
"""No candidate (most lookups)."""


def filter_width(num_values: int) -> int:
    """Bytes of a page's filter: :data:`FILTER_BITS` a value."""
    return -(-num_values * FILTER_BITS // 8)


def _low(values: np.ndarray) -> np.ndarray:
    return (np.asarray(values) & 3).astype(np.uint8)


def filter_rows(sketches: np.ndarray) -> np.ndarray:
    """The filter of pages with these sketches (rows, values of any unsigned type): the low
    :data:`FILTER_BITS` bits of each value, four values a byte, the first in the lowest bits."""
    low = _low(sketches)
    pad = (-low.shape[1]) % 4
    if pad:
        low = np.pad(low, ((0, 0), (0, pad)))
    low = low.reshape(low.shape[0], low.shape[1] // 4, 4)
    return low[..., 0] | low[..., 1] << 2 | low[..., 2] << 4 | low[..., 3] << 6


def verify(
    sketches: np.ndarray,
    query_of: np.ndarray,
    queries: np.ndarray,
    bands: int,
    rows: int,
    min_matches: int,
) -> np.ndarray:
    """For each candidate (a row of ``sketches``, asked by query ``query_of`` of ``queries``): its
    count of values equal to the query's when it shares a whole band and has at least ``min_matches``,
    else -1 (as :meth:`~.lsh.MinHashLSH._counts`). The candidates' and queries' values are in the
    stored width."""
    queries = np.ascontiguousarray(queries, dtype=sketches.dtype)
    if _native_verify is not None:
        out = _native_verify(
            np.ascontiguousarray(sketches),
            sketches.shape[1],
            np.arange(sketches.shape[0], dtype=np.int64),
            np.ascontiguousarray(query_of, dtype=np.int64),
            queries,
            bands,
            rows,
            min_matches,
            sketches.dtype.itemsize,
        )
        return np.frombuffer(out, dtype=np.int32)
    width = bands * rows
    if not query_of.size:  # one query for every candidate
        query_of = np.zeros(sketches.shape[0], np.int64)
    eq = sketches == queries[query_of]
    counts = np.count_nonzero(eq, axis=1)
    ok = counts >= min_matches
    ok &= eq[:, :width].reshape(-1, bands, rows).all(axis=2).any(axis=1)
    return np.where(ok, counts, -1).astype(np.int32)


def holds_older(base: LSHSegment, frozen: LSHState) -> bool:
    """Whether ``frozen`` holds a page older than ``base``'s newest (given a sketch since)."""
    oldest = frozen.oldest_tag()
    return bool(base.seqs.size) and oldest is not None and oldest <= int(base.seqs[-1])


def write_with_level(
    parts: Parts, base: LSHSegment, frozen: LSHState, older: tuple[np.ndarray, np.ndarray] | None
) -> dict[str, int]:
    """``base``'s live pages and ``frozen``'s as one new segment's parts, ids in seq order.
    ``older``: the base's live pages' seqs and sketches, when ``frozen`` holds older pages."""
    _, sketches, seqs = frozen.live()
    order = np.argsort(seqs, kind="stable")
    sketches, seqs = sketches[order], seqs[order]
    if older is not None:
        # pages given a sketch after the base was written keep their (older) seq: rebuild
        every = np.concatenate([older[0], seqs])
        matrix = np.concatenate([older[1].astype(sketches.dtype), sketches])
        order = np.argsort(every, kind="stable")
        segment = LSHSegment.build(frozen.hasher, matrix[order], every[order])
        for part, array in segment.arrays().items():
            parts.put(part, array)
        return {"count": int(segment.seqs.size), "prefix_bits": segment.buckets.prefix}
    return base.write_merged(parts, frozen.hasher, sketches, seqs)


def _check_pages(pages: int) -> None:
    if pages > MAX_PAGES:
        raise ValueError(f"an LSH segment holds at most {MAX_PAGES} pages")
