"""The SQLite file each embedded archive store keeps in the index directory, opened one way.

Payload digests and last captures are small tables a crawl can do without (see
:mod:`scrapy_simhash.side_store`), each in a file of its own so that a damaged one costs one feature.
Both open alike: WAL, a commit per write (surviving a crash of the crawling process), and a first
read that finds a damaged file at open rather than on the first page.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path


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
