"""Sorted (key, id) entries on disk in 4 bytes each: the key's prefix split between a directory and a tag.

The on-disk form of the LSH's buckets (a band key and a page, :mod:`.lsh.lsh_segment`) and of the
simhash tables (a table's key and a row, :mod:`.tables.packed_tables`). An entry names an *id* (a
position in its segment) under a 64-bit key (left-aligned when narrower). Only the key's top
``prefix`` bits are kept, split in two: the high ``cell_bits`` pick a cell of the directory (which
gives where the cell's entries start), the low ``tag_bits`` go into the entry beside the id::

    entry (uint32)  = tag << id_bits | id           id_bits = pages.bit_length()
    cell            = prefix >> tag_bits            tag_bits = min(32 - id_bits, prefix)
                                                    cell_bits = prefix - tag_bits

The split moves with the segment's size (a segment twice as large has one more id bit, one tag bit
less, one cell bit more), but ``prefix_bits`` stays, so every entry can be written again for any size
(:meth:`PackedBuckets.sort_form`): merges and compactions lose nothing. The directory has two to four
cells a page (for 32 bands about 8 to 16 entries a cell), as the 8-byte entries it replaces had.

A prefix shared by another key only adds a candidate: every LSH candidate's bands are checked against
the query's sketch, every table candidate's distance against the query (the simhash tables keep their
whole 32-bit combined key with the default layout: no extra candidate at all).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import numpy as np

from . import array_files
from .array_files import Parts
from .sorted_runs import merge_sorted

try:  # the optional C directory builder and lookup (built by pip install where a compiler exists)
    from ._probe import bucket_directory as _native_directory
    from ._probe import packed_lookup as _native_lookup
    from ._probe import packed_sort_form as _native_sort_form
except ImportError:  # pragma: no cover - depends on the build
    _native_directory = _native_lookup = _native_sort_form = None

ENTRY_FORMAT = "packed32"
"""The manifest's name for this layout (files written before it held 8-byte entries)."""
MAX_PAGES = (1 << 31) - 1
"""Ids take at most 31 bits, so a sort form (``prefix << id_bits | id``) fits 64 bits."""
_CHUNK = 1 << 20


def prefix_bits(bands: int) -> int:
    """Bits of each band key kept: 32, plus one per doubling of bands past 16 (cells of ~8-16 entries)."""
    return 32 + max(0, int(bands).bit_length() - 5)


def split(prefix: int, pages: int) -> tuple[int, int, int]:
    """``(id_bits, tag_bits, cell_bits)`` of a segment of ``pages`` with ``prefix``-bit keys."""
    ids = id_bits(pages)
    tags = min(32 - ids, prefix)
    return ids, tags, prefix - tags


def id_bits(pages: int) -> int:
    """Bits that number ``pages`` ids (at least one)."""
    return max(1, int(pages).bit_length())


def renumbering(alive: np.ndarray) -> np.ndarray:
    """Each id's id once the ids not ``alive`` are dropped (order kept), -1 for those: what
    :meth:`PackedBuckets.merged_forms` renumbers by."""
    return np.where(alive, np.cumsum(alive, dtype=np.int64) - 1, -1)


def sort_form_of(keys: np.ndarray, ids: np.ndarray, pages: int, prefix: int) -> np.ndarray:
    """``prefix << id_bits | id`` of each (key, id) (uint64 keys, left-aligned; ``ids`` broadcast
    against them), for a segment of ``pages``: the value whose order the entries are stored in."""
    form = keys >> np.uint64(64 - prefix)
    form <<= np.uint64(id_bits(pages))
    form |= ids
    return form


def sort_form(keys: np.ndarray, first_id: int, pages: int, prefix: int) -> np.ndarray:
    """:func:`sort_form_of` each band key (``keys``: one row a page, ids from ``first_id``), flat
    and sorted."""
    ids = np.arange(first_id, first_id + keys.shape[0], dtype=np.uint64)[:, None]
    flat = sort_form_of(keys, ids, pages, prefix).ravel()
    flat.sort()
    return flat


