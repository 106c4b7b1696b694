"""The SQLite file each embedded archive store keeps in the index directory, opened and used one way.

Payload digests and last captures are small tables a crawl can do without (see
:mod:`scrapy_simhash.side_store`), each in a file of its own so that a damaged one costs one feature.
Both open alike: WAL, a commit per write (surviving a crash of the crawling process), and a first
read that finds a damaged file at open rather than on the first page. Every later failure is the
store's own error, naming the file and what was being done, so that the crawl can count it and go on.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar


def open_store_file(
    path: Path, schema: str, probe: str, error: type[Exception], what: str, start_anew: str
) -> sqlite3.Connection:
    """A connection to ``path`` with ``schema`` created and ``probe`` (a query) read once.

    Raises ``error`` naming ``what`` ("the captures"): the file cannot be opened, or is damaged, in
    which case the message says to move it away and ``start_anew`` (what that costs the user)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    except (OSError, sqlite3.Error) as exc:
        raise error(f"cannot open {what} at {path}: {exc}") from exc
    try:
        db.execute("PRAGMA busy_timeout = 2000")
        db.execute("PRAGMA journal_mode = WAL")
        db.execute("PRAGMA synchronous = NORMAL")
        db.execute(schema)
        db.execute(probe).fetchone()
    except sqlite3.Error as exc:
        db.close()
        raise error(
            f"{what} at {path} are damaged ({exc}); move the file away to start a new one ({start_anew})"
        ) from exc
    return db


class SQLiteSideStore:
    """A store of one table in ``<index directory>/<DATABASE>``; subclasses name the table and say
    what a damaged file costs."""

    DATABASE: ClassVar[str]
    TABLE: ClassVar[str]
    SCHEMA: ClassVar[str]
    KEY: ClassVar[str]
    ERROR: ClassVar[type[Exception]]
    WHAT: ClassVar[str]
    """What the user reads in errors: "the captures"."""
    START_ANEW: ClassVar[str]
    """What moving a damaged file away costs the user."""

    def __init__(self, directory: str | Path) -> None:
        self.path = Path(directory) / self.DATABASE
        self._db = open_store_file(
            self.path,
            self.SCHEMA,
            f"SELECT count(*) FROM {self.TABLE} WHERE {self.KEY} = ''",
            self.ERROR,
            self.WHAT,
            self.START_ANEW,
        )

    def _failed(self, action: str, exc: sqlite3.Error) -> Exception:
        return self.ERROR(f"{self.WHAT.removeprefix('the ')} at {self.path}: {action} failed: {exc}")

    def _execute(self, action: str, sql: str, parameters: Sequence[Any] = ()) -> sqlite3.Cursor:
        """``sql`` run once (one commit); the store's error naming ``action`` when SQLite fails."""
        try:
            return self._db.execute(sql, parameters)
        except sqlite3.Error as exc:
            raise self._failed(action, exc) from exc

    def _one(self, action: str, sql: str, parameters: Sequence[Any] = ()) -> Any:
        """The first row ``sql`` reads (None when there is none)."""
        try:
            return self._execute(action, sql, parameters).fetchone()
        except sqlite3.Error as exc:
            raise self._failed(action, exc) from exc

    def clear(self) -> None:
        self._execute("emptying", f"DELETE FROM {self.TABLE}")

    def __len__(self) -> int:
        return int(self._one("counting", f"SELECT count(*) FROM {self.TABLE}")[0])

    def close(self) -> None:
        self._db.close()
