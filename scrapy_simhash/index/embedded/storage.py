"""The index's source of truth: one SQLite database (stdlib, no server).

WAL mode with ``synchronous=FULL`` makes every committed transaction durable when the
call returns; one transaction per ``add_many`` batch amortises the fsync. Everything
else in the index directory (the sorted tables) is derived from this database and can be
rebuilt from it.

Tables:

- ``entries(seq, key, simhash, meta, chk, sketch)``: ``seq`` is the insertion order (age), never
  reused (AUTOINCREMENT; a removal advances it too, so every acknowledged write moves the high-water
  mark), so a derived table file can refer to rows by ``seq``. ``chk`` is the row's checksum
  (:mod:`.integrity`), verified whenever the row is read; a NULL is damage.
  ``sketch``: the page's minhash sketch as the verified index keeps it (:mod:`.sketch_column`), or
  NULL: in the page's own row, so that a page and its sketch are one write and the key is stored once.
- ``tombstones(seq)``: rows removed since the table files were last written; they tell
  the reopened index which rows of the files to ignore.
- ``resketched(seq)``: rows whose sketch changed since the table files were written.
- the index ``entries_without_sketch``: the seqs of the rows without a sketch (usually none), so that
  listing them does not read the whole table (a writer adds it to a database written without it).
- ``settings(name, value)``: layout, k, the database's identity, ``format`` (:data:`FORMAT`), the
  sketch column's settings (``sketch_*``), the index's notes (``note:extractor``, ...:
  :meth:`Store.note`), and ``check``: their CRC-32.

The format is the one :mod:`.store_format` describes; a database of an earlier one is refused at open
(:class:`~.store_format.IndexFormatError`, naming ``scrapy-simhash index upgrade``).

Any SQLite or JSON error while reading means a damaged database and is raised as
:class:`IndexCorruptError` naming the file.
"""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..base import IndexCorruptError, IndexSettingsError
from .database import check_synchronous, connect, settings_check
from .integrity import CommitMark, Mark, check_mark, check_sqlite, row_check, row_columns
from .row_scans import SELECTED, RowScans, to_signed, to_unsigned
from .store_format import FORMAT, refuse_format

