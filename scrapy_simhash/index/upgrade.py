"""A one-off converter: an index written by an earlier development version into this version's format.

``scrapy-simhash index upgrade OLD NEW`` (:func:`upgrade`). The run-time stores read one format
(:mod:`.store_format`); this module alone knows the earlier ones, from their shapes in the database,
with nothing but :mod:`sqlite3` and numpy:

- **format 1** (no ``format``, no settings ``check``, no ``chk`` column): rows without checksums;
- **checksums without a format** (``chk`` and ``check``, no ``format``): rows from before checksums
  may still lack one;
- **format 2**: rows and settings checksummed, except rows up to ``unchecked_upto``;
- **no sketch column** (written before sketches, or only ever in simhash mode): pages without sketch;
- **a second sketch store** ``sketches/`` (a MinHash index database, ``minhash.sqlite3``): the
  sketches move into their pages' rows; a sketch whose page is missing (an insert a crash cut) is
  dropped, as that version's first writer dropped it;
- **32-bit sketch values** (``sketch_value_bits`` 32, or a ``sketches/`` store without
  ``value_bits``): each value keeps its low 8 bits, as this version's verified index keeps them.

Every row keeps its seq (its age), key, fingerprint and meta; tombstones and table files are derived
and rebuilt. A row that carries a checksum must pass it, the settings' ``check`` too, SQLite's
``integrity_check`` must pass and the database must hold what its commit mark acknowledged: any
damage stops the conversion (:class:`UpgradeDamaged`) and NEW is not created. Pages without a
sketch cannot get one from nothing: they are kept as rows without sketch, which the verified index
judges by simhash alone (``index stats``: ``without_sketch``) until re-fingerprinted.

NEW is written in a temporary directory beside it, opened once by the run-time index (which builds
its tables and checks every row), then renamed: a failed conversion leaves no NEW.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import sqlite3
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..fingerprint.minhash import SCHEME
from .base import SimhashIndexError
from .database import settings_check
from .integrity import check_mark, read_mark, row_check
from .sketch_rows import sketch_row_check
from .store_format import FORMAT

DATABASE = "index.sqlite3"
SKETCH_STORE = "sketches"
"""Where earlier versions kept a verified index's sketches: a MinHash index directory in the index's."""
SKETCH_DATABASE = "minhash.sqlite3"
_BATCH = 50_000
_EVERYTHING = (1 << 63) - 1
_SIGN, _WRAP = 1 << 63, 1 << 64


class UpgradeError(SimhashIndexError):
    """The conversion cannot start (NEW exists, OLD is no index or already in this format)."""


class UpgradeDamaged(SimhashIndexError):
    """OLD is damaged: a row or setting fails its checksum, SQLite finds errors, writes were lost."""


@dataclass
class UpgradeReport:
    """What the conversion found and wrote."""

    found_format: str
    pages: int = 0
    with_sketch: int = 0
    unchecked: int = 0
    """Rows that had no checksum (written before checksums): copied as they were, now checksummed."""
    narrowed: int = 0
    """Sketches whose 32-bit values were reduced to their low 8 bits."""
    moved: int = 0
    """Sketches moved from a second store (``sketches/``) into their pages' rows."""
    orphans: int = 0
    """Sketches of that store whose page was missing (dropped)."""

    @property
    def without_sketch(self) -> int:
        return self.pages - self.with_sketch


