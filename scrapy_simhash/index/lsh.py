"""MinHash-LSH in memory: candidates by band buckets, answers verified by estimated Jaccard.

A sketch is a ``uint32`` numpy array of ``num_values`` MinHash values (or any object with such
an array as ``.values``). The estimated Jaccard similarity of two sketches is the fraction of
positions where they are equal. The index cuts the first ``bands * rows`` positions into
``bands`` bands of ``rows`` values; two sketches are *candidates* when at least one band is
equal in both, and a candidate is *returned* only when its estimated Jaccard is at least the
threshold. So an answer never holds a pair below the threshold by estimate, and it holds
exactly the stored sketches that share a band with the query and pass the threshold.

Band keys (:func:`band_keys`) are 64-bit, defined here so that a storage layer can keep the
buckets (band key -> document ids) anywhere. In memory the buckets live in one sorted
``uint64`` array of ``band key's high 32 bits << 32 | document id`` (8 bytes per band and
document), plus a small dict of recent inserts merged into it in batches; sketches live in
one growing ``uint32`` array; removals are tombstones, dropped by :meth:`MinHashLSH.compact`.
"""

from __future__ import annotations

from collections.abc import Iterable
from math import comb
from typing import Any

import numpy as np

from .lsh_buckets import HI as _HI
from .lsh_buckets import LO as _LO
from .lsh_buckets import SortedBuckets, merge_sorted

_M64 = (1 << 64) - 1
_FMIX1 = np.uint64(0xFF51AFD7ED558CCD)
_FMIX2 = np.uint64(0xC4CEB9FE1A85EC53)
_MULTIPLIER_SEED = 0x6D696E68617368  # "minhash"
_OFFSET_SEED = 0x6C7368  # "lsh"
_MAX_IDS = 0xFFFFFFFF
DEFAULT_WEIGHTS = (0.05, 0.95)


def splitmix64(seed: int, count: int) -> np.ndarray:
    """The first ``count`` outputs of Vigna's splitmix64 generator from ``seed`` (uint64)."""
    out = np.empty(count, dtype=np.uint64)
    state = seed & _M64
    for i in range(count):
        state = (state + 0x9E3779B97F4A7C15) & _M64
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _M64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _M64
        out[i] = z ^ (z >> 31)
    return out


def fmix64(h: np.ndarray) -> np.ndarray:
    """MurmurHash3's 64-bit finaliser (a bijection that spreads every input bit), elementwise."""
    h = h ^ (h >> np.uint64(33))
    h *= _FMIX1
    h ^= h >> np.uint64(33)
    h *= _FMIX2
    h ^= h >> np.uint64(33)
    return h


class BandHasher:
    """The 64-bit key of each band of a sketch, for ``bands`` bands of ``rows`` values.

    ``key[t] = fmix64(O[t] + sum_j M[t*rows + j] * v[t*rows + j]  mod 2**64)`` where ``v`` are
    the sketch values as unsigned integers, ``M`` the first ``bands * rows`` outputs of
    :func:`splitmix64` seeded with ``0x6D696E68617368`` each forced odd (``| 1``), ``O`` the first
    ``bands`` outputs seeded with ``0x6C7368``. Multilinear hashing keeps collisions of
    different bands rare (about 2**-32 at worst) and numpy computes it for a whole batch at
    once; multipliers depend on the absolute position, so equal values in different bands
    give different keys. A collision only adds a candidate: answers check band equality.
    """

    def __init__(self, bands: int, rows: int) -> None:
        self.bands, self.rows = bands, rows
        self.multipliers = splitmix64(_MULTIPLIER_SEED, bands * rows) | np.uint64(1)
        self.offsets = splitmix64(_OFFSET_SEED, bands)

    def keys(self, sketch: np.ndarray) -> np.ndarray:
        """Band keys of one sketch: ``uint64`` array of shape ``(bands,)``."""
        width = self.bands * self.rows
        prod = sketch[:width].astype(np.uint64) * self.multipliers
        return fmix64(prod.reshape(self.bands, self.rows).sum(axis=1, dtype=np.uint64) + self.offsets)

    def keys_many(self, sketches: np.ndarray, chunk: int = 65536) -> np.ndarray:
        """Band keys of a batch: ``uint64`` array of shape ``(n, bands)``."""
        n, width = sketches.shape[0], self.bands * self.rows
        out = np.empty((n, self.bands), dtype=np.uint64)
        for start in range(0, n, chunk):
            part = sketches[start : start + chunk, :width].astype(np.uint64)
            part *= self.multipliers
            sums = part.reshape(-1, self.bands, self.rows).sum(axis=2, dtype=np.uint64)
            out[start : start + chunk] = fmix64(sums + self.offsets)
        return out


