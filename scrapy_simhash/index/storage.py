"""The index's source of truth: one SQLite database (stdlib, no server).

WAL mode with ``synchronous=FULL`` makes every committed transaction durable when the
call returns; one transaction per ``add_many`` batch amortises the fsync. Everything
else in the index directory (the sorted tables) is derived from this database and can be
rebuilt from it.

Tables:

- ``entries(seq, key, simhash, meta)``: ``seq`` is the insertion order (age), never reused
  (AUTOINCREMENT), so a derived table file can refer to rows by ``seq``.
- ``tombstones(seq)``: rows removed since the table files were last written; they tell
  the reopened index which rows of the files to ignore.
- ``settings(name, value)``: layout, k, format and the database's identity.
"""

from __future__ import annotations

import json
import sqlite3
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .base import IndexCorruptError

SIGN = 1 << 63
WRAP = 1 << 64
_CHUNK = 500  # host parameters per statement, well under SQLite's limit

_SCHEMA = """
CREATE TABLE IF NOT EXISTS settings (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS entries (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    key TEXT NOT NULL UNIQUE,
    simhash INTEGER NOT NULL,
    meta TEXT
);
CREATE TABLE IF NOT EXISTS tombstones (seq INTEGER PRIMARY KEY);
"""


def to_signed(h: int) -> int:
    """SQLite integers are signed 64-bit."""
    return h - WRAP if h >= SIGN else h


def to_unsigned(v: int) -> int:
    return v + WRAP if v < 0 else v


def _chunks(values: Sequence[Any], size: int = _CHUNK) -> Iterator[Sequence[Any]]:
    for start in range(0, len(values), size):
        yield values[start : start + size]


