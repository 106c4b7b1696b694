"""The MinHash kind's earlier format (``minhash.sqlite3`` without ``format``), copied as format 3."""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Callable
from pathlib import Path

from ..base import SimhashIndexError
from ..embedded.database import settings_check
from ..embedded.integrity import check_mark, read_mark
from ..embedded.sketch_rows import sketch_row_check
from ..embedded.store_format import FORMAT
from .old_files import (
    BATCH,
    UpgradeDamaged,
    UpgradeError,
    UpgradeReport,
    connect,
    damaged,
    signed_settings,
    sketch_params,
)


class OldMinHashIndex:
    """A MinHash-kind index (``minhash.sqlite3``) of an earlier format: its settings lack ``format``
    (and, before the setting existed, ``value_bits``: 32). Its rows are copied as they are (their
    checksum covers seq, sketch, key and meta, none of which changes)."""

    def __init__(self, database: Path) -> None:
        self.path = database
        self.conn = connect(database)
        try:
            self.settings = signed_settings(self.conn, database)
            if "check" not in dict(self.conn.execute("SELECT name, value FROM settings").fetchall()):
                raise damaged(database, "the settings lack their checksum")
            if self.settings.get("kind") != "minhash":
                raise damaged(database, f"its settings name no MinHash index ({self.settings})")
            self.format = self.settings.get("format")
            if self.format == str(FORMAT):
                raise UpgradeError(
                    f"the MinHash index at {database.parent} is already in format {FORMAT}: "
                    "nothing to upgrade"
                )
            if self.format is not None:
                raise UpgradeError(
                    f"the MinHash index at {database.parent} has format {self.format}, which this version "
                    "does not know"
                )
            self.params = sketch_params(self.settings, database)
            row = self.conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'sketches'").fetchone()
            top = self.conn.execute("SELECT max(seq), count(*) FROM sketches").fetchone()
            self.high, self.count = max(row[0] if row else 0, top[0] or 0), int(top[1])
            if "db_id" in self.settings:
                try:
                    mark = read_mark(database.parent)
                    check_mark(database, mark, self.settings["db_id"], self.high, self.count)
                except SimhashIndexError as exc:
                    raise UpgradeDamaged(f"{exc}; nothing was written") from exc
        except sqlite3.DatabaseError as exc:
            self.conn.close()
            raise damaged(database, f"{type(exc).__name__}: {exc}") from exc
        except BaseException:
            self.conn.close()
            raise

    def write(self, database: Path, report: UpgradeReport, progress: Callable[[str], None]) -> None:
        width = self.params["value_bits"] // 8 * self.params["num_values"]
        conn = sqlite3.connect(database, isolation_level=None)
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.executescript(_MINHASH_SCHEMA)
            conn.execute("BEGIN")
            cursor = self.conn.execute("SELECT seq, key, sketch, meta, chk FROM sketches ORDER BY seq")
            insert = "INSERT INTO sketches (seq, key, sketch, meta, chk) VALUES (?, ?, ?, ?, ?)"
            while chunk := cursor.fetchmany(BATCH):
                for seq, key, sketch, meta, chk in chunk:
                    if not isinstance(sketch, bytes) or len(sketch) != width:
                        raise damaged(self.path, f"row {seq} ({key!r}) holds a sketch of the wrong length")
                    if chk != sketch_row_check(seq, key, sketch, meta):
                        raise damaged(self.path, f"row {seq} ({key!r}) fails its checksum")
                conn.executemany(insert, chunk)
                report.pages += len(chunk)
                report.with_sketch += len(chunk)
                progress(f"upgrade: {report.pages} of {self.count} pages read")
            update = "UPDATE sqlite_sequence SET seq = ? WHERE name = 'sketches'"
            if self.high and not conn.execute(update, (self.high,)).rowcount:
                conn.execute("INSERT INTO sqlite_sequence (name, seq) VALUES ('sketches', ?)", (self.high,))
            values = {**self.settings, "value_bits": str(self.params["value_bits"]), "format": str(FORMAT)}
            values["db_id"] = uuid.uuid4().hex
            rows = [*values.items(), ("check", settings_check(values))]
            conn.executemany("INSERT INTO settings VALUES (?, ?)", rows)
            conn.execute("COMMIT")
        except sqlite3.DatabaseError as exc:
            if isinstance(exc, sqlite3.IntegrityError):
                raise damaged(self.path, f"{type(exc).__name__}: {exc}") from exc
            raise
        finally:
            conn.close()

    def close(self) -> None:
        self.conn.close()


_MINHASH_SCHEMA = """
CREATE TABLE settings (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE sketches (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    key TEXT NOT NULL UNIQUE,
    sketch BLOB NOT NULL,
    meta TEXT,
    chk INTEGER NOT NULL
);
"""
"""Format 3's MinHash-kind tables, as :mod:`.sketch_rows` creates them."""
