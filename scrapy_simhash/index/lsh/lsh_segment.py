"""The bulk of an embedded index's MinHash-LSH on disk: one immutable, memory-mapped segment.

The verified index keeps its sketches' LSH like its simhash tables (:mod:`.layers`): the bulk in files
written with each table generation (:mod:`.manifest`) and mapped at open, the pages written since in
memory (a :class:`~.lsh.MinHashLSH`). So opening maps files instead of reading every row's sketch and
rebuilding the buckets (at 1M pages: seconds and ~900 bytes of heap a page, linear in the index).

A segment is four arrays, positions ("ids") in seq order:

- ``entries``: 4 bytes a band and page, the band key's prefix split between the directory's cell and a
  tag beside the page's id (:mod:`..packed_buckets`);
- ``directory``: where each cell's entries start, so that it is not rebuilt at open;
- ``seqs``: each id's row in the database (ascending), by which a candidate's row is read;
- ``dead``: the ids whose rows were removed or replaced before the segment was written (carried by a
  merge until they are a fair share of it: :meth:`LSHSegment.merged`).

Pages removed or replaced since the segment was written are marked dead in memory (one byte a page),
from the database's records at open and from each write after.

A segment finds *candidates* (live pages sharing a band prefix with a query); it keeps no sketches.
A candidate is verified (:func:`verify`) against the sketch in its own row, which the caller reads
with the row it needs anyway to name the match: the database's copy is the only one, 128 bytes a
page less on disk and in every merge than a second copy beside the entries (generations written
with that copy, ``lsh_sketches``, are read without it).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from ..array_files import MemoryParts, Parts, live_slices, seq_dtype
from ..packed_buckets import MAX_PAGES, BucketParts, PackedBuckets, prefix_bits, renumbering, sort_form
from .lsh_bands import BandHasher, keys_in_slices
from .lsh_state import LSHState

try:
    from .._probe import sketch_verify as _native_verify
except ImportError:  # pragma: no cover - depends on the build
    _native_verify = None

PARTS = ("lsh_entries", "lsh_directory", "lsh_seqs", "lsh_dead")
"""The segment's files in a table generation (``tables-NNNNNN.<part>.npy``)."""
DEAD_SHARE = 8
"""A merge drops the dead pages it carries once they are more than 1/DEAD_SHARE of the segment."""


_CHUNK = 1 << 16


class LSHSegment:
    """An immutable LSH level over pages in seq order, answering with candidates by seq."""

    def __init__(self, buckets: PackedBuckets, seqs: np.ndarray) -> None:
        if buckets.pages != seqs.shape[0] and buckets.size:
            raise ValueError(f"buckets numbered for {buckets.pages} pages, not {seqs.shape[0]}")
        self.buckets, self.seqs = buckets, seqs
        self.alive = np.ones(seqs.shape[0], dtype=bool)
        self.dead = 0

    @classmethod
    def empty(cls) -> LSHSegment:
        return cls(PackedBuckets.empty(), np.zeros(0, dtype=np.int64))

    @classmethod
    def build(cls, hasher: BandHasher, sketches: np.ndarray, seqs: np.ndarray) -> LSHSegment:
        """The segment of pages ``seqs`` (ascending) with these sketches (rows)."""
        if sketches.shape[0] != seqs.shape[0]:
            raise ValueError(f"{sketches.shape[0]} sketches for {seqs.shape[0]} seqs")
        n, prefix = sketches.shape[0], prefix_bits(hasher.bands)
        _check_pages(n)
        form = sort_form(keys_in_slices(hasher, sketches), 0, n, prefix)
        return cls(PackedBuckets.from_sort_form(form, n, prefix), seqs)

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray], prefix: int) -> LSHSegment:
        """A segment over its files' arrays (memory-mapped), checked for shape: a damaged file
        raises ValueError, never gives a wrong answer later."""
        seqs = arrays["lsh_seqs"]
        # seqs stay as mapped (uint32 while they fit: 4 bytes a page, no copy at open)
        if seqs.size > 1 and not bool((seqs[1:] > seqs[:-1]).all()):
            raise ValueError("the segment's seqs are not ascending")
        buckets = PackedBuckets(arrays["lsh_entries"], arrays["lsh_directory"], int(seqs.size), prefix)
        segment = cls(buckets, seqs)
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
            "lsh_seqs": seqs,
            "lsh_dead": np.flatnonzero(~self.alive).astype(np.int64),
        }

    def __len__(self) -> int:
        """Live pages."""
        return int(self.seqs.shape[0]) - self.dead

    @property
    def nbytes(self) -> int:
        return self.buckets.nbytes + int(self.seqs.nbytes + self.alive.nbytes)

    def snapshot(self) -> LSHSegment:
        """The same files with a copy of which pages are alive: a merge in another thread reads it
        while kills go on marking this one (they are applied to the merge's result afterwards)."""
        out = LSHSegment(self.buckets, self.seqs)
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
        return LSHSegment.from_arrays(arrays, info["prefix_bits"])

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
        highest = max(int(self.seqs[-1]) if n else 0, int(seqs.max()) if seqs.size else 0)
        parts.put_slices("lsh_seqs", seq_dtype(highest), total, live_slices(self.seqs, alive, seqs))
        dead = np.flatnonzero(~self.alive) if alive is None else np.zeros(0, np.int64)
        parts.put("lsh_dead", dead.astype(np.int64))
        return {"count": total, "prefix_bits": prefix}

    # -- candidates ----------------------------------------------------------------------------------
    def candidates(self, band_keys: np.ndarray) -> np.ndarray:
        """The seqs (ascending) of the live pages sharing a band key's prefix with one query."""
        if not len(self):
            return np.zeros(0, np.int64)
        _, ids = self.buckets.lookup(np.ascontiguousarray(band_keys, dtype=np.uint64).ravel())
        if ids.size:
            ids = np.unique(ids)
            ids = ids[self.alive[ids]]
        return self.seqs[ids].astype(np.int64)

    def candidates_many(self, band_keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(query, seq)`` of every live page sharing a band key's prefix with a query of the batch
        (``band_keys``: a row of ``bands`` keys a query), each pair once, ordered by query then seq."""
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
        return q[live], np.asarray(self.seqs)[ids[live]].astype(np.int64)


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