def upgrade(
    old: str | Path, new: str | Path, progress: Callable[[str], None] = lambda line: None
) -> UpgradeReport:
    """Convert the embedded index at ``old`` into a new index at ``new`` in this version's format.

    ``old`` is only read. ``new`` must not exist; it appears whole or not at all.
    ``progress`` receives a line now and then (the command prints them on stderr).
    """
    old, new = Path(old), Path(new)
    if new.exists():
        raise UpgradeError(f"{new} exists: give a new directory for the converted index")
    database = old / DATABASE
    if not database.is_file():
        if (old / SKETCH_DATABASE).is_file():
            raise UpgradeError(f"{old} holds a MinHash index, which opens as it is: nothing to upgrade")
        raise UpgradeError(f"{old} holds no index ({DATABASE} is missing)")
    staging = new.parent / f".{new.name}.upgrading-{os.getpid()}"
    with _writer_excluded(old):
        reader = _OldIndex(database)
        try:
            report = UpgradeReport(reader.format or "none")
            new.parent.mkdir(parents=True, exist_ok=True)
            staging.mkdir()
            try:
                _write(reader, staging / DATABASE, report, progress)
                progress(f"upgrade: {report.pages} pages copied; building the index's tables")
                _build_tables(staging, with_sketches=reader.sketch_params is not None)
                staging.rename(new)
                _sync_directory(new.parent)
            except BaseException:
                shutil.rmtree(staging, ignore_errors=True)
                raise
        finally:
            reader.close()
    return report