class PackedBuckets:
    """Immutable uint32 entries (sorted within each cell) plus the directory of the cells' starts."""

    def __init__(self, entries: np.ndarray, directory: np.ndarray, pages: int, prefix: int) -> None:
        """Checked for size and ends (a lookup checks each cell it reads): ValueError when they do not
        fit ``pages`` pages with ``prefix``-bit key prefixes."""
        if not 0 <= pages < 1 << 32:
            raise ValueError(f"a segment holds less than 2**32 ids, not {pages}")
        if not 1 <= prefix <= 64 - id_bits(pages):
            raise ValueError(f"a {prefix}-bit key prefix does not fit {pages} ids")
        self.pages, self.prefix = pages, prefix
        self.id_bits, self.tag_bits, self.cell_bits = split(prefix, pages)
        n = entries.shape[0]
        if entries.dtype != np.uint32 or entries.ndim != 1:
            raise ValueError(f"bucket entries of {entries.dtype}, not uint32")
        if directory.shape != ((1 << self.cell_bits) + 1,):
            raise ValueError(f"a bucket directory of {directory.shape[0]} cells does not fit {pages} pages")
        if n and (int(directory[0]) != 0 or int(directory[-1]) != n):
            raise ValueError(f"a bucket directory that does not add up to {n} entries")
        self.entries, self.directory = entries, directory

    @classmethod
    def empty(cls, prefix: int = 32) -> PackedBuckets:
        return cls(np.zeros(0, np.uint32), np.zeros(1 + (1 << split(prefix, 0)[2]), np.uint32), 0, prefix)

    @classmethod
    def from_sort_form(cls, form: np.ndarray, pages: int, prefix: int) -> PackedBuckets:
        """Buckets over sorted ``prefix << id_bits(pages) | id`` values (:func:`sort_form`)."""
        bits = split(prefix, pages)[2]
        directory = np.zeros((1 << bits) + 1, dtype=np.int64)
        if _native_directory is not None and form.dtype == np.uint64 and form.flags.c_contiguous:
            _native_directory(form, 32, directory)
        else:
            counts = np.bincount((form >> np.uint64(32)).astype(np.intp), minlength=1 << bits)
            np.cumsum(counts, out=directory[1:])
        entries = form.astype(np.uint32)  # the low 32 bits
        if form.shape[0] < 1 << 32:
            directory = directory.astype(np.uint32)
        return cls(entries, directory, pages, prefix)

    def sort_form(self, pages: int | None = None, *, native: bool | None = None) -> np.ndarray:
        """The entries as :func:`sort_form` values for a segment of ``pages`` (default: this one's):
        one pass in C when built (``native``), else a slice of cells at a time."""
        return self.sort_form_cells(0, self.directory.shape[0] - 1, pages, native=native)

    def sort_form_cells(
        self, first: int, last: int, pages: int | None = None, *, native: bool | None = None
    ) -> np.ndarray:
        """The entries of the cells ``first`` to ``last`` (excluded) as :func:`sort_form` values for a
        segment of ``pages``: in stored order, so sorted."""
        bits = id_bits(self.pages if pages is None else pages)
        if self.prefix + bits > 64:
            raise ValueError(f"a segment of {pages} pages does not fit {self.prefix}-bit prefixes")
        start, end = int(self.directory[first]), int(self.directory[last])
        out = np.empty(max(0, end - start), dtype=np.uint64)
        if _native_sort_form is not None and native is not False:
            entries, directory, dsize, prefix, old_bits = self.native_args()
            entries, directory = np.ascontiguousarray(entries), np.ascontiguousarray(directory)
            _native_sort_form(entries, directory, dsize, prefix, old_bits, bits, out, first, last)
            return out
        mask, shift = np.uint64((1 << self.id_bits) - 1), np.uint64(self.id_bits)
        for low in range(first, last, _CHUNK):  # a slice of cells at a time: bounded temporaries
            bounds = np.asarray(self.directory[low : min(last, low + _CHUNK) + 1], dtype=np.int64)
            lo, hi = int(bounds[0]), int(bounds[-1])
            if int(np.diff(bounds).min(initial=0)) < 0 or hi > self.size:
                raise ValueError("the bucket directory does not fit the entries")
            if lo == hi:
                continue
            cells = np.repeat(np.arange(low, low + bounds.shape[0] - 1, dtype=np.uint64), np.diff(bounds))
            part = self.entries[lo:hi].astype(np.uint64)
            prefixes = (cells << np.uint64(self.tag_bits)) | (part >> shift)
            out[lo - start : hi - start] = (prefixes << np.uint64(bits)) | (part & mask)
        return out

    def merged_forms(
        self, fresh: np.ndarray, pages: int, renumber: np.ndarray | None = None, step: int | None = None
    ) -> Iterator[np.ndarray]:
        """These entries and the sorted ``fresh`` sort form, both for a segment of ``pages``, merged
        and yielded in order a slice of about ``step`` entries at a time (a merge streams them into the
        next generation's files). ``renumber``: each id's new id, negative for an id dropped (ids kept
        in their order, so each slice stays sorted)."""
        step = step or array_files.SLICE_ENTRIES
        bits = id_bits(pages)
        cells = self.directory.shape[0] - 1
        taken, first = 0, 0
        while first < cells:  # the next cells up to about ``step`` entries (at least one cell)
            goal = int(self.directory[first]) + step
            last = int(np.searchsorted(self.directory[first + 1 :], goal, side="right")) + first + 1
            last = min(max(last, first + 1), cells)
            old = self._renumbered(first, last, pages, renumber)
            upto = fresh.size
            if last < cells:  # the fresh entries below the next cell's first prefix
                upto = int(np.searchsorted(fresh, np.uint64((last << self.tag_bits) << bits), side="left"))
            yield merge_sorted(old, fresh[taken:upto]) if upto > taken else old
            taken, first = upto, last
        if taken < fresh.size:
            yield fresh[taken:]

    def _renumbered(self, first: int, last: int, pages: int, renumber: np.ndarray | None) -> np.ndarray:
        if renumber is None:
            return self.sort_form_cells(first, last, pages)
        form = self.sort_form_cells(first, last)  # this segment's own id bits
        ids = (form & np.uint64((1 << self.id_bits) - 1)).astype(np.intp)
        new = renumber[ids]
        keep = new >= 0
        prefixes = form[keep] >> np.uint64(self.id_bits)
        return (prefixes << np.uint64(id_bits(pages))) | new[keep].astype(np.uint64)

    def native_args(self) -> tuple[np.ndarray, np.ndarray, int, int, int]:
        """The C lookups' view: (entries, directory, its itemsize, prefix bits, id bits)."""
        return self.entries, self.directory, self.directory.itemsize, self.prefix, self.id_bits

    @property
    def size(self) -> int:
        return int(self.entries.shape[0])

    @property
    def nbytes(self) -> int:
        return int(self.entries.nbytes + self.directory.nbytes)

    def ids(self) -> np.ndarray:
        """Each entry's id (int64), in stored order."""
        return (self.entries & np.uint32((1 << self.id_bits) - 1)).astype(np.int64)

    def lookup(self, keys: np.ndarray, *, native: bool | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(index into ``keys``, id) of every entry whose prefix equals that of ``keys[k]`` (full
        uint64 keys, left-aligned), as a set (in no particular order). The C lookup (``native``, by default
        when built) and the numpy one give the same pairs."""
        if not self.size or not keys.size:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        if _native_lookup is not None and native is not False:
            wanted = np.ascontiguousarray(keys, dtype=np.uint64)
            entries, directory, dsize, prefix, bits = self.native_args()
            pos, ids = _native_lookup(entries, directory, dsize, prefix, bits, wanted)
            return np.frombuffer(pos, dtype=np.int64), np.frombuffer(ids, dtype=np.int64)
        prefixes = np.asarray(keys, dtype=np.uint64) >> np.uint64(64 - self.prefix)
        cells = (prefixes >> np.uint64(self.tag_bits)).astype(np.intp)
        tags = prefixes & np.uint64((1 << self.tag_bits) - 1)
        lo = self.directory[cells].astype(np.int64)
        sizes = self.directory[cells + 1].astype(np.int64) - lo
        if int(sizes.min()) < 0 or int((lo + sizes).max()) > self.size:
            raise ValueError("the bucket directory does not fit the entries")
        total = int(sizes.sum())
        which = np.repeat(np.arange(keys.shape[0], dtype=np.int64), sizes)
        positions = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(sizes) - sizes - lo, sizes)
        found = self.entries[positions].astype(np.uint64)
        match = (found >> np.uint64(self.id_bits)) == tags[which]
        ids = (found[match] & np.uint64((1 << self.id_bits) - 1)).astype(np.int64)
        return which[match], ids


class BucketParts:
    """Sorted sort-form slices (``prefix << id_bits | id``) of ``total`` entries for a segment of
    ``pages`` with ``prefix``-bit keys become its packed ``entries`` (the low 32 bits of each) as they
    pass, and its ``directory`` (where each cell's entries start) once all have."""

    def __init__(self, total: int, pages: int, prefix: int) -> None:
        self.total = total
        dtype = np.uint32 if total < 1 << 32 else np.int64
        self._counts = np.zeros((1 << split(prefix, pages)[2]) + 1, dtype=dtype)
        self._last = -1

    def entries(self, forms: Iterable[np.ndarray]) -> Iterator[np.ndarray]:
        """Each slice's entries, its cells counted (the slices must come in sorted order)."""
        for form in forms:
            if not form.size:
                continue
            cells = (form >> np.uint64(32)).astype(np.intp)
            first, last = int(cells[0]), int(cells[-1])
            if first < self._last or last >= self._counts.size - 1:
                raise ValueError("bucket entries out of order or past the directory")
            counts = np.bincount(cells - first, minlength=last - first + 1)
            window = self._counts[first + 1 : last + 2]
            np.add(window, counts.astype(window.dtype), out=window)
            self._last = last
            yield form.astype(np.uint32)

    def put(self, parts: Parts, entries: str, directory: str, forms: Iterable[np.ndarray]) -> None:
        """Both parts, under the names ``entries`` and ``directory``."""
        parts.put_slices(entries, np.dtype(np.uint32), self.total, self.entries(forms))
        np.cumsum(self._counts, out=self._counts, dtype=self._counts.dtype)
        parts.put(directory, self._counts)
