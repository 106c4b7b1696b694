"""The verified index on an embedded index whose rows hold the sketches (:mod:`.sketch_column`).

One writer and one database: a page and its sketch are one durable write, so a crash leaves
neither half of a page; the set of pages stored without sketch is known exactly, so while it is
empty a lookup with a sketch skips the simhash tables (only such pages are judged by simhash);
and the sketch column remembers each page's seq, so a lookup's matches are read by seq, all of a
batch's in one read, each Match made once (:meth:`EmbeddedVerifiedIndex._sketch_answers`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import numpy as np

from ...decision import Rule
from ..base import Match, Meta
from ..embedded.sketch_column import SketchColumn
from ..values import check_key, check_simhash, encode_meta
from .verified import VerifiedIndex, _ordered

if TYPE_CHECKING:
    from ..embedded.embedded import SimhashIndex


class EmbeddedVerifiedIndex(VerifiedIndex):
    """:class:`~.verified.VerifiedIndex`'s answers over a :class:`~.embedded.SimhashIndex` with a
    sketch column: the same rule, the same Matches."""

    _in_rows = True
    simhashes: SimhashIndex
    sketches: SketchColumn

    def __init__(self, simhashes: Any, sketches: SketchColumn, rule: Rule) -> None:
        super().__init__(simhashes, sketches, rule)
        self._legacy: set[str] | None = simhashes.keys_without_sketch()
        """The keys stored without a sketch (exact: one writer; a row's own sketch decides), or None
        after a write failed half-way (then every lookup probes)."""

    # -- pages without sketch --------------------------------------------------------------------
    def _probing(self) -> bool:
        return self._legacy is None or bool(self._legacy)

    @contextmanager
    def _tracking(self, with_sketch: Iterable[str] = (), without: Iterable[str] = ()) -> Iterator[None]:
        """Around a write: afterwards ``with_sketch`` have one, ``without`` none; if it fails
        half-way, the set of pages without sketch is no longer trusted."""
        try:
            yield
        except BaseException:
            self._legacy = None
            raise
        if self._legacy is not None:
            self._legacy.difference_update(with_sketch)
            self._legacy.update(without)

    # -- rows ------------------------------------------------------------------------------------
    def _get_many(self, keys: list[str]) -> dict[str, Match]:
        rows = self._rows(dict(zip(keys, self.sketches.hints(keys), strict=True)))
        return {key: Match(key, h, 0, meta, seq) for key, (seq, h, meta) in rows.items()}

    def _rows(self, hint_of: dict[str, int]) -> dict[str, tuple[int, int, dict[str, Any]]]:
        """The rows ``key -> (seq, simhash, meta)`` of the keys of ``hint_of``, read by the seq the
        sketch column remembers for each (a wrong one would cost a second read, by key)."""
        return self.simhashes.rows_many(list(hint_of), list(hint_of.values()))

    # -- writes ----------------------------------------------------------------------------------
    def add_many(self, items: Iterable[Any]) -> int:
        """Store many ``(simhash, key, meta[, sketch])`` in one durable transaction; one bad item
        stores nothing; a key given twice ends as its last item says, sketch or none."""
        given = [(*item, None, None)[:4] for item in items]
        sketched = [i for i, item in enumerate(given) if item[3] is not None]
        encoded, matrix = self._encode_many([given[i][3] for i in sketched])
        data: Sequence[bytes | None] = encoded
        if len(sketched) < len(given):  # the matrix would hold only some rows: the column reads the bytes
            by_item = dict(zip(sketched, encoded, strict=True))
            data, matrix = [by_item.get(i) for i in range(len(given))], None
        checked = [  # each page checked here once: the simhash store takes the rows as they are
            (check_simhash(simhash), check_key(key), meta, sketch)
            for (simhash, key, meta, _), sketch in zip(given, data, strict=True)
        ]
        rows = [
            (h, key, None if meta is None else encode_meta(key, meta), sk) for h, key, meta, sk in checked
        ]
        last = {row[1]: row[3] is not None for row in rows}
        with (
            self._writing,
            self._tracking([k for k, has in last.items() if has], [k for k, has in last.items() if not has]),
        ):
            return self.simhashes.add_rows(rows, matrix)

    def _encode_many(self, sketches: list[Any]) -> tuple[list[bytes], np.ndarray | None]:
        """The rows' bytes of a batch's sketches, and the batch as one matrix when they are plain
        uint32 arrays (encoded in one array operation; else each as :meth:`_sketch_values` reads it)."""
        if not sketches:
            return [], None
        column = self._writable_sketches()
        plain = column.encode_plain(sketches)
        if plain is not None:
            return plain
        return [column.encode(self._sketch_values(sketch)) for sketch in sketches], None

    def check_and_add(
        self, simhash: int, key: str, meta: Meta | None = None, *, sketch: Any = None
    ) -> list[Match]:
        """The matches before this insert (the key's own previous entry too, judged by the sketch it
        had), then the insert; one writer, under the index's lock."""
        simhash, key = check_simhash(simhash), check_key(key)
        values = self._sketch_values(sketch)
        data = None if values is None else self._writable_sketches().encode(values)
        with self._writing:
            if values is not None and not self._probing():
                # every page has a sketch: the sketch matches are the answer, read by seq; the
                # simhash tables need no probe (the insert still enters them)
                matches = self._sketch_answers([simhash], values[None, :])[0]
                with self._tracking([key]):
                    self.simhashes.add_many([(simhash, key, meta, data)])
                return matches
            had = key in self.sketches
            sketch_found = None if values is None else self.sketches.query(values)
            change = ([key], ()) if values is not None else ((), [key])
            with self._tracking(*change):
                # the matches' rows as they are before this insert (it may replace one: its own key)
                before = self._get_many([found.key for found in sketch_found]) if sketch_found else None
                simhash_found = self.simhashes.check_and_add(simhash, key, meta, sketch=data)
            return self._combine(simhash, sketch_found, simhash_found, self.k, (key, had), before)

    def add_sketch(self, key: str, sketch: Any) -> bool:
        values = self._sketch_values(sketch)
        if values is None:
            raise ValueError("add_sketch needs a sketch")
        data = self._writable_sketches().encode(values)
        with self._writing:
            if check_key(key) in self.sketches:
                return False
            with self._tracking(with_sketch=[key]):  # (a key not stored is in no set: nothing changes)
                return bool(self.simhashes.set_sketches([(key, data)]))

    def remove(self, key: str) -> bool:
        with self._writing, self._tracking(with_sketch=[key]):  # gone: no longer without sketch
            return self.simhashes.remove(key)

    # -- reads -----------------------------------------------------------------------------------
    def query(self, simhash: int, k: int | None = None, *, sketch: Any = None) -> list[Match]:
        values = self._sketch_values(sketch)
        if values is not None and not self._probing():
            return self._sketch_answers([int(simhash)], values[None, :])[0]
        return super().query(simhash, k, sketch=values)

    def query_many(
        self, simhashes: Iterable[int], k: int | None = None, *, sketches: Iterable[Any] | None = None
    ) -> list[list[Match]]:
        hashes = [int(h) for h in simhashes]
        matrix, with_sketch = self._sketch_matrix(hashes, sketches)
        if matrix is not None and len(with_sketch) == len(hashes) and not self._probing():
            return self._sketch_answers(hashes, matrix)
        return super().query_many(hashes, k, sketches=sketches)

    def _sketch_answers(self, simhashes: list[int], sketches: np.ndarray) -> list[list[Match]]:
        """Every page stored and asked with a sketch: :meth:`_combine`'s answers with only sketch
        matches (most lookups), every match's row read by seq in one read for the batch and each
        Match made once: a hit costs ~5 µs a match, mostly the database read and the row check."""
        rows: dict[int, tuple[str, dict[str, Any], int]] = {}  # the base's answers, read to verify them
        answers = self.sketches.query_tagged(sketches, rows)
        seqs = sorted({seq for found in answers for _, _, seq in found})
        if not seqs:
            return [[] for _ in answers]
        unread = [seq for seq in seqs if seq not in rows]
        if unread:
            rows.update(self.simhashes.rows_by_seq(unread))
        out, used = [], set()
        for simhash, found in zip(simhashes, answers, strict=True):
            matches = []
            for _, similarity, seq in found:
                row = rows.get(seq)
                if row is None:
                    continue  # a reader's snapshot of an index moved since (see ``_row_decides``)
                key, meta, stored = row
                if seq in used:  # another answer of the batch holds this row: its meta is copied
                    meta = dict(meta)
                used.add(seq)
                matches.append(Match(key, stored, (stored ^ simhash).bit_count(), meta, seq, similarity))
            out.append(_ordered(matches))
        return out

    def stats(self) -> dict[str, Any]:
        out = super().stats()
        if self._legacy is not None:  # known exactly
            out["without_sketch"] = len(self._legacy)
        return out
