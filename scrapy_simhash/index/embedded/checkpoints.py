"""The database's WAL checkpoints in a thread of their own: a write does not copy the log back.

In WAL mode each commit appends its pages to the ``-wal`` file. By default the commit that takes the
log past 1000 pages (4 MiB: about one batch of 10k verified pages) also copies the whole log into the
database and syncs it, inside the writer's call. Here the writer's connection does that only past
:data:`FALLBACK_PAGES` (a safety net), and after every :data:`ROWS_PER_CHECKPOINT` rows written a
thread with its own connection runs a PASSIVE checkpoint, which waits for no one and makes no one
wait: the writer appends meanwhile, and the log starts again from its beginning at the first write
after a complete checkpoint. Durability does not depend on checkpoints (a commit is in the log,
synced, before it is acknowledged); a failed checkpoint is logged, counted and tried again later.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from pathlib import Path

logger = logging.getLogger(__name__)

ROWS_PER_CHECKPOINT = 20_000
"""Rows written between two checkpoints (~8 MiB of log for verified pages)."""
FALLBACK_PAGES = 1 << 14
"""The writer's own automatic checkpoint, past this many log pages (64 MiB of 4 KiB pages)."""


class Checkpoints:
    """Checkpoints of the database at ``path``, whose writer's connection is ``writer``."""

    def __init__(
        self, path: Path, writer: sqlite3.Connection, synchronous: str, rows: int | None = None
    ) -> None:
        self.path, self._synchronous = path, synchronous
        self._every = ROWS_PER_CHECKPOINT if rows is None else max(1, rows)
        writer.execute(f"PRAGMA wal_autocheckpoint={FALLBACK_PAGES}")
        self._since = 0
        self._wake = threading.Event()
        self._closed = False
        self._thread: threading.Thread | None = None
        self.done = 0
        """Checkpoints run (for tests and ``stats()``)."""
        self.failures = 0

    def written(self, rows: int) -> None:
        """After a commit of ``rows`` rows: wake the thread when enough were written since the last."""
        self._since += rows
        if self._since < self._every:
            return
        self._since = 0
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="scrapy-simhash-checkpoint", daemon=True)
            self._thread.start()
        self._wake.set()

    def _run(self) -> None:
        try:
            conn = sqlite3.connect(str(self.path), isolation_level=None, check_same_thread=False, timeout=60)
            conn.execute(f"PRAGMA synchronous={self._synchronous.upper()}")
        except sqlite3.Error as exc:
            logger.warning("index %s: no checkpoint connection (%s); the writer checkpoints", self.path, exc)
            self.failures += 1
            return
        try:
            while True:
                self._wake.wait()
                self._wake.clear()
                if self._closed:
                    return
                try:
                    conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
                    self.done += 1
                except sqlite3.Error as exc:
                    self.failures += 1
                    logger.warning("index %s: a checkpoint failed (%s); tried again later", self.path, exc)
        finally:
            conn.close()

    def close(self) -> None:
        """Stop the thread (a checkpoint under way finishes first)."""
        self._closed = True
        self._wake.set()
        if self._thread is not None:
            self._thread.join()
