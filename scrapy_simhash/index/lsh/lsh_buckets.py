"""In-memory LSH buckets: every (band key, document id) in one sorted ``uint64`` array.

An entry is ``band key's high 32 bits << 32 | id`` (8 bytes per band and document). Band keys
are uniform hashes, so a directory over their top bits (about 8 entries per cell, 0.5 byte per
entry) finds a bucket in one read, and the bucket is within a short window after it: a
lookup is a gather of a few contiguous entries instead of a binary search through a large
array (which costs one cache miss per level). Cells longer than the window (many documents
with the same band: mass duplicates) fall back to a binary search, so skew costs only the
keys that hit it. The prefix is 32 bits of the 64-bit key: a prefix collision only adds a
candidate, which the index's band check removes.
"""

from __future__ import annotations

import numpy as np

from ..sorted_runs import merge_sorted as merge_sorted
from .lsh_bands import BandHasher, keys_in_slices

try:  # the optional C lookup (built by pip install where a compiler exists); numpy otherwise
    from .._probe import bucket_directory as _native_directory
    from .._probe import bucket_lookup as _native_lookup
except ImportError:  # pragma: no cover - depends on the build
    _native_lookup = _native_directory = None

HI = np.uint64(0xFFFFFFFF00000000)
LO = np.uint64(0xFFFFFFFF)
_EMPTY = np.zeros(0, dtype=np.int64)


def _directory(entries: np.ndarray, bits: int) -> np.ndarray:
    """The start of each of the ``2**bits`` cells (top bits of the sorted entries), and the end: in
    one pass in C when built (a write builds one for each new sorted run), else by counting."""
    directory = np.zeros((1 << bits) + 1, dtype=np.int64)
    if _native_directory is not None and entries.dtype == np.uint64 and entries.flags.c_contiguous:
        _native_directory(entries, 64 - bits, directory)
        return directory
    counts = np.bincount((entries >> np.uint64(64 - bits)).astype(np.intp), minlength=1 << bits)
    np.cumsum(counts, out=directory[1:])
    return directory


def band_entries(hasher: BandHasher, sketches: np.ndarray, first_id: int = 0) -> np.ndarray:
    """The sorted bucket entries of ``sketches`` (rows), numbered from ``first_id``."""
    entries = keys_in_slices(hasher, sketches)
    entries &= HI
    entries |= np.arange(first_id, first_id + sketches.shape[0], dtype=np.uint64)[:, None]
    flat = entries.ravel()
    flat.sort()
    return flat


