"""A MinHash-LSH's state: its sketches, keys and band buckets, and the writes that change them.

:class:`LSHState` keeps what :class:`~.lsh.MinHashLSH` answers from: the sketches in one growing
array (``uint32``, or a byte a value when ``value_bits`` is 8), the keys by id, each sketch's tag,
and the buckets on three levels: a dict of the last inserts, sorted runs of the recent ones
(:mod:`.bucket_runs`) and the bulk loaded at open. Removals are tombstones, dropped by
:meth:`LSHState.compact`. The queries over this state are :class:`~.lsh.MinHashLSH`'s.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from ...fingerprint.bbit import ValueBits
from ..sorted_runs import merge_sorted
from .bucket_runs import BucketRuns
from .lsh_bands import DEFAULT_WEIGHTS, BandHasher, as_sketch, as_sketch_batch, resolve_params
from .lsh_buckets import HI as _HI
from .lsh_buckets import LO as _LO
from .lsh_buckets import SortedBuckets, band_entries

MAX_IDS = 0xFFFFFFFF
"""The most sketches one LSH numbers (a document id is 32 bits of a bucket entry)."""


class LSHState:
    """The sketches, keys, tags and band buckets of a MinHash-LSH, and its writes (add, load, remove,
    compact). Not thread-safe; the owner's lock, if any, covers it."""

    RUN_CAP = 1 << 22
    """The most bucket entries a write merges at once (32 MiB): the longest a write takes does not
    grow with the index; the recent buckets are then about ``size / RUN_CAP + 5`` runs."""

    def __init__(
        self,
        threshold: float = 0.8,
        num_values: int = 128,
        bands: int | None = None,
        rows: int | None = None,
        *,
        weights: tuple[float, float] = DEFAULT_WEIGHTS,
        pending_limit: int = 2048,
        value_bits: int = 32,
    ) -> None:
        self.threshold = float(threshold)
        self.num_values = int(num_values)
        self.bands, self.rows = resolve_params(self.threshold, self.num_values, bands, rows, weights)
        self.value_bits = value_bits
        self._bits = ValueBits(value_bits)
        self.min_matches = self._bits.min_equal(self.threshold, self.num_values)
        self._similarity = [self._bits.similarity(c, self.num_values) for c in range(self.num_values + 1)]
        """The estimate for each count of equal values, computed once: a single query's answers
        without a call per match (the same floats as ``ValueBits.similarity``)."""
        self._hasher = BandHasher(self.bands, self.rows)
        self._dtype = np.dtype(np.uint8 if value_bits == 8 else np.uint32)
        """The sketches' matrix: a byte a value at 8 bits (a quarter of the RAM and of the bytes a
        verification reads), else uint32."""
        self._sketches = np.zeros((1024, self.num_values), dtype=self._dtype)
        self._alive = np.zeros(1024, dtype=bool)
        self._tags = np.zeros(1024, dtype=np.int64)
        """A number the owner keeps beside each sketch (0 when unset): the persistent index's row
        hint (:meth:`tags`); set by :meth:`set_tags`, reset when a key is re-added."""
        self._keys: list[str | None] = []  # by id; None once removed
        self._ids: dict[str, int] = {}
        # buckets, three levels: a dict of the last inserts (full band key -> ids), sorted
        # every ``pending_limit`` inserts (or a batch at once) into a new run; runs are merged
        # geometrically up to RUN_CAP entries (each entry copied about log2(RUN_CAP / batch)
        # times); the bulk loaded at open (``_table``). A query does two directory lookups
        # (lsh_buckets) a level and dict lookups
        self._table = SortedBuckets()
        self._runs = BucketRuns()
        self._pending: dict[int, list[int]] = {}
        self._pending_packed = np.zeros((max(1, pending_limit), self.bands), dtype=np.uint64)
        self._pending_count = 0
        self._dead = 0

    # -- size and lookups ---------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._ids)

    def __contains__(self, key: object) -> bool:
        return key in self._ids

    def get(self, key: str) -> np.ndarray | None:
        """A copy of the sketch stored under ``key``, or None."""
        i = self._ids.get(key)
        return None if i is None else self._sketches[i].astype(np.uint32)

    def keys(self) -> list[str]:
        """Stored keys, oldest first."""
        return [k for k in self._keys if k is not None]

    def tags(self, keys: Iterable[str]) -> list[int]:
        """The tag of each key (0: unset or not stored)."""
        ids, tag = self._ids, self._tags.item
        return [tag(i) if (i := ids.get(key)) is not None else 0 for key in keys]

    def set_tags(self, pairs: Iterable[tuple[str, int]]) -> None:
        """Tag stored keys (keys not stored are skipped); a re-added key starts untagged again."""
        ids, tags = self._ids, self._tags
        for key, tag in pairs:
            i = ids.get(key)
            if i is not None:
                tags[i] = tag

    def prepare(self, sketch: Any) -> tuple[np.ndarray, np.ndarray]:
        """One sketch as this index compares it, and its band keys: what another level over the same
        bands (:class:`~.lsh_segment.LSHSegment`) is asked with."""
        v = self._sketch(sketch)
        return v, self._hasher.keys(v)

    def prepare_many(self, sketches: Any) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`prepare` for a batch: ``(n, num_values)`` values and ``(n, bands)`` band keys."""
        batch = self._batch(sketches)
        return batch, self._hasher.keys_many(batch)

    @property
    def hasher(self) -> BandHasher:
        return self._hasher

    @property
    def dtype(self) -> np.dtype[Any]:
        """The kept values' type: a byte a value at 8 bits, else uint32."""
        return self._dtype

    def similarity_of(self, count: int) -> float:
        """The estimated Jaccard of a sketch with ``count`` equal values (the answers' floats)."""
        return self._similarity[count]

    def oldest_tag(self) -> int | None:
        """The smallest tag of a stored key (None: none stored)."""
        n = len(self._keys)
        tags = self._tags[:n][self._alive[:n]]
        return int(tags.min()) if tags.size else None

    def live(self) -> tuple[list[str], np.ndarray, np.ndarray]:
        """The stored keys, their sketches (as kept) and tags, oldest first."""
        n = len(self._keys)
        ids = np.flatnonzero(self._alive[:n])
        keys = self._keys
        return [keys[i] for i in ids.tolist()], self._sketches[ids], self._tags[ids]

    def _sketch(self, sketch: Any) -> np.ndarray:
        """One sketch as this index keeps and compares it: ``num_values`` values, ``value_bits`` each."""
        return self._bits.reduce(as_sketch(sketch, self.num_values))

    def _batch(self, sketches: Any) -> np.ndarray:
        return self._bits.reduce(as_sketch_batch(sketches, self.num_values))

    # -- writes -------------------------------------------------------------------------

    def add(self, key: str, sketch: Any, *, tag: int = 0) -> None:
        """Store ``sketch`` under ``key`` (replacing what ``key`` held), tagged ``tag``."""
        if not isinstance(key, str):
            raise TypeError(f"keys are str, got {type(key).__name__}")
        v = self._sketch(sketch)
        self._insert(key, v, self._hasher.keys(v))
        self._tags[self._ids[key]] = tag

    def add_many(self, items: Iterable[tuple[str, Any]]) -> int:
        """Store many ``(key, sketch)``; returns the count. Band keys are computed in one batch."""
        items = list(items)
        if not items:
            return 0
        for key, _ in items:
            if not isinstance(key, str):
                raise TypeError(f"keys are str, got {type(key).__name__}")
        batch = self._batch([s for _, s in items])
        keys = self._hasher.keys_many(batch)
        names = [key for key, _ in items]
        if len(names) >= 64 and self._append(names, batch, keys):
            return len(items)
        for key, v, k in zip(names, batch, keys, strict=True):
            self._insert(key, v, k)
        return len(items)

    def add_matrix(self, keys: list[str], sketches: np.ndarray, tags: list[int] | None = None) -> int:
        """:meth:`add_many` for a matrix of sketches ``(n, num_values)`` (a ``uint8`` one at 8 bits
        taken as it is), each key tagged ``tags[i]`` (None: 0): no Python step per sketch when the
        keys are new and distinct."""
        if not all(isinstance(key, str) for key in keys):
            raise TypeError("keys are str")
        narrow = sketches.dtype == np.uint8 == self._dtype and sketches.ndim == 2
        batch = sketches.astype(np.uint32) if narrow else self._batch(sketches)
        if batch.shape != (len(keys), self.num_values):
            raise ValueError(f"{len(keys)} keys for sketches of shape {sketches.shape}")
        band_keys = self._hasher.keys_many(batch)
        if len(keys) >= 64 and self._append(keys, batch, band_keys, tags):
            return len(keys)
        for i, (key, v, k) in enumerate(zip(keys, batch, band_keys, strict=True)):
            self._insert(key, v, k)
            if tags is not None:
                self._tags[self._ids[key]] = tags[i]
        return len(keys)

    def _append(
        self, names: list[str], batch: np.ndarray, band_keys: np.ndarray, tags: list[int] | None = None
    ) -> bool:
        """A batch of new, distinct keys in a few array operations (False: not such a batch)."""
        start, m = len(self._keys), len(names)
        ids = self._ids
        if start + m > MAX_IDS or len(set(names)) != m or not ids.keys().isdisjoint(names):
            return False
        capacity = self._sketches.shape[0]
        if start + m > capacity:
            self._grow(max(start + m, capacity + max(1024, capacity // 4)))
        self._sketches[start : start + m] = batch
        self._alive[start : start + m] = True
        self._tags[start : start + m] = 0 if tags is None else tags
        self._keys.extend(names)
        ids.update(zip(names, range(start, start + m), strict=True))
        entries = (band_keys & _HI) | np.arange(start, start + m, dtype=np.uint64)[:, None]
        entries = entries.ravel()
        entries.sort()
        self._runs.add(entries, self.RUN_CAP)
        return True

    @property
    def _levels(self) -> list[SortedBuckets]:
        """The sorted bucket arrays a query looks up: the bulk, then the runs."""
        return [level for level in (self._table, *self._runs.runs) if level.size]

    def load(self, keys: list[str], sketches: np.ndarray, tags: list[int] | None = None) -> None:
        """Fill an empty index with unique ``keys`` (oldest first): ``add_many``'s result, built
        in a few array operations (a persistent index rebuilt at open: ~5x faster). At 8 bits a
        ``uint8`` matrix (as the store reads it) is taken as it is: no uint32 copy of every sketch.
        ``tags``: each key's tag (:meth:`set_tags` in one array assignment)."""
        narrow = isinstance(sketches, np.ndarray) and sketches.dtype == np.uint8 == self._dtype
        if narrow and (sketches.ndim != 2 or sketches.shape[1] != self.num_values):
            raise ValueError(f"a batch of sketches has shape (n, {self.num_values}), got {sketches.shape}")
        batch = sketches if narrow else self._batch(sketches)
        n = len(keys)
        if len(self._keys) or self._pending_count:
            raise ValueError("load fills an empty index only")
        if batch.shape[0] != n or n > MAX_IDS:
            raise ValueError(f"{n} keys for {batch.shape[0]} sketches (at most 2**32 - 1)")
        ids = dict(zip(keys, range(n), strict=True))
        if len(ids) != n or not all(isinstance(k, str) for k in keys):
            raise ValueError("load needs unique str keys")
        capacity = max(1024, n + n // 4)
        self._sketches = np.zeros((capacity, self.num_values), dtype=self._dtype)
        self._sketches[:n] = batch
        self._alive = np.zeros(capacity, dtype=bool)
        self._alive[:n] = True
        self._tags = np.zeros(capacity, dtype=np.int64)
        if tags is not None:
            self._tags[:n] = tags
        self._keys, self._ids = list(keys), ids
        self._table = SortedBuckets(band_entries(self._hasher, batch))

    def _insert(self, key: str, v: np.ndarray, band_keys: np.ndarray) -> None:
        if key in self._ids:
            self.remove(key)
        i = len(self._keys)
        if i > MAX_IDS:
            self.compact()
            i = len(self._keys)
            if i > MAX_IDS:
                raise OverflowError("a MinHashLSH holds at most 2**32 - 1 sketches")
        if i >= self._sketches.shape[0]:
            self._grow(self._sketches.shape[0] + max(1024, self._sketches.shape[0] // 4))  # +25%: RAM
        self._sketches[i] = v
        self._alive[i] = True
        self._tags[i] = 0
        self._keys.append(key)
        self._ids[key] = i
        pending = self._pending
        for k in band_keys.tolist():
            ids = pending.get(k)
            if ids is None:
                pending[k] = [i]
            else:
                ids.append(i)
        self._pending_packed[self._pending_count] = (band_keys & _HI) | np.uint64(i)
        self._pending_count += 1
        if self._pending_count == self._pending_packed.shape[0]:
            self.flush()

    def _grow(self, capacity: int) -> None:
        """Room for ``capacity`` sketches. The arrays are resized where they are (``realloc``: a
        large block moves by remapping its pages, not by a copy of every sketch inside a write); no
        view of them outlives a call (answers and :meth:`live` are copies)."""
        self._sketches = _resized(self._sketches, (capacity, self.num_values), len(self._keys))
        self._alive = _resized(self._alive, (capacity,), len(self._keys))
        self._tags = _resized(self._tags, (capacity,), len(self._keys))

    def flush(self) -> None:
        """Merge recent inserts (a dict) into the sorted bucket array."""
        if not self._pending_count:
            return
        new = np.sort(self._pending_packed[: self._pending_count].ravel())
        self._pending.clear()
        self._pending_count = 0
        self._runs.add(new, self.RUN_CAP)

    def _merge_recent(self) -> None:
        """Every run into the bulk (compaction's work, not a write's)."""
        merged = self._runs.take()
        if merged is not None:
            self._table = SortedBuckets(merge_sorted(self._table.entries, merged))

    def remove(self, key: str) -> bool:
        """Forget ``key``; True if it was stored. Its buckets are dropped by the next compaction."""
        i = self._ids.pop(key, None)
        if i is None:
            return False
        self._alive[i] = False
        self._keys[i] = None
        self._dead += 1
        if self._dead >= 4096 and self._dead > len(self._ids):
            self.compact()
        return True

    def compact(self) -> None:
        """Drop removed sketches and their bucket entries; ids are renumbered, order kept."""
        self.flush()
        self._merge_recent()
        if not self._dead:
            return
        n = len(self._keys)
        alive = self._alive[:n]
        new_id = np.cumsum(alive, dtype=np.int64) - 1
        entries = self._table.entries
        entry_ids = (entries & _LO).astype(np.int64)
        keep = alive[entry_ids]
        self._table = SortedBuckets((entries[keep] & _HI) | new_id[entry_ids[keep]].astype(np.uint64))
        live = np.flatnonzero(alive)
        capacity = max(1024, int(live.size * 1.25))
        sketches = np.zeros((capacity, self.num_values), dtype=self._dtype)
        sketches[: live.size] = self._sketches[live]
        self._sketches = sketches
        self._alive = np.zeros(capacity, dtype=bool)
        self._alive[: live.size] = True
        tags = np.zeros(capacity, dtype=np.int64)
        tags[: live.size] = self._tags[live]
        self._tags = tags
        self._keys = [self._keys[i] for i in live.tolist()]
        self._ids = {k: j for j, k in enumerate(self._keys)}  # type: ignore[misc]
        self._dead = 0


def _resized(array: np.ndarray, shape: tuple[int, ...], used: int) -> np.ndarray:
    """``array`` with room for ``shape`` (its first ``used`` rows kept, the new ones zero): in place
    when it owns its memory, else a copy."""
    if array.flags.owndata and array.flags.c_contiguous and array.base is None:
        array.resize(shape, refcheck=False)
        return array
    out = np.zeros(shape, dtype=array.dtype)
    out[:used] = array[:used]
    return out
