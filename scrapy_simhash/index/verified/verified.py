"""The verified index: every page's simhash and its sketch, and the default decision rule.

Two parts, both crash-safe and each exact for its part:

- the **simhash store** (:class:`~.embedded.SimhashIndex` or :class:`~.redis_store.RedisIndex`):
  every page's simhash-doc/1 fingerprint and meta, the identifier that exports and reports show,
  and the lookup for pages stored without a sketch (simhash mode, indexes written before sketches);
- the **sketches**: the minhash-doc/1 sketch of every page that has one, found by LSH bands and
  verified by estimated Jaccard, with ``bands``, ``rows`` and the threshold of the
  :class:`~scrapy_simhash.decision.Rule`, so that their answers are the rule's answers. Embedded,
  a column of the simhash store's rows (:mod:`.sketch_column`, :mod:`.verified_embedded`): a page
  and its sketch are one write. On Redis, a second store (:class:`~.redis_minhash.RedisMinHashIndex`,
  under the prefix ``<prefix>-sketches``): this module.

On Redis a page with a sketch is written to the sketch store first: its atomic ``check_and_add``
(one Lua script) is what makes the decision, so two processes racing with near-duplicate pages
cannot both see "no match". A sketch match takes its fingerprint, meta and age (``seq``, which
the middleware compares) from the simhash store, read in one go for a batch; the sketch store's
meta also carries the page's simhash and meta, so that a match on a sketch without simhash row is
complete. Both writes are done when a call returns: an acknowledged page is never lost.

On a single Redis server both stores' writes (and the rows the combination needs) are one atomic
script (:mod:`.redis_verified`): one round trip, and both writes land or neither. On Redis Cluster,
where the two stores are in two slots, a crash between the two writes leaves an unacknowledged
sketch without its simhash row, which is reported, as it cannot be told from an insert in flight.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np

from ...decision import Rule
from ...fingerprint.minhash import MinHash
from ..base import Match, Meta, NearDuplicateIndex
from ..lsh.lsh_bands import check_scheme
from ..values import check_key, check_simhash, encode_meta

_SIMHASH_FIELD = "\x00simhash"
"""The page's simhash in the sketch store's meta (a name no caller's meta uses: theirs is kept whole)."""


def _ordered(matches: list[Match]) -> list[Match]:
    """Best first: similarity descending (simhash-only decisions last), then distance.

    A stable sort: the stores' own order (oldest first among equals) breaks the remaining ties.
    """
    return sorted(matches, key=lambda m: (-(m.similarity if m.similarity is not None else -1.0), m.distance))


class VerifiedIndex(NearDuplicateIndex):
    """Near-duplicate lookups by the verified rule, over a simhash store and a sketch store.

    Redis, and any opening without sketches (a reader of an index that never held one, simhash
    mode); an embedded index with sketches is an :class:`~.verified_embedded.EmbeddedVerifiedIndex`.

    Answers are exactly the stored pages p for which
    ``rule.compare_values(simhash, p.simhash, sketch, p.sketch).near_duplicate``; a page given
    or stored without a sketch is judged by simhash alone (distance <= ``k``), and its Match has
    ``similarity=None``.
    """

    _in_rows = False
    """Embedded: the sketches are in the simhash store's rows (the subclass), not a store of their own."""

    def __init__(self, simhashes: NearDuplicateIndex, sketches: Any | None, rule: Rule) -> None:
        if rule.mode != "verified":
            raise ValueError("VerifiedIndex applies the verified rule; simhash mode uses the simhash index")
        if sketches is not None and sketches.value_bits != rule.value_bits:
            raise ValueError(
                f"the sketch store keeps {sketches.value_bits}-bit values; "
                f"the rule compares {rule.value_bits}"
            )
        self.rule = rule
        self.k = simhashes.k
        self.simhashes = simhashes
        self.sketches = sketches
        """None for a read-only opening of an index that has no sketch store yet (every page legacy)."""
        self._writing = threading.RLock()
        """Held across both stores' writes: this process's other threads never see half an insert."""
        self._pair: Any = None
        """Redis: both stores' writes in one atomic script (:mod:`.redis_verified`), or None."""
        if sketches is not None and not self._in_rows:
            from ..redis.redis_verified import pair_for

            self._pair = pair_for(simhashes, sketches)
        self._retention = getattr(simhashes, "retention", None)
        self._row_decides = self._in_rows or self._pair is not None or self._retention is not None
        """Whether a sketch match whose page has no simhash row is dropped: embedded (a reader's snapshot
        of an index written since), one Redis server (both written by one
        script: the page was removed or expired since), and with retention anywhere (it expired).
        Only on Redis Cluster without retention may it be another process's insert in flight,
        reported from the sketch's meta."""

    # -- helpers ---------------------------------------------------------------------------------
    def _sketch_values(self, sketch: Any) -> np.ndarray | None:
        if sketch is None:
            return None
        check_scheme(sketch)
        values = np.asarray(getattr(sketch, "values", sketch))
        if values.dtype != np.uint32:
            values = MinHash(values).values
        return values

    def _has_sketch(self, key: str) -> bool:
        return self.sketches is not None and key in self.sketches

    def _combine(
        self,
        simhash: int,
        sketch_found: list[Any] | None,
        simhash_found: list[Match],
        k: int,
        own: tuple[str, bool] | None = None,
        before: dict[str, Match] | None = None,
        sketched: set[str] | None = None,
    ) -> list[Match]:
        """The rule's answer from the two stores' answers (sketch matches verified, the rest legacy).

        ``own``: ``(key, had_sketch)`` for check_and_add, whose key's sketch is already replaced;
        ``before``: the simhash store's rows of the sketch matches, read before that insert (or for
        a whole batch): a match without a row there has none (it is not read again); ``sketched``:
        the keys of ``simhash_found`` that have a sketch, when the reply said (else asked here).
        """
        if not sketch_found and not simhash_found:
            return []  # most lookups: nothing near
        out: list[Match] = []
        seen: set[str] = set()
        by_key = {m.key: m for m in simhash_found}
        if sketch_found:
            if before is None:
                farther = [f.key for f in sketch_found if f.key not in by_key]
                if farther:  # the simhash store has their fingerprints, meta and age
                    by_key.update(self._get_many(farther))
                before = {}
            # rows read before this insert (check_and_add) or for the whole batch (query_many)
            by_key.update(
                (f.key, before[f.key]) for f in sketch_found if f.key in before and f.key not in by_key
            )
        for found in sketch_found or ():
            known = by_key.get(found.key)
            if known is not None:  # rows of ``before`` may serve several answers: their meta is copied
                stored, seq = known.simhash, known.seq
                meta = dict(known.meta) if before and before.get(found.key) is known else known.meta
            elif self._row_decides:
                continue  # removed, expired, or an insert a crash cut (see ``_row_decides``)
            else:  # Redis Cluster: being added by another process now (or a crash cut its second write)
                meta = dict(found.meta)
                stored, seq = int(meta.pop(_SIMHASH_FIELD, simhash)), 0
            distance = (stored ^ simhash).bit_count()
            out.append(Match(found.key, stored, distance, meta, seq, found.similarity))
            seen.add(found.key)
        for match in simhash_found:
            if match.key in seen or match.distance > k:
                continue
            if sketch_found is not None:
                if own is not None and match.key == own[0]:
                    had = own[1]
                else:
                    had = match.key in sketched if sketched is not None else self._has_sketch(match.key)
                if had:
                    continue  # both have sketches: the sketch store judged it (and it failed)
            out.append(match)
        return _ordered(out)

    def _get_many(self, keys: list[str]) -> dict[str, Match]:
        get_many = getattr(self.simhashes, "get_many", None)
        if get_many is not None:
            return get_many(keys)
        return {key: found for key in keys if (found := self.simhashes.get(key)) is not None}

    def _sketch_meta(self, simhash: int, meta: Meta | None) -> dict[str, Any] | None:
        """What the sketch store keeps beside a sketch: the page's simhash and meta (a match on another
        process's insert still in flight must be complete)."""
        return {**(meta or {}), _SIMHASH_FIELD: int(simhash)}

    # -- writes ----------------------------------------------------------------------------------
    def add(self, simhash: int, key: str, meta: Meta | None = None, *, sketch: Any = None) -> None:
        self.add_many([(simhash, key, meta, sketch)])

    def add_many(self, items: Iterable[Any]) -> int:
        """Store many ``(simhash, key, meta[, sketch])``; sketches first, then the simhash store.

        Every item is checked before anything is written (one bad item stores nothing); a key
        given twice ends as its last item says, sketch or none.
        """
        rows = []
        for item in items:
            simhash, key, meta, sketch = (*item, None, None)[:4] if len(item) < 4 else item
            rows.append((check_simhash(simhash), check_key(key), meta, self._sketch_values(sketch)))
        last = {key: i for i, (_, key, _, _) in enumerate(rows)}
        final = [row for i, row in enumerate(rows) if last[row[1]] == i]
        with_sketch = [
            (key, values, self._sketch_meta(h, meta)) for h, key, meta, values in final if values is not None
        ]
        without = [key for _, key, _, values in final if values is None]
        if with_sketch:  # every meta the sketch store will not check is checked before it writes
            for _, key, meta, values in rows:
                if values is None:
                    encode_meta(key, meta)
        with self._writing:
            if self._pair is not None:  # Redis: 50 rows per atomic script over both stores
                sketch_meta = [None if v is None else self._sketch_meta(h, m) for h, _, m, v in rows]
                return self._pair.add_many([(*row, sm) for row, sm in zip(rows, sketch_meta, strict=True)])
            if with_sketch:
                self._writable_sketches().add_many(with_sketch)
            for key in without:  # a page replaced by one without sketch loses its old sketch
                if self._has_sketch(key):
                    self._writable_sketches().remove(key)
            return self.simhashes.add_many([(h, key, meta) for h, key, meta, _ in rows])

    def _probing(self) -> bool:
        """Whether a lookup with a sketch must probe the simhash tables: some page may lack a sketch
        (on Redis nobody here can tell: other processes write), so it may be judged by simhash alone."""
        return True

    def _writable_sketches(self) -> Any:
        if self.sketches is None:
            raise ValueError("this index was opened read-only and has no sketch store")
        return self.sketches

    def check_and_add(
        self, simhash: int, key: str, meta: Meta | None = None, *, sketch: Any = None
    ) -> list[Match]:
        """Atomically (the sketch store deciding): the matches before this insert, then the insert.

        The key's own previous entry is reported too when the rule matches it (as every backend
        does), judged by the sketch it had before this call.
        """
        simhash, key = check_simhash(simhash), check_key(key)
        values = self._sketch_values(sketch)
        with self._writing:
            if self._pair is not None:  # Redis: one atomic script does all of the below
                sketch_meta = None if values is None else self._sketch_meta(simhash, meta)
                had, found, before, near, sketched = self._pair.check_and_add(
                    simhash, key, meta, values, sketch_meta
                )
                return self._combine(simhash, found, near, self.k, (key, had), before, sketched)
            had = self._has_sketch(key)
            sketch_found = None
            if values is not None:
                sketch_meta = self._sketch_meta(simhash, meta)
                sketch_found = self._writable_sketches().check_and_add(key, values, sketch_meta)
            elif had:
                self._writable_sketches().remove(key)
            # the matches' rows as they are before this insert (it may replace one: its own key)
            before = self._get_many([found.key for found in sketch_found]) if sketch_found else None
            simhash_found = self.simhashes.check_and_add(simhash, key, meta)
            return self._combine(simhash, sketch_found, simhash_found, self.k, (key, had), before)

    def add_sketch(self, key: str, sketch: Any) -> bool:
        """Give the stored page ``key`` a sketch if it has none, keeping its fingerprint, meta and age.

        For pages stored before sketches: a re-crawl that finds one unchanged does not re-add it
        (that would make the original look newer than its copies), but from now on it can be
        verified. False when ``key`` is not stored or already has a sketch.
        """
        values = self._sketch_values(sketch)
        if values is None:
            raise ValueError("add_sketch needs a sketch")
        check_key(key)
        with self._writing:
            stored = self.simhashes.get(key)
            if stored is None or self._has_sketch(key):
                return False
            meta = self._sketch_meta(stored.simhash, stored.meta)
            if self._pair is not None:  # Redis: added only if the key still holds this page, atomically
                return self._pair.add_sketch(key, stored.seq, values, meta)
            self._writable_sketches().add_many([(key, values, meta)])
            return True

    def remove(self, key: str) -> bool:
        with self._writing:
            if self._pair is not None:
                return self._pair.remove(key)
            if self._has_sketch(key):
                self._writable_sketches().remove(key)
            return self.simhashes.remove(key)

    # -- reads -----------------------------------------------------------------------------------
    def query(self, simhash: int, k: int | None = None, *, sketch: Any = None) -> list[Match]:
        k = self.k if k is None else k
        values = self._sketch_values(sketch)
        if self._pair is not None:  # Redis: both stores in one script, one round trip
            ((found, before, near, sketched),) = self._pair.query_many([int(simhash)], k, [values])
            return self._combine(int(simhash), found, near, k, before=before, sketched=sketched)
        sketch_found = None
        if values is not None:
            sketch_found = [] if self.sketches is None else self.sketches.query(values)
        near = self.simhashes.query(simhash, k) if values is None or self._probing() else []
        return self._combine(int(simhash), sketch_found, near, k)

    def query_many(
        self, simhashes: Iterable[int], k: int | None = None, *, sketches: Iterable[Any] | None = None
    ) -> list[list[Match]]:
        """``query`` for each page of a batch: one batched lookup in each store."""
        k = self.k if k is None else k
        hashes = [int(h) for h in simhashes]
        matrix, with_sketch = self._sketch_matrix(hashes, sketches)
        if self._pair is not None:  # Redis: both stores per page in one script, 50 pages a call
            pages: list[Any] = [None] * len(hashes)
            for i, row in zip(with_sketch, () if matrix is None else matrix, strict=True):
                pages[i] = row
            return [
                self._combine(h, found, near, k, before=before, sketched=sketched)
                for h, (found, before, near, sketched) in zip(
                    hashes, self._pair.query_many(hashes, k, pages), strict=True
                )
            ]
        sketch_found: list[list[Any] | None] = [None] * len(hashes)
        if with_sketch:
            if self.sketches is None:
                answers: list[list[Any]] = [[] for _ in with_sketch]
            else:
                answers = self.sketches.query_many(matrix)
            for i, answer in zip(with_sketch, answers, strict=True):
                sketch_found[i] = answer
        if len(with_sketch) < len(hashes) or self._probing():
            simhash_found = self.simhashes.query_many(hashes, k)
        else:  # every page stored and asked has a sketch: the sketches decide alone
            simhash_found = [[] for _ in hashes]
        farther = {  # sketch matches beyond k, for the whole batch: one read of the simhash store
            found.key
            for answer, near in zip(sketch_found, simhash_found, strict=True)
            if answer
            for found in answer
            if all(m.key != found.key for m in near)
        }
        rows = self._get_many(sorted(farther)) if farther else {}
        return [
            self._combine(h, s, f, k, before=rows)
            for h, s, f in zip(hashes, sketch_found, simhash_found, strict=True)
        ]

    def _sketch_matrix(
        self, hashes: list[int], sketches: Iterable[Any] | None
    ) -> tuple[np.ndarray | None, list[int]]:
        """The batch's sketches as one uint32 matrix (None: none given) and the pages they belong to."""
        if isinstance(sketches, np.ndarray) and sketches.ndim == 2 and sketches.dtype == np.uint32:
            if len(sketches) != len(hashes):
                raise ValueError(f"{len(hashes)} simhashes but {len(sketches)} sketches")
            return sketches, list(range(len(sketches)))  # a batch of sketches as it comes
        given = [None] * len(hashes) if sketches is None else list(sketches)
        if len(given) != len(hashes):
            raise ValueError(f"{len(hashes)} simhashes but {len(given)} sketches")
        values = [self._sketch_values(s) for s in given]
        with_sketch = [i for i, v in enumerate(values) if v is not None]
        present = [v for v in values if v is not None]  # in the order of with_sketch
        return (np.stack(present) if present else None), with_sketch

    def get(self, key: str) -> Match | None:
        return self.simhashes.get(key)

    def sketch(self, key: str) -> MinHash | None:
        """The sketch stored under ``key``, or None (a page stored without one, or no such key): the
        low ``rule.value_bits`` of each value, what the index keeps and the rule compares."""
        if self.sketches is None:
            return None
        values = self.sketches.get(key)
        return None if values is None else MinHash(values)

    def sketch_many(self, keys: Iterable[str]) -> dict[str, MinHash]:
        """``sketch`` for many keys at once (Redis: 1,000 per round trip); keys without one are absent.

        For callers reading many pages' sketches (export, reports): one read per key would cost
        one round trip each on Redis."""
        if self.sketches is None:
            return {}
        wanted = list(keys)
        get_many = getattr(self.sketches, "get_many", None)
        if get_many is not None:
            found = get_many(wanted)
        else:
            found = {key: values for key in wanted if (values := self.sketches.get(key)) is not None}
        return {key: MinHash(values) for key, values in found.items()}

    def __len__(self) -> int:
        return len(self.simhashes)

    def __contains__(self, key: object) -> bool:
        return key in self.simhashes

    def __iter__(self) -> Iterator[Match]:
        return iter(self.simhashes)

    def compact(self) -> None:
        """The simhash store's compaction; with retention, expired pages are forgotten with their sketches."""
        if self._pair is not None:
            self._pair.compact()
        self.simhashes.compact()
        if self._retention is not None and self._pair is None and self.sketches is not None:
            self._drop_sketches_without_page()

    def _drop_sketches_without_page(self) -> None:
        """Redis Cluster with retention (the stores' writes are separate scripts there): remove the
        sketches whose page expired. Not atomic: a page another process is adding at this instant
        may lose its sketch (it is then judged by simhash alone, never lost)."""
        assert self.sketches is not None
        keys = self.sketches.keys()
        for start in range(0, len(keys), 1000):
            chunk = keys[start : start + 1000]
            alive = self._get_many(chunk)
            for key in chunk:
                if key not in alive:
                    self.sketches.remove(key)

    def clear(self) -> int:
        """Empty a server index: both stores' namespaces (the sketches first: a sketch must never outlive
        its page), each created again empty with its settings. Returns the number of keys deleted.
        An embedded index is emptied by opening it with ``reset=True``."""
        clear = getattr(self.simhashes, "clear", None)
        if clear is None:
            raise ValueError(f"{self!r} cannot be cleared in place: open it with reset=True")
        deleted = 0 if self.sketches is None else self.sketches.clear()
        return deleted + clear()

    def stats(self) -> dict[str, Any]:
        out = dict(self.simhashes.stats())
        sketch_stats = {} if self.sketches is None else self.sketches.stats()
        out["mode"] = "verified"
        out["similarity"] = self.rule.similarity
        out["value_bits"] = self.rule.value_bits  # of each sketch value, kept and compared
        out["sketches"] = sketch_stats
        with_sketch = 0 if self.sketches is None else len(self.sketches)
        out["without_sketch"] = max(0, len(self.simhashes) - with_sketch)
        return out

    def notes(self) -> dict[str, str]:
        return self.simhashes.notes()

    def note(self, name: str, value: str, *, replacing: str | None = None) -> str:
        return self.simhashes.note(name, value, replacing=replacing)

    def close(self) -> None:
        try:
            if self.sketches is not None:
                self.sketches.close()
        finally:
            self.simhashes.close()

    def __enter__(self) -> VerifiedIndex:
        return self

    def __getattr__(self, name: str) -> Any:
        # the simhash store's own attributes (path, layout, read_only, ...) read through
        if name in ("simhashes", "sketches", "rule"):
            raise AttributeError(name)
        return getattr(self.simhashes, name)

    def __repr__(self) -> str:
        return f"VerifiedIndex({self.simhashes!r}, similarity={self.rule.similarity})"
