"""The simhash tables' base generation as stored and mapped: 4 bytes a table entry instead of 8.

In memory (the delta's runs, :class:`~.tables.Segment`) a table entry is a combined key
(``table << key_bits | key``, 4 bytes for the default layout) and a row (4 bytes). The base, written
once and mapped, keeps each entry in one uint32 instead (:mod:`..packed_buckets`): the key's high bits
are a directory's cell, the rest a tag beside the row. The default layout's combined key has 32 bits,
and all 32 are kept (cell + tag): a probe finds exactly the rows it found before, from half the bytes
(16 tables: 64 bytes a fingerprint instead of 128, plus 4 to 8 bytes of directory). A wider key (a
layout for another k) keeps its top 32 bits; the extra rows such a prefix lets through are dropped
by the distance check every candidate gets.
"""

from __future__ import annotations

import numpy as np

from ..array_files import MemoryParts, Parts, live_slices, seq_dtype
from ..packed_buckets import BucketParts, PackedBuckets, renumbering, sort_form_of
from .layouts import Layout
from .tables import MAX_ROWS, Hits, Segment, hits_within

try:  # the optional C probe for single queries (built by pip install where a compiler exists)
    from .._probe import packed_probe as _native_probe
except ImportError:  # pragma: no cover - depends on the build
    _native_probe = None

ENTRY_FORMAT = "packed32"
"""The manifest's name for this layout (table files written before it held keys and rows)."""


def key_width(layout: Layout) -> int:
    """Bits of the layout's combined key."""
    return layout.table_bits + layout.key_bits


def prefix_bits(layout: Layout) -> int:
    """Bits of the combined key an entry keeps: all of them up to 32."""
    return min(32, key_width(layout))


def aligned(layout: Layout, combined: np.ndarray) -> np.ndarray:
    """Combined keys as the top bits of uint64 values (what :class:`PackedBuckets` looks up)."""
    return np.asarray(combined, dtype=np.uint64) << np.uint64(64 - key_width(layout))


