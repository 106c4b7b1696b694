"""What the index's SQLite row stores share: the connection, read and write transactions, errors.

Both the simhash store (:mod:`.storage`) and the MinHash index's sketch store (:mod:`.sketch_rows`)
are SQLite databases in WAL mode that are the source of truth of their index: a damaged one is
reported (:class:`IndexCorruptError`), never answered from.
"""

from __future__ import annotations

import json
import sqlite3
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..base import IndexCorruptError
from .integrity import MARK, CommitMark


def settings_check(values: dict[str, str]) -> str:
    """The CRC-32 a database's settings are stored with (as text, in the row ``check``)."""
    return str(zlib.crc32(json.dumps(values, sort_keys=True).encode()))


def check_synchronous(synchronous: str) -> None:
    if synchronous not in ("full", "normal"):
        raise ValueError(f"synchronous must be 'full' or 'normal', not {synchronous!r}")


def connect(path: Path, read_only: bool, synchronous: str) -> sqlite3.Connection:
    """An index database connection, read-only by URI or a WAL writer (the simhash and the sketch stores)."""
    if read_only:
        uri = f"file:{path}?mode=ro"
        conn = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
        _map(conn)
        return conn
    conn = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
    try:
        _map(conn)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute(f"PRAGMA synchronous={synchronous.upper()}")
        # 64 MiB of page cache keeps the key index's hot pages in memory: ~1.5x inserts/s
        conn.execute("PRAGMA cache_size=-65536")
    except sqlite3.DatabaseError:
        conn.close()
        raise
    return conn


def _map(conn: sqlite3.Connection) -> None:
    """Read pages through a memory map (SQLite clamps the size to its build's limit, ~2 GiB): a
    verified hit reads ~5 rows by key, and pages the cache misses then cost no read() call each
    (at 1M pages, hit p50/p99 ~95/245 -> ~77/190 µs). Writes still go through the WAL."""
    try:
        conn.execute(f"PRAGMA mmap_size={1 << 31}")
    except sqlite3.DatabaseError:
        conn.close()
        raise


class RowDatabase:
    """What both row stores (simhash entries, MinHash sketches) share: the connection, the commit mark,
    and every SQLite or JSON error while reading reported as a damaged database."""

    kind = "index"
    """How the damage message names the database."""
    derived = f"{MARK} and manifest.json"
    """Files to delete after restoring the database from a backup (they describe the newer state)."""

    path: Path
    conn: sqlite3.Connection
    mark: CommitMark | None

    def damaged(self, what: str) -> IndexCorruptError:
        return IndexCorruptError(
            f"the {self.kind} database {self.path} is damaged ({what}); it is the source of truth and cannot "
            f"be rebuilt: restore it from a backup (then delete {self.derived} beside it) or "
            f"export what `sqlite3 .recover` finds"
        )

    @contextmanager
    def _reading(self) -> Iterator[None]:
        """SQLite and JSON errors while reading: a damaged database."""
        try:
            yield
        except (sqlite3.DatabaseError, json.JSONDecodeError) as exc:
            raise self.damaged(f"{type(exc).__name__}: {exc}") from exc

    high: int
    live: int

    def close(self, clean: bool = False) -> None:
        """Close the database; ``clean``: a writer's orderly close, which then sets the commit mark's
        clean-close flag (only once the database closed without an error)."""
        try:
            self.conn.close()
        except BaseException:
            clean = False
            raise
        finally:
            if self.mark is not None:
                if clean:
                    self.mark.closed_cleanly(self.high, self.live)
                self.mark.close()
                self.mark = None

    def _transaction(self) -> Transaction:
        return Transaction(self)


class Transaction:
    """BEGIN IMMEDIATE ... COMMIT, rolled back on any error (so a failed batch stores nothing).

    A database error other than a constraint (a damaged page) is an IndexCorruptError.
    """

    def __init__(self, store: RowDatabase) -> None:
        self.store = store

    def __enter__(self) -> None:
        self.store.conn.execute("BEGIN IMMEDIATE")

    def __exit__(self, exc_type: object, exc: object, *rest: object) -> None:
        conn = self.store.conn
        if exc_type is None:
            conn.execute("COMMIT")
            return
        conn.execute("ROLLBACK")
        if isinstance(exc, sqlite3.DatabaseError) and not isinstance(
            exc, (sqlite3.IntegrityError, sqlite3.OperationalError)
        ):
            raise self.store.damaged(f"{type(exc).__name__}: {exc}") from exc