def band_keys(sketch: Any, bands: int, rows: int) -> np.ndarray:
    """The 64-bit band keys of ``sketch`` (see :class:`BandHasher` for the definition)."""
    return BandHasher(bands, rows).keys(as_sketch(sketch))


def _error_integrals(
    threshold: float, num_values: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(bands, rows, FP, FN) over every ``bands * rows <= num_values``, by Gauss-Legendre quadrature.

    The integrands are polynomials of degree ``bands * rows <= num_values``; a rule with
    ``num_values // 2 + 1`` points integrates them exactly (up to rounding).
    """
    pairs = [(b, r) for b in range(1, num_values + 1) for r in range(1, num_values // b + 1)]
    b = np.array([p[0] for p in pairs], dtype=np.float64)[:, None]
    r = np.array([p[1] for p in pairs], dtype=np.float64)[:, None]
    nodes, weights = np.polynomial.legendre.leggauss(max(8, num_values // 2 + 1))

    def integral(lo: float, hi: float, miss: bool) -> np.ndarray:
        s = (hi - lo) / 2 * nodes + (hi + lo) / 2
        none_equal = (1 - s[None, :] ** r) ** b  # P(no band equal) at similarity s
        f = none_equal if miss else 1 - none_equal
        return (f * weights).sum(axis=1) * (hi - lo) / 2

    fp, fn = integral(0.0, threshold, False), integral(threshold, 1.0, True)
    return b[:, 0].astype(int), r[:, 0].astype(int), fp, fn


def optimal_params(
    threshold: float, num_values: int, weights: tuple[float, float] = DEFAULT_WEIGHTS
) -> tuple[int, int]:
    """Bands and rows (``bands * rows <= num_values``) minimising ``w_fp * FP + w_fn * FN``.

    With ``P(s) = 1 - (1 - s**rows)**bands``, the probability that two sketches of Jaccard
    ``s`` share at least one band::

        FP = integral over s in [0, threshold] of P(s) ds          (candidates below threshold)
        FN = integral over s in [threshold, 1] of 1 - P(s) ds      (misses at or above it)

    as in datasketch's ``_optimal_param`` (ties go to fewer bands, then fewer rows). The
    default weights (0.05, 0.95) favour recall: a false positive costs one vectorised
    comparison (answers are verified), a false negative loses a duplicate. datasketch's
    default is (0.5, 0.5).
    """
    _check_threshold(threshold)
    w_fp, w_fn = weights
    b, r, fp, fn = _error_integrals(threshold, num_values)
    error = w_fp * fp + w_fn * fn
    best = int(np.flatnonzero(error == error.min())[0])  # order is bands, then rows, ascending
    return int(b[best]), int(r[best])


def recall_at(similarity: float, bands: int, rows: int, num_values: int, min_matches: int) -> float:
    """P(a stored sketch is returned) for a true Jaccard ``similarity``, positions independent.

    Returned = at least one band equal AND at least ``min_matches`` equal positions overall:
    the S-curve of the bands combined with the binomial noise of the estimate.
    """
    s = similarity
    band = np.array([comb(rows, k) * s**k * (1 - s) ** (rows - k) for k in range(rows + 1)])
    no_full = band.copy()
    no_full[-1] = 0.0
    rest = num_values - bands * rows
    total = np.array([comb(rest, k) * s**k * (1 - s) ** (rest - k) for k in range(rest + 1)])
    total_no_full = total.copy()
    for _ in range(bands):
        total = np.convolve(total, band)
        total_no_full = np.convolve(total_no_full, no_full)
    return float(total[min_matches:].sum() - total_no_full[min_matches:].sum())


def min_matches_for(threshold: float, num_values: int) -> int:
    """The fewest equal positions ``m`` with ``m / num_values >= threshold`` (float comparison)."""
    m = max(0, int(np.ceil(threshold * num_values)))
    while m > 0 and (m - 1) / num_values >= threshold:
        m -= 1
    while m / num_values < threshold:
        m += 1
    return m


def _check_threshold(threshold: float) -> None:
    if not 0.0 < threshold <= 1.0:
        raise ValueError(f"threshold must be in (0, 1], got {threshold!r}")


def resolve_params(
    threshold: float,
    num_values: int,
    bands: int | None,
    rows: int | None,
    weights: tuple[float, float] = DEFAULT_WEIGHTS,
) -> tuple[int, int]:
    """Bands and rows: derived from the threshold, or given (one given: the other fills num_values)."""
    _check_threshold(threshold)
    if num_values < 1:
        raise ValueError(f"num_values must be positive, got {num_values!r}")
    if bands is None and rows is None:
        return optimal_params(threshold, num_values, weights)
    if bands is None:
        bands = num_values // rows if rows and rows > 0 else 0
    if rows is None:
        rows = num_values // bands if bands > 0 else 0
    if bands < 1 or rows < 1 or bands * rows > num_values:
        raise ValueError(f"need bands >= 1, rows >= 1, bands * rows <= {num_values}; got {bands} x {rows}")
    return bands, rows


def as_sketch(sketch: Any, num_values: int | None = None) -> np.ndarray:
    """A sketch as a 1-D ``uint32`` array: a numpy array or an object with ``.values``."""
    values = getattr(sketch, "values", None)
    if isinstance(values, np.ndarray):
        sketch = values
    arr = np.asarray(sketch)
    if arr.dtype != np.uint32:
        if arr.dtype.kind not in "iu" or (arr.size and (arr.min() < 0 or arr.max() > 0xFFFFFFFF)):
            raise TypeError(f"a sketch holds uint32 values, got dtype {arr.dtype}")
        arr = arr.astype(np.uint32)
    if arr.ndim != 1 or (num_values is not None and arr.shape[0] != num_values):
        want = f"({num_values},)" if num_values is not None else "(num_values,)"
        raise ValueError(f"a sketch has shape {want}, got {arr.shape}")
    return arr


def as_sketch_batch(sketches: Any, num_values: int | None = None) -> np.ndarray:
    """A batch of sketches as a 2-D ``uint32`` array ``(n, num_values)``."""
    if not isinstance(sketches, np.ndarray):
        sketches = [as_sketch(s, num_values) for s in sketches]
        if not sketches:
            return np.zeros((0, num_values or 0), dtype=np.uint32)
        sketches = np.stack(sketches)
    arr = sketches
    if arr.dtype != np.uint32:
        if arr.dtype.kind not in "iu" or (arr.size and (arr.min() < 0 or arr.max() > 0xFFFFFFFF)):
            raise TypeError(f"sketches hold uint32 values, got dtype {arr.dtype}")
        arr = arr.astype(np.uint32)
    if arr.ndim != 2 or (num_values is not None and arr.shape[1] != num_values):
        raise ValueError(f"a batch of sketches has shape (n, {num_values or 'num_values'}), got {arr.shape}")
    return arr


class MinHashLSH:
    """An in-memory MinHash-LSH index with verified answers.

    ``query`` returns ``[(key, estimated_jaccard)]`` for the stored sketches sharing a band
    with the query whose estimate is ``>= threshold``, best first, ties oldest first.
    Adding an existing key replaces its sketch (it becomes the newest). Not thread-safe.
    """

    def __init__(
        self,
        threshold: float = 0.8,
        num_values: int = 128,
        bands: int | None = None,
        rows: int | None = None,
        *,
        weights: tuple[float, float] = DEFAULT_WEIGHTS,
        pending_limit: int = 2048,
    ) -> None:
        self.threshold = float(threshold)
        self.num_values = int(num_values)
        self.bands, self.rows = resolve_params(self.threshold, self.num_values, bands, rows, weights)
        self.min_matches = min_matches_for(self.threshold, self.num_values)
        self._hasher = BandHasher(self.bands, self.rows)
        self._sketches = np.zeros((1024, self.num_values), dtype=np.uint32)
        self._alive = np.zeros(1024, dtype=bool)
        self._keys: list[str | None] = []  # by id; None once removed
        self._ids: dict[str, int] = {}
        # buckets, three levels: a dict of the last inserts (full band key -> ids), merged
        # every ``pending_limit`` inserts into a small sorted array (``_recent``), merged into
        # the big one (``_table``) when it exceeds an eighth of it: each entry is copied
        # O(log N) times; a query does two directory lookups (lsh_buckets) and dict lookups
        self._table = SortedBuckets()
        self._recent = SortedBuckets()
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
        return None if i is None else self._sketches[i].copy()

    def keys(self) -> list[str]:
        """Stored keys, oldest first."""
        return [k for k in self._keys if k is not None]

    # -- writes -------------------------------------------------------------------------

    def add(self, key: str, sketch: Any) -> None:
        """Store ``sketch`` under ``key`` (replacing what ``key`` held)."""
        if not isinstance(key, str):
            raise TypeError(f"keys are str, got {type(key).__name__}")
        v = as_sketch(sketch, self.num_values)
        self._insert(key, v, self._hasher.keys(v))

    def add_many(self, items: Iterable[tuple[str, Any]]) -> int:
        """Store many ``(key, sketch)``; returns the count. Band keys are computed in one batch."""
        items = list(items)
        if not items:
            return 0
        for key, _ in items:
            if not isinstance(key, str):
                raise TypeError(f"keys are str, got {type(key).__name__}")
        batch = as_sketch_batch([s for _, s in items], self.num_values)
        keys = self._hasher.keys_many(batch)
        names = [key for key, _ in items]
        if len(names) >= 64 and self._append(names, batch, keys):
            return len(items)
        for key, v, k in zip(names, batch, keys, strict=True):
            self._insert(key, v, k)
        return len(items)

    def _append(self, names: list[str], batch: np.ndarray, band_keys: np.ndarray) -> bool:
        """A batch of new, distinct keys in a few array operations (False: not such a batch)."""
        start, m = len(self._keys), len(names)
        ids = self._ids
        if start + m > _MAX_IDS or len(set(names)) != m or any(key in ids for key in names):
            return False
        capacity = self._sketches.shape[0]
        if start + m > capacity:
            self._grow(max(start + m, capacity + max(1024, capacity // 4)))
        self._sketches[start : start + m] = batch
        self._alive[start : start + m] = True
        self._keys.extend(names)
        ids.update(zip(names, range(start, start + m), strict=True))
        entries = (band_keys & _HI) | np.arange(start, start + m, dtype=np.uint64)[:, None]
        entries = entries.ravel()
        entries.sort()
        self._recent = SortedBuckets(merge_sorted(self._recent.entries, entries))
        if self._recent.size > max(1 << 20, self._table.size // 8):
            self._merge_recent()
        return True

    def load(self, keys: list[str], sketches: np.ndarray) -> None:
        """Fill an empty index with unique ``keys`` (oldest first): ``add_many``'s result, built
        in a few array operations (a persistent index rebuilt at open: ~5x faster)."""
        batch = as_sketch_batch(sketches, self.num_values)
        n = len(keys)
        if len(self._keys) or self._pending_count:
            raise ValueError("load fills an empty index only")
        if batch.shape[0] != n or n > _MAX_IDS:
            raise ValueError(f"{n} keys for {batch.shape[0]} sketches (at most 2**32 - 1)")
        ids = dict(zip(keys, range(n), strict=True))
        if len(ids) != n or not all(isinstance(k, str) for k in keys):
            raise ValueError("load needs unique str keys")
        capacity = max(1024, n + n // 4)
        self._sketches = np.zeros((capacity, self.num_values), dtype=np.uint32)
        self._sketches[:n] = batch
        self._alive = np.zeros(capacity, dtype=bool)
        self._alive[:n] = True
        self._keys, self._ids = list(keys), ids
        entries = self._hasher.keys_many(batch) & _HI
        entries |= np.arange(n, dtype=np.uint64)[:, None]
        entries = entries.ravel()
        entries.sort()
        self._table = SortedBuckets(entries)

    def _insert(self, key: str, v: np.ndarray, band_keys: np.ndarray) -> None:
        if key in self._ids:
            self.remove(key)
        i = len(self._keys)
        if i > _MAX_IDS:
            self.compact()
            i = len(self._keys)
            if i > _MAX_IDS:
                raise OverflowError("a MinHashLSH holds at most 2**32 - 1 sketches")
        if i >= self._sketches.shape[0]:
            self._grow(self._sketches.shape[0] + max(1024, self._sketches.shape[0] // 4))  # +25%: RAM
        self._sketches[i] = v
        self._alive[i] = True
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
        sketches = np.zeros((capacity, self.num_values), dtype=np.uint32)
        sketches[: len(self._keys)] = self._sketches[: len(self._keys)]
        alive = np.zeros(capacity, dtype=bool)
        alive[: len(self._keys)] = self._alive[: len(self._keys)]
        self._sketches, self._alive = sketches, alive

    def flush(self) -> None:
        """Merge recent inserts (a dict) into the sorted bucket array."""
        if not self._pending_count:
            return
        new = np.sort(self._pending_packed[: self._pending_count].ravel())
        self._recent = SortedBuckets(merge_sorted(self._recent.entries, new))
        self._pending.clear()
        self._pending_count = 0
        if self._recent.size > max(1 << 20, self._table.size // 8):
            self._merge_recent()

    def _merge_recent(self) -> None:
        if self._recent.size:
            self._table = SortedBuckets(merge_sorted(self._table.entries, self._recent.entries))
            self._recent = SortedBuckets()

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
        sketches = np.zeros((capacity, self.num_values), dtype=np.uint32)
        sketches[: live.size] = self._sketches[live]
        self._sketches = sketches
        self._alive = np.zeros(capacity, dtype=bool)
        self._alive[: live.size] = True
        self._keys = [self._keys[i] for i in live.tolist()]
        self._ids = {k: j for j, k in enumerate(self._keys)}  # type: ignore[misc]
        self._dead = 0

    # -- queries ------------------------------------------------------------------------

    def query(self, sketch: Any) -> list[tuple[str, float]]:
        """Stored sketches sharing a band with ``sketch`` and estimated Jaccard >= threshold."""
        v = as_sketch(sketch, self.num_values)
        return self._query(v, self._hasher.keys(v))

    def _query(self, v: np.ndarray, band_keys: np.ndarray) -> list[tuple[str, float]]:
        found = self._candidates(band_keys)
        if not found:
            return []
        cand = np.array(sorted(found), dtype=np.intp)
        return self._verify(v, cand[self._alive[cand]])

    def _candidates(self, band_keys: np.ndarray) -> set[int]:
        """Ids in the query's buckets (removed ones included)."""
        found: set[int] = set()
        hi = band_keys & _HI
        for level in (self._table, self._recent):
            if level.size:
                found.update(level.lookup_ids(hi).tolist())
        if self._pending:
            pending = self._pending
            for k in band_keys.tolist():
                ids = pending.get(k)
                if ids:
                    found.update(ids)
        return found

    def _verify(self, v: np.ndarray, cand: np.ndarray) -> list[tuple[str, float]]:
        """The candidates (ascending ids) that share a band and pass the threshold, best first."""
        width, nv, keys = self.bands * self.rows, self.num_values, self._keys
        if cand.shape[0] == 1:  # the usual hit: a few numpy calls fewer
            i = int(cand[0])
            eq1 = self._sketches[i] == v
            count = int(np.count_nonzero(eq1))
            if count < self.min_matches or (
                count < nv and not eq1[:width].reshape(self.bands, self.rows).all(axis=1).any()
            ):
                return []
            return [(keys[i], count / nv)]  # type: ignore[list-item]
        eq = self._sketches[cand] == v
        counts = np.count_nonzero(eq, axis=1)
        ok = counts >= self.min_matches
        if not ok.any():
            return []
        ok &= eq[:, :width].reshape(-1, self.bands, self.rows).all(axis=2).any(axis=1)
        best_first = sorted(zip((-counts[ok]).tolist(), cand[ok].tolist(), strict=True))
        return [(keys[i], -c / nv) for c, i in best_first]  # type: ignore[misc]

    def query_many(self, sketches: Any) -> list[list[tuple[str, float]]]:
        """``query`` for each sketch of a batch, vectorised."""
        batch = as_sketch_batch(sketches, self.num_values)
        m = batch.shape[0]
        results: list[list[tuple[str, float]]] = [[] for _ in range(m)]
        self.flush()
        if not m:
            return results
        hi = (self._hasher.keys_many(batch) & _HI).ravel()
        parts_q, parts_ids = [], []
        for start in range(0, hi.shape[0], 1 << 16):  # bounds the lookups' temporary arrays
            for level in (self._table, self._recent):
                k, found = level.lookup(hi[start : start + (1 << 16)])
                parts_q.append((k + start) // self.bands)
                parts_ids.append(found)
        query_of, ids = np.concatenate(parts_q), np.concatenate(parts_ids)
        if not ids.size:
            return results
        pairs = np.unique((query_of << 32) | ids)
        q, ids = pairs >> 32, pairs & _MAX_IDS
        alive = self._alive[ids]
        q, ids = q[alive], ids[alive]
        width, nv, keys = self.bands * self.rows, self.num_values, self._keys
        start, total = 0, q.shape[0]
        while start < total:  # chunks bound the equality matrix; a query never spans two
            end = min(total, start + (1 << 16))
            if end < total:
                cut = int(np.searchsorted(q, q[end], "left"))
                end = cut if cut > start else int(np.searchsorted(q, q[end], "right"))
            cq, cids = q[start:end], ids[start:end]
            start = end
            eq = self._sketches[cids] == batch[cq]
            counts = np.count_nonzero(eq, axis=1)
            ok = counts >= self.min_matches
            ok &= eq[:, :width].reshape(-1, self.bands, self.rows).all(axis=2).any(axis=1)
            cq, cids, counts = cq[ok], cids[ok], counts[ok]
            order = np.lexsort((cids, -counts, cq))
            for qi, i, c in zip(
                cq[order].tolist(), cids[order].tolist(), counts[order].tolist(), strict=True
            ):
                results[qi].append((keys[i], c / nv))  # type: ignore[arg-type]
        return results

    def check_and_add(self, key: str, sketch: Any) -> list[tuple[str, float]]:
        """The matches before this insert (``key``'s old sketch included, as for simhash), then the insert."""
        if not isinstance(key, str):
            raise TypeError(f"keys are str, got {type(key).__name__}")
        v = as_sketch(sketch, self.num_values)
        band_keys = self._hasher.keys(v)
        matches = self._query(v, band_keys)
        self._insert(key, v, band_keys)
        return matches

    def stats(self) -> dict[str, Any]:
        """Sizes for monitoring and the benchmark."""
        return {
            "size": len(self._ids),
            "bands": self.bands,
            "rows": self.rows,
            "removed_not_compacted": self._dead,
            "pending": self._pending_count,
            "bytes_sketches": int(self._sketches.nbytes),
            "bytes_buckets": self._table.nbytes + self._recent.nbytes,
        }
