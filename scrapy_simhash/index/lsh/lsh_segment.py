"""The bulk of an embedded index's MinHash-LSH on disk: one immutable, memory-mapped segment.

The verified index keeps its sketches' LSH like its simhash tables (:mod:`.layers`): the bulk in files
written with each table generation (:mod:`.manifest`) and mapped at open, the pages written since in
memory (a :class:`~.lsh.MinHashLSH`). So opening maps files instead of reading every row's sketch and
rebuilding the buckets (at 1M pages: seconds and ~900 bytes of heap a page, linear in the index).

A segment is four arrays, positions ("ids") in seq order:

- ``entries``: 4 bytes a band and page, the band key's prefix split between the directory's cell and a
  tag beside the page's id (:mod:`..packed_buckets`);
- ``directory``: where each cell's entries start, so that it is not rebuilt at open;
- ``sketches``: the pages' sketches, ``num_values`` values of ``value_bits`` (a byte each at 8 bits);
- ``seqs``: each id's row in the database (ascending), by which a match's row is read;
- ``dead``: the ids whose rows were removed or replaced before the segment was written (carried by a
  merge until they are a fair share of it: :meth:`LSHSegment.merged`).

Pages removed or replaced since the segment was written are marked dead in memory (one byte a page),
from the database's records at open and from each write after.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from ..array_files import MemoryParts, Parts, live_slices, seq_dtype
from ..packed_buckets import MAX_PAGES, BucketParts, PackedBuckets, prefix_bits, renumbering, sort_form
from .lsh_bands import BandHasher, keys_in_slices

try:
    from .._probe import lsh_query as _native_query
    from .._probe import sketch_verify as _native_verify
except ImportError:  # pragma: no cover - depends on the build
    _native_query = _native_verify = None

PARTS = ("lsh_entries", "lsh_directory", "lsh_sketches", "lsh_seqs", "lsh_dead")
"""The segment's files in a table generation (``tables-NNNNNN.<part>.npy``)."""
DEAD_SHARE = 8
"""A merge drops the dead pages it carries once they are more than 1/DEAD_SHARE of the segment."""


_CHUNK = 1 << 16


