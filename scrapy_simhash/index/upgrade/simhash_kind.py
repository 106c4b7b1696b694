"""The simhash kind's earlier formats (``index.sqlite3``, perhaps ``sketches/minhash.sqlite3``), read
with sqlite3 and numpy only, and written as format 3."""

from __future__ import annotations

import json
import sqlite3
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from ...fingerprint.minhash import SCHEME
from ..base import SimhashIndexError
from ..embedded.database import settings_check
from ..embedded.integrity import check_mark, read_mark, row_check
from ..embedded.sketch_rows import sketch_row_check
from ..embedded.store_format import FORMAT
from .old_files import (
    BATCH,
    EVERYTHING,
    SIGN,
    SKETCH_DATABASE,
    SKETCH_STORE,
    WRAP,
    UpgradeDamaged,
    UpgradeError,
    UpgradeReport,
    connect,
    damaged,
    read_only_uri,
    signed_settings,
    sketch_params,
)


class OldIndex:
    """An earlier version's simhash store (and its ``sketches/`` store, if any), read-only."""

    def __init__(self, database: Path) -> None:
        self.path = database
        self.conn = connect(database)
        try:
            self._read_settings()
        except sqlite3.DatabaseError as exc:
            self.conn.close()
            raise damaged(database, f"{type(exc).__name__}: {exc}") from exc
        except BaseException:
            self.conn.close()
            raise

    def _read_settings(self) -> None:
        database = self.path
        tables = {r[0] for r in self.conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if not {"settings", "entries"} <= tables:
            raise damaged(database, "the tables settings and entries are missing")
        raw = dict(self.conn.execute("SELECT name, value FROM settings").fetchall())
        self.settings = signed_settings(self.conn, database)
        self.format = self.settings.get("format")
        if self.format == str(FORMAT):
            raise UpgradeError(
                f"the index at {database.parent} is already in format {FORMAT}: nothing to upgrade"
            )
        if self.format not in (None, "2"):
            raise UpgradeError(
                f"the index at {database.parent} has format {self.format}, which this version does not know"
            )
        if not {"layout", "k"} <= set(self.settings):
            raise damaged(database, "its settings lack the layout or k")
        columns = {r[1] for r in self.conn.execute("PRAGMA table_info(entries)")}
        self.has_chk, self.has_sketch = "chk" in columns, "sketch" in columns
        if self.format == "2" and ("check" not in raw or not self.has_chk):
            raise damaged(database, "format 2 without its checksums")
        if self.has_chk and "check" not in raw:  # only a database from before checksums lacks it
            raise damaged(database, "the settings lack their checksum")
        if not self.has_chk and "check" in raw:
            raise damaged(database, "its rows' checksum column is missing, but its settings are checksummed")
        if self.format == "2":
            self.unchecked_upto = int(self.settings.get("unchecked_upto", 0))
        else:  # format 1, or checksums but no format: rows from before checksums may lack one anywhere
            self.unchecked_upto = EVERYTHING
        mine = {n.removeprefix("sketch_"): v for n, v in self.settings.items() if n.startswith("sketch_")}
        self.sketch_params = sketch_params(mine, database) if mine else None
        self.store: Path | None = None
        """The second sketch store, attached to the connection as ``store``, when there is one."""
        self.orphans = 0
        if self.sketch_params is None and (database.parent / SKETCH_STORE / SKETCH_DATABASE).is_file():
            self._attach_sketch_store(database.parent / SKETCH_STORE / SKETCH_DATABASE)
        row = self.conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'entries'").fetchone()
        top = self.conn.execute("SELECT max(seq), count(*) FROM entries").fetchone()
        self.high, self.count = max(row[0] if row else 0, top[0] or 0), int(top[1])
        if "db_id" in self.settings:
            try:
                check_mark(
                    database, read_mark(database.parent), self.settings["db_id"], self.high, self.count
                )
            except SimhashIndexError as exc:
                raise UpgradeDamaged(f"{exc}; nothing was written") from exc

    def _attach_sketch_store(self, database: Path) -> None:
        """A second store's sketches, read with their pages (a join, not a copy in memory): attached
        after SQLite's check of it; its rows without page (dropped) are checked and counted here."""
        conn = connect(database)
        try:
            stored = signed_settings(conn, database)
        except sqlite3.DatabaseError as exc:
            raise damaged(database, f"{type(exc).__name__}: {exc}") from exc
        finally:
            conn.close()
        if not stored:
            return
        self.sketch_params = sketch_params(stored, database)
        self.conn.execute("ATTACH DATABASE ? AS store", (read_only_uri(database),))
        self.store = database
        lonely = (
            "SELECT seq, key, sketch, meta, chk FROM store.sketches "
            "WHERE key NOT IN (SELECT key FROM main.entries)"
        )
        for seq, key, sketch, meta, chk in self.conn.execute(lonely):
            self._stored_sketch(seq, key, sketch, meta, chk)
            self.orphans += 1

    def _stored_sketch(self, seq: Any, key: Any, sketch: Any, meta: Any, chk: Any) -> bytes:
        """A row of the second store, checked against its checksum."""
        assert self.store is not None and self.sketch_params is not None
        width = self.sketch_params["value_bits"] // 8 * self.sketch_params["num_values"]
        if not isinstance(sketch, bytes) or len(sketch) != width:
            raise damaged(self.store, f"row {seq} ({key!r}) holds a sketch of the wrong length")
        if not isinstance(chk, int) or chk & 0xFFFFFFFF != sketch_row_check(seq, key, sketch, meta):
            raise damaged(self.store, f"row {seq} ({key!r}) fails its checksum")
        return sketch

    def rows(self) -> Iterator[list[tuple[int, str, int, str | None, int | None, bytes | None, bool]]]:
        """``(seq, key, unsigned simhash, meta, chk, sketch, moved)`` in seq order, each row checked:
        the row's sketch as stored, or (``moved``) its sketch in the second store."""
        chk = "e.chk" if self.has_chk else "NULL"
        sketch = "e.sketch" if self.has_sketch else "NULL"
        joined, join = ", NULL, NULL, NULL, NULL", ""
        if self.store is not None:
            joined, join = (
                ", s.seq, s.sketch, s.meta, s.chk",
                " LEFT JOIN store.sketches AS s ON s.key = e.key",
            )
        query = (
            f"SELECT e.seq, e.key, e.simhash, e.meta, {chk}, {sketch}{joined} FROM main.entries AS e{join}"
        )
        try:
            cursor = self.conn.execute(f"{query} ORDER BY e.seq")
            while chunk := cursor.fetchmany(BATCH):
                out = []
                for row in chunk:
                    seq, key, h, meta, chk_value, own = self._checked(*row[:6])
                    moved = own is None and row[7] is not None
                    if moved:
                        own = self._stored_sketch(row[6], key, row[7], row[8], row[9])
                    out.append((seq, key, h, meta, chk_value, own, moved))
                yield out
        except sqlite3.DatabaseError as exc:
            raise damaged(self.path, f"{type(exc).__name__}: {exc}") from exc

    def _checked(
        self, seq: Any, key: Any, simhash: Any, meta: Any, chk: Any, sketch: Any
    ) -> tuple[int, str, int, str | None, int | None, bytes | None]:
        if not (
            isinstance(seq, int) and isinstance(key, str) and key and isinstance(simhash, int) and simhash
        ):
            raise damaged(self.path, f"row {seq!r} ({key!r}) holds a value of the wrong type")
        if not isinstance(meta, str | None) or not isinstance(sketch, bytes | None):
            raise damaged(self.path, f"row {seq} ({key!r}) holds a value of the wrong type")
        h = simhash + WRAP if simhash < 0 else simhash
        if chk is None:
            if seq > self.unchecked_upto:
                raise damaged(self.path, f"row {seq} ({key!r}) has no checksum")
        elif (chk + WRAP if chk < 0 else chk) != row_check(seq, h, key, meta, sketch):
            raise damaged(self.path, f"row {seq} ({key!r}) fails its checksum")
        if meta:
            try:
                if not isinstance(json.loads(meta), dict):
                    raise ValueError("not a JSON object")
            except ValueError as exc:
                raise damaged(self.path, f"row {seq} ({key!r}) holds meta that is not a JSON object") from exc
        return seq, key, h, meta, chk, sketch

    def narrow(self, sketch: bytes, seq: int, key: str) -> tuple[bytes, bool]:
        """A stored sketch as 8-bit values; whether it was wider."""
        params = self.sketch_params
        if params is None:
            raise damaged(
                self.path, f"row {seq} ({key!r}) holds a sketch, but the index records no sketch settings"
            )
        width = params["value_bits"] // 8
        if len(sketch) != width * params["num_values"]:
            raise damaged(self.path, f"row {seq} ({key!r}) holds a sketch of the wrong length")
        if width == 1:
            return sketch, False
        return np.frombuffer(sketch, dtype="<u4").astype(np.uint8).tobytes(), True

    def close(self) -> None:
        self.conn.close()


_SCHEMA = """
CREATE TABLE settings (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE entries (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    key TEXT NOT NULL UNIQUE,
    simhash INTEGER NOT NULL,
    meta TEXT,
    chk INTEGER,
    sketch BLOB
);
CREATE TABLE tombstones (seq INTEGER PRIMARY KEY);
CREATE TABLE resketched (seq INTEGER PRIMARY KEY);
"""
"""Format 3's tables, as :mod:`.storage` creates them."""


def _new_settings(old: OldIndex) -> dict[str, str]:
    values = {name: value for name, value in old.settings.items() if name.startswith("note:")}
    values.update(
        layout=old.settings["layout"], k=old.settings["k"], format=str(FORMAT), db_id=uuid.uuid4().hex
    )
    if old.sketch_params is not None:
        params = {**old.sketch_params, "value_bits": 8, "scheme": SCHEME}
        values.update({f"sketch_{name}": str(value) for name, value in params.items()})
    return values


def write(old: OldIndex, database: Path, report: UpgradeReport, progress: Callable[[str], None]) -> None:
    """Format 3's database at ``database``: every old row with its seq, its checksum, its 8-bit sketch."""
    conn = sqlite3.connect(database, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.executescript(_SCHEMA)
        conn.execute("BEGIN")
        insert = "INSERT INTO entries (seq, key, simhash, meta, chk, sketch) VALUES (?, ?, ?, ?, ?, ?)"
        for chunk in old.rows():
            out = []
            for seq, key, h, meta, chk, sketch, moved in chunk:
                report.unchecked += chk is None
                report.moved += moved
                if sketch is not None:
                    sketch, wider = old.narrow(sketch, seq, key)
                    report.narrowed += wider
                    report.with_sketch += 1
                check = row_check(seq, h, key, meta, sketch)
                out.append(
                    (
                        seq,
                        key,
                        h - WRAP if h >= SIGN else h,
                        meta,
                        check - WRAP if check >= SIGN else check,
                        sketch,
                    )
                )
            conn.executemany(insert, out)
            report.pages += len(out)
            progress(f"upgrade: {report.pages} of {old.count} pages read")
        report.orphans = old.orphans
        # the high-water seq (a removal advanced it too): seqs are never reused
        update = "UPDATE sqlite_sequence SET seq = ? WHERE name = 'entries'"
        if old.high and not conn.execute(update, (old.high,)).rowcount:
            conn.execute("INSERT INTO sqlite_sequence (name, seq) VALUES ('entries', ?)", (old.high,))
        values = _new_settings(old)
        rows = [*values.items(), ("check", settings_check(values))]
        conn.executemany("INSERT INTO settings VALUES (?, ?)", rows)
        conn.execute("COMMIT")
    finally:
        conn.close()
