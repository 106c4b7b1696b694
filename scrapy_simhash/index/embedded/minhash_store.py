"""A persistent MinHash-LSH index: a local directory, no server, crash-safe like SimhashIndex.

The SQLite database ``minhash.sqlite3`` (:mod:`.sketch_rows`) is the source of truth: every
insert and removal is committed there before the call returns, so an acknowledged write
survives the process being killed (``synchronous="full"``: a power cut too). The in-memory
:class:`~.lsh.MinHashLSH` is derived: rebuilt at open from the rows in seq order, so answers,
their order (best first, ties oldest first) and replacements are those of a MinHashLSH fed the
same operations. One process writes an index at a time (an ``flock`` on ``LOCK``; a second
writer gets :class:`IndexLockedError`); any number may open it ``read_only=True`` and see it as
of their opening. The scheme, ``num_values``, ``threshold``, ``bands``, ``rows`` and ``value_bits``
(the low bits of each value it keeps: :mod:`scrapy_simhash.fingerprint.bbit`) are fixed when the
index is created and checked at every open (:class:`IndexSettingsError`).
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ...fingerprint.bbit import ValueBits
from ...fingerprint.minhash import SCHEME
from ..base import (
    IndexSettingsError as IndexSettingsError,  # its home before base.py; still imported from here
)
from ..base import Meta, SimhashIndexError
from ..lsh.lsh import MinHashLSH
from ..lsh.lsh_bands import DEFAULT_NUM_VALUES as DEFAULT_NUM_VALUES
from ..lsh.lsh_bands import DEFAULT_THRESHOLD as DEFAULT_THRESHOLD
from ..lsh.lsh_bands import DEFAULT_VALUE_BITS as DEFAULT_VALUE_BITS
from ..lsh.lsh_bands import as_sketch, as_sketch_batch, check_given, check_scheme, new_params, readable_params
from ..values import check_key, encode_meta
from .database import settings_check
from .integrity import (
    CommitMark,
    check_mark,
    open_directory,
    read_mark,
)
from .sketch_rows import Row, SketchStore
from .store_format import FORMAT, refuse_format

logger = logging.getLogger(__name__)

DATABASE = "minhash.sqlite3"
KIND = "minhash"
NOTE = "note:"
"""Prefix of the settings that hold the index's notes."""
_SIMHASH_DATABASE = "index.sqlite3"
_META_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)
_PLAIN = (str, int, bool, type(None))  # no float: NaN must still be refused with encode_meta's error


@dataclass(frozen=True)
class LSHMatch:
    """A stored sketch found by a query: its key, estimated Jaccard similarity and meta."""

    key: str
    similarity: float
    meta: dict[str, Any] = field(default_factory=dict)


class LockedSketchReads:
    """The reads of an in-memory :class:`MinHashLSH` (``_lsh``) that its owner answers under its lock
    (``_lock``): the MinHash index and the verified index's sketch column."""

    _lock: threading.RLock
    _lsh: MinHashLSH

    def __len__(self) -> int:
        with self._lock:
            return len(self._lsh)

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self._lsh

    def get(self, key: str) -> np.ndarray | None:
        """A copy of the sketch kept for ``key`` (uint32 values of ``value_bits``), or None."""
        with self._lock:
            return self._lsh.get(key)

    def keys(self) -> list[str]:
        """Keys with a sketch, oldest first."""
        with self._lock:
            return self._lsh.keys()


