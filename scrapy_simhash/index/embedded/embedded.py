"""The embedded index: a local directory, no server, exact and crash-safe.

Fingerprints are found in permuted tables kept in layers (:mod:`.layers`: pending, delta, merging,
base); new base generations are written in the background (:mod:`.generations`). Only the SQLite
database (:mod:`.storage`) is the source of truth: every insert is committed there (durably) before
the call returns, and the pending buffer and the delta are rebuilt from it on open, the base when
its files are missing or damaged. One process may write an index at a time (an ``flock`` on
``LOCK``; a second writer gets :class:`IndexLockedError`); any number may open it
``read_only=True`` and see the state as of their opening.
Damage to the database itself cannot be repaired; :mod:`.integrity` detects it and it is
raised as :class:`IndexCorruptError`, never answered from.

This module opens, writes and closes the index; its lookups are :mod:`.reads`'s.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from ..base import IndexCorruptError, Match, Meta, SimhashIndexError
from ..tables import prefault
from ..tables.layers import DELTA_MAX, Layers
from ..tables.layouts import DEFAULT_K, Layout, resolve, settle
from ..tables.manifest import remove_stale
from ..values import check_key, check_simhash, encode_meta
from .checkpoints import Checkpoints
from .generations import Generations, mapped_lsh
from .integrity import (
    CommitMark,
    check_mark,
    check_verify,
    open_directory,
    read_mark,
    sqlite_check_at_open,
)
from .loading import load_layers
from .reads import IndexReads
from .storage import Store

logger = logging.getLogger(__name__)

DATABASE = "index.sqlite3"
NOTE = "note:"
"""Settings named ``note:<name>`` hold the index's notes (:meth:`SimhashIndex.note`)."""


