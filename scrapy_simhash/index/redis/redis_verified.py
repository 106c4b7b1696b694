"""A verified Redis index's writes in one atomic script: the sketch store's and the simhash store's.

Why: :class:`~.verified.VerifiedIndex` over two Redis stores would otherwise write each page with
one script per store (plus reads between them): 3-4 round trips per ``check_and_add``, and a
crash between the two writes leaves a sketch without its simhash row. Here both stores' scripts
run unchanged inside one script (``redis_verified.lua`` assembles them, see there), so one call is
one ``EVALSHA``: Redis runs it atomically, both writes land or neither, and the reply holds
everything the verified rule needs (the sketch store's candidates, the simhash store's rows of
those candidates read *before* the insert, and the simhash store's matches).

A script may only touch one Redis Cluster slot. The sketch store's keys carry the hash tag
``{<prefix>-sketches}``, the simhash store's ``{<prefix>}``: on Redis Cluster they are (nearly
always) in different slots, so :func:`pair_for` returns None there and the verified index keeps
its per-store calls (see docs/index.md). A single Redis server has no slots: every verified index,
old or new, gets the one-script path with its existing keys; nothing is migrated.
"""

from __future__ import annotations

from collections.abc import Sequence
from importlib import resources
from typing import Any

import numpy as np
import redis
from redis.crc import key_slot

from ..base import Match, Meta
from ..embedded.minhash_store import LSHMatch
from .redis_client import ScriptClient
from .redis_minhash import CALLS_PER_ROUND_TRIP, ROWS_PER_CALL, RedisMinHashIndex
from .redis_store import RedisIndex
from .redis_tables import check_key, encode_row

__all__ = ["SCRIPT", "RedisPair", "pair_for"]


def _assemble() -> str:
    files = resources.files(__package__)
    store, sketches, main = (
        files.joinpath(name).read_text(encoding="utf-8")
        for name in ("redis_store.lua", "redis_minhash.lua", "redis_verified.lua")
    )
    hook = "local ON_EXPIRE = nil"  # the simhash store's trim() forgets expired pages: their sketches go too
    if store.count(hook) != 1:
        raise RuntimeError("redis_store.lua has no ON_EXPIRE hook line")
    store = store.replace(hook, "local ON_EXPIRE = ON_EXPIRE_HOOK")
    return (
        f"local function SIMHASH_STORE(KEYS, ARGV, ON_EXPIRE_HOOK)\n{store}\nend\n"
        f"local function SKETCH_STORE(KEYS, ARGV)\n{sketches}\nend\n{main}"
    )


SCRIPT = _assemble()
"""The simhash store's and the sketch store's scripts as functions, and the dispatcher calling them."""


class _Script(ScriptClient):
    script = SCRIPT


def _op(name: bytes, args: Sequence[bytes]) -> list[bytes]:
    return [name, str(len(args)).encode(), *args]