class MinHashIndex(LockedSketchReads):
    """Persistent MinHash-LSH index in directory ``path`` (created if missing).

    ``threshold``, ``num_values``, ``bands``, ``rows``, ``value_bits``: as :class:`MinHashLSH`; fixed
    when the index is created (defaults 0.8, 128 and 32, bands and rows derived from the threshold).
    ``new_value_bits``: the width a new index gets when ``value_bits`` is None (an existing one keeps
    its own). An index of an earlier format is refused (:class:`~.store_format.IndexFormatError`).
    Reopening with None takes the stored values; a value that differs is an
    :class:`IndexSettingsError`. ``read_only``: no lock, no writes, a snapshot as of opening.
    ``synchronous``: ``"full"`` fsyncs every commit (survives a power cut), ``"normal"``
    survives a killed process. ``reset``: empty the index first, under the write lock.
    ``verify``: SQLite's integrity_check at open (quick_check when read-only).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        threshold: float | None = None,
        num_values: int | None = None,
        bands: int | None = None,
        rows: int | None = None,
        *,
        value_bits: int | None = None,
        new_value_bits: int | None = None,
        read_only: bool = False,
        synchronous: str = "full",
        reset: bool = False,
        verify: bool = True,
    ) -> None:
        self.path = Path(path)
        self.read_only = read_only
        self._lock = threading.RLock()
        self._lock_fd: int | None = None
        self._closed = True
        if self.path.exists() and not self.path.is_dir():
            raise ValueError(f"index path {self.path} exists and is not a directory")
        if (self.path / _SIMHASH_DATABASE).exists():
            raise IndexSettingsError(
                f"{self.path} holds a simhash index ({_SIMHASH_DATABASE}), not a MinHash index; "
                f"open it with SimhashIndex, or give the MinHash index its own directory"
            )
        self._lock_fd = open_directory(
            self.path, DATABASE, read_only=read_only, reset=reset, what="MinHash index"
        )
        try:
            mark = read_mark(self.path)  # before the database: a concurrent writer can only be ahead
            check = None if not verify else "quick" if read_only else "thorough"
            self._store = SketchStore(
                self.path / DATABASE, read_only=read_only, synchronous=synchronous, check=check
            )
            try:
                self._settle(threshold, num_values, bands, rows, value_bits, new_value_bits)
                self._load()
                check_mark(self._store.path, mark, self._db_id, self._store.high, self._store.live)
                if not read_only:
                    self._store.mark = CommitMark(self.path, self._db_id, synchronous == "full")
                    self._store.mark.write(self._store.high, self._store.live)
            except BaseException:
                self._store.close()
                raise
        except BaseException:
            self._release_lock()
            raise
        self._closed = False

    # -- opening ---------------------------------------------------------------------------
    def _release_lock(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def _settle(
        self,
        threshold: float | None,
        num_values: int | None,
        bands: int | None,
        rows: int | None,
        value_bits: int | None,
        new_value_bits: int | None = None,
    ) -> None:
        """The stored settings (or a new index's); IndexSettingsError when a given one differs."""
        given = {
            "num_values": num_values,
            "threshold": threshold,
            "bands": bands,
            "rows": rows,
            "value_bits": value_bits,
        }
        stored = self._store.settings()
        if not stored:
            if self.read_only:
                raise SimhashIndexError(f"the MinHash index at {self.path} has never been initialised")
            new = {"kind": KIND, "format": str(FORMAT), "scheme": SCHEME, **new_params(given, new_value_bits)}
            stored = self._store.init_settings(new)
        if stored.get("kind") != KIND:
            raise IndexSettingsError(f"the index at {self.path} is not a MinHash index ({stored})")
        if stored.get("format") != str(FORMAT):  # (before it: value_bits perhaps not recorded)
            raise refuse_format(self.path, stored.get("format"), kind="MinHash index")
        if "value_bits" not in stored:  # signed settings of this format always record it
            raise self._store.damaged("the settings lack value_bits")
        where = f"the MinHash index at {self.path}"
        have = readable_params(stored, where, instead="rebuild")
        check_given(given, have, where, "open it without them to use the stored ones, or build a new index")
        self.threshold, self.num_values = have["threshold"], have["num_values"]
        self.bands, self.rows = have["bands"], have["rows"]
        self.value_bits = have["value_bits"]
        self._bits = ValueBits(self.value_bits)
        self._db_id = stored["db_id"]

    def _load(self) -> None:
        """The in-memory LSH, rebuilt from every row (one snapshot, batched add_many)."""
        self._lsh = MinHashLSH(
            self.threshold, self.num_values, self.bands, self.rows, value_bits=self.value_bits
        )
        width = self._bits.width * self.num_values
        keys: list[str] = []
        parts = []
        for chunk in self._store.load():
            blob = b"".join(sketch for _, _, sketch in chunk)
            if len(blob) != width * len(chunk):
                bad = next(s for s, _, sketch in chunk if len(sketch) != width)
                raise self._store.damaged(f"row {bad} holds a sketch of the wrong length")
            # as stored: a byte a value at 8 bits, which the LSH keeps as it is
            parts.append(
                np.frombuffer(blob, dtype=f"<u{self._bits.width}").reshape(len(chunk), self.num_values)
            )
            keys += [key for _, key, _ in chunk]
        if len(set(keys)) != len(keys):  # the UNIQUE key index failed to keep them apart
            raise self._store.damaged("a key is stored twice")
        if keys:
            self._lsh.load(keys, np.concatenate(parts))

    # -- size and lookups (and those of LockedSketchReads) -----------------------------------
    def meta(self, key: str) -> dict[str, Any] | None:
        """The meta stored with ``key`` (``{}`` for none), or None when the key is not stored."""
        with self._lock:
            self._check_open()
            if key not in self._lsh:
                return None
            return self._metas([key])[key]

    # -- writes ----------------------------------------------------------------------------
    def _row(self, key: str, sketch: Any, meta: Meta | None) -> tuple[Row, np.ndarray]:
        check_key(key)
        check_scheme(sketch)
        values = self._bits.reduce(as_sketch(sketch, self.num_values))
        if meta is None:
            text = None
        elif isinstance(meta, dict) and all(type(k) is str and type(v) in _PLAIN for k, v in meta.items()):
            text = _META_ENCODER.encode(meta)  # the common small flat meta: ~3x faster than encode_meta
        else:
            text = encode_meta(key, meta)
        data = self._bits.encode(values)
        return (key, data, text), values

    def _writable(self) -> None:
        self._check_open()
        if self.read_only:
            raise SimhashIndexError(f"the MinHash index at {self.path} is open read-only")

    def add(self, key: str, sketch: Any, meta: Meta | None = None) -> None:
        """Store ``sketch`` under ``key`` (replacing what it held); durable when it returns."""
        self.add_many([(key, sketch, meta)])

    def add_many(self, items: Iterable[tuple[str, Any, Meta | None]]) -> int:
        """Store many ``(key, sketch, meta)`` in one durable commit; one bad item stores nothing."""
        checked = [self._row(key, sketch, meta) for key, sketch, meta in items]
        if not checked:
            return 0
        with self._lock:
            self._writable()
            self._store.put_many([row for row, _ in checked])
            values = np.stack([v for _, v in checked]) if len(checked) > 1 else checked[0][1][None, :]
            self._lsh.add_many(zip([row[0] for row, _ in checked], as_sketch_batch(values), strict=True))
        return len(checked)

    def check_and_add(
        self, key: str, sketch: Any, meta: Meta | None = None, *, with_meta: bool = True
    ) -> list[LSHMatch]:
        """The matches before this insert (``key``'s old sketch included), then the durable insert.

        ``with_meta=False``: matches without their meta (``{}``), sparing a database read."""
        row, values = self._row(key, sketch, meta)
        with self._lock:
            self._writable()
            found = self._with_meta(self._lsh.query(values), with_meta)  # meta before the insert replaces it
            self._store.put_many([row])
            self._lsh.add(key, values)
            return found

    def remove(self, key: str) -> bool:
        """Forget ``key``; True if it was stored. Durable when it returns."""
        with self._lock:
            self._writable()
            if key not in self._lsh:
                return False
            self._store.delete(key)
            return self._lsh.remove(key)

    # -- queries ---------------------------------------------------------------------------
    def _with_meta(self, found: list[tuple[str, float]], with_meta: bool = True) -> list[LSHMatch]:
        if not found:
            return []
        if not with_meta:
            return [LSHMatch(key, similarity) for key, similarity in found]
        metas = self._metas([key for key, _ in found])
        return [LSHMatch(key, similarity, metas[key]) for key, similarity in found]

    def _metas(self, keys: list[str]) -> dict[str, dict[str, Any]]:
        """Meta of keys the LSH holds. A writer's database holds every one of them (else it is
        damaged: its key index lost a row); a reader's snapshot may hold keys removed since: ``{}``."""
        metas = self._store.meta(keys)
        missing = [key for key in keys if key not in metas]
        if missing and not self.read_only:
            raise self._store.damaged(f"no row found for the stored key {missing[0]!r}")
        return {key: metas.get(key, {}) for key in keys}

    def query(self, sketch: Any, *, with_meta: bool = True) -> list[LSHMatch]:
        """Stored sketches sharing a band with ``sketch`` and estimated Jaccard >= threshold,
        best first, ties oldest first (``with_meta=False``: without their meta)."""
        values = as_sketch(sketch, self.num_values)
        with self._lock:
            self._check_open()
            return self._with_meta(self._lsh.query(values), with_meta)

    def query_many(self, sketches: Any, *, with_meta: bool = True) -> list[list[LSHMatch]]:
        """``query`` for each sketch of a batch (vectorised candidate search)."""
        with self._lock:
            self._check_open()
            return [self._with_meta(found, with_meta) for found in self._lsh.query_many(sketches)]

    # -- notes -----------------------------------------------------------------------------
    def notes(self) -> dict[str, str]:
        """What the index records about its pages beside its settings (the extractor that made their
        sketches: :mod:`.extractor_record`); empty where nothing is recorded."""
        with self._lock:
            self._check_open()
            settings = self._store.settings()
        return {name[len(NOTE) :]: value for name, value in settings.items() if name.startswith(NOTE)}

    def note(self, name: str, value: str, *, replacing: str | None = None) -> str:
        """Record ``value`` as note ``name`` unless another value (than ``replacing``) is recorded;
        the value recorded afterwards. Compare-and-set in one durable transaction that moves the
        high-water seq, as every acknowledged write does (so that the commit mark sees a lost one);
        kept in the settings (``note:<name>``) under their checksum, which a version without notes
        reads and ignores."""
        with self._lock:
            self._writable()
            return _record_note(self._store, NOTE + name, value, replacing)

    def stats(self) -> dict[str, Any]:
        """Sizes for monitoring: the LSH's, plus the database file's size."""
        with self._lock:
            out = {**self._lsh.stats(), "threshold": self.threshold, "num_values": self.num_values}
        out["bytes_database"] = sum(p.stat().st_size for p in self.path.glob(f"{DATABASE}*") if p.is_file())
        return out

    # -- lifetime --------------------------------------------------------------------------
    def _check_open(self) -> None:
        if self._closed:
            raise SimhashIndexError(f"the MinHash index at {self.path} is closed")

    def close(self) -> None:
        """Release the database and the write lock. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._store.close()
            self._release_lock()

    def __enter__(self) -> MinHashIndex:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        mode = "read-only" if self.read_only else "writer"
        return (
            f"MinHashIndex({str(self.path)!r}, threshold={self.threshold}, num_values={self.num_values}, "
            f"bands={self.bands}, rows={self.rows}, value_bits={self.value_bits}, {len(self)} sketches, "
            f"{mode})"
        )


def _record_note(store: SketchStore, name: str, value: str, replacing: str | None) -> str:
    """Setting ``name`` set to ``value`` unless it holds another value than ``replacing``; the value
    it holds afterwards (one transaction: the settings re-signed, the high-water seq moved)."""
    with store._transaction():
        current = store.settings()
        held = current.get(name)
        if held is not None and held != replacing:
            return held
        if held == value:
            return value
        current[name] = value
        store.conn.execute("DELETE FROM settings")
        rows = [*current.items(), ("check", settings_check(current))]
        store.conn.executemany("INSERT INTO settings VALUES (?, ?)", rows)
        used = store.high + 1
        moved = store.conn.execute("UPDATE sqlite_sequence SET seq = ? WHERE name = 'sketches'", (used,))
        if not moved.rowcount:  # no row was ever inserted
            store.conn.execute("INSERT INTO sqlite_sequence (name, seq) VALUES ('sketches', ?)", (used,))
    store.high = used
    if store.mark is not None:
        store.mark.write(store.high, store.live)
    return value
