"""The MinHash index's source of truth: one SQLite database of sketches (WAL, stdlib).

A sibling of :mod:`.storage` (which stores 64-bit simhashes as integers): the same durability
and damage rules, for rows holding a whole sketch.

Tables:

- ``sketches(seq, key, sketch, meta, chk)``: ``seq`` is the insertion order, never reused
  (AUTOINCREMENT; a removal advances it too, so every acknowledged write moves the high-water
  mark the commit mark records). ``sketch`` is the values as little-endian unsigned
  integers of ``value_bits / 8`` bytes each (4 for a database without that setting).
  ``chk`` is the row's CRC-32 over seq, sketch, key and meta (:func:`sketch_row_check`),
  verified whenever the row is read: SQLite checksums neither pages nor rows.
- ``settings(name, value)``: kind, scheme, num_values, threshold, bands, rows, value_bits, the database's
  identity, and ``check``: their CRC-32.

Any SQLite or JSON error while reading means a damaged database: :class:`IndexCorruptError`.
"""

from __future__ import annotations

import json
import sqlite3
import struct
import uuid
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..base import IndexCorruptError
from .database import RowDatabase, check_synchronous, connect, settings_check
from .integrity import MARK, CommitMark, check_sqlite, key_meta_crc

_TABLES = {"settings", "sketches"}
_SCHEMA = """
CREATE TABLE IF NOT EXISTS settings (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS sketches (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    key TEXT NOT NULL UNIQUE,
    sketch BLOB NOT NULL,
    meta TEXT,
    chk INTEGER NOT NULL
);
"""
_INSERT = "INSERT INTO sketches (seq, key, sketch, meta, chk) VALUES (?, ?, ?, ?, ?)"
_SEQ = struct.Struct("<q")

Row = tuple[str, bytes, str | None]
"""What the index writes: ``(key, sketch bytes, meta JSON)``."""


def sketch_row_check(seq: int, key: str, sketch: bytes, meta: str | None) -> int:
    """CRC-32 of the row: seq (8 bytes), the sketch bytes, then ``key NUL meta`` as UTF-8."""
    crc = zlib.crc32(_SEQ.pack(seq))
    return key_meta_crc(key, meta, zlib.crc32(sketch, crc))


