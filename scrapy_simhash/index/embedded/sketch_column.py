"""The embedded verified index's sketches: a column of the simhash store, and an LSH over it in memory.

Each page's minhash sketch (``value_bits`` of each value: :mod:`scrapy_simhash.fingerprint.bbit`)
is kept in the page's own row of the simhash store (:mod:`.storage`, column ``sketch``): a page and
its sketch are one durable write, its key and row overhead are paid once (an index of 1M pages is
~400 bytes a page, not ~530 as with a second store), and the row's checksum covers the sketch.
The :class:`SketchColumn` is the derived part: a :class:`~.lsh.MinHashLSH` over those sketches,
filled at open from the rows (seq order: ties oldest first, as a MinHashLSH fed the same writes)
and told of every write after it commits (:meth:`~.embedded.SimhashIndex.attach`). Beside each
sketch it remembers the row's seq, so a match's row is read by seq.

Its settings (threshold, bands, rows, num_values, value_bits: the :class:`~scrapy_simhash.decision.Rule`'s)
are stored with the simhash store's, prefixed ``sketch_``, and fixed when the column is created;
``value_bits`` is always :data:`VALUE_BITS` (the store's format, :mod:`.store_format`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from ...fingerprint.bbit import ValueBits
from ...fingerprint.minhash import SCHEME
from ..array_files import Parts
from ..base import IndexSettingsError
from ..lsh.lsh import MinHashLSH
from ..lsh.lsh_bands import (
    as_sketch,
    as_sketch_batch,
    check_given,
    check_scheme,
    new_params,
    readable_params,
    stored_params,
)
from ..lsh.lsh_segment import LSHSegment, holds_older, verify, write_with_level
from .minhash_store import LSHMatch

Row = tuple[str, dict[str, Any], int]
"""A page's row as the simhash store reads it by seq: key, meta, simhash."""
Answer = tuple[str, float, int]
"""A lookup's answer: the page's key, its estimated Jaccard with the query, its seq."""

PREFIX = "sketch_"
"""The column's settings among the simhash store's: ``sketch_threshold``, ``sketch_bands``, ..."""
VALUE_BITS = 8
"""The low bits of each sketch value a row keeps: a byte a value."""


