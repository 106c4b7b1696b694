"""Redis backend: one near-duplicate index shared by crawler processes on many machines.

Why this shape:

- Manku tables become sorted sets whose scores are all 0 and whose members are the big-endian permuted
  fingerprint followed by an 8-byte sequence number. Sorted sets with equal scores are ordered by their
  bytes, so one table's bucket (all members sharing a permuted prefix) is one ``ZRANGEBYLEX`` range.
  Floats never hold a fingerprint: a double keeps 53 bits and would silently lose the low 11.
  ``tables=hash`` stores the same 16-byte entries concatenated per bucket in a hash field named by the
  table key instead: one O(1) ``HGET`` per table rather than a skip-list search, and no per-entry
  overhead (see docs/scaling.md for the measured difference).
- Every operation is one Lua script (``redis_store.lua``): one round trip, and atomic, so two crawlers
  that fetch near-duplicate pages at the same moment cannot both be told "no match".
- Every key of one index carries the hash tag ``{prefix}``: Redis Cluster keeps a whole index in one
  slot (a script may only touch one slot). Different crawls (prefixes) spread over the cluster's nodes;
  one crawl's index does not (see docs/scaling.md).
- Each write carries a random request id stored with the record. When a connection drops after Redis
  ran a script but before the reply arrived, the retried call recognises its own earlier run and neither
  inserts twice nor reports its own insert as a duplicate.
- A namespace records a random epoch when it is created; every call names the epoch its client opened,
  and the script checks it before touching anything. A Redis that restarted empty (no persistence),
  was flushed or evicted our keys raises :class:`IndexLostError` instead of silently starting a new,
  empty index under the old name. ``clear()`` (``SIMHASH_RESET``) is the deliberate fresh start.

URI: ``redis://[:password@]host:port/db?prefix=crawl1&retention=2592000`` (also ``rediss://`` and
``unix:///path/redis.sock?db=0&prefix=...``). Query options (keyword arguments of :meth:`from_uri`
take precedence): ``prefix`` (namespace, default ``simhash``), ``retention`` (seconds a fingerprint is
kept; default forever), ``cluster`` (``1``: Redis Cluster), ``retries``, ``retry_cap`` (longest pause
between retries, seconds), ``retry_budget`` (seconds one call may spend retrying), ``timeout`` (socket
timeout, seconds), ``layout`` (a Manku layout spec of :mod:`.layouts`; default ``blocks:k+1``, the
least memory), ``tables`` (``zset``, the default, or ``hash``). Layout, tables and retention are fixed
when a namespace is created; later openers adopt them.

Modules: this one is the index (the interface, the namespace's config); :mod:`.redis_tables` encodes
(permutations, records, validation); :mod:`.redis_client` talks to Redis (URI, script, retries, errors).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from typing import Any

import redis

from ..base import IndexLostError, LayoutError, Match, Meta, NearDuplicateIndex, SimhashIndexError
from ..tables import layouts
from .redis_client import ScriptClient, connect, parse_retry_budget
from .redis_tables import (
    TABLE_KINDS,
    PermutedTable,
    check_key,
    check_simhash,
    decode_record,
    default_layout,
    encode_record,
    encode_row,
)

__all__ = ["FORMAT", "TABLE_KINDS", "IndexLostError", "RedisIndex", "default_layout"]

FORMAT = "scrapy-simhash-redis/1"
NOTE = "note:"
"""Config fields named ``note:<name>`` hold the index's notes (:meth:`RedisIndex.note`)."""
ROWS_PER_CALL = 50
"""Inserts or lookups per script call in add_many/query_many: one call blocks Redis for ~1-3 ms, short
enough for the other crawlers' lookups to interleave."""
CALLS_PER_ROUND_TRIP = 10
"""Script calls per pipeline: 500 inserts or lookups per round trip."""