class RedisPair:
    """Both stores of a verified Redis index, written together by one script call per operation.

    Reads go to the stores themselves (one script each, nothing to keep consistent); every write
    of the verified index comes here when the two stores may share a script (:func:`pair_for`).
    """

    def __init__(self, simhashes: RedisIndex, sketches: RedisMinHashIndex) -> None:
        self.simhashes, self.sketches = simhashes, sketches
        own = simhashes._redis
        self._redis = _Script(
            own.client,
            [],
            location=own.location,
            namespace=simhashes.prefix,
            retries=own.retries,
            retry_cap=own.retry_cap,
            retry_budget=own.retry_budget,
        )

    def _run(self, ops: list[bytes], action: str) -> Any:
        self._prepare()
        replies = self._redis.run(
            [str(len(self.sketches._redis.keys)).encode(), *self._expiring(), *ops], action
        )
        return replies[1:] if self.simhashes.retention is not None else replies

    def _run_many(self, calls: list[list[bytes]], action: str) -> list[Any]:
        self._prepare()
        head = [str(len(self.sketches._redis.keys)).encode(), *self._expiring()]
        return self._redis.run_many([[*head, *ops] for ops in calls], action)

    def _expiring(self) -> list[bytes]:
        """With retention: the op that makes every page the simhash store forgets as expired (its
        writes trim a few; :meth:`compact` all) lose its sketch in the same script."""
        if self.simhashes.retention is None:
            return []
        return _op(b"e", self.sketches._args(b"r"))

    def _prepare(self) -> None:
        # the stores' keys change when they are cleared (a new epoch): read them at every call
        self._redis.keys = [*self.sketches._redis.keys, *self.simhashes._redis.keys]
        if self.simhashes._redis.closed or self.sketches._redis.closed:
            self._redis.closed = True

    # -- writes --------------------------------------------------------------------------------

    def check_and_add(
        self, simhash: int, key: str, meta: Meta | None, sketch: np.ndarray | None, sketch_meta: Meta | None
    ) -> tuple[bool, list[LSHMatch] | None, dict[str, Match], list[Match], set[str]]:
        """One atomic call: ``(had a sketch, sketch matches or None, the simhash rows of the sketch
        candidates before the insert, simhash matches before the insert, the keys of those that have
        a sketch)``; the insert done."""
        simhash_args = self.simhashes._write_args(b"c", simhash, key, meta)
        if sketch is None:  # a page without sketch replaces the key's old sketch, if any
            ops = _op(b"m", self.sketches._args(b"r", key.encode())) + _op(b"s", simhash_args)
            had, found = self._run(ops, "checking and adding a page")
            return bool(had), None, {}, self.simhashes._matches(found), set()
        ((key_bytes, record),) = self.sketches._records([(key, sketch, sketch_meta)])
        head = self.simhashes._args(b"b")[1:]  # k, retention, tables spec, epoch
        ops = [
            *_op(b"h", [key_bytes]),
            *_op(b"m", self.sketches._args(b"c", key_bytes, record)),
            *_op(b"b", head),
            *_op(b"s", simhash_args),
            *_op(b"k", []),
        ]
        had, candidates, rows, found, sketched = self._run(ops, "checking and adding a page")
        sketch_found = self.sketches._answer(self.sketches._values(sketch), candidates)
        before = {m.key: m for m in self.simhashes._matches(rows)}
        near = self.simhashes._matches(found)
        return bool(had), sketch_found, before, near, _keys(sketched)

    def add_many(self, rows: Sequence[tuple[int, str, Meta | None, np.ndarray | None, Meta | None]]) -> int:
        """``(simhash, key, meta, sketch or None, sketch meta)`` rows: 50 per atomic call, 10 calls
        per round trip. Everything is encoded (and checked) before the first call is sent."""
        with_sketch = [i for i, row in enumerate(rows) if row[3] is not None]
        encoded = self.sketches._records([(rows[i][1], rows[i][3], rows[i][4]) for i in with_sketch])
        records = dict(zip(with_sketch, encoded, strict=True))  # band keys hashed for all rows at once
        simhash_rows = [encode_row(h, key, meta) for h, key, meta, _, _ in rows]
        calls = []
        for start in range(0, len(rows), ROWS_PER_CALL):
            chunk = range(start, min(len(rows), start + ROWS_PER_CALL))
            last = {rows[i][1]: i for i in chunk}
            final = [i for i in chunk if last[rows[i][1]] == i]  # a key given twice ends as its last row
            ops: list[bytes] = []
            if any(i in records for i in final):
                parts = [part for i in final if i in records for part in records[i]]
                ops += _op(b"m", self.sketches._args(b"A", *parts))
            for i in final:  # a page stored without sketch loses its old sketch
                if i not in records:
                    ops += _op(b"m", self.sketches._args(b"r", rows[i][1].encode()))
            simhash_args = self.simhashes._args(b"A")
            for simhash, key_bytes, meta_bytes in (simhash_rows[i] for i in chunk):
                simhash_args += [key_bytes, self.simhashes._record(simhash, key_bytes, meta_bytes)]
            calls.append(ops + _op(b"s", simhash_args))
        for start in range(0, len(calls), CALLS_PER_ROUND_TRIP):
            self._run_many(calls[start : start + CALLS_PER_ROUND_TRIP], "adding pages")
        return len(rows)

    # -- reads ---------------------------------------------------------------------------------

    def query_many(
        self, simhashes: Sequence[int], k: int, sketches: Sequence[np.ndarray | None]
    ) -> list[tuple[list[LSHMatch] | None, dict[str, Match], list[Match], set[str]]]:
        """Each page's ``(sketch matches or None, the simhash rows of its sketch candidates, simhash
        matches, the keys of those that have a sketch)``, read in one script per 50 pages (so one
        round trip for a single page): both stores answer from the same instant, and nothing is
        read again."""
        head = self.simhashes._args(b"b")[1:]  # k, retention, tables spec, epoch
        values = [None if v is None else self.sketches._values(v) for v in sketches]
        probes = [self.simhashes._probe(simhash, k) for simhash in simhashes]
        with_sketch = [i for i, v in enumerate(values) if v is not None]
        band_probes = dict(
            zip(
                with_sketch,
                self.sketches._hasher.keys_many(np.stack([v for v in values if v is not None])).astype(">u8")
                if with_sketch
                else [],
                strict=True,
            )
        )
        query_head = [b"Q", str(self.simhashes._k(k)).encode(), *head[1:]]
        calls, pages = [], []
        for start in range(0, len(values), ROWS_PER_CALL):
            chunk = range(start, min(len(values), start + ROWS_PER_CALL))
            sketched = [i for i in chunk if values[i] is not None]
            # the simhash matches; the sketch candidates; which matches have a sketch (a candidate has);
            # the rows of the candidates that the page's simhash matches do not hold
            ops = _op(b"s", [*query_head, *(probes[i] for i in chunk)])
            if sketched:
                at = {i: str(n).encode() for n, i in enumerate(sketched, 1)}
                ops += _op(b"m", self.sketches._args(b"Q", *(band_probes[i].tobytes() for i in sketched)))
                ops += _op(b"K", [at.get(i, b"0") for i in chunk])
                ops += _op(b"B", [*head, *(str(i - start + 1).encode() for i in sketched)])
            else:
                ops += _op(b"K", [b"0"] * len(chunk))
            calls.append(ops)
            pages.append((chunk, sketched))
        replies: list[Any] = []
        for start in range(0, len(calls), CALLS_PER_ROUND_TRIP):
            for reply in self._run_many(calls[start : start + CALLS_PER_ROUND_TRIP], "querying"):
                replies.append(reply[1:] if self.simhashes.retention is not None else reply)
        out: list[tuple[list[LSHMatch] | None, dict[str, Match], list[Match], set[str]]] = []
        for (chunk, sketched), reply in zip(pages, replies, strict=True):
            candidates: dict[int, list[Any]] = {}
            before: dict[str, Match] = {}
            found_lists, sketched_lists = reply[0], reply[2 if sketched else 1]
            if sketched:
                candidates = dict(zip(sketched, reply[1], strict=True))
                before = {m.key: m for m in self.simhashes._matches(reply[3])}
            for i, found, with_sketch in zip(chunk, found_lists, sketched_lists, strict=True):
                near = self.simhashes._matches(found)
                value = values[i]
                if value is None:
                    out.append((None, {}, near, set()))
                else:
                    answer = self.sketches._answer(value, candidates[i])
                    out.append((answer, before, near, _keys(with_sketch)))
        return out

    def compact(self) -> None:
        """Forget every page past the retention window now, with its sketch (1,000 per call)."""
        if self.simhashes.retention is not None:
            while self._run(_op(b"s", self.simhashes._args(b"t", b"1000")), "trimming expired pages")[0]:
                pass

    def add_sketch(self, key: str, seq: int, sketch: np.ndarray, sketch_meta: Meta | None) -> bool:
        """Give the page stored as ``seq`` under ``key`` the sketch, in one atomic call that checks the
        key still holds that page and has no sketch (else nothing is written: False)."""
        ((key_bytes, record),) = self.sketches._records([(key, sketch, sketch_meta)])
        ops = _op(b"w", [seq.to_bytes(8, "big"), *self.sketches._args(b"a", key_bytes, record)])
        (added,) = self._run(ops, "adding a sketch")
        return bool(added)

    def remove(self, key: str) -> bool:
        """Forget ``key`` in both stores at once; True if the simhash store held it."""
        check_key(key)
        ops = _op(b"m", self.sketches._args(b"r", key.encode()))
        ops += _op(b"s", self.simhashes._args(b"r", key.encode()))
        _, removed = self._run(ops, "removing a key")
        return bool(removed)


def _keys(reply: list[bytes]) -> set[str]:
    """The keys a 'k' or 'K' operation replied (the simhash matches that have a sketch)."""
    return {key.decode() for key in reply}


def pair_for(simhashes: Any, sketches: Any) -> RedisPair | None:
    """The one-script writer for these two stores, or None: not both Redis, or (Redis Cluster) in
    two slots, where one script may not touch both."""
    if not isinstance(simhashes, RedisIndex) or not isinstance(sketches, RedisMinHashIndex):
        return None
    slots = {key_slot(store._redis.keys[0].encode()) for store in (simhashes, sketches)}
    if isinstance(simhashes._redis.client, redis.RedisCluster) and len(slots) > 1:
        return None
    return RedisPair(simhashes, sketches)