class SketchColumn:
    """The sketches of an embedded index's pages, found by LSH bands and verified by estimated
    Jaccard (the rule's ``threshold``); answers are ``(key, similarity)``, best first, ties oldest
    first. Written only through the simhash store (:meth:`encode`, then :meth:`stored` after the
    commit); thread-safe for readers.

    Levels like the simhash tables': the *base*, an :class:`~.lsh_segment.LSHSegment` mapped from
    the current table generation's files, and the *recent* pages (written since, or the whole index
    when it has no such files yet) in a :class:`~.lsh.MinHashLSH`. While a generation is written in
    the background, the recent level it was frozen from is the read-only *merging* level (its pages
    replaced, removed or given another sketch since are ``gone`` from it), and writes go on into a
    fresh recent level. A page's key is in its row: base answers are named by seq and their keys
    read with their rows (:meth:`attach_rows`)."""

    def __init__(self, params: dict[str, Any]) -> None:
        self.threshold, self.num_values = params["threshold"], params["num_values"]
        self.bands, self.rows = params["bands"], params["rows"]
        self.value_bits = params["value_bits"]
        self._bits = ValueBits(self.value_bits)
        self._lsh = self._new_recent()
        self._base = LSHSegment.empty(self.num_values)
        self._merging: MinHashLSH | None = None
        self._gone: set[str] = set()
        """Keys of the merging level whose page has changed since it was frozen (not answers)."""
        self._reader: Any = None
        """The simhash store's reads by seq and by key (:meth:`attach_rows`)."""
        self._lock = threading.RLock()

    def _new_recent(self) -> MinHashLSH:
        return MinHashLSH(self.threshold, self.num_values, self.bands, self.rows, value_bits=self.value_bits)

    def attach_rows(self, reader: Any) -> None:
        """``reader`` (the :class:`~.embedded.SimhashIndex`) answers ``rows_by_seq`` and ``sketch_rows``."""
        self._reader = reader

    @property
    def params(self) -> dict[str, int]:
        """What a table generation's LSH files must have been written with to be this column's base."""
        return {
            "num_values": self.num_values,
            "value_bits": self.value_bits,
            "bands": self.bands,
            "rows": self.rows,
        }

    # -- filling and keeping in step ---------------------------------------------------------------
    def encode(self, sketch: Any) -> bytes:
        """A sketch as its row keeps it: ``value_bits`` of each value, little-endian bytes. Checked
        (scheme, length) before anything is written."""
        check_scheme(sketch)
        return self._bits.encode(self._bits.reduce(as_sketch(sketch, self.num_values)))

    def encode_plain(self, sketches: list[Any]) -> tuple[list[bytes], np.ndarray] | None:
        """:meth:`encode` for a batch of plain sketches (numpy arrays of ``num_values`` uint32 values,
        checked here in one pass) in one array operation: each row's bytes, and the batch as one
        matrix as the LSH keeps it (a view of the same bytes), to hand to :meth:`stored` so that
        the rows are not joined back. None when a sketch is not plain: :meth:`encode` each."""
        shape = (self.num_values,)
        if not sketches or not all(
            type(s) is np.ndarray and s.dtype == np.uint32 and s.shape == shape for s in sketches
        ):
            return None
        blob = self._bits.encode(self._bits.reduce(np.stack(sketches)))
        size = len(blob) // len(sketches)
        matrix = np.frombuffer(blob, dtype=f"<u{self._bits.width}").reshape(len(sketches), self.num_values)
        return [blob[i : i + size] for i in range(0, len(blob), size)], matrix

    def _decode(self, data: bytes) -> np.ndarray:
        """A row's sketch as the LSH keeps it (a byte a value at 8 bits: no uint32 copy)."""
        width = self._bits.width
        if len(data) != width * self.num_values:
            raise ValueError(f"a sketch of {len(data)} bytes, not {width * self.num_values}")
        return np.frombuffer(data, dtype=f"<u{width}")

    def set_base(self, base: LSHSegment, dead: Iterable[int] = ()) -> None:
        """The base level (the recent level emptied): ``dead``, its rows removed or replaced since."""
        with self._lock:
            base.kill(np.fromiter(dead, dtype=np.int64))
            self._base, self._lsh = base, self._new_recent()

    def freeze(self) -> Callable[[Parts], dict[str, int]]:
        """Start a merge: the recent level becomes the merging level (unless one is already frozen:
        a retry), and the returned function puts base + merging as one new segment's parts, for the
        next table generation (its ``count`` and ``prefix_bits``). It reads only what no write
        changes (a copy of the base's live marks), so it may run in another thread; kills meanwhile
        are applied by :meth:`switch`."""
        with self._lock:
            if self._merging is None:
                self._merging, self._lsh, self._gone = self._lsh, self._new_recent(), set()
            frozen, base = self._merging, self._base.snapshot()
        older = self._base_sketches(base) if holds_older(base, frozen) else None
        return lambda parts: write_with_level(parts, base, frozen, older)

    def _base_sketches(self, base: LSHSegment) -> tuple[np.ndarray, np.ndarray]:
        """The live base pages' seqs and sketches, read from their rows: a merge whose merging level
        holds pages older than the base's newest (given a sketch after the base was written, rare)
        builds the whole segment again. Read by the writer's call, in the writer's thread."""
        seqs = base.live_seqs()
        sketches: dict[int, bytes] = {}
        for start in range(0, seqs.size, 1 << 16):
            read = self._reader.sketched_rows_by_seq(seqs[start : start + (1 << 16)].tolist())
            sketches.update((seq, sketch) for seq, (_, sketch) in read.items())
        kept = np.array([seq for seq in seqs.tolist() if seq in sketches], dtype=np.int64)
        if not kept.size:
            return kept, np.zeros((0, self.num_values), dtype=self._lsh.dtype)
        return kept, self._decode_many([sketches[seq] for seq in kept.tolist()])

    def switch(self, base: LSHSegment, dead: Iterable[int]) -> None:
        """The merge's segment becomes the base, ``dead``: its rows removed, replaced or given another
        sketch while it was built; the merging level is dropped (the recent level stays)."""
        with self._lock:
            base.kill(np.fromiter(dead, dtype=np.int64))
            self._base, self._merging, self._gone = base, None, set()

    def _forget_merging(self, keys: Iterable[str]) -> None:
        """These keys' pages changed: the merging level's copies are no longer answers."""
        merging = self._merging
        if merging is not None:
            self._gone.update(key for key in keys if key in merging)

    def load(self, chunks: Iterable[list[tuple[int, str, bytes]]]) -> None:
        """Fill the empty recent level from rows ``(seq, key, sketch bytes)`` in seq order (one open);
        the base's copies of those rows (a sketch changed since it was written) die."""
        keys: list[str] = []
        seqs: list[int] = []
        parts = []
        row_bytes = self._bits.width * self.num_values
        for chunk in chunks:
            blob = b"".join(sketch for _, _, sketch in chunk)
            if len(blob) != row_bytes * len(chunk):
                bad = next((seq, key) for seq, key, sketch in chunk if len(sketch) != row_bytes)
                raise ValueError(f"row {bad[0]} ({bad[1]!r}) holds a sketch of the wrong length")
            parts.append(np.frombuffer(blob, dtype=f"<u{self._bits.width}").reshape(len(chunk), -1))
            keys += [key for _, key, _ in chunk]
            seqs += [seq for seq, _, _ in chunk]
        if not keys:
            return
        matrix = np.concatenate(parts)
        with self._lock:
            self._base.kill(seqs)
            self._lsh.load(keys, matrix, tags=seqs)

    def stored(
        self,
        keys: list[str],
        seqs: list[int],
        sketches: list[bytes | None],
        replaced: Iterable[int] = (),
        matrix: np.ndarray | None = None,
    ) -> None:
        """After a commit: ``keys`` now hold these rows (seq, sketch or None); ``replaced``: the seqs
        the keys held before (their base copies die, as do those of rows whose sketch changed).
        ``matrix``: every row's sketch as :meth:`encode_plain` gave it (None: read from the bytes)."""
        with self._lock:
            lsh = self._lsh
            if len(self._base.seqs):
                self._base.kill([*replaced, *seqs])
            self._forget_merging(keys)
            if len(keys) == 1 and sketches[0]:  # one page (a crawl's every write): no batch machinery
                lsh.add(keys[0], self._decode(sketches[0]), tag=seqs[0])
                return
            with_sketch = [i for i, data in enumerate(sketches) if data]
            if len(with_sketch) < len(keys):
                for key, data in zip(keys, sketches, strict=True):
                    if not data and key in lsh:
                        lsh.remove(key)  # replaced by a page without sketch: its old sketch goes
            if matrix is not None and len(with_sketch) == len(keys) == matrix.shape[0]:
                lsh.add_matrix(keys, matrix, seqs)
            elif with_sketch:
                lsh.add_matrix(
                    [keys[i] for i in with_sketch],
                    self._decode_many([sketches[i] for i in with_sketch]),  # type: ignore[misc]
                    [seqs[i] for i in with_sketch],
                )

    def _decode_many(self, rows: list[bytes]) -> np.ndarray:
        """Rows' sketches as one matrix, as the LSH keeps them (:meth:`_decode`, in one operation)."""
        blob = b"".join(rows)
        if len(blob) != self._bits.width * self.num_values * len(rows):
            return np.stack([self._decode(data) for data in rows])  # raises, naming the length
        return np.frombuffer(blob, dtype=f"<u{self._bits.width}").reshape(len(rows), self.num_values)

    def removed(self, key: str, seq: int | None = None) -> None:
        with self._lock:
            self._lsh.remove(key)
            self._forget_merging([key])
            if seq is not None:
                self._base.kill([seq])

    # -- reads by key ----------------------------------------------------------------------------------
    def __len__(self) -> int:
        with self._lock:
            return len(self._base) + self._merging_size() + len(self._lsh)

    def _merging_size(self) -> int:
        return 0 if self._merging is None else len(self._merging) - len(self._gone)

    def _in_merging(self, key: str) -> bool:
        return self._merging is not None and key in self._merging and key not in self._gone

    def _base_rows(self, keys: list[str]) -> dict[str, tuple[int, bytes]]:
        """The rows with a sketch of ``keys`` (asked for those not in the recent level: they are in the
        base). Called without this column's lock held: the reader takes the index's, which a write
        holds while it tells this column (one lock order)."""
        if self._reader is None or not len(self._base) or not keys:
            return {}
        return self._reader.sketch_rows(keys)

    def in_recent(self, key: str) -> bool:
        """Whether the recent (or merging) level holds ``key`` (no read of the rows)."""
        with self._lock:
            return key in self._lsh or self._in_merging(key)

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, str):
            return False
        return self.in_recent(key) or bool(self._base_rows([key]))

    def get(self, key: str) -> np.ndarray | None:
        """A copy of the sketch kept for ``key`` (uint32 values of ``value_bits``), or None."""
        return self.get_many([key]).get(key)

    def get_many(self, keys: Iterable[str]) -> dict[str, np.ndarray]:
        wanted = list(keys)
        with self._lock:
            out = {key: values for key in wanted if (values := self._lsh.get(key)) is not None}
            if self._merging is not None:
                merging = self._merging
                for key in wanted:
                    if key not in out and self._in_merging(key):
                        out[key] = merging.get(key)  # type: ignore[assignment]
        for key, (_, data) in self._base_rows([key for key in wanted if key not in out]).items():
            out[key] = self._decode(data).astype(np.uint32)
        return out

    def keys(self) -> list[str]:
        """Keys with a sketch."""
        with self._lock:
            recent = self._lsh.keys()
            if self._merging is not None:
                fresh, gone = set(recent), self._gone
                frozen = self._merging.keys()  # a list, oldest first (MinHashLSH is not iterable)
                recent = [k for k in frozen if k not in gone and k not in fresh] + recent
            based = self._reader is not None and len(self._base) > 0
        if not based:
            return recent
        return [*self._reader.keys_with_sketch(exclude=set(recent)), *recent]

    def hints(self, keys: Iterable[str]) -> list[int]:
        """Each key's seq in the simhash store as last seen here (0: not known here)."""
        with self._lock:
            wanted = list(keys)
            tags = self._lsh.tags(wanted)
            if self._merging is None:
                return tags
            older = self._merging.tags(wanted)
            gone = self._gone
            return [t or (0 if key in gone else o) for key, t, o in zip(wanted, tags, older, strict=True)]

    def set_hints(self, pairs: Iterable[tuple[str, int]]) -> None:
        with self._lock:
            self._lsh.set_tags(pairs)

    # -- lookups -------------------------------------------------------------------------------------------
    def query(self, sketch: Any) -> list[LSHMatch]:
        """Stored sketches sharing a band with ``sketch`` and estimated Jaccard >= threshold (no meta:
        the simhash store's rows have it)."""
        return self.query_many(as_sketch(sketch, self.num_values)[None, :])[0]

    def query_many(self, sketches: Any) -> list[list[LSHMatch]]:
        return [[LSHMatch(key, s) for key, s, _ in found] for found in self.query_tagged(sketches)]

    def query_tagged(self, sketches: Any, rows: dict[int, Row] | None = None) -> list[list[Answer]]:
        """For each sketch of a batch ``[(key, similarity, seq)]``, best first, ties oldest first: the
        lean path, whose caller reads the matches' rows by seq. The base's candidates are verified
        against the sketches in their rows, read without this column's lock; ``rows`` receives those
        of the base's answers (``seq -> (key, meta, simhash)``), so that the caller need not read
        them again."""
        batch = as_sketch_batch(sketches, self.num_values)
        with self._lock:
            lsh, base, merging, gone = self._lsh, self._base, self._merging, self._gone
            if batch.shape[0] == 1:  # one lookup: the single query's C calls, no batch machinery
                values, band_keys = lsh.prepare(batch[0])  # the band keys once, for every level
                recent: list[Answer] = list(lsh.query_prepared(values, band_keys))
                if merging is not None:
                    frozen = [a for a in merging.query_prepared(values, band_keys) if a[0] not in gone]
                    recent = _best_first(frozen, recent) if frozen else recent
                out = [recent]
                if not len(base):
                    return out
                seqs = base.candidates(values, band_keys, self.bands, self.rows, lsh.min_matches)
                if not seqs.size:  # most lookups: no candidate, no row read
                    return out
                values, query_of = values[None, :], np.zeros(seqs.size, np.int64)
            else:
                out = self._recent_answers(batch, lsh, merging, gone)
                if not len(base):
                    return out
                values, band_keys = lsh.prepare_many(batch)
                query_of, seqs = base.candidates_many(values, band_keys, self.rows, lsh.min_matches)
            if not seqs.size:
                return out
            min_matches, similarity = lsh.min_matches, lsh.similarity_of
        olds = self._verified(values, query_of, seqs, min_matches, similarity, len(out), rows)
        return [_best_first(old, new) if old else new for old, new in zip(olds, out, strict=True)]

    @staticmethod
    def _recent_answers(
        batch: np.ndarray, lsh: MinHashLSH, merging: MinHashLSH | None, gone: set[str]
    ) -> list[list[Answer]]:
        """The recent and merging levels' answers to a batch (under the column's lock)."""
        tags = lsh.tags
        out: list[list[Answer]] = [
            [(key, s, t) for (key, s), t in zip(found, tags(key for key, _ in found), strict=True)]
            for found in lsh.query_many(batch)
        ]
        if merging is not None:
            frozen_tags = merging.tags
            olders = [
                [
                    (key, s, t)
                    for (key, s), t in zip(found, frozen_tags(key for key, _ in found), strict=True)
                    if key not in gone
                ]
                for found in merging.query_many(batch)
            ]
            out = [_best_first(old, new) if old else new for old, new in zip(olders, out, strict=True)]
        return out

    def _verified(
        self,
        values: np.ndarray,
        query_of: np.ndarray,
        seqs: np.ndarray,
        min_matches: int,
        similarity: Callable[[int], float],
        queries: int,
        answered: dict[int, Row] | None,
    ) -> list[list[Answer]]:
        """The base's candidates ``(query, seq)`` that pass :func:`verify` against the sketch in their
        row, named by it, for each query best first (ties oldest first); their rows into ``answered``.
        A candidate whose row is gone or has no sketch now (changed since the lookup) is no answer."""
        olds: list[list[Answer]] = [[] for _ in range(queries)]
        wanted = np.unique(seqs).tolist()
        rows = self._reader.sketched_rows_by_seq(wanted) if self._reader is not None else {}
        if len(rows) < len(wanted):
            present = np.fromiter((seq in rows for seq in seqs.tolist()), dtype=bool, count=seqs.size)
            seqs, query_of = seqs[present], query_of[present]
        if not seqs.size:
            return olds
        listed = seqs.tolist()
        matrix = self._decode_many([rows[seq][1] for seq in listed])
        counts = verify(matrix, query_of, values, self.bands, self.rows, min_matches)
        for q, seq, count in zip(query_of.tolist(), listed, counts.tolist(), strict=True):
            if count >= 0:
                row = rows[seq][0]
                olds[q].append((row[0], similarity(count), seq))
                if answered is not None:
                    answered[seq] = row
        for old in olds:
            if len(old) > 1:
                old.sort(key=_rank)
        return olds

    def stats(self) -> dict[str, Any]:
        with self._lock:
            recent = self._lsh.stats()
            return {
                **recent,
                "size": len(self._base) + self._merging_size() + len(self._lsh),
                "base": len(self._base),
                "merging": self._merging_size(),
                "recent": len(self._lsh),
                "removed_not_compacted": recent["removed_not_compacted"] + self._base.dead,
                "bytes_base": self._base.nbytes,
                "threshold": self.threshold,
                "num_values": self.num_values,
            }

    def close(self) -> None:
        """Nothing to release: the simhash store holds the rows (and closes them)."""

    def __repr__(self) -> str:
        return (
            f"SketchColumn(threshold={self.threshold}, bands={self.bands}, rows={self.rows}, "
            f"value_bits={self.value_bits}, {len(self)} sketches)"
        )