class RedisIndex(NearDuplicateIndex):
    """Exact ≤ k lookups over 64-bit fingerprints stored in Redis (or Redis Cluster)."""

    def __init__(
        self,
        client: redis.Redis | redis.RedisCluster,
        *,
        k: int = 3,
        prefix: str = "simhash",
        retention: float | None = None,
        layout: str | None = None,
        tables: str | None = None,
        retries: int = 10,
        retry_cap: float = 2.0,
        retry_budget: float | None = None,
        location: str = "redis",
    ) -> None:
        if not prefix or any(c in prefix for c in "{}"):
            raise ValueError(f"prefix must be non-empty and without braces, got {prefix!r}")
        if retention is not None and not retention > 0:
            raise ValueError(f"retention must be a positive number of seconds, got {retention!r}")
        if tables is not None and tables not in TABLE_KINDS:
            raise ValueError(f"tables must be one of {', '.join(TABLE_KINDS)}, got {tables!r}")
        self.k = k
        self.prefix = prefix
        self.location = location
        self._redis = ScriptClient(
            client,
            [],
            location=location,
            namespace=prefix,
            retries=retries,
            retry_cap=retry_cap,
            retry_budget=retry_budget,
        )
        self._epoch = b""
        self._use_layout(layouts.resolve(layout or default_layout(k), k), tables or "zset")
        self.retention = self._open_config(
            retention, explicit_layout=layout is not None, explicit_tables=tables is not None
        )
        self._retention_ms = b"0" if self.retention is None else str(round(self.retention * 1000)).encode()

    # -- construction --------------------------------------------------------------------------

    @classmethod
    def from_uri(cls, uri: str, k: int = 3, **options: Any) -> RedisIndex:
        """Connect to the Redis named by ``uri``; see the module docstring for its options."""
        client, location, ours = connect(uri, options)
        try:
            return cls(
                client,
                k=k,
                prefix=str(ours.get("prefix", "simhash")),
                retention=None if ours.get("retention") in (None, "") else float(ours["retention"]),
                layout=ours.get("layout") or None,
                tables=ours.get("tables") or None,
                retries=int(ours.get("retries", 10)),
                retry_cap=float(ours.get("retry_cap", 2.0)),
                retry_budget=parse_retry_budget(ours.get("retry_budget")),
                location=location,
            )
        except BaseException:
            client.close()
            raise

    def _use_layout(self, layout: layouts.Layout, tables: str) -> None:
        self.layout = layout
        self.tables = tables
        self._tables = [PermutedTable(positions) for positions in layout.tables]
        tag = f"simhash:{{{self.prefix}}}"
        self._keys = [f"{tag}:{name}" for name in ("config", "seq", "keys", "docs", "time")]
        self._keys += [f"{tag}:{tables[0]}{i}" for i in range(len(self._tables))]
        self._redis.keys = self._keys
        # told to the script with every call: the table kind and each table's key length in bits
        self._spec = tables[0].encode() + bytes(table.prefix_bits for table in self._tables)

    def _open_config(
        self, retention: float | None, explicit_layout: bool = True, explicit_tables: bool = True
    ) -> float | None:
        """Create the namespace's config on first open; check that later openers agree with it.

        k must match (processes with different k would disagree on what a duplicate is); layout, table
        kind and retention are adopted from the stored config unless this opener asked for others.
        """
        layout = self.layout.spec
        wanted = {
            "format": FORMAT,
            "k": str(self.k),
            "layout": layout,
            "tables": self.tables,
            "retention": str(retention or 0),
        }
        pairs = [item.encode() for pair in wanted.items() for item in pair]
        fresh = os.urandom(8).hex().encode()  # this namespace's epoch, if this call creates it
        reply = self._redis.run(
            [b"i", str(self.k).encode(), b"0", self._spec, fresh, *pairs], "opening the index"
        )
        stored = {reply[i].decode(): reply[i + 1].decode() for i in range(0, len(reply), 2)}
        self._epoch = stored.get("epoch", "").encode()
        if stored.get("format") != FORMAT:
            raise SimhashIndexError(
                f"{self.location}: keys under prefix {self.prefix!r} are not a {FORMAT} index "
                f"(format {stored.get('format')!r}); choose another prefix"
            )
        adopt_layout = stored.get("layout") != layout and not explicit_layout
        adopt_tables = stored.get("tables") != self.tables and not explicit_tables
        if stored.get("k") == wanted["k"] and (adopt_layout or adopt_tables):
            self._use_layout(
                layouts.resolve(stored["layout"], self.k) if adopt_layout else self.layout,
                stored["tables"] if adopt_tables and stored.get("tables") in TABLE_KINDS else self.tables,
            )
            layout = self.layout.spec
        found = (stored.get("k"), stored.get("layout"), stored.get("tables"))
        if found != (wanted["k"], layout, self.tables):
            raise LayoutError(
                f"{self.location}: the index under prefix {self.prefix!r} was created with k={found[0]}, "
                f"layout {found[1]} and {found[2]} tables; this process asked for k={self.k}, layout "
                f"{layout} and {self.tables} tables. Open it with the same k and layout everywhere, or use "
                "another prefix"
            )
        stored_retention = float(stored.get("retention", "0")) or None
        if retention is not None and retention != stored_retention:
            raise ValueError(
                f"{self.location}: the index under prefix {self.prefix!r} keeps fingerprints for "
                f"{stored_retention or 'ever'} s, not {retention} s; retention is fixed when the index is "
                "created"
            )
        return stored_retention

    # -- the interface -------------------------------------------------------------------------

    def add(self, simhash: int, key: str, meta: Meta | None = None) -> None:
        self._redis.run(self._write_args(b"a", simhash, key, meta), "adding a fingerprint")

    def add_many(self, items: Iterable[tuple[int, str, Meta | None]]) -> int:
        """Batched inserts: 50 per script call, 10 calls per round trip; each call is atomic.

        Every item is validated before the first is sent: a batch with one bad item stores nothing.
        """
        rows = [encode_row(simhash, key, meta) for simhash, key, meta in items]
        per_trip = ROWS_PER_CALL * CALLS_PER_ROUND_TRIP
        for trip in range(0, len(rows), per_trip):
            calls = []
            for start in range(trip, min(len(rows), trip + per_trip), ROWS_PER_CALL):
                args = self._args(b"A")
                for simhash, key_bytes, meta_bytes in rows[start : start + ROWS_PER_CALL]:
                    args += [key_bytes, self._record(simhash, key_bytes, meta_bytes)]
                calls.append(args)
            self._redis.run_many(calls, "adding fingerprints")
        return len(rows)

    def query(self, simhash: int, k: int | None = None) -> list[Match]:
        probe = self._probe(simhash, k)
        return self._matches(
            self._redis.run(
                [
                    b"q",
                    str(self._k(k)).encode(),
                    self._retention_ms,
                    self._spec,
                    self._epoch,
                    b"",
                    b"",
                    probe,
                ],
                "querying",
            )
        )

    def query_many(self, simhashes: Iterable[int], k: int | None = None) -> list[list[Match]]:
        """Batched lookups: 50 per script call, 10 calls per round trip."""
        probes = [self._probe(simhash, k) for simhash in simhashes]
        head = [b"Q", str(self._k(k)).encode(), self._retention_ms, self._spec, self._epoch]
        calls = [head + probes[i : i + ROWS_PER_CALL] for i in range(0, len(probes), ROWS_PER_CALL)]
        out: list[list[Match]] = []
        for start in range(0, len(calls), CALLS_PER_ROUND_TRIP):
            for reply in self._redis.run_many(calls[start : start + CALLS_PER_ROUND_TRIP], "querying"):
                out.extend(self._matches(r) for r in reply)
        return out

    def check_and_add(self, simhash: int, key: str, meta: Meta | None = None) -> list[Match]:
        reply = self._redis.run(
            self._write_args(b"c", simhash, key, meta), "checking and adding a fingerprint"
        )
        return self._matches(reply)

    def remove(self, key: str) -> bool:
        check_key(key)
        return bool(self._redis.run(self._args(b"r", key.encode()), "removing a key"))

    def get(self, key: str) -> Match | None:
        check_key(key)
        found = self._matches(self._redis.run(self._args(b"g", key.encode()), "reading a key"))
        return found[0] if found else None

    def get_many(self, keys: Iterable[str]) -> dict[str, Match]:
        """``get`` for many keys in one round trip (pipelined); keys not stored are absent."""
        wanted = list(keys)
        for key in wanted:
            check_key(key)
        if not wanted:
            return {}
        out: dict[str, Match] = {}
        for start in range(0, len(wanted), 1000):  # bounds one round trip's size
            calls = [self._args(b"g", key.encode()) for key in wanted[start : start + 1000]]
            for reply in self._redis.run_many(calls, "reading keys"):
                if found := self._matches(reply):
                    out[found[0].key] = found[0]
        return out

    def __len__(self) -> int:
        return int(self._redis.run(self._args(b"n"), "counting keys"))

    def __iter__(self) -> Iterator[Match]:
        """Every stored fingerprint (distance 0), oldest first; 1,000 sequence numbers per round trip.

        Not a snapshot: entries added while iterating may or may not appear.
        """
        chunk = 1000
        last = int(self._redis.call(lambda: self._redis.client.get(self._keys[1]) or 0, "iterating"))
        for first in range(1, last + 1, chunk):
            reply = self._redis.run(self._args(b"e", str(first).encode(), str(chunk).encode()), "iterating")
            yield from self._matches(reply)

    def compact(self) -> None:
        """Forget every fingerprint past the retention window now (writes also do it, a few at a time)."""
        if self.retention is not None:
            while self._redis.run(self._args(b"t", b"1000"), "trimming expired fingerprints"):
                pass

    def stats(self) -> dict[str, Any]:
        memory = self._redis.call(lambda: self._redis.client.info("memory"), "reading INFO memory")
        if isinstance(memory, dict) and "used_memory" not in memory:  # Redis Cluster: per node
            used = sum(int(node.get("used_memory", 0)) for node in memory.values())
        else:
            used = int(memory["used_memory"])
        return {
            "backend": "redis",
            "location": self.location,
            "prefix": self.prefix,
            "size": len(self),
            "k": self.k,
            "layout": self.layout.spec,
            "tables": len(self._tables),
            "table_kind": self.tables,
            "retention": self.retention,
            "redis_used_memory": used,
        }

    def notes(self) -> dict[str, str]:
        config = self._redis.call(lambda: self._redis.client.hgetall(self._keys[0]), "reading the notes")
        fields = {_text(name): _text(value) for name, value in config.items()}
        return {name[len(NOTE) :]: value for name, value in fields.items() if name.startswith(NOTE)}

    def note(self, name: str, value: str, *, replacing: str | None = None) -> str:
        args = self._args(b"o", (NOTE + name).encode(), value.encode(), (replacing or "").encode())
        return _text(self._redis.run(args, "recording a note"))

    def clear(self) -> int:
        """Delete this index's keys (its config and tables) and start a new epoch. Returns the number of
        Redis keys deleted. The payload-digest and capture stores a crawl keeps under the same prefix
        are not this index's and stay: their own ``clear()`` empties them (``SIMHASH_RESET`` clears all
        of them with the index)."""
        deleted = int(self._redis.run(self._args(b"x"), "deleting the namespace"))
        self.retention = self._open_config(self.retention)
        return deleted

    def close(self) -> None:
        self._redis.close()

    def __repr__(self) -> str:
        return f"<RedisIndex {self.location} prefix={self.prefix!r} k={self.k} tables={len(self._tables)}>"

    # -- encoding ------------------------------------------------------------------------------

    def _args(self, mode: bytes, *extra: bytes) -> list[bytes]:
        return [mode, str(self.k).encode(), self._retention_ms, self._spec, self._epoch, *extra]

    def _run(self, args: list[bytes], action: str) -> Any:
        """One script call (with retries)."""
        return self._redis.run(args, action)

    def _k(self, k: int | None) -> int:
        if k is None:
            return self.k
        if isinstance(k, bool) or not isinstance(k, int):
            raise TypeError(f"k must be an int, got {type(k).__name__}")
        if k < 0:
            raise ValueError(f"k must be >= 0, got {k}")
        if k > self.layout.max_k:
            raise LayoutError(
                f"layout {self.layout.spec} guarantees exact answers up to k={self.layout.max_k}, not k={k}"
            )
        return k

    def _probe(self, simhash: int, k: int | None = None) -> bytes:
        """Validated query: per table the permuted fingerprint and its bucket's bounds."""
        check_simhash(simhash)
        self._k(k)
        return b"".join(table.probe(table.permute(simhash)) for table in self._tables)

    def _write_args(self, mode: bytes, simhash: int, key: str, meta: Meta | None) -> list[bytes]:
        simhash, key_bytes, meta_bytes = encode_row(simhash, key, meta)
        permuted = [table.permute(simhash) for table in self._tables]
        record = self._record(simhash, key_bytes, meta_bytes, permuted)
        probe = b"".join(table.probe(p) for table, p in zip(self._tables, permuted, strict=True))
        return [
            mode,
            str(self.k).encode(),
            self._retention_ms,
            self._spec,
            self._epoch,
            key_bytes,
            record,
            probe,
        ]

    def _record(
        self, simhash: int, key_bytes: bytes, meta_bytes: bytes, permuted: list[int] | None = None
    ) -> bytes:
        """The stored record, with a fresh request id."""
        if permuted is None:
            permuted = [table.permute(simhash) for table in self._tables]
        return encode_record(simhash, key_bytes, meta_bytes, permuted)

    def _matches(self, reply: list[Any]) -> list[Match]:
        n = len(self._tables)
        found = [decode_record(reply[i], reply[i + 1], reply[i + 2], n) for i in range(0, len(reply), 3)]
        found.sort(key=lambda m: (m.distance, m.seq))
        return found


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