class SketchStore(RowDatabase):
    """Durable sketch rows. Not thread-safe by itself: the index serialises calls.

    ``high`` (the high-water seq) and ``live`` (rows) are kept up to date by the writes.
    """

    kind = "MinHash index"
    derived = MARK

    def __init__(
        self, path: Path, read_only: bool = False, synchronous: str = "full", check: str | None = None
    ) -> None:
        check_synchronous(synchronous)
        self.path = path
        self.read_only = read_only
        self.mark: CommitMark | None = None
        try:
            self.conn = connect(path, read_only, synchronous)
            if check:
                check_sqlite(self.conn, path, thorough=check == "thorough")
            tables = {r[0] for r in self.conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if not tables and not read_only:
                self.conn.executescript(f"BEGIN IMMEDIATE; {_SCHEMA} COMMIT;")
                tables = set(_TABLES)
            if not tables >= _TABLES:
                raise sqlite3.DatabaseError(f"tables {sorted(_TABLES - tables)} are missing")
        except IndexCorruptError:
            self.conn.close()
            raise
        except sqlite3.DatabaseError as exc:
            if hasattr(self, "conn"):
                self.conn.close()
            raise IndexCorruptError(
                f"the MinHash index database {path} is damaged or not a MinHash index ({exc}); it is the "
                f"source of truth and cannot be rebuilt: restore it from a backup"
            ) from exc
        self.high = 0
        self.live = 0

    # -- settings ----------------------------------------------------------------------------
    def settings(self) -> dict[str, str]:
        """The stored settings, verified against their CRC-32 (empty for a new database)."""
        with self._reading():
            stored = dict(self.conn.execute("SELECT name, value FROM settings").fetchall())
        check = stored.pop("check", None)
        if stored and check != settings_check(stored):
            raise self.damaged("the settings fail their checksum")
        return stored

    def init_settings(self, values: dict[str, str]) -> dict[str, str]:
        """Write a new database's settings (once, with a fresh ``db_id``); returns the stored ones."""
        with self._transaction():
            current = dict(self.conn.execute("SELECT name, value FROM settings").fetchall())
            current.pop("check", None)
            if current:
                return current
            values = {**values, "db_id": uuid.uuid4().hex}
            rows = [*values.items(), ("check", settings_check(values))]
            self.conn.executemany("INSERT INTO settings VALUES (?, ?)", rows)
        return values

    # -- reads -------------------------------------------------------------------------------
    def load(self, batch: int = 50_000) -> Iterator[list[tuple[int, str, bytes]]]:
        """Every row as ``(seq, key, sketch bytes)`` in seq order, verified, in lists of ``batch``.

        Sets ``high`` and ``live`` from the same snapshot (one read transaction).
        """
        check = sketch_row_check
        with self._reading():
            self.conn.execute("BEGIN")
            try:
                row = self.conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'sketches'").fetchone()
                top = self.conn.execute("SELECT max(seq), count(*) FROM sketches").fetchone()
                self.high, self.live = max(row[0] if row else 0, top[0] or 0), int(top[1])
                cursor = self.conn.execute("SELECT seq, key, sketch, meta, chk FROM sketches ORDER BY seq")
                while True:
                    chunk = cursor.fetchmany(batch)
                    if not chunk:
                        break
                    out = []
                    for seq, key, sketch, meta, chk in chunk:
                        if not isinstance(sketch, bytes) or check(seq, key, sketch, meta) != chk:
                            raise self.damaged(f"row {seq} ({key!r}) fails its checksum")
                        out.append((seq, key, sketch))
                    yield out
            finally:
                self.conn.execute("COMMIT")

    def meta(self, keys: list[str]) -> dict[str, dict[str, Any]]:
        """The meta of each stored key (verified with its row)."""
        out: dict[str, dict[str, Any]] = {}
        with self._reading():
            for start in range(0, len(keys), 500):
                chunk = keys[start : start + 500]
                marks = ",".join("?" * len(chunk))
                for seq, key, sketch, meta, chk in self.conn.execute(
                    f"SELECT seq, key, sketch, meta, chk FROM sketches WHERE key IN ({marks})", chunk
                ):
                    if sketch_row_check(seq, key, sketch, meta) != chk:
                        raise self.damaged(f"row {seq} ({key!r}) fails its checksum")
                    value = json.loads(meta) if meta else {}
                    if not isinstance(value, dict):
                        raise self.damaged(f"row {seq} ({key!r}): meta is not a JSON object")
                    out[key] = value
        return out

    # -- writes ------------------------------------------------------------------------------
    def put_many(self, items: list[Row]) -> None:
        """Store ``(key, sketch, meta)`` rows in one durable transaction; a repeated or stored key
        is replaced (the later one wins, with a new seq)."""
        start = self.high + 1
        rows = [
            (seq, key, sketch, meta, sketch_row_check(seq, key, sketch, meta))
            for seq, (key, sketch, meta) in enumerate(items, start)
        ]
        try:  # fast path: every key new, the common case in a crawl
            with self._transaction():
                self.conn.executemany(_INSERT, rows)
            replaced = 0
        except sqlite3.IntegrityError:  # rolled back: replace explicitly, row by row
            replaced = 0
            with self._transaction():
                for row in rows:
                    cur = self.conn.execute("DELETE FROM sketches WHERE key = ?", (row[1],))
                    replaced += cur.rowcount
                    self.conn.execute(_INSERT, row)
        self.high = start + len(items) - 1
        self.live += len(items) - replaced
        self._marked()

    def delete(self, key: str) -> bool:
        """Remove ``key``; True if it was stored. A removal advances the high-water seq by one."""
        with self._transaction():
            cur = self.conn.execute("DELETE FROM sketches WHERE key = ?", (key,))
            if not cur.rowcount:
                return False
            self.conn.execute("UPDATE sqlite_sequence SET seq = ? WHERE name = 'sketches'", (self.high + 1,))
        self.high += 1
        self.live -= 1
        self._marked()
        return True

    def _marked(self) -> None:
        if self.mark is not None:
            self.mark.write(self.high, self.live)