def _rank(answer: Answer) -> tuple[float, int]:
    """Answers' order: best first, ties oldest (smallest seq) first."""
    return -answer[1], answer[2]


def _best_first(old: Sequence[Answer], new: Sequence[Answer]) -> list[Answer]:
    """Two levels' answers as one, in :func:`_rank`'s order."""
    if not new:
        return list(old)
    return sorted([*old, *new], key=_rank)


# -- opening --------------------------------------------------------------------------------------------
def column_params(simhashes: Any) -> dict[str, Any] | None:
    """The sketch column's settings (``sketch_*`` among the simhash store's) of the embedded index
    ``simhashes``; None: it has no column yet."""
    stored = simhashes.settings()
    mine = {name.removeprefix(PREFIX): value for name, value in stored.items() if name.startswith(PREFIX)}
    if not mine:
        return None
    have = readable_params(mine, f"the index at {simhashes.path}", instead="rebuild")
    if have["value_bits"] != VALUE_BITS:  # signed settings of this format always say 8
        raise IndexSettingsError(
            f"the index at {simhashes.path} records {have['value_bits']}-bit sketch values; its format "
            f"keeps {VALUE_BITS}"
        )
    return have


def _as_settings(params: dict[str, Any]) -> dict[str, str]:
    """The column's parameters as the simhash store keeps them: ``sketch_*``, the scheme with them."""
    return {PREFIX + name: str(value) for name, value in {**params, "scheme": SCHEME}.items()}


_REMEDY = "open it with its own (the similarity it was created with), or build a new index"


def open_column(simhashes: Any, given: dict[str, Any]) -> SketchColumn | None:
    """The sketch column of the embedded index ``simhashes`` (a :class:`~.embedded.SimhashIndex`),
    attached to it. ``given``: threshold, bands, rows (num_values: None for the stored or default
    one); a new column is created with them and :data:`VALUE_BITS`. A reader of an index that has
    none gets None (every page is judged by simhash)."""
    have = column_params(simhashes)
    if have is None and simhashes.read_only:
        return None
    if have is None:
        params = {"num_values": None, **given, "value_bits": VALUE_BITS}
        created = new_params(params)
        simhashes.set_sketches([], _as_settings(created))
        have = stored_params(created)
    check_given(given, have, f"the index at {simhashes.path}", _REMEDY)
    column = SketchColumn(have)
    simhashes.attach(column)
    return column