_CHUNK = 500  # host parameters per statement, well under SQLite's limit
_TABLES = {"settings", "entries", "tombstones", "resketched"}
_COLUMNS = {"seq", "key", "simhash", "meta", "chk", "sketch"}
_INSERT = "INSERT INTO entries (seq, key, simhash, meta, chk, sketch) VALUES (?, ?, ?, ?, ?, ?)"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS settings (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS entries (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    key TEXT NOT NULL UNIQUE,
    simhash INTEGER NOT NULL,
    meta TEXT,
    chk INTEGER,
    sketch BLOB
);
CREATE TABLE IF NOT EXISTS tombstones (seq INTEGER PRIMARY KEY);
CREATE TABLE IF NOT EXISTS resketched (seq INTEGER PRIMARY KEY);
"""
_WITHOUT_SKETCH = "CREATE INDEX IF NOT EXISTS entries_without_sketch ON entries (seq) WHERE sketch IS NULL"
"""The rows without a sketch, found without reading every row (the verified index lists them at open):
a partial index, empty while every page has its sketch."""


def _chunks(values: Sequence[Any], size: int = _CHUNK) -> Iterator[Sequence[Any]]:
    for start in range(0, len(values), size):
        yield values[start : start + size]


class Store(RowScans):
    """Durable rows of the index. Not thread-safe by itself: the index serialises calls.

    ``check``: run SQLite's ``"quick"`` or ``"thorough"`` check at open (see :func:`check_sqlite`).
    After opening, ``high`` (the high-water seq) and ``live`` (rows) are read in one snapshot.
    ``counted``: the commit mark, whose row count is taken as ``live`` while the database's high-water
    seq is the mark's (every acknowledged write moves it): no ``count(*)``, which reads the whole key
    index. Give it only when the open checks found no reason to doubt the mark (a clean shutdown).
    """

    def __init__(
        self,
        path: Path,
        read_only: bool = False,
        synchronous: str = "full",
        check: str | None = None,
        counted: Mark | None = None,
    ) -> None:
        check_synchronous(synchronous)
        self.path = path
        self.read_only = read_only
        self.mark: CommitMark | None = None
        self._counted: Mark | None = None
        self.counts = 0
        """How many times the rows were counted with ``count(*)`` (at open: 0 when the mark told)."""
        try:
            self.conn = connect(path, read_only, synchronous)
            if check:
                check_sqlite(self.conn, path, thorough=check == "thorough")
            self._prepare_schema()
            if counted is not None and counted.db_id == self.stored_settings().get("db_id"):
                self._counted = counted
            with self.snapshot():  # reads high and live
                pass
        except (IndexCorruptError, IndexSettingsError):
            self.conn.close()
            raise
        except sqlite3.DatabaseError as exc:
            if hasattr(self, "conn"):  # connect() itself can fail
                self.conn.close()
            raise IndexCorruptError(
                f"the index database {path} is damaged or not an index ({exc}); it is the source of truth "
                f"and cannot be rebuilt: restore it from a backup or export what `sqlite3 .recover` finds"
            ) from exc
        self.next_seq = self.high + 1

    def _prepare_schema(self) -> None:
        """Create a new database's tables; refuse a database of an earlier format (before looking for
        what it may lack) and one whose tables or columns are missing."""
        tables = {r[0] for r in self.conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if not tables and not self.read_only:
            self.conn.executescript(f"BEGIN IMMEDIATE; {_SCHEMA} COMMIT;")
            tables = set(_TABLES)
        columns = {r[1] for r in self.conn.execute("PRAGMA table_info(entries)")}
        if "settings" in tables:
            self._check_format(checksummed="chk" in columns)
        if not tables >= _TABLES:
            raise sqlite3.DatabaseError(f"tables {sorted(_TABLES - tables)} are missing")
        if not columns >= _COLUMNS:
            raise sqlite3.DatabaseError(f"columns {sorted(_COLUMNS - columns)} of entries are missing")

    def _check_format(self, checksummed: bool) -> None:
        """The settings (if any: a new database gets them next) are signed and record :data:`FORMAT`.

        Only a database written before checksums (no ``chk`` column) may lack the settings' ``check``:
        deleting it from a later one is damage, not a way to make it look old."""
        stored = self.stored_settings()
        check = stored.pop("check", None)
        if check is None and not stored:
            return
        if check is None and checksummed:
            raise self.damaged("the settings lack their checksum")
        if check is not None and check != settings_check(stored):
            raise self.damaged("the settings fail their checksum")
        if stored.get("format") != str(FORMAT):
            raise refuse_format(self.path.parent, stored.get("format"))

    def index_rows_without_sketch(self) -> None:
        """A writer, after its mark says the index is open for writing: add ``entries_without_sketch``
        to a database written without it (once: it reads every row then)."""
        with self._reading():
            self.conn.execute(_WITHOUT_SKETCH)

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        """Several reads from one state of the database, starting with ``high`` and ``live``."""
        with self._reading():
            self.conn.execute("BEGIN")
        try:
            with self._reading():
                self.high = self._max_seq()
                self.live = self._live()
            yield
        finally:
            self.conn.execute("COMMIT")

    def _live(self) -> int:
        """The row count: the commit mark's while the database is where the mark says, else counted."""
        known = self._counted
        if known is not None and known.high == self.high:
            return known.count
        self._counted = None  # the database moved on (another writer, or this one): count from now on
        self.counts += 1
        return int(self.conn.execute("SELECT count(*) FROM entries").fetchone()[0])

    def recount(self) -> bool:
        """When ``live`` was the commit mark's count: count the rows (in the caller's snapshot), and
        IndexCorruptError when they are fewer than the mark says; whether they were counted."""
        known = self._counted
        if known is None or known.high != self.high:
            return False
        self._counted = None
        self.live = self._live()
        check_mark(self.path, known, known.db_id, self.high, self.live)
        return True

    def _max_seq(self) -> int:
        row = self.conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'entries'").fetchone()
        top = self.conn.execute("SELECT max(seq) FROM entries").fetchone()[0]
        return max(row[0] if row else 0, top or 0)

    def _marked(self) -> None:
        """After a commit: the high-water mark and row count it left, for :func:`check_mark`."""
        self.high = self.next_seq - 1
        if self.mark is not None:
            self.mark.write(self.high, self.live)

    # settings
    def stored_settings(self) -> dict[str, str]:
        """The settings rows as they are (``check`` included), unverified."""
        with self._reading():
            return dict(self.conn.execute("SELECT name, value FROM settings").fetchall())

    def settings(self) -> dict[str, str]:
        """The settings, verified against their stored CRC-32."""
        stored = self.stored_settings()
        check = stored.pop("check", None)
        if check is None and stored:
            raise self.damaged("the settings lack their checksum")
        if check is not None and check != settings_check(stored):
            raise self.damaged("the settings fail their checksum")
        return stored

    def init_settings(self, values: dict[str, str]) -> dict[str, str]:
        """Write settings for a new database (once); returns the stored ones."""
        with self._transaction():
            current = self.stored_settings()
            current.pop("check", None)
            if not current:
                current = self.add_settings({**values, "format": str(FORMAT), "db_id": uuid.uuid4().hex})
        return current

    # writes
    def put_many(
        self, items: list[tuple[int, str, str | None, bytes | None]], tombstone_upto: int
    ) -> tuple[list[int], list[int]]:
        """Store ``(simhash, key, meta_json, sketch)`` (keys unique) in one durable transaction.

        Returns the new seqs (in item order) and the seqs the keys held before.
        Replaced rows at or below ``tombstone_upto`` (the table files' last seq) get a
        tombstone in the same transaction.
        """
        start = self.next_seq
        seqs = list(range(start, start + len(items)))
        signed, checks = row_columns(start, items)
        _, keys, metas, sketches = zip(*items, strict=True) if items else ((), (), (), ())
        rows = list(zip(seqs, keys, signed, metas, checks, sketches, strict=True))  # no Python step a row
        try:  # fast path: all keys new (the common case in a crawl), one pass over the key index
            with self._transaction():
                self.conn.executemany(_INSERT, rows)
            self.next_seq = start + len(items)
            self.live += len(items)
            self._marked()
            return seqs, []
        except sqlite3.IntegrityError:
            pass  # some key exists: rolled back; replace explicitly
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
            self.conn.executemany(_INSERT, rows)
        self.next_seq = start + len(items)
        self.live += len(items) - len(replaced)
        self._marked()
        return seqs, replaced

    def delete(self, key: str, tombstone_upto: int) -> int | None:
        """Remove ``key``; its old seq or None. Advances the high-water seq by one."""
        with self._transaction():
            row = self.conn.execute("SELECT seq FROM entries WHERE key = ?", (key,)).fetchone()
            if row is None:
                return None
            self.conn.execute("DELETE FROM entries WHERE seq = ?", (row[0],))
            if row[0] <= tombstone_upto:
                self._tombstone([row[0]])
            self._advance_sequence()
        self.next_seq += 1
        self.live -= 1
        self._marked()
        return int(row[0])

    def _advance_sequence(self) -> None:
        """In a write that inserts no row: take ``next_seq`` as used, so that the write moves the
        high-water mark as every acknowledged write does (the caller then counts it used)."""
        cur = self.conn.execute("UPDATE sqlite_sequence SET seq = ? WHERE name = 'entries'", (self.next_seq,))
        if not cur.rowcount:  # no row was ever inserted
            self.conn.execute(
                "INSERT INTO sqlite_sequence (name, seq) VALUES ('entries', ?)", (self.next_seq,)
            )

    def _tombstone(self, seqs: list[int]) -> None:
        if seqs:
            self.conn.executemany("INSERT OR IGNORE INTO tombstones (seq) VALUES (?)", [(s,) for s in seqs])

    def clear_tombstones(self, upto: int, removed: set[int], resketched: set[int]) -> None:
        """The table files now hold every row up to ``upto``: forget what changed in them before,
        but for ``removed`` and ``resketched``, rows that changed while those files were written."""
        with self._transaction():
            self.conn.execute("DELETE FROM tombstones WHERE seq <= ?", (upto,))
            self.conn.execute("DELETE FROM resketched WHERE seq <= ?", (upto,))
            self._tombstone(sorted(s for s in removed if s <= upto))
            kept = [(s,) for s in sorted(resketched) if s <= upto]
            self.conn.executemany("INSERT OR IGNORE INTO resketched (seq) VALUES (?)", kept)

    # reads
    def count(self) -> int:
        with self._reading():
            return int(self.conn.execute("SELECT count(*) FROM entries").fetchone()[0])

    def get(self, key: str) -> tuple[int, int, dict[str, Any]] | None:
        with self._reading():
            row = self.conn.execute(f"SELECT {SELECTED} FROM entries WHERE key = ?", (key,)).fetchone()
            if row is None:
                return None
            if row[1] != key:
                raise self.damaged(f"the key index leads {key!r} to row {row[0]} of {row[1]!r}")
            return int(row[0]), to_unsigned(row[2]), self._verified(*row)

    def get_many(
        self, keys: Sequence[str], seq_hints: Sequence[int] | None = None
    ) -> dict[str, tuple[int, int, dict[str, Any]]]:
        """``get`` for many keys in one read (missing keys are absent from the result).

        ``seq_hints``: a guess of each key's seq (0: none). Rows are read by seq first (one
        B-tree instead of the key index and the table: ~1.5x faster); a hint is taken only
        when its row holds that key (seqs are never reused), else the key is read by key.
        """
        out: dict[str, tuple[int, int, dict[str, Any]]] = {}
        wanted = list(keys)
        with self._reading():
            if seq_hints is not None:
                hinted = {seq: key for key, seq in zip(wanted, seq_hints, strict=True) if seq > 0}
                if hinted:
                    for chunk in _chunks(list(hinted)):
                        marks = ",".join("?" * len(chunk))
                        self._collect(out, f"seq IN ({marks})", chunk, hinted)
                    wanted = [key for key in wanted if key not in out]
            for chunk in _chunks(wanted):
                marks = ",".join("?" * len(chunk))
                self._collect(out, f"key IN ({marks})", chunk, None)
        return out

    def _collect(
        self,
        out: dict[str, tuple[int, int, dict[str, Any]]],
        where: str,
        args: Sequence[Any],
        expected: dict[int, str] | None,
    ) -> None:
        """Verified rows into ``out`` by key (``expected``: only rows whose seq maps to their key)."""
        for row in self.conn.execute(f"SELECT {SELECTED} FROM entries WHERE {where}", args):
            seq, key = row[0], row[1]
            if expected is None or expected.get(seq) == key:
                out[key] = (seq, to_unsigned(row[2]), self._verified(*row))

    def fetch(self, seqs: Sequence[int]) -> dict[int, tuple[str, dict[str, Any], int]]:
        """Key, meta and fingerprint of each stored seq (missing seqs are absent from the result)."""
        return {row[0]: (row[1], meta, to_unsigned(row[2])) for row, meta in self._rows_by_seq(seqs)}

    def fetch_sketched(self, seqs: Sequence[int]) -> dict[int, tuple[tuple[str, dict[str, Any], int], bytes]]:
        """:meth:`fetch` of the stored ``seqs`` with a sketch, each with its sketch."""
        return {
            row[0]: ((row[1], meta, to_unsigned(row[2])), row[5])
            for row, meta in self._rows_by_seq(seqs)
            if row[5] is not None
        }

    def _rows_by_seq(self, seqs: Sequence[int]) -> list[tuple[tuple[Any, ...], dict[str, Any]]]:
        """The stored rows of ``seqs`` (:data:`SELECTED`), each verified, with its meta."""
        out = []
        with self._reading():
            for chunk in _chunks(list(seqs)):
                marks = ",".join("?" * len(chunk))
                query = f"SELECT {SELECTED} FROM entries WHERE seq IN ({marks})"
                out += [(row, self._verified(*row)) for row in self.conn.execute(query, chunk)]
        return out

    def sketch_rows(self, keys: Sequence[str]) -> dict[str, tuple[int, bytes]]:
        """``key -> (seq, sketch)`` of the stored ``keys`` with a sketch, each row verified."""
        out: dict[str, tuple[int, bytes]] = {}
        with self._reading():
            for chunk in _chunks(list(keys)):
                marks = ",".join("?" * len(chunk))
                query = f"SELECT {SELECTED} FROM entries WHERE key IN ({marks})"
                for row in self.conn.execute(query, chunk):
                    self._verified(*row)
                    if row[5] is not None:
                        out[row[1]] = (row[0], row[5])
        return out

    def set_sketches(
        self,
        items: Sequence[tuple[str, bytes | None]],
        settings: dict[str, str] | None = None,
        resketch_upto: int = 0,
    ) -> dict[str, int]:
        """Give stored keys a sketch (or none) in one durable transaction, keeping their seq (age),
        fingerprint and meta; keys not stored are skipped. Returns each changed key's seq. Advances the
        high-water seq by one, as every acknowledged write does (the commit mark sees it).
        ``settings``: added to the stored ones in the same transaction (a new sketch column's).
        Changed rows at or below ``resketch_upto`` (the table files' last seq) are listed in
        ``resketched``, so that the next open reads their sketch from the row, not the files."""
        changed: dict[str, int] = {}
        with self._transaction():
            query = f"SELECT {SELECTED} FROM entries WHERE key = ?"
            update = "UPDATE entries SET sketch = ?, chk = ? WHERE seq = ?"
            for key, sketch in items:
                row = self.conn.execute(query, (key,)).fetchone()
                if row is None or row[1] != key:
                    continue
                seq, h, meta = row[0], to_unsigned(row[2]), row[3]
                self._verified(*row)  # a damaged row is not given a fresh checksum
                self.conn.execute(update, (sketch, to_signed(row_check(seq, h, key, meta, sketch)), seq))
                changed[key] = seq
            marked = [(seq,) for seq in changed.values() if seq <= resketch_upto]
            self.conn.executemany("INSERT OR IGNORE INTO resketched (seq) VALUES (?)", marked)
            if settings:
                self.add_settings(settings)
            self._advance_sequence()
        self.next_seq += 1
        self._marked()
        return changed

    def note(self, name: str, value: str, replacing: str | None = None) -> str:
        """Setting ``name`` set to ``value`` unless it holds another value than ``replacing``; the value
        it holds afterwards. A change is one durable write that moves the high-water seq, as every
        acknowledged write does (so that the commit mark sees a lost one)."""
        with self._transaction():
            current = self.settings().get(name)
            if current is not None and current != replacing:
                return current
            if current == value:
                return value
            self.add_settings({name: value})
            self._advance_sequence()
        self.next_seq += 1
        self._marked()
        return value

    def add_settings(self, values: dict[str, str]) -> dict[str, str]:
        """Add (or change) settings and sign them again, in the caller's transaction."""
        current = self.stored_settings()
        current.pop("check", None)
        current.update(values)
        self.conn.execute("DELETE FROM settings")
        rows = [*current.items(), ("check", settings_check(current))]
        self.conn.executemany("INSERT INTO settings VALUES (?, ?)", rows)
        return current
