"""The embedded index's reads: lookups by fingerprint and by key, and whole-index listings.

:class:`IndexReads` answers from what :class:`~.embedded.SimhashIndex` opened: the tables' layers
(:mod:`..tables.layers`) find the seqs of the fingerprints within k, the database (:mod:`.storage`)
holds their rows (key, meta), each verified when read. Every read holds the index's lock and
checks that it is open (and not found damaged since).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from ..base import LayoutError, Match, NearDuplicateIndex
from ..tables.batch import as_hash_array
from ..tables.layers import Layers
from ..tables.layouts import Layout
from ..values import check_key, check_simhash
from .storage import Store

_QUERY_CHUNK = 262_144  # queries per vectorised pass: denser needles walk the tables more cache-friendly


class IndexReads(NearDuplicateIndex):
    """The reads of an open embedded index (its opening, writes and state are
    :class:`~.embedded.SimhashIndex`'s)."""

    path: Path
    k: int
    layout: Layout
    _lock: threading.RLock
    _store: Store
    _layers: Layers
    _count: int

    def _check_open(self, writing: bool = False) -> None:
        """Raise unless the index is open (and, ``writing``, writable)."""
        raise NotImplementedError

    def _query_k(self, k: int | None) -> int:
        if k is None:
            return self.k
        if isinstance(k, bool) or not isinstance(k, int) or k < 0:
            raise ValueError(f"k must be a non-negative int, got {k!r}")
        if k > self.layout.max_k:
            raise LayoutError(
                f"this index's layout {self.layout.spec} answers exactly only up to k={self.layout.max_k}"
            )
        return k

    # by fingerprint
    def query(self, simhash: int, k: int | None = None) -> list[Match]:
        h = check_simhash(simhash)
        with self._lock:
            self._check_open()
            return self._search(np.array([h], dtype=np.uint64), self._query_k(k))[0]

    def query_many(self, simhashes: Iterable[int] | np.ndarray, k: int | None = None) -> list[list[Match]]:
        """Vectorised ``query`` over many fingerprints (a numpy uint64 array is fastest)."""
        queries = as_hash_array(simhashes)
        if queries.size and not queries.all():
            raise ValueError("the fingerprint 0 (a text without tokens) cannot be queried")
        with self._lock:
            self._check_open()
            k = self._query_k(k)
            if len(self._layers.pending) * queries.size > 1 << 22:
                self._layers.merge_pending()  # brute force over the buffer would dominate
            out: list[list[Match]] = []
            for start in range(0, queries.size, _QUERY_CHUNK):
                out.extend(self._search(queries[start : start + _QUERY_CHUNK], k))
            return out

    def _search_one(self, h: int, k: int) -> list[Match]:
        found = self._layers.probe_one(h, k)
        if not found:
            return []
        rows = self._store.fetch([seq for seq, _, _ in found])
        matches = [
            Match(row[0], stored, distance, row[1], seq)
            for seq, stored, distance in found
            if (row := rows.get(seq)) is not None
        ]
        matches.sort(key=lambda m: (m.distance, m.seq))
        return matches

    def _search(self, queries: np.ndarray, k: int) -> list[list[Match]]:
        if queries.shape[0] == 1:
            return [self._search_one(int(queries[0]), k)]
        hits = self._layers.probe(queries, k)
        results: list[list[Match]] = [[] for _ in range(queries.shape[0])]
        if not hits.query.size:
            return results
        seq_list = hits.seq.tolist()
        rows = self._store.fetch(sorted(set(seq_list)))
        for q, seq, h, d in zip(
            hits.query.tolist(), seq_list, hits.simhash.tolist(), hits.distance.tolist(), strict=True
        ):
            row = rows.get(seq)
            if row is not None:
                results[q].append(Match(row[0], h, d, row[1], seq))
        for matches in results:
            if len(matches) > 1:
                matches.sort(key=lambda m: (m.distance, m.seq))
        return results

    # by key
    def get(self, key: str) -> Match | None:
        key = check_key(key)
        with self._lock:
            self._check_open()
            row = self._store.get(key)
        if row is None:
            return None
        seq, h, meta = row
        return Match(key, h, 0, meta, seq)

    def get_many(self, keys: Iterable[str]) -> dict[str, Match]:
        """``get`` for many keys in one database read; keys not stored are absent."""
        rows = self.rows_many([check_key(key) for key in keys])
        return {key: Match(key, h, 0, meta, seq) for key, (seq, h, meta) in rows.items()}

    def rows_many(
        self, keys: list[str], seq_hints: list[int] | None = None
    ) -> dict[str, tuple[int, int, dict[str, Any]]]:
        """:meth:`get_many`'s rows as ``key -> (seq, simhash, meta)``, for a caller that builds its own
        answers from them (the verified index: no Match made twice). ``seq_hints``: each key's seq
        if known (0: not), to read rows by seq (a wrong hint costs only a second read by key)."""
        with self._lock:
            self._check_open()
            return self._store.get_many(keys, seq_hints) if keys else {}

    def key_seqs(self) -> list[tuple[str, int]]:
        """Every stored ``(key, seq)``, in no particular order (one read, no rows decoded)."""
        with self._lock:
            self._check_open()
            return [pair for chunk in self._store.key_seqs() for pair in chunk]

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and bool(key) and self.get(key) is not None

    def __len__(self) -> int:
        return self._count

    def keys(self) -> list[str]:
        """Every stored key, in no particular order (one read of the database, no rows decoded)."""
        with self._lock:
            self._check_open()
            return list(self._store.keys())

    def __iter__(self) -> Iterator[Match]:
        """Every stored fingerprint, oldest first (distance 0)."""
        self._check_open()
        for seq, key, h, meta in self._store.iterate():
            yield Match(key, h, 0, meta, seq)

    # the verified index's reads of the rows' sketches (:mod:`.sketch_column`)
    def rows_by_seq(self, seqs: list[int]) -> dict[int, tuple[str, dict[str, Any], int]]:
        """The rows ``seq -> (key, meta, simhash)`` of ``seqs`` (those still stored), each verified."""
        with self._lock:
            self._check_open()
            return self._store.fetch(seqs) if seqs else {}

    def sketched_rows_by_seq(
        self, seqs: list[int]
    ) -> dict[int, tuple[tuple[str, dict[str, Any], int], bytes]]:
        """``seq -> ((key, meta, simhash), sketch bytes)`` of the stored ``seqs`` that have a sketch,
        each row verified: what the sketch LSH's base verifies its candidates against."""
        with self._lock:
            self._check_open()
            return self._store.fetch_sketched(seqs) if seqs else {}

    def sketch_rows(self, keys: list[str]) -> dict[str, tuple[int, bytes]]:
        """``key -> (seq, sketch bytes)`` of the stored ``keys`` that have a sketch, each row verified."""
        with self._lock:
            self._check_open()
            return self._store.sketch_rows(keys) if keys else {}

    def keys_with_sketch(self, exclude: set[str]) -> list[str]:
        with self._lock:
            self._check_open()
            return [key for key in self._store.keys(with_sketch=True) if key not in exclude]

    def keys_without_sketch(self) -> set[str]:
        with self._lock:
            self._check_open()
            return set(self._store.keys(without_sketch=True))
