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

from ..packed_buckets import PackedBuckets, id_bits, sort_form_of
from ..sorted_runs import merge_sorted
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
        """This generation plus ``other`` (newer rows), dropping rows whose seq is in ``dead``: linear
        in the sizes (each entry written again for the larger split, one merge, no re-sort of the base)."""
        base = self.without(dead) if dead is not None and dead.size else self
        extra = other.without(dead) if dead is not None and dead.size else other
        if not len(extra):
            return base
        n, total, prefix = len(base), len(base) + len(extra), prefix_bits(layout)
        if total > MAX_ROWS:
            raise ValueError(f"a segment holds at most {MAX_ROWS} fingerprints")
        fresh = _form(layout, extra.keys, extra.rows, n, total, prefix)
        form = merge_sorted(base.buckets.sort_form(total), fresh) if n else fresh
        return PackedTables(
            PackedBuckets.from_sort_form(form, total, prefix),
            np.concatenate([base.hashes, extra.hashes]),
            np.concatenate([base.seqs, extra.seqs]),
        )

    def without(self, dead: np.ndarray) -> PackedTables:
        """A copy without the rows whose seq is in ``dead`` (rows renumbered, order kept)."""
        alive = ~np.isin(self.seqs, dead)
        if alive.all():
            return self
        pages = int(np.count_nonzero(alive))
        renumber = np.cumsum(alive, dtype=np.int64) - 1
        ids = self.buckets.ids()
        keep = alive[ids]
        prefixes = self.buckets.sort_form()[keep] >> np.uint64(self.buckets.id_bits)
        # rows renumbered in their order: the (prefix, row) order is kept, still sorted
        form = (prefixes << np.uint64(id_bits(pages))) | renumber[ids[keep]].astype(np.uint64)
        return PackedTables(
            PackedBuckets.from_sort_form(form, pages, self.buckets.prefix),
            np.ascontiguousarray(self.hashes[alive]),
            np.ascontiguousarray(self.seqs[alive]),
        )


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