class SimhashIndex(IndexReads):
    """Persistent exact near-duplicate index in directory ``path`` (created if missing).

    ``k``: default query distance (default: the one the index was created with, else 3).
    ``layout``: table layout spec (see :mod:`.layouts`); fixed when the index is created.
    ``read_only``: no lock, no writes; a snapshot as of opening.
    ``verify``: True (default): check at open what an unclean shutdown can damage: after one (the
    last writer did not close cleanly), the database with SQLite's integrity_check (quick_check when
    read-only); a cleanly closed index opens in constant time (manifest, file sizes and headers,
    commit mark, row count). ``"full"``: also after a clean close, and the table files' CRC-32s (a
    damaged file is rebuilt), as ``scrapy-simhash index check`` does. False: neither. Without
    ``"full"``, a thread checks the table files' CRC-32s after the open (:mod:`..tables.prefault`)
    and a file that fails makes every later call raise :class:`IndexCorruptError`.
    ``delta_min`` / ``delta_max``: the pages written since the last table generation are kept in
    memory until they are a quarter of the generation, at least ``delta_min`` and at most
    ``delta_max`` (the heap's bound: about 1 kB a page in verified mode), then written as the next
    generation in the background.
    ``reset``: empty the index first, under the write lock (IndexLockedError if another
    process writes it, and then nothing is deleted).
    ``synchronous``: ``"full"`` (default) fsyncs every commit, so an acknowledged insert
    survives a power cut; ``"normal"`` survives a crash of the process (SIGKILL, OOM) but
    may lose the last commits on power loss, for about 100x more single inserts per second.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        k: int | None = None,
        layout: str | Layout | None = None,
        *,
        read_only: bool = False,
        verify: bool | str = True,
        pending_max: int = 4096,
        delta_min: int = 1 << 18,
        delta_max: int = DELTA_MAX,
        synchronous: str = "full",
        reset: bool = False,
    ) -> None:
        self.path = Path(path)
        self.read_only = read_only
        self._pending_max = max(1, pending_max)
        self._delta_min, self._delta_max = max(1, delta_min), max(1, delta_max)
        self._lock = threading.RLock()
        self._lock_fd: int | None = None
        self._closed = True
        check_verify(verify)
        self._verify = verify
        self._crc = verify == "full"
        """Whether opening reads the table files whole for their CRC-32s (:mod:`.integrity`: when)."""
        self._rebuilds = 0
        self._checkpoints: Checkpoints | None = None
        """A writer's WAL checkpoints, in a thread (:mod:`.checkpoints`)."""
        self._column: Any = None
        """The verified index's sketch column (:mod:`.sketch_column`), told of every write: :meth:`attach`."""
        if self.path.exists() and not self.path.is_dir():
            raise ValueError(f"index path {self.path} exists and is not a directory")
        self._lock_fd = open_directory(self.path, DATABASE, read_only=read_only, reset=reset, what="index")
        try:
            mark = read_mark(self.path)  # before the database: a concurrent writer can only be ahead
            self._sqlite_check = sqlite_check_at_open(self.path, mark, verify, read_only)
            self._store = Store(
                self.path / DATABASE,
                read_only=read_only,
                synchronous=synchronous,
                check=self._sqlite_check,
                counted=mark if self._sqlite_check is None else None,
            )
            try:
                self.layout, self.k = self._settle_layout(k, layout)
                check_mark(self._store.path, mark, self._db_id, self._store.high, self._store.live)
                if not read_only:  # durably not clean before any write
                    self._store.mark = CommitMark(self.path, self._db_id, synchronous == "full")
                    self._store.mark.opened(self._store.high, self._store.live)
                    self._store.index_rows_without_sketch()
                self._load()
                if not read_only:
                    self._checkpoints = Checkpoints(self._store.path, self._store.conn, synchronous)
            except BaseException:
                self._store.close()
                raise
        except BaseException:
            self._release_lock()
            raise
        self._closed = False

    # opening
    def _release_lock(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # closing the descriptor drops the flock
            self._lock_fd = None

    def _settle_layout(self, k: int | None, spec: str | Layout | None) -> tuple[Layout, int]:
        """The stored layout and k (or a new index's); LayoutError when k or spec disagree with them."""
        stored = self._store.settings()
        if not stored:
            if self.read_only:
                raise SimhashIndexError(f"the index at {self.path} has never been initialised")
            k = DEFAULT_K if k is None else k
            stored = self._store.init_settings({"layout": resolve(spec, k).spec, "k": str(k)})
        self._db_id = stored["db_id"]
        return settle(stored["layout"], int(stored["k"]), k, spec, self.path)

    def _load(self) -> None:
        """Base tables from disk (rebuilt if damaged), the rest from one snapshot of the database."""
        layers = Layers(self.path, self.layout, self._pending_max, self._delta_min, self._delta_max)
        self._rebuilds += load_layers(
            layers, self._store, self._db_id, self._verify, self.read_only, crc=self._crc
        )
        self._layers, self._count = layers, self._store.live
        info = {"db_id": self._db_id, "k": self.k}
        self._generations = Generations(self.path, layers, self._store, info, bool(self._verify))
        if not self.read_only:
            remove_stale(self.path, keep=layers.generation or None)
            if self._rebuilds or layers.delta_full():
                self._generations.merge_now()

    # helpers
    def _check_open(self, writing: bool = False) -> None:
        if self._closed:
            raise SimhashIndexError(f"the index at {self.path} is closed")
        if prefault.damage_found and not self._crc and (problems := self._damaged_files()):
            repair = f'`scrapy-simhash index check --repair {self.path}` (or an open with verify="full")'
            raise IndexCorruptError(
                f"the index at {self.path} is damaged: {'; '.join(problems)} (found after opening it). Its "
                f"table files are rebuilt from the database by {repair}"
            )
        if writing and self.read_only:
            raise SimhashIndexError(f"the index at {self.path} is open read-only")

    def _damaged_files(self) -> list[str]:
        """What the prefault thread found wrong with the files this index answers from (a file of a
        generation it no longer uses, or rebuilt at open, does not count)."""
        files = (self._layers.manifest or {}).get("files", {})
        names = {entry.get("name") for entry in files.values() if isinstance(entry, dict)}
        return [problem for name, problem in prefault.damage_in(self.path) if name in names]

    # writing
    def add(self, simhash: int, key: str, meta: Meta | None = None) -> None:
        self.add_many([(simhash, key, meta)])

    def add_many(self, items: Iterable[tuple[Any, ...]]) -> int:
        """Store many ``(simhash, key[, meta[, sketch]])`` in one durable transaction; all or nothing.

        ``sketch``: the row's sketch bytes (:meth:`.sketch_column.SketchColumn.encode`) or None."""
        given: list[tuple[int, str, str | None, bytes | None]] = []
        for item in items:
            h, key, meta, sketch = item if type(item) is tuple and len(item) == 4 else (*item, None, None)[:4]
            if type(key) is not str or not key:
                key = check_key(key)
            h = check_simhash(h)
            given.append((h, key, None if meta is None else encode_meta(key, meta), sketch))
        return self.add_rows(given)

    def add_rows(
        self, rows: list[tuple[int, str, str | None, bytes | None]], sketches: np.ndarray | None = None
    ) -> int:
        """:meth:`add_many` for rows its caller checked (the verified index: each page is checked
        once): ``(simhash, key, meta JSON or None, sketch bytes or None)``. ``sketches``: every row's
        sketch as :meth:`.sketch_column.SketchColumn.encode_plain` gave them, handed on to the
        column (None: it reads them from the bytes)."""
        if not rows:
            return 0
        count = len(rows)
        last = {row[1]: i for i, row in enumerate(rows)}
        if len(last) != count:  # the last of several items with one key wins, in its place
            rows = [row for i, row in enumerate(rows) if last[row[1]] == i]
            sketches = None  # its rows no longer line up with the rows
        with self._lock:
            self._check_open(writing=True)
            self._insert(rows, sketches)
        return count

    def _insert(
        self, rows: list[tuple[int, str, str | None, bytes | None]], sketches: np.ndarray | None = None
    ) -> None:
        seqs, replaced = self._store.put_many(rows, tombstone_upto=self._layers.frozen_max_seq)
        if self._checkpoints is not None:
            self._checkpoints.written(len(rows))
        if self._column is not None:
            self._column.stored([row[1] for row in rows], seqs, [row[3] for row in rows], replaced, sketches)
        self._count += len(rows) - len(replaced)
        self._layers.inserted([row[0] for row in rows], seqs, replaced)
        self._generations.changed(removed=replaced)
        self._generations.after_write()

    def check_and_add(
        self, simhash: int, key: str, meta: Meta | None = None, *, sketch: bytes | None = None
    ) -> list[Match]:
        h = check_simhash(simhash)
        key = check_key(key)
        encoded = encode_meta(key, meta)
        with self._lock:
            self._check_open(writing=True)
            matches = self._search(np.array([h], dtype=np.uint64), self.k)[0]
            self._insert([(h, key, encoded, sketch)])
        return matches

    def remove(self, key: str) -> bool:
        key = check_key(key)
        with self._lock:
            self._check_open(writing=True)
            seq = self._store.delete(key, tombstone_upto=self._layers.frozen_max_seq)
            if seq is None:
                return False
            self._layers.dead.add(seq)
            self._count -= 1
            if self._column is not None:
                self._column.removed(key, seq)
            self._generations.changed(removed=[seq])
            self._generations.after_write()
            return True

    # the verified index's sketch column (:mod:`.sketch_column`)
    def attach(self, column: Any) -> None:
        """Keep ``column`` in step with the rows' sketches, told of each write. Its base is mapped
        from the table generation's LSH files; only the rows written since (and those whose sketch
        changed since) are read. A generation without such files (written while the index
        had no sketch column: only simhash mode so far) is written again by a writer once, so that the
        next open maps it."""
        with self._lock:
            self._check_open()
            self._generations.wait()  # the base is what the files hold
            column.attach_rows(self)
            base = mapped_lsh(self.path, self._layers.manifest, column, self._crc)
            after = 0
            if base is not None:
                column.set_base(base, self._layers.dead)
                after = self._layers.base_max_seq
            try:
                column.load(self._store.sketches(after=after))
            except ValueError as exc:  # a row whose sketch passed its check but has the wrong length
                raise self._store.damaged(str(exc)) from exc
            self._column = self._generations.column = column
            if base is None and not self.read_only and self._layers.generation:
                self._generations.merge_now(force=True)

    def settings(self) -> dict[str, str]:
        """The stored settings (layout, k, the sketch column's, ...)."""
        with self._lock:
            self._check_open()
            return self._store.settings()

    def set_sketches(
        self, items: list[tuple[str, bytes | None]], settings: dict[str, str] | None = None
    ) -> dict[str, int]:
        """Give stored pages these sketch bytes (None: none), keeping their fingerprint, meta and age,
        and add ``settings`` (the sketch column's), all in one durable transaction; keys not stored
        are skipped. Returns each changed key's seq."""
        with self._lock:
            self._check_open(writing=True)
            changed = self._store.set_sketches(
                [(check_key(key), data) for key, data in items], settings, self._layers.frozen_max_seq
            )
            if changed and self._column is not None:
                sketch_of = dict(items)
                self._column.stored(list(changed), list(changed.values()), [sketch_of[k] for k in changed])
            self._generations.changed(resketched=changed.values())
            self._generations.after_write()
            return changed

    def compact(self) -> None:
        """Merge recent inserts and removals into a new on-disk generation (after the one being
        written in the background, if any); checkpoint the WAL. A failure to write it is raised."""
        with self._lock:
            self._check_open(writing=True)
            self._generations.merge_now()
            self._store.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    # reading
    def stats(self) -> dict[str, Any]:
        with self._lock:
            self._check_open()
            if not self.read_only:
                self._generations.poll()
            disk = _disk_bytes(self.path)
            layers = self._layers.stats()
            return {
                "backend": "embedded",
                "path": str(self.path),
                "size": self._count,
                "k": self.k,
                "layout": self.layout.spec,
                "tables": self.layout.num_tables,
                "complete_up_to_k": self.layout.max_k,
                "base": layers["base"],
                "merging": layers["merging"],
                "delta": layers["delta"],
                "pending": layers["pending"],
                "removed_not_compacted": layers["removed_not_compacted"],
                "generation": layers["generation"],
                "merges": layers["merges"],
                **self._generations.stats(),
                "rebuilds": self._rebuilds,
                "table_bytes": layers["table_bytes"],
                "disk_bytes": disk,
                "read_only": self.read_only,
            }

    def notes(self) -> dict[str, str]:
        with self._lock:
            self._check_open()
            settings = self._store.settings()
        return {name[len(NOTE) :]: value for name, value in settings.items() if name.startswith(NOTE)}

    def note(self, name: str, value: str, *, replacing: str | None = None) -> str:
        with self._lock:
            self._check_open(writing=True)
            return self._store.note(NOTE + name, value, replacing)

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            orderly = False
            try:
                if not self.read_only and self._generations.wait() is not None:  # no merge left behind
                    logger.warning("index %s: closed with its last generation unwritten", self.path)
                orderly = True
            finally:
                self._closed = True
                self._generations.close()
                if self._checkpoints is not None:
                    self._checkpoints.close()
                self._store.close(clean=orderly)
                self._layers.close()
                self._release_lock()

    def __enter__(self) -> SimhashIndex:
        return self

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"{self._count} fingerprints"
        return f"<SimhashIndex {str(self.path)!r} k={getattr(self, 'k', '?')} {state}>"


def _disk_bytes(directory: Path) -> int:
    """The files' bytes (an old generation's files may vanish meanwhile: a thread deletes them)."""
    total = 0
    for path in directory.iterdir():
        try:
            if path.is_file():
                total += path.stat().st_size
        except FileNotFoundError:
            continue
    return total


__all__ = ["SimhashIndex", "check_simhash"]