class Store:
    """Durable rows of the index. Not thread-safe by itself: the index serialises calls."""

    def __init__(self, path: Path, read_only: bool = False, synchronous: str = "full") -> None:
        if synchronous not in ("full", "normal"):
            raise ValueError(f"synchronous must be 'full' or 'normal', not {synchronous!r}")
        self.path = path
        self.read_only = read_only
        try:
            if read_only:
                self.conn = sqlite3.connect(
                    f"file:{path}?mode=ro", uri=True, isolation_level=None, check_same_thread=False
                )
            else:
                self.conn = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
                self.conn.execute("PRAGMA journal_mode=WAL")
                self.conn.execute(f"PRAGMA synchronous={synchronous.upper()}")
                # 64 MiB of page cache keeps the key index's hot pages in memory: ~1.5x inserts/s
                self.conn.execute("PRAGMA cache_size=-65536")
                self.conn.executescript(_SCHEMA)
            self.conn.execute("SELECT seq FROM entries LIMIT 1").fetchall()
        except sqlite3.DatabaseError as exc:
            raise IndexCorruptError(
                f"the index database {path} is damaged or not an index ({exc}); it is the source of truth "
                f"and cannot be rebuilt: restore it from a backup or export what `sqlite3 .recover` finds"
            ) from exc
        self.next_seq = self._max_seq() + 1

    def _max_seq(self) -> int:
        row = self.conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'entries'").fetchone()
        top = self.conn.execute("SELECT max(seq) FROM entries").fetchone()[0]
        return max(row[0] if row else 0, top or 0)

    def close(self) -> None:
        self.conn.close()

    # settings
    def settings(self) -> dict[str, str]:
        return dict(self.conn.execute("SELECT name, value FROM settings").fetchall())

    def init_settings(self, values: dict[str, str]) -> dict[str, str]:
        """Write settings for a new database (once); returns the stored ones."""
        with self._transaction():
            current = self.settings()
            if not current:
                values = {**values, "db_id": uuid.uuid4().hex}
                self.conn.executemany("INSERT INTO settings VALUES (?, ?)", list(values.items()))
                current = values
        return current

    # writes
    def _transaction(self) -> _Transaction:
        return _Transaction(self.conn)

    def put_many(
        self, items: list[tuple[int, str, str | None]], tombstone_upto: int
    ) -> tuple[list[int], list[int]]:
        """Store ``(simhash, key, meta_json)`` (keys unique) in one durable transaction.

        Returns the new seqs (in item order) and the seqs the keys held before.
        Replaced rows at or below ``tombstone_upto`` (the table files' last seq) get a
        tombstone in the same transaction.
        """
        start = self.next_seq
        seqs = list(range(start, start + len(items)))
        rows = [(s, key, to_signed(h), meta) for s, (h, key, meta) in zip(seqs, items, strict=True)]
        try:  # fast path: all keys new (the common case in a crawl), one pass over the key index
            with self._transaction():
                self.conn.executemany(
                    "INSERT INTO entries (seq, key, simhash, meta) VALUES (?, ?, ?, ?)", rows
                )
            self.next_seq = start + len(items)
            return seqs, []
        except sqlite3.IntegrityError:
            pass  # some key exists: rolled back; replace explicitly
        keys = [key for _, key, _ in items]
        with self._transaction():
            replaced: list[int] = []
            for chunk in _chunks(keys):
                marks = ",".join("?" * len(chunk))
                replaced += [
                    r[0] for r in self.conn.execute(f"SELECT seq FROM entries WHERE key IN ({marks})", chunk)
                ]
            if replaced:
                self.conn.executemany("DELETE FROM entries WHERE seq = ?", [(s,) for s in replaced])
                self._tombstone([s for s in replaced if s <= tombstone_upto])
            self.conn.executemany("INSERT INTO entries (seq, key, simhash, meta) VALUES (?, ?, ?, ?)", rows)
        self.next_seq = start + len(items)
        return seqs, replaced

    def delete(self, key: str, tombstone_upto: int) -> int | None:
        """Remove ``key``; its old seq or None."""
        with self._transaction():
            row = self.conn.execute("SELECT seq FROM entries WHERE key = ?", (key,)).fetchone()
            if row is None:
                return None
            self.conn.execute("DELETE FROM entries WHERE seq = ?", (row[0],))
            if row[0] <= tombstone_upto:
                self._tombstone([row[0]])
        return int(row[0])

    def _tombstone(self, seqs: list[int]) -> None:
        if seqs:
            self.conn.executemany("INSERT OR IGNORE INTO tombstones (seq) VALUES (?)", [(s,) for s in seqs])

    def clear_tombstones(self, upto: int) -> None:
        with self._transaction():
            self.conn.execute("DELETE FROM tombstones WHERE seq <= ?", (upto,))

    # reads
    def count(self) -> int:
        return int(self.conn.execute("SELECT count(*) FROM entries").fetchone()[0])

    def get(self, key: str) -> tuple[int, int, dict[str, Any]] | None:
        row = self.conn.execute("SELECT seq, simhash, meta FROM entries WHERE key = ?", (key,)).fetchone()
        if row is None:
            return None
        return int(row[0]), to_unsigned(row[1]), _meta(row[2])

    def fetch(self, seqs: Sequence[int]) -> dict[int, tuple[str, dict[str, Any]]]:
        """Key and meta of each stored seq (missing seqs are absent from the result)."""
        out: dict[int, tuple[str, dict[str, Any]]] = {}
        for chunk in _chunks(list(seqs)):
            marks = ",".join("?" * len(chunk))
            for seq, key, meta in self.conn.execute(
                f"SELECT seq, key, meta FROM entries WHERE seq IN ({marks})", chunk
            ):
                out[seq] = (key, _meta(meta))
        return out

    def tombstones(self) -> np.ndarray:
        return np.array([r[0] for r in self.conn.execute("SELECT seq FROM tombstones")], dtype=np.int64)

    def rows(self, after: int = 0, batch: int = 200_000) -> tuple[np.ndarray, np.ndarray]:
        """(seqs, fingerprints) of every row with seq > ``after``, in seq order, as arrays."""
        seqs_parts, hash_parts = [], []
        cursor = self.conn.execute("SELECT seq, simhash FROM entries WHERE seq > ? ORDER BY seq", (after,))
        while True:
            chunk = cursor.fetchmany(batch)
            if not chunk:
                break
            block = np.array(chunk, dtype=np.int64)
            seqs_parts.append(block[:, 0].copy())
            hash_parts.append(block[:, 1].view(np.uint64).copy())
        if not seqs_parts:
            return np.zeros(0, np.int64), np.zeros(0, np.uint64)
        return np.concatenate(seqs_parts), np.concatenate(hash_parts)

    def iterate(self, batch: int = 10_000) -> Iterator[tuple[int, str, int, dict[str, Any]]]:
        """Every row as (seq, key, simhash, meta), oldest first."""
        cursor = self.conn.execute("SELECT seq, key, simhash, meta FROM entries ORDER BY seq")
        while True:
            chunk = cursor.fetchmany(batch)
            if not chunk:
                return
            for seq, key, h, meta in chunk:
                yield seq, key, to_unsigned(h), _meta(meta)


def _meta(text: str | None) -> dict[str, Any]:
    return json.loads(text) if text else {}


class _Transaction:
    """BEGIN IMMEDIATE ... COMMIT, rolled back on any error (so a failed batch stores nothing)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def __enter__(self) -> None:
        self.conn.execute("BEGIN IMMEDIATE")

    def __exit__(self, exc_type: object, *rest: object) -> None:
        if exc_type is None:
            self.conn.execute("COMMIT")
        else:
            self.conn.execute("ROLLBACK")