class SortedBuckets:
    """Immutable sorted entries plus a directory over the top bits of the key."""

    WINDOW_CAP = 64

    def __init__(
        self, entries: np.ndarray | None = None, directory: np.ndarray | None = None, width: int | None = None
    ) -> None:
        """``directory`` and ``width``: those this class built for ``entries`` before (kept on disk
        with them): the directory is checked for size and ends, neither is recomputed (a lookup
        checks each cell it reads)."""
        self.entries = np.zeros(0, dtype=np.uint64) if entries is None else entries
        n = self.entries.shape[0]
        bits = min(32, max(1, (max(n, 16) // 8).bit_length() - 1))
        self.shift = np.uint64(64 - bits)
        if directory is None:
            directory = _directory(self.entries, bits)
            counts = np.diff(directory)
            self.directory = directory.astype(np.uint32) if n < 2**32 else directory
        else:
            if directory.shape != ((1 << bits) + 1,) or int(directory[0]) != 0 or int(directory[-1]) != n:
                raise ValueError(f"a bucket directory of {directory.shape[0]} cells does not fit {n} entries")
            self.directory = directory
            if width is not None:
                self._set_width(width)
                return
            counts = np.diff(directory.astype(np.int64))
        # the window covers all but the longest 0.1% of cells: a few long ones (clusters of
        # near-duplicates share their bands) would otherwise widen every lookup's gather
        typical = int(np.partition(counts, int(counts.size * 0.999))[int(counts.size * 0.999)]) if n else 0
        self._set_width(int(min(max(typical, 1 if n else 0), counts.max(initial=0), self.WINDOW_CAP)))

    def _set_width(self, width: int) -> None:
        if not 0 <= width <= self.WINDOW_CAP:
            raise ValueError(f"a bucket window of {width} entries")
        self.width = width
        self._offsets = np.arange(self.width, dtype=np.int64)
        self._last = max(0, self.entries.shape[0] - 1)

    @classmethod
    def from_parts(cls, entries: np.ndarray, directory: np.ndarray, width: int) -> SortedBuckets:
        """Buckets over stored ``entries``, ``directory`` and ``width`` (no pass over either array)."""
        return cls(entries, directory, width)

    def merged(self, new: np.ndarray) -> SortedBuckets:
        """These entries and the sorted ``new`` ones: a sorted insertion; the directory by adding the
        new entries' counts while the cell size stays (it doubles with the entries), else rebuilt."""
        if not new.size:
            return SortedBuckets(self.entries, self.directory, self.width) if self.size else SortedBuckets()
        entries = merge_sorted(self.entries, new)
        n = entries.shape[0]
        bits = min(32, max(1, (max(n, 16) // 8).bit_length() - 1))
        if not self.size or np.uint64(64 - bits) != self.shift or n >= 2**32:
            return SortedBuckets(entries)
        counts = np.bincount((new >> self.shift).astype(np.intp), minlength=1 << bits)
        directory = self.directory.astype(np.int64)
        directory[1:] += np.cumsum(counts)
        return SortedBuckets(entries, directory.astype(np.uint32))

    def native_args(self) -> tuple[np.ndarray, np.ndarray, int, int]:
        """The C lookups' view of these buckets: (entries, directory, its itemsize, shift)."""
        return self.entries, self.directory, self.directory.itemsize, int(self.shift)

    @property
    def size(self) -> int:
        return int(self.entries.shape[0])

    @property
    def nbytes(self) -> int:
        return int(self.entries.nbytes + self.directory.nbytes)

    def lookup_ids(self, hi: np.ndarray) -> np.ndarray:
        """The ids (uint64, repeats possible) of the entries whose key prefix is in ``hi``:
        :meth:`lookup` for one query, in as few numpy calls as possible."""
        if not self.entries.shape[0]:
            return _EMPTY
        if _native_lookup is not None:
            return self.lookup(hi)[1]
        cell = (hi >> self.shift).astype(np.intp)
        lo = self.directory[cell]
        size = self.directory[cell + 1] - lo
        if int(size.max()) > self.width:
            return self.lookup(hi)[1]
        vals = self.entries[np.minimum(lo[:, None] + self._offsets, self._last)]
        match = (self._offsets < size[:, None]) & ((vals & HI) == hi[:, None])
        return vals[match] & LO

    def lookup(self, hi: np.ndarray, *, native: bool | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(index into ``hi``, id) of every entry whose key prefix equals ``hi[k]`` (``hi`` holds
        prefixes ``key & HI``). The C lookup (``native``, by default when built) gives the same
        pairs as the numpy path, possibly in another order (callers treat them as a set)."""
        n = self.entries.shape[0]
        if not n or not hi.size:
            return _EMPTY, _EMPTY
        if _native_lookup is not None and native is not False:
            entries = np.ascontiguousarray(self.entries, dtype=np.uint64)
            directory = np.ascontiguousarray(self.directory)
            prefixes = np.ascontiguousarray(hi, dtype=np.uint64)
            pos, ids = _native_lookup(entries, directory, directory.itemsize, int(self.shift), prefixes)
            return np.frombuffer(pos, dtype=np.int64), np.frombuffer(ids, dtype=np.int64)
        cell = (hi >> self.shift).astype(np.intp)
        lo = self.directory[cell].astype(np.int64)
        size = self.directory[cell + 1].astype(np.int64) - lo
        keys_of, ids = [], []
        w = self.width
        if w:
            offsets = np.arange(w)
            vals = self.entries[np.minimum(lo[:, None] + offsets, n - 1)]
            match = (offsets < size[:, None]) & ((vals & HI) == hi[:, None])
            match &= (size <= w)[:, None]
            k, c = np.nonzero(match)
            keys_of.append(k.astype(np.int64))
            ids.append((vals[k, c] & LO).astype(np.int64))
        big = np.flatnonzero(size > w)
        if big.size:  # cells longer than the window: binary search
            a = np.searchsorted(self.entries, hi[big], "left")
            z = np.searchsorted(self.entries, hi[big] | LO, "right")
            sizes = z - a
            total = int(sizes.sum())
            starts = np.repeat(a - np.cumsum(sizes) + sizes, sizes)
            keys_of.append(np.repeat(big, sizes).astype(np.int64))
            ids.append((self.entries[starts + np.arange(total)] & LO).astype(np.int64))
        if len(ids) == 1:
            return keys_of[0], ids[0]
        return np.concatenate(keys_of), np.concatenate(ids)