class _writer_excluded:
    """Holds OLD's write lock (``LOCK``) while it is read, so that no writer changes it meanwhile."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / "LOCK"
        self.fd: int | None = None

    def __enter__(self) -> None:
        if not self.path.exists():
            return
        self.fd = os.open(self.path, os.O_RDONLY)
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self.fd)
            self.fd = None
            raise UpgradeError(
                f"another process is writing the index at {self.path.parent}: stop it first"
            ) from None

    def __exit__(self, *exc: object) -> None:
        if self.fd is not None:
            os.close(self.fd)


def _damaged(database: Path, what: str) -> UpgradeDamaged:
    return UpgradeDamaged(
        f"the index database {database} is damaged ({what}); nothing was written. Restore it from a "
        f"backup, or rebuild the index from the pages' WARCs"
    )


def _connect(database: Path) -> sqlite3.Connection:
    """Read-only, after SQLite's full check (pages, indexes, free list). Without a write-ahead log (a
    writer closed it cleanly) the file is read as immutable, so that not even SQLite's shared-memory
    file is left beside it; with one (a writer was killed), SQLite reads it, as the old version would."""
    mode = "ro" if Path(f"{database}-wal").exists() else "ro&immutable=1"
    try:
        conn = sqlite3.connect(f"file:{database}?mode={mode}", uri=True)
        problems = [row[0] for row in conn.execute("PRAGMA integrity_check(3)").fetchall()]
    except sqlite3.DatabaseError as exc:
        raise _damaged(database, f"{type(exc).__name__}: {exc}") from exc
    if problems != ["ok"]:
        conn.close()
        raise _damaged(database, "integrity_check: " + "; ".join(problems))
    return conn


def _signed_settings(conn: sqlite3.Connection, database: Path) -> dict[str, str]:
    """The settings, checked against their ``check`` when they have one."""
    stored = dict(conn.execute("SELECT name, value FROM settings").fetchall())
    check = stored.pop("check", None)
    if check is not None and check != settings_check(stored):
        raise _damaged(database, "the settings fail their checksum")
    return stored


def _sketch_params(stored: dict[str, str], where: Path) -> dict[str, Any]:
    """A sketch store's or column's parameters (value_bits 32 when not recorded: before the setting)."""
    if stored.get("scheme") != SCHEME:
        raise UpgradeError(
            f"{where} holds {stored.get('scheme')!r} sketches, not {SCHEME!r}: "
            "rebuild the index from the pages"
        )
    try:
        params = {
            "num_values": int(stored["num_values"]),
            "threshold": float(stored["threshold"]),
            "bands": int(stored["bands"]),
            "rows": int(stored["rows"]),
            "value_bits": int(stored.get("value_bits", 32)),
        }
    except (KeyError, ValueError) as exc:
        raise _damaged(where, f"its sketch settings are incomplete: {exc}") from exc
    if params["value_bits"] not in (8, 32):
        raise _damaged(where, f"{params['value_bits']}-bit sketch values")
    return params


class _OldIndex:
    """An earlier version's simhash store (and its ``sketches/`` store, if any), read-only."""

    def __init__(self, database: Path) -> None:
        self.path = database
        self.conn = _connect(database)
        try:
            self._read_settings()
        except sqlite3.DatabaseError as exc:
            self.conn.close()
            raise _damaged(database, f"{type(exc).__name__}: {exc}") from exc
        except BaseException:
            self.conn.close()
            raise

    def _read_settings(self) -> None:
        database = self.path
        tables = {r[0] for r in self.conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if not {"settings", "entries"} <= tables:
            raise _damaged(database, "the tables settings and entries are missing")
        raw = dict(self.conn.execute("SELECT name, value FROM settings").fetchall())
        self.settings = _signed_settings(self.conn, database)
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
            raise _damaged(database, "its settings lack the layout or k")
        columns = {r[1] for r in self.conn.execute("PRAGMA table_info(entries)")}
        self.has_chk, self.has_sketch = "chk" in columns, "sketch" in columns
        if self.format == "2" and ("check" not in raw or not self.has_chk):
            raise _damaged(database, "format 2 without its checksums")
        if self.has_chk and "check" not in raw:  # only a database from before checksums lacks it
            raise _damaged(database, "the settings lack their checksum")
        if not self.has_chk and "check" in raw:
            raise _damaged(database, "its rows' checksum column is missing, but its settings are checksummed")
        if self.format == "2":
            self.unchecked_upto = int(self.settings.get("unchecked_upto", 0))
        else:  # format 1, or checksums but no format: rows from before checksums may lack one anywhere
            self.unchecked_upto = _EVERYTHING
        mine = {n.removeprefix("sketch_"): v for n, v in self.settings.items() if n.startswith("sketch_")}
        self.sketch_params = _sketch_params(mine, database) if mine else None
        self.store: dict[str, bytes] = {}
        self.store_rows = 0
        if self.sketch_params is None and (database.parent / SKETCH_STORE / SKETCH_DATABASE).is_file():
            self._read_sketch_store(database.parent / SKETCH_STORE / SKETCH_DATABASE)
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

    def _read_sketch_store(self, database: Path) -> None:
        """The sketches of a second store, reduced to 8 bits, each row checked against its checksum."""
        conn = _connect(database)
        try:
            stored = _signed_settings(conn, database)
            if not stored:
                return
            self.sketch_params = params = _sketch_params(stored, database)
            width = params["value_bits"] // 8
            for seq, key, sketch, meta, chk in conn.execute(
                "SELECT seq, key, sketch, meta, chk FROM sketches"
            ):
                if not isinstance(sketch, bytes) or len(sketch) != width * params["num_values"]:
                    raise _damaged(database, f"row {seq} ({key!r}) holds a sketch of the wrong length")
                if chk is None or chk & 0xFFFFFFFF != sketch_row_check(seq, key, sketch, meta):
                    raise _damaged(database, f"row {seq} ({key!r}) fails its checksum")
                self.store[key] = sketch
            self.store_rows = len(self.store)
        except sqlite3.DatabaseError as exc:
            raise _damaged(database, f"{type(exc).__name__}: {exc}") from exc
        finally:
            conn.close()

    def rows(self) -> Iterator[list[tuple[int, str, int, str | None, int | None, bytes | None]]]:
        """``(seq, key, unsigned simhash, meta, chk, sketch as stored)`` in seq order, each row checked."""
        chk = "chk" if self.has_chk else "NULL"
        sketch = "sketch" if self.has_sketch else "NULL"
        try:
            cursor = self.conn.execute(
                f"SELECT seq, key, simhash, meta, {chk}, {sketch} FROM entries ORDER BY seq"
            )
            while chunk := cursor.fetchmany(_BATCH):
                yield [self._checked(*row) for row in chunk]
        except sqlite3.DatabaseError as exc:
            raise _damaged(self.path, f"{type(exc).__name__}: {exc}") from exc

    def _checked(
        self, seq: Any, key: Any, simhash: Any, meta: Any, chk: Any, sketch: Any
    ) -> tuple[int, str, int, str | None, int | None, bytes | None]:
        if not (
            isinstance(seq, int) and isinstance(key, str) and key and isinstance(simhash, int) and simhash
        ):
            raise _damaged(self.path, f"row {seq!r} ({key!r}) holds a value of the wrong type")
        if not isinstance(meta, str | None) or not isinstance(sketch, bytes | None):
            raise _damaged(self.path, f"row {seq} ({key!r}) holds a value of the wrong type")
        h = simhash + _WRAP if simhash < 0 else simhash
        if chk is None:
            if seq > self.unchecked_upto:
                raise _damaged(self.path, f"row {seq} ({key!r}) has no checksum")
        elif (chk + _WRAP if chk < 0 else chk) != row_check(seq, h, key, meta, sketch):
            raise _damaged(self.path, f"row {seq} ({key!r}) fails its checksum")
        if meta:
            try:
                if not isinstance(json.loads(meta), dict):
                    raise ValueError("not a JSON object")
            except ValueError as exc:
                raise _damaged(
                    self.path, f"row {seq} ({key!r}) holds meta that is not a JSON object"
                ) from exc
        return seq, key, h, meta, chk, sketch

    def narrow(self, sketch: bytes, seq: int, key: str) -> tuple[bytes, bool]:
        """A stored sketch as 8-bit values; whether it was wider."""
        params = self.sketch_params
        if params is None:
            raise _damaged(
                self.path, f"row {seq} ({key!r}) holds a sketch, but the index records no sketch settings"
            )
        width = params["value_bits"] // 8
        if len(sketch) != width * params["num_values"]:
            raise _damaged(self.path, f"row {seq} ({key!r}) holds a sketch of the wrong length")
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


def _new_settings(old: _OldIndex) -> dict[str, str]:
    values = {name: value for name, value in old.settings.items() if name.startswith("note:")}
    values.update(
        layout=old.settings["layout"], k=old.settings["k"], format=str(FORMAT), db_id=uuid.uuid4().hex
    )
    if old.sketch_params is not None:
        params = {**old.sketch_params, "value_bits": 8, "scheme": SCHEME}
        values.update({f"sketch_{name}": str(value) for name, value in params.items()})
    return values


def _write(old: _OldIndex, database: Path, report: UpgradeReport, progress: Callable[[str], None]) -> None:
    """Format 3's database at ``database``: every old row with its seq, its checksum, its 8-bit sketch."""
    conn = sqlite3.connect(database, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.executescript(_SCHEMA)
        conn.execute("BEGIN")
        insert = "INSERT INTO entries (seq, key, simhash, meta, chk, sketch) VALUES (?, ?, ?, ?, ?, ?)"
        for chunk in old.rows():
            out = []
            for seq, key, h, meta, chk, sketch in chunk:
                report.unchecked += chk is None
                if sketch is None and key in old.store:
                    sketch = old.store.pop(key)
                    report.moved += 1
                if sketch is not None:
                    sketch, wider = old.narrow(sketch, seq, key)
                    report.narrowed += wider
                    report.with_sketch += 1
                check = row_check(seq, h, key, meta, sketch)
                out.append(
                    (
                        seq,
                        key,
                        h - _WRAP if h >= _SIGN else h,
                        meta,
                        check - _WRAP if check >= _SIGN else check,
                        sketch,
                    )
                )
            conn.executemany(insert, out)
            report.pages += len(out)
            progress(f"upgrade: {report.pages} of {old.count} pages read")
        report.orphans = len(old.store)
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


def _sync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _build_tables(directory: Path, with_sketches: bool) -> None:
    """Open the new index once as its writer: every row is checked, the tables (and the sketches'
    LSH files) are written, so that NEW opens by mapping them."""
    from . import open_index

    with open_index(directory, mode="verified" if with_sketches else "simhash") as index:
        index.compact()