class PackedTables:
    """The base generation: packed table entries with their directory, each row's fingerprint and seq."""

    def __init__(self, buckets: PackedBuckets, hashes: np.ndarray, seqs: np.ndarray) -> None:
        self.buckets, self.hashes, self.seqs = buckets, hashes, seqs

    def __len__(self) -> int:
        return int(self.hashes.shape[0])

    @property
    def nbytes(self) -> int:
        return int(self.buckets.nbytes + self.hashes.nbytes + self.seqs.nbytes)

    @classmethod
    def empty(cls, layout: Layout) -> PackedTables:
        return cls(PackedBuckets.empty(prefix_bits(layout)), np.zeros(0, np.uint64), np.zeros(0, np.int64))

    @classmethod
    def from_segment(cls, layout: Layout, segment: Segment) -> PackedTables:
        """The same fingerprints and tables, packed."""
        n, prefix = len(segment), prefix_bits(layout)
        form = _form(layout, segment.keys, segment.rows, 0, n, prefix)
        return cls(PackedBuckets.from_sort_form(form, n, prefix), segment.hashes, segment.seqs)

    def check(self, layout: Layout) -> str | None:
        """A reason why this generation is inconsistent, or None (cheap structural checks)."""
        n = len(self)
        if self.seqs.shape != (n,) or self.seqs.dtype != np.int64 or self.hashes.dtype != np.uint64:
            return "fingerprint and sequence arrays disagree"
        if self.buckets.size != n * layout.num_tables or self.buckets.pages != n:
            return f"table entries hold {self.buckets.size} entries, expected {n * layout.num_tables}"
        if self.buckets.prefix != prefix_bits(layout):
            return f"table entries keep {self.buckets.prefix} key bits, not {prefix_bits(layout)}"
        return None

    # -- answers -------------------------------------------------------------------------------------
    def probe(self, layout: Layout, query: np.ndarray, combined: np.ndarray, k: int) -> Hits:
        """Every row within ``k`` of each query (``combined``: the queries' keys, shape (q, tables))."""
        if not len(self):
            return Hits.empty()
        which, rows = self.buckets.lookup(aligned(layout, combined.ravel()))
        if not rows.size:
            return Hits.empty()
        if int(rows.max()) >= len(self):
            raise ValueError("a table entry names a row past the fingerprints (damaged table)")
        return hits_within(query, which // layout.num_tables, rows, self.hashes, self.seqs, k)

    def probe_one(self, layout: Layout, query: int, k: int) -> list[tuple[int, int, int]]:
        """``(seq, simhash, distance)`` of every row within ``k`` of one query: one C call when built."""
        if not len(self):
            return []
        if _native_probe is not None:
            shift, mask, outs = layout.segment_arrays
            entries, directory, dsize, prefix, bits = self.buckets.native_args()
            return _native_probe(
                entries, directory, dsize, prefix, bits, self.hashes, self.seqs, shift, mask, outs,
                layout.num_tables, shift.shape[1], layout.key_bits, key_width(layout), query, k,
            )  # fmt: skip
        q = np.array([query], dtype=np.uint64)
        hits = self.probe(layout, q, layout.combined_keys(q), k)
        return list(zip(hits.seq.tolist(), hits.simhash.tolist(), hits.distance.tolist(), strict=True))

    # -- the next generation ---------------------------------------------------------------------------
    def merged(self, layout: Layout, other: Segment, dead: np.ndarray | None = None) -> PackedTables:
        """This generation plus ``other`` (newer rows), dropping rows whose seq is in ``dead``, in
        memory (:meth:`write_merged` into arrays)."""
        parts = MemoryParts()
        self.write_merged(parts, layout, other, dead)
        got = parts.arrays
        pages = int(got["hashes"].shape[0])
        buckets = PackedBuckets(got["entries"], got["directory"], pages, prefix_bits(layout))
        return PackedTables(buckets, got["hashes"], got["seqs"].astype(np.int64))

    def write_merged(
        self, parts: Parts, layout: Layout, other: Segment, dead: np.ndarray | None = None
    ) -> dict[str, int]:
        """This generation plus ``other`` (newer rows), dropping rows whose seq is in ``dead``, put as
        the next generation's parts (``entries``, ``directory``, ``hashes``, ``seqs``; seqs as uint32
        while they fit): its ``count`` and ``prefix_bits``. Linear in the sizes (each entry written
        again for the larger split, one merge, no re-sort of the base), a slice at a time: the heap
        holds ``other``'s entries, not this generation's."""
        n, renumber, alive = len(self), None, None
        if dead is not None and dead.size:
            other = other.without(dead)
            if n:
                alive = ~np.isin(self.seqs, dead)
                if alive.all():
                    alive = None
                else:
                    renumber = renumbering(alive)
        kept = n if alive is None else int(np.count_nonzero(alive))
        total, prefix = kept + len(other), prefix_bits(layout)
        if total > MAX_ROWS:
            raise ValueError(f"a segment holds at most {MAX_ROWS} fingerprints")
        fresh = _form(layout, other.keys, other.rows, kept, total, prefix)
        forms = self.buckets.merged_forms(fresh, total, renumber)
        BucketParts(total * layout.num_tables, total, prefix).put(parts, "entries", "directory", forms)
        parts.put_slices("hashes", np.dtype(np.uint64), total, live_slices(self.hashes, alive, other.hashes))
        highest = max(int(self.seqs.max()) if n else 0, int(other.seqs.max()) if len(other) else 0)
        parts.put_slices("seqs", seq_dtype(highest), total, live_slices(self.seqs, alive, other.seqs))
        return {"count": total, "prefix_bits": prefix}


def _form(
    layout: Layout, keys: np.ndarray, rows: np.ndarray, first: int, pages: int, prefix: int
) -> np.ndarray:
    """A segment's (combined key, row) entries as sorted sort-form values for ``pages`` ids, rows
    raised by ``first``. A segment's pairs are sorted by (key, row), which a key cut short can
    reorder: a stable sort (about linear on sorted input) makes sure."""
    ids = np.asarray(rows, dtype=np.uint64) + np.uint64(first)
    form = sort_form_of(aligned(layout, keys), ids, pages, prefix)
    form.sort(kind="stable")
    return form
