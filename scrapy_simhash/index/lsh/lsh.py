"""MinHash-LSH in memory: candidates by band buckets, answers verified by estimated Jaccard.

A sketch is a ``uint32`` numpy array of ``num_values`` MinHash values (or any object with such
an array as ``.values``). The estimated Jaccard similarity of two sketches is the fraction of
positions where they are equal (with ``value_bits`` below 32: of their low bits, corrected for
chance agreement, :mod:`scrapy_simhash.fingerprint.bbit`). The index cuts the first
``bands * rows`` positions into ``bands`` bands of ``rows`` values; two sketches are *candidates*
when at least one band is equal in both, and a candidate is *returned* only when its estimated
Jaccard is at least the threshold. So an answer never holds a pair below the threshold by
estimate, and it holds exactly the stored sketches that share a band with the query and pass the
threshold.

Band keys (:func:`band_keys`) are 64-bit, defined here so that a storage layer can keep the
buckets (band key -> document ids) anywhere. In memory the buckets live in one sorted
``uint64`` array of ``band key's high 32 bits << 32 | document id`` (8 bytes per band and
document), plus sorted runs of the recent inserts (:mod:`.bucket_runs`) and a small dict of the
last ones; sketches live in one growing array. That state and the writes that change it are
:mod:`.lsh_state`'s; this module answers from it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .lsh_bands import DEFAULT_WEIGHTS as DEFAULT_WEIGHTS
from .lsh_bands import BandHasher as BandHasher
from .lsh_bands import as_sketch as as_sketch
from .lsh_bands import as_sketch_batch as as_sketch_batch
from .lsh_bands import band_keys as band_keys
from .lsh_bands import fmix64 as fmix64
from .lsh_bands import min_matches_for as min_matches_for
from .lsh_bands import optimal_params as optimal_params
from .lsh_bands import recall_at as recall_at
from .lsh_bands import resolve_params as resolve_params
from .lsh_bands import splitmix64 as splitmix64
from .lsh_buckets import HI as _HI
from .lsh_state import MAX_IDS as _MAX_IDS
from .lsh_state import LSHState

try:
    from .._probe import lsh_query as _native_query
    from .._probe import sketch_verify as _native_verify
except ImportError:  # pragma: no cover - depends on the build
    _native_query = _native_verify = None


class MinHashLSH(LSHState):
    """An in-memory MinHash-LSH index with verified answers.

    ``query`` returns ``[(key, estimated_jaccard)]`` for the stored sketches sharing a band
    with the query whose estimate is ``>= threshold``, best first, ties oldest first.
    Adding an existing key replaces its sketch (it becomes the newest). Not thread-safe.
    The sketches, buckets and writes are :class:`~.lsh_state.LSHState`'s; this class answers.
    """

    # -- queries ------------------------------------------------------------------------

    def query(self, sketch: Any) -> list[tuple[str, float]]:
        """Stored sketches sharing a band with ``sketch`` and estimated Jaccard >= threshold."""
        v = self._sketch(sketch)
        return self._query(v, self._hasher.keys(v))

    def query_tagged(self, sketch: Any) -> list[tuple[str, float, int]]:
        """:meth:`query`'s answers with each key's tag: ``(key, similarity, tag)``."""
        return self.query_prepared(*self.prepare(sketch))

    def query_prepared(self, v: np.ndarray, band_keys: np.ndarray) -> list[tuple[str, float, int]]:
        """:meth:`query_tagged` for a sketch already :meth:`prepare`-d (asked of other levels too)."""
        if not self._ids:
            return []
        if _native_query is None:
            found = self._query(v, band_keys)
            tags = self.tags(key for key, _ in found)
            return [(key, s, t) for (key, s), t in zip(found, tags, strict=True)]
        ids, counts = self._native(v, band_keys)
        keys, table, tag = self._keys, self._similarity, self._tags.item
        return [(keys[i], table[c], tag(i)) for i, c in zip(ids, counts, strict=True)]  # type: ignore[misc]

    def _native(self, v: np.ndarray, band_keys: np.ndarray) -> tuple[list[int], list[int]]:
        """Buckets, dedupe and verification in one C call: the ids and equal counts of the answers."""
        extra: Any = b""
        if self._pending:
            pending = self._pending
            extra = np.array([i for k in band_keys.tolist() for i in pending.get(k, ())], dtype=np.int64)
        levels = [level.native_args() for level in self._levels]
        return _native_query(
            band_keys,
            levels,
            extra,
            self._sketches,
            self._alive,
            self.num_values,
            np.ascontiguousarray(v, dtype=self._dtype),
            self.bands,
            self.rows,
            self.min_matches,
            self._dtype.itemsize,
        )

    def _query(self, v: np.ndarray, band_keys: np.ndarray) -> list[tuple[str, float]]:
        if _native_query is not None:  # buckets, dedupe and verification in one C call
            ids, counts = self._native(v, band_keys)
            keys, table = self._keys, self._similarity
            return [(keys[i], table[c]) for i, c in zip(ids, counts, strict=True)]  # type: ignore[misc]
        found = self._candidates(band_keys)
        if not found:
            return []
        cand = np.array(sorted(found), dtype=np.intp)
        return self._verify(v, cand[self._alive[cand]])

    def _candidates(self, band_keys: np.ndarray) -> set[int]:
        """Ids in the query's buckets (removed ones included)."""
        found: set[int] = set()
        hi = band_keys & _HI
        for level in self._levels:
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
        if not cand.shape[0]:
            return []
        counts = self._counts(cand, v[None, :], None)
        ok = counts >= 0
        if not ok.any():
            return []
        nv, keys, similarity = self.num_values, self._keys, self._bits.similarity
        best_first = sorted(zip((-counts[ok]).tolist(), cand[ok].tolist(), strict=True))
        return [(keys[i], similarity(-c, nv)) for c, i in best_first]

    def _counts(
        self, ids: np.ndarray, queries: np.ndarray, query_of: np.ndarray | None, *, native: bool | None = None
    ) -> np.ndarray:
        """For each candidate ``ids[j]`` against ``queries[query_of[j]]`` (``query_of`` None: query
        0): its count of equal values when it shares a band and has at least ``min_matches``,
        else -1. In C when built (``native``; one pass, no equality matrix), else numpy."""
        if _native_verify is not None and native is not False:
            ids64 = np.ascontiguousarray(ids, dtype=np.int64)
            of = b"" if query_of is None else np.ascontiguousarray(query_of, dtype=np.int64)
            out = _native_verify(
                self._sketches,
                self.num_values,
                ids64,
                of,
                np.ascontiguousarray(queries, dtype=self._dtype),
                self.bands,
                self.rows,
                self.min_matches,
                self._dtype.itemsize,
            )
            return np.frombuffer(out, dtype=np.int32)
        width = self.bands * self.rows
        eq = self._sketches[ids] == (queries[0] if query_of is None else queries[query_of])
        counts = np.count_nonzero(eq, axis=1)
        ok = counts >= self.min_matches
        ok &= eq[:, :width].reshape(-1, self.bands, self.rows).all(axis=2).any(axis=1)
        return np.where(ok, counts, -1).astype(np.int32)

    def query_many(self, sketches: Any) -> list[list[tuple[str, float]]]:
        """``query`` for each sketch of a batch, vectorised."""
        batch = self._batch(sketches)
        m = batch.shape[0]
        results: list[list[tuple[str, float]]] = [[] for _ in range(m)]
        self.flush()
        if not m:
            return results
        hi = (self._hasher.keys_many(batch) & _HI).ravel()
        parts_q, parts_ids = [], []
        for start in range(0, hi.shape[0], 1 << 16):  # bounds the lookups' temporary arrays
            for level in self._levels:
                k, found = level.lookup(hi[start : start + (1 << 16)])
                parts_q.append((k + start) // self.bands)
                parts_ids.append(found)
        if not parts_ids:
            return results
        query_of, ids = np.concatenate(parts_q), np.concatenate(parts_ids)
        if not ids.size:
            return results
        pairs = np.unique((query_of << 32) | ids)
        q, ids = pairs >> 32, pairs & _MAX_IDS
        alive = self._alive[ids]
        q, ids = q[alive], ids[alive]
        nv, keys, similarity = self.num_values, self._keys, self._bits.similarity
        start, total = 0, q.shape[0]
        while start < total:  # chunks bound the equality matrix; a query never spans two
            end = min(total, start + (1 << 16))
            if end < total:
                cut = int(np.searchsorted(q, q[end], "left"))
                end = cut if cut > start else int(np.searchsorted(q, q[end], "right"))
            cq, cids = q[start:end], ids[start:end]
            start = end
            counts = self._counts(cids, batch, cq)
            ok = counts >= 0
            cq, cids, counts = cq[ok], cids[ok], counts[ok]
            order = np.lexsort((cids, -counts, cq))
            for qi, i, s in zip(
                cq[order].tolist(), cids[order].tolist(), similarity(counts[order], nv).tolist(), strict=True
            ):
                results[qi].append((keys[i], s))
        return results

    def check_and_add(self, key: str, sketch: Any) -> list[tuple[str, float]]:
        """The matches before this insert (``key``'s old sketch included, as for simhash), then the insert."""
        if not isinstance(key, str):
            raise TypeError(f"keys are str, got {type(key).__name__}")
        v = self._sketch(sketch)
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
            "value_bits": self.value_bits,
            "removed_not_compacted": self._dead,
            "pending": self._pending_count,
            "bytes_sketches": int(self._sketches.nbytes),
            "bytes_buckets": self._table.nbytes + self._runs.nbytes,
            "runs": len(self._runs),
        }
