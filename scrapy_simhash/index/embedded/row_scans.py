"""Whole-table reads of the simhash store (:mod:`.storage`): at open and for export, every row or key.

Every row read is checked against its checksum, vectorised where rows are read in bulk. Split from
the store's writes and lookups by key or seq, which are small and many.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from .database import RowDatabase
from .integrity import bad_rows, row_check, stored_row_checks

SIGN = 1 << 63
WRAP = 1 << 64
SELECTED = "seq, key, simhash, meta, chk, sketch"
"""What every read of whole rows selects: all that :meth:`RowScans._verified` checks."""


def to_signed(h: int) -> int:
    """SQLite integers are signed 64-bit."""
    return h - WRAP if h >= SIGN else h


def to_unsigned(v: int) -> int:
    return v + WRAP if v < 0 else v


class RowScans(RowDatabase):
    """The store's reads of every row (a base of :class:`~.storage.Store`)."""

    def _verified(
        self, seq: int, key: str, h: int, meta: str | None, chk: int | None, sketch: bytes | None = None
    ) -> dict[str, Any]:
        """The row's meta, after checking the row (sketch included) against its checksum."""
        if chk is None:
            raise self.damaged(f"row {seq} ({key!r}) has no checksum")
        if to_unsigned(chk) != row_check(seq, to_unsigned(h), key, meta, sketch):
            raise self.damaged(f"row {seq} ({key!r}) fails its checksum")
        return _meta(meta)

    def key_seqs(self, batch: int = 100_000) -> Iterator[list[tuple[str, int]]]:
        """Every stored ``(key, seq)``, in lists of ``batch`` (no rows decoded)."""
        with self._reading():
            cursor = self.conn.execute("SELECT key, seq FROM entries")
            while chunk := cursor.fetchmany(batch):
                yield chunk

    def tombstones(self) -> np.ndarray:
        """Seqs removed since the table files were written; none of them may still be a row."""
        with self._reading():
            # CROSS JOIN keeps tombstones the outer loop: one lookup each (a plain JOIN reads every row)
            live = self.conn.execute(
                "SELECT t.seq FROM tombstones AS t CROSS JOIN entries AS e ON e.seq = t.seq LIMIT 1"
            ).fetchone()
            if live is not None:
                raise self.damaged(f"row {live[0]} is both stored and marked removed")
            return np.array([r[0] for r in self.conn.execute("SELECT seq FROM tombstones")], dtype=np.int64)

    def rows(self, after: int = 0, batch: int = 200_000) -> tuple[np.ndarray, np.ndarray]:
        """(seqs, fingerprints) of every row with seq > ``after``, in seq order, as arrays.

        Each row's seq and fingerprint are checked against its checksum (vectorised).
        """
        seqs_parts, hash_parts = [], []
        with self._reading():
            cursor = self.conn.execute(
                "SELECT seq, simhash, ifnull(chk, 0) FROM entries WHERE seq > ? ORDER BY seq",
                (after,),
            )
            while True:
                chunk = cursor.fetchmany(batch)
                if not chunk:
                    break
                block = np.array(chunk, dtype=np.int64)
                seqs, hashes = block[:, 0].copy(), block[:, 1].view(np.uint64).copy()
                bad = bad_rows(seqs, hashes, block[:, 2])
                if bad.size:
                    what = "has no checksum" if block[bad[0], 2] == 0 else "fails its checksum"
                    raise self.damaged(f"row {int(seqs[bad[0]])} {what}")
                seqs_parts.append(seqs)
                hash_parts.append(hashes)
        if not seqs_parts:
            return np.zeros(0, np.int64), np.zeros(0, np.uint64)
        return np.concatenate(seqs_parts), np.concatenate(hash_parts)

    def keys(
        self, batch: int = 100_000, *, without_sketch: bool = False, with_sketch: bool = False
    ) -> Iterator[str]:
        """Every stored key (keys only: the rows' checks are verified where rows are read), or only
        those of rows without (or with) a sketch."""
        where = " WHERE sketch IS NULL" if without_sketch else ""
        where = " WHERE sketch IS NOT NULL" if with_sketch else where
        with self._reading():
            cursor = self.conn.execute(f"SELECT key FROM entries{where}")
            while True:
                chunk = cursor.fetchmany(batch)
                if not chunk:
                    return
                for (key,) in chunk:
                    yield key

    def iterate(self, batch: int = 10_000) -> Iterator[tuple[int, str, int, dict[str, Any]]]:
        """Every row as (seq, key, simhash, meta), oldest first, each verified."""
        with self._reading():
            cursor = self.conn.execute(f"SELECT {SELECTED} FROM entries ORDER BY seq")
            while True:
                chunk = cursor.fetchmany(batch)
                if not chunk:
                    return
                for row in chunk:
                    meta = self._verified(*row)
                    yield row[0], row[1], to_unsigned(row[2]), meta

    def sketches(self, batch: int = 50_000, after: int = 0) -> Iterator[list[tuple[int, str, bytes]]]:
        """Every row's ``(seq, key, sketch)`` that has a sketch, in seq order, in lists of ``batch``:
        those with a seq above ``after`` (the table files hold the others' sketches) and those whose
        sketch changed since the table files were written.

        Every row read is verified whole, those without a sketch too: a sketch set to NULL is damage
        found here, at open, as a changed one is (not at the row's first read). Meta is not decoded.
        """
        with self._reading(), self._read_transaction():
            for chunk in self._newer_or_resketched(after, batch):
                for row in chunk:
                    if (
                        not isinstance(row[5], bytes | None)
                        or not isinstance(row[0], int)
                        or not isinstance(row[2], int)
                    ):
                        raise self.damaged(f"row {row[0]} ({row[1]!r}) holds a value of the wrong type")
                stored = np.fromiter((0 if row[4] is None else row[4] for row in chunk), np.int64, len(chunk))
                bad = np.flatnonzero((stored == 0) | (stored.view(np.uint64) != stored_row_checks(chunk)))
                if bad.size:
                    seq, key = chunk[int(bad[0])][:2]
                    what = "has no checksum" if stored[bad[0]] == 0 else "fails its checksum"
                    raise self.damaged(f"row {seq} ({key!r}) {what}")
                if out := [(row[0], row[1], row[5]) for row in chunk if row[5] is not None]:
                    yield out

    def _newer_or_resketched(self, after: int, batch: int) -> Iterator[list[tuple[Any, ...]]]:
        """Rows resketched at or below ``after``, then rows above it, in seq order: two range reads
        (one ``seq > ? OR seq IN (...)`` would read every row of the table)."""
        queries = (
            (f"SELECT {SELECTED} FROM entries WHERE seq IN (SELECT seq FROM resketched) AND seq <= ?", after),
            (f"SELECT {SELECTED} FROM entries WHERE seq > ?", after),
        )
        for query, bound in queries:
            cursor = self.conn.execute(query + " ORDER BY seq", (bound,))
            while chunk := cursor.fetchmany(batch):
                yield chunk

    @contextmanager
    def _read_transaction(self) -> Iterator[None]:
        """One state of the database for several statements (unless already in a transaction)."""
        if self.conn.in_transaction:
            yield
            return
        self.conn.execute("BEGIN")
        try:
            yield
        finally:
            # closed meanwhile: a reading generator dropped by its caller and collected after the close
            with contextlib.suppress(sqlite3.ProgrammingError):
                self.conn.execute("COMMIT")


def _meta(text: str | None) -> dict[str, Any]:
    if not text:
        return {}
    meta = json.loads(text)
    if not isinstance(meta, dict):
        raise json.JSONDecodeError("meta is not a JSON object", text, 0)
    return meta