class LSHSegment:
    """An immutable LSH level over ``sketches`` (rows in seq order), answering by seq."""

    def __init__(self, buckets: PackedBuckets, sketches: np.ndarray, seqs: np.ndarray) -> None:
        if sketches.shape[0] != seqs.shape[0]:
            raise ValueError(f"{sketches.shape[0]} sketches for {seqs.shape[0]} seqs")
        if buckets.pages != seqs.shape[0] and buckets.size:
            raise ValueError(f"buckets numbered for {buckets.pages} pages, not {seqs.shape[0]}")
        self.buckets, self.sketches, self.seqs = buckets, sketches, seqs
        self.alive = np.ones(seqs.shape[0], dtype=bool)
        self.dead = 0

    @classmethod
    def empty(cls, num_values: int, dtype: np.dtype[Any]) -> LSHSegment:
        return cls(PackedBuckets.empty(), np.zeros((0, num_values), dtype=dtype), np.zeros(0, dtype=np.int64))

    @classmethod
    def build(cls, hasher: BandHasher, sketches: np.ndarray, seqs: np.ndarray) -> LSHSegment:
        n, prefix = sketches.shape[0], prefix_bits(hasher.bands)
        _check_pages(n)
        form = sort_form(keys_in_slices(hasher, sketches), 0, n, prefix)
        return cls(PackedBuckets.from_sort_form(form, n, prefix), sketches, seqs)

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray], num_values: int, prefix: int) -> LSHSegment:
        """A segment over its files' arrays (memory-mapped), checked for shape: a damaged file
        raises ValueError, never gives a wrong answer later."""
        seqs, flat = arrays["lsh_seqs"], arrays["lsh_sketches"]
        if flat.size != seqs.size * num_values:
            raise ValueError(f"{flat.size} sketch values for {seqs.size} pages of {num_values}")
        sketches = flat.reshape(seqs.size, num_values)
        # seqs stay as mapped (uint32 while they fit: 4 bytes a page, no copy at open)
        if seqs.size > 1 and not bool((seqs[1:] > seqs[:-1]).all()):
            raise ValueError("the segment's seqs are not ascending")
        buckets = PackedBuckets(arrays["lsh_entries"], arrays["lsh_directory"], int(seqs.size), prefix)
        segment = cls(buckets, sketches, seqs)
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
            "lsh_sketches": self.sketches.reshape(-1),
            "lsh_seqs": seqs,
            "lsh_dead": np.flatnonzero(~self.alive).astype(np.int64),
        }

    def __len__(self) -> int:
        """Live pages."""
        return int(self.seqs.shape[0]) - self.dead

    @property
    def nbytes(self) -> int:
        return self.buckets.nbytes + int(self.sketches.nbytes + self.seqs.nbytes + self.alive.nbytes)

    def snapshot(self) -> LSHSegment:
        """The same files with a copy of which pages are alive: a merge in another thread reads it
        while kills go on marking this one (they are applied to the merge's result afterwards)."""
        out = LSHSegment(self.buckets, self.sketches, self.seqs)
        out.alive, out.dead = self.alive.copy(), self.dead
        return out

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
        return LSHSegment.from_arrays(arrays, self.sketches.shape[1], info["prefix_bits"])

    def write_merged(
        self, parts: Parts, hasher: BandHasher, sketches: np.ndarray, seqs: np.ndarray
    ) -> dict[str, int]:
        """A new segment, put as its parts (:data:`PARTS`): this one's pages, then ``sketches`` (seqs
        above all of this one's); its ``count`` and ``prefix_bits``. A slice at a time: the heap holds
        the new pages' entries, not this segment's.

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
        width = self.sketches.shape[1]
        rows = live_slices(self.sketches, alive, sketches.astype(self.sketches.dtype))
        parts.put_slices("lsh_sketches", self.sketches.dtype, total * width, rows)
        highest = max(int(self.seqs[-1]) if n else 0, int(seqs.max()) if seqs.size else 0)
        parts.put_slices("lsh_seqs", seq_dtype(highest), total, live_slices(self.seqs, alive, seqs))
        dead = np.flatnonzero(~self.alive) if alive is None else np.zeros(0, np.int64)
        parts.put("lsh_dead", dead.astype(np.int64))
        return {"count": total, "prefix_bits": prefix}

    # -- answers -------------------------------------------------------------------------------------
    def query(
        self, v: np.ndarray, band_keys: np.ndarray, bands: int, rows: int, min_matches: int
    ) -> list[tuple[int, int]]:
        """``(seq, count of equal values)`` of the live pages sharing a band with ``v`` (reduced to
        the stored width) and with at least ``min_matches`` equal values, best first, ties oldest first."""
        if not len(self):
            return []
        if _native_query is not None:
            ids, counts = _native_query(
                band_keys,
                [self.buckets.native_args()],
                b"",
                self.sketches,
                self.alive,
                self.sketches.shape[1],
                np.ascontiguousarray(v, dtype=self.sketches.dtype),
                bands,
                rows,
                min_matches,
                self.sketches.dtype.itemsize,
            )
            seqs = self.seqs
            return [(int(seqs[i]), c) for i, c in zip(ids, counts, strict=True)]
        found = self.query_many(v[None, :], band_keys[None, :], bands, rows, min_matches)
        return [(seq, count) for _, seq, count in found]

    def query_many(
        self, batch: np.ndarray, band_keys: np.ndarray, bands: int, rows: int, min_matches: int
    ) -> list[tuple[int, int, int]]:
        """``(query, seq, count)`` for each query of ``batch`` (rows) and each live page it finds
        (as :meth:`query`), ordered by query, then best first, ties oldest first."""
        if not len(self) or not batch.shape[0]:
            return []
        flat = np.ascontiguousarray(band_keys, dtype=np.uint64).ravel()
        parts_q, parts_ids = [], []
        for start in range(0, flat.shape[0], _CHUNK):  # bounds the lookups' temporary arrays
            k, found = self.buckets.lookup(flat[start : start + _CHUNK])
            parts_q.append((k + start) // bands)
            parts_ids.append(found)
        q, ids = np.concatenate(parts_q), np.concatenate(parts_ids)
        if not ids.size:
            return []
        pairs = np.unique((q << 32) | ids)
        q, ids = pairs >> 32, pairs & 0xFFFFFFFF
        live = self.alive[ids]
        q, ids = q[live], ids[live]
        out: list[tuple[int, int, int]] = []
        for start in range(0, q.shape[0], _CHUNK):
            cq, cids = q[start : start + _CHUNK], ids[start : start + _CHUNK]
            counts = self._counts(cids, batch, cq, bands, rows, min_matches)
            ok = counts >= 0
            cq, cids, counts = cq[ok], cids[ok], counts[ok]
            order = np.lexsort((cids, -counts, cq))
            seqs = self.seqs[cids[order]]
            out += zip(cq[order].tolist(), seqs.tolist(), counts[order].tolist(), strict=True)
        if q.shape[0] > _CHUNK:  # a query's candidates may span chunks: order the whole answer
            out.sort(key=lambda t: (t[0], -t[2], t[1]))
        return out

    def _counts(
        self,
        ids: np.ndarray,
        queries: np.ndarray,
        query_of: np.ndarray,
        bands: int,
        rows: int,
        min_matches: int,
    ) -> np.ndarray:
        """Equal values of each candidate with its query when it shares a band and has at least
        ``min_matches``, else -1 (as :meth:`~.lsh.MinHashLSH._counts`)."""
        queries = np.ascontiguousarray(queries, dtype=self.sketches.dtype)
        if _native_verify is not None:
            out = _native_verify(
                self.sketches,
                self.sketches.shape[1],
                np.ascontiguousarray(ids, dtype=np.int64),
                np.ascontiguousarray(query_of, dtype=np.int64),
                queries,
                bands,
                rows,
                min_matches,
                self.sketches.dtype.itemsize,
            )
            return np.frombuffer(out, dtype=np.int32)
        width = bands * rows
        eq = self.sketches[ids] == queries[query_of]
        counts = np.count_nonzero(eq, axis=1)
        ok = counts >= min_matches
        ok &= eq[:, :width].reshape(-1, bands, rows).all(axis=2).any(axis=1)
        return np.where(ok, counts, -1).astype(np.int32)


def _check_pages(pages: int) -> None:
    if pages > MAX_PAGES:
        raise ValueError(f"an LSH segment holds at most {MAX_PAGES} pages")
