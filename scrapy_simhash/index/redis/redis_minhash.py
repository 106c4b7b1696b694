"""MinHash-LSH in Redis: the embedded MinHashIndex's API and answers, shared by many crawler processes.

Why this shape:

- Candidates come from band buckets: per band a Redis set ``…:b:<band>:<band key hex>`` holding the
  sequence numbers of the documents whose band hashes to that key (:class:`~.lsh.BandHasher`, the
  same 64-bit keys as the in-memory index). Sets of small integers are intsets: a few bytes per
  member, where the document keys (URLs) repeated once per band would cost ~16x their length.
  ``buckets=hash`` keeps instead one Redis hash per band (field: the band key, value: the bucket's
  sequence numbers, 8 bytes each): no Redis key per bucket, less memory per document.
- A hash ``docs`` maps a sequence number to the record (sketch bytes, band keys, key, meta JSON) and
  ``keys`` maps a key to its sequence number; the numbers grow with every insert, so "ties oldest
  first" and "a replaced key becomes the newest" are the in-memory index's orders.
- Every operation is one Lua script (``redis_minhash.lua``): ``check_and_add`` collects the members
  of the query's buckets *before* the insert, inserts (dropping a replaced key's old memberships)
  and returns the candidates' records, atomically; two crawlers fetching near-duplicates at the same
  moment cannot both be told "no match". Verification (shared band, estimated Jaccard >= threshold)
  is :func:`verify`, a pure function of what the script returned, so the answer is still the
  matches before the insert.
- The namespace's config (``simhash:{prefix}:config``, the simhash index's config key, so one prefix
  holds one kind of index) stores the scheme, ``num_values``, ``threshold``, ``bands``, ``rows``,
  ``value_bits`` (absent: 32, a namespace created before it existed) and a random epoch; openers
  must agree (:class:`IndexSettingsError`). Data keys carry the epoch in their names; a call whose
  epoch is not the stored one fails with :class:`IndexLostError` before touching anything (Redis
  restarted empty, flushed, evicted), as in the simhash Redis index.
- Writes carry a random request id: a call retried after a lost reply neither inserts twice nor
  reports its own insert.

URI: ``redis://host:port/db?prefix=crawl1&threshold=0.8&num_values=128`` (``bands``, ``rows``,
``value_bits``, ``buckets`` (``set``, the default, or ``hash``), ``reset``, ``retries``, ``retry_cap``,
``retry_budget``, ``timeout``, ``cluster`` too); keyword arguments take precedence.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from importlib import resources
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import numpy as np

from ...fingerprint.bbit import ValueBits
from ...fingerprint.minhash import SCHEME
from ..base import IndexSettingsError, Meta
from ..embedded.minhash_store import LSHMatch
from ..lsh.lsh_bands import (
    BandHasher,
    as_sketch,
    as_sketch_batch,
    check_given,
    check_scheme,
    new_params,
    readable_params,
)
from ..values import check_key, encode_meta
from .redis_client import Client, ScriptClient, connect, parse_retry_budget, truthy
from .redis_minhash_records import Candidate, decode_record, verify

__all__ = ["FORMAT", "RedisMinHashIndex", "verify"]

FORMAT = "scrapy-simhash-minhash-redis/1"
SIMHASH_FORMAT = "scrapy-simhash-redis/1"
OPTIONS = ("threshold", "num_values", "bands", "rows", "value_bits", "buckets", "reset")
BUCKET_KINDS = ("set", "hash")
ROWS_PER_CALL = 50
"""Inserts or lookups per script call in add_many/query_many (one call blocks Redis ~1-2 ms)."""
CALLS_PER_ROUND_TRIP = 10
GETS_PER_CALL = 1000
"""Sketch reads per script call in get_many (~0.6 MB of reply at 128 values, well under 1 ms)."""
SCRIPT = resources.files(__package__).joinpath("redis_minhash.lua").read_text(encoding="utf-8")


class _Script(ScriptClient):
    """The simhash index's client (retries, reload, errors naming the server) running our script."""

    script = SCRIPT


class RedisMinHashIndex:
    """MinHash-LSH index in Redis under namespace ``prefix``; the API and answers of MinHashIndex.

    ``threshold``, ``num_values``, ``bands``, ``rows``, ``value_bits``: fixed when the namespace is
    created (defaults 0.8, 128 and 32, bands and rows derived from the threshold; a namespace created
    before ``value_bits`` existed keeps 32; ``new_value_bits``: a new namespace's width when
    ``value_bits`` is None); None takes the stored ones, a value
    that differs is an :class:`IndexSettingsError`; so is ``buckets`` (``"set"``: a Redis set per
    bucket, the default; ``"hash"``: a Redis hash per band, less memory). ``reset``: delete the
    namespace first.
    """

    def __init__(
        self,
        client: Client,
        *,
        prefix: str = "minhash",
        threshold: float | None = None,
        num_values: int | None = None,
        bands: int | None = None,
        rows: int | None = None,
        value_bits: int | None = None,
        new_value_bits: int | None = None,
        buckets: str | None = None,
        reset: bool = False,
        retries: int = 10,
        retry_cap: float = 2.0,
        retry_budget: float | None = None,
        location: str = "redis",
    ) -> None:
        if not prefix or any(c in prefix for c in "{}"):
            raise ValueError(f"prefix must be non-empty and without braces, got {prefix!r}")
        if buckets is not None and buckets not in BUCKET_KINDS:
            raise ValueError(f"buckets must be one of {', '.join(BUCKET_KINDS)}, got {buckets!r}")
        self.prefix = prefix
        self.location = location
        self._config = f"simhash:{{{prefix}}}:config"
        self._redis = _Script(
            client,
            [self._config],
            location=location,
            namespace=prefix,
            retries=retries,
            retry_cap=retry_cap,
            retry_budget=retry_budget,
        )
        self._epoch = b""
        if reset:
            self.clear(reopen=False)
        self._open(threshold, num_values, bands, rows, value_bits, buckets, new_value_bits)

    # -- construction --------------------------------------------------------------------------

    @classmethod
    def from_uri(cls, uri: str, **options: Any) -> RedisMinHashIndex:
        """Connect to the Redis named by ``uri``; see the module docstring for its options."""
        parts = urlsplit(uri)
        query = parse_qsl(parts.query, keep_blank_values=True)
        ours = {name: value for name, value in query if name in OPTIONS}
        ours.update({name: options.pop(name) for name in OPTIONS if name in options})
        clean = urlunsplit(parts._replace(query=urlencode([(n, v) for n, v in query if n not in OPTIONS])))
        new_value_bits = options.pop("new_value_bits", None)
        client, location, conn = connect(clean, options)
        try:
            unsupported = sorted(set(conn) & {"retention", "layout", "tables"})
            if unsupported:
                raise TypeError(f"a Redis MinHash index has no option {', '.join(unsupported)}")

            def number(name: str, kind: type) -> Any:
                value = ours.get(name)
                return None if value in (None, "") else kind(value)

            return cls(
                client,
                prefix=str(conn.get("prefix", "minhash")),
                threshold=number("threshold", float),
                num_values=number("num_values", int),
                bands=number("bands", int),
                rows=number("rows", int),
                value_bits=number("value_bits", int),
                new_value_bits=new_value_bits,
                buckets=ours.get("buckets") or None,
                reset=truthy(ours.get("reset", False)),
                retries=int(conn.get("retries", 10)),
                retry_cap=float(conn.get("retry_cap", 2.0)),
                retry_budget=parse_retry_budget(conn.get("retry_budget")),
                location=location,
            )
        except BaseException:
            client.close()
            raise

    def _open(
        self,
        threshold: float | None,
        num_values: int | None,
        bands: int | None,
        rows: int | None,
        value_bits: int | None,
        buckets: str | None,
        new_value_bits: int | None = None,
    ) -> None:
        """Create the namespace's config on first open; later openers must agree with it."""
        given = {
            "num_values": num_values,
            "threshold": threshold,
            "bands": bands,
            "rows": rows,
            "value_bits": value_bits,
        }
        new = {
            "format": FORMAT,
            "scheme": SCHEME,
            **new_params(given, new_value_bits),
            "buckets": buckets or "set",
        }
        pairs = [item.encode() for pair in new.items() for item in pair]
        fresh = os.urandom(8).hex().encode()
        self._redis.keys = [self._config]
        reply = self._redis.run([b"i", fresh, b"", b"", b"", b"", *pairs], "opening the index")
        stored = {reply[i].decode(): reply[i + 1].decode() for i in range(0, len(reply), 2)}
        where = f"{self.location}: the namespace {self.prefix!r}"
        if stored.get("format") == SIMHASH_FORMAT:
            raise IndexSettingsError(
                f"{where} holds a simhash index: open it with kind='simhash', or give the MinHash index "
                "another prefix"
            )
        if stored.get("format") != FORMAT:
            raise IndexSettingsError(f"{where} is not a MinHash index ({stored.get('format')!r})")
        have = {
            **readable_params(stored, where, instead="use another prefix"),
            "buckets": stored.get("buckets", "set"),
        }
        remedy = "open it without them to use the stored ones, or use another prefix"
        check_given({**given, "buckets": buckets}, have, where, remedy)
        self.threshold, self.num_values = have["threshold"], have["num_values"]
        self.bands, self.rows = have["bands"], have["rows"]
        self.buckets = have["buckets"]
        if self.buckets not in BUCKET_KINDS:
            raise IndexSettingsError(f"{where} has buckets of an unknown kind {self.buckets!r}")
        self.value_bits = have["value_bits"]
        self._bits = ValueBits(self.value_bits)
        self.min_matches = self._bits.min_equal(self.threshold, self.num_values)
        self._hasher = BandHasher(self.bands, self.rows)
        self._epoch = stored["epoch"].encode()
        base = f"simhash:{{{self.prefix}}}:m:{stored['epoch']}:"
        self._base = base.encode()
        self._redis.keys = [self._config, f"{base}seq", f"{base}keys", f"{base}docs"]
        self._head = [
            self._epoch,
            self._base,
            str(self._bits.width * self.num_values).encode(),
            str(self.bands).encode(),
            self.buckets[0].encode(),
        ]

    # -- encoding ------------------------------------------------------------------------------

    def _records(self, items: Iterable[tuple[str, Any, Meta | None]]) -> list[tuple[bytes, bytes]]:
        """Validated, encoded inserts ``(key, record)``; raises before anything is sent."""
        checked = []
        for key, sketch, meta in items:
            check_key(key)
            check_scheme(sketch)
            text = encode_meta(key, meta)
            checked.append((key.encode(), self._values(sketch), (text or "").encode()))
        if not checked:
            return []
        values = np.stack([v for _, v, _ in checked])
        band_keys = self._hasher.keys_many(values).astype(">u8")
        width = self._bits.width * self.num_values
        sketches = self._bits.encode(values)
        return [
            (
                key,
                b"".join(
                    [
                        os.urandom(8),
                        sketches[i * width : (i + 1) * width],
                        band_keys[i].tobytes(),
                        len(key).to_bytes(4, "big"),
                        key,
                        meta,
                    ]
                ),
            )
            for i, (key, _, meta) in enumerate(checked)
        ]

    def _values(self, sketch: Any) -> np.ndarray:
        """One sketch as this index keeps and compares it (``value_bits`` of each value)."""
        return self._bits.reduce(as_sketch(sketch, self.num_values))

    def _args(self, mode: bytes, *extra: bytes) -> list[bytes]:
        return [mode, *self._head, *extra]

    def _answer(self, query: np.ndarray, reply: list[Any]) -> list[LSHMatch]:
        """The answer to ``query`` (as :meth:`_values` returns it) from a script's candidates."""
        found = [
            decode_record(reply[i], reply[i + 1], self.num_values, self.bands, self._bits)
            for i in range(0, len(reply), 2)
        ]
        return verify(query, found, self.bands, self.rows, self.min_matches, self._bits)

    # -- writes --------------------------------------------------------------------------------

    def add(self, key: str, sketch: Any, meta: Meta | None = None) -> None:
        """Store ``sketch`` under ``key`` (replacing what it held)."""
        ((key_bytes, record),) = self._records([(key, sketch, meta)])
        self._redis.run(self._args(b"a", key_bytes, record), "adding a sketch")

    def add_many(self, items: Iterable[tuple[str, Any, Meta | None]]) -> int:
        """Batched inserts: 50 per script call, 10 calls per round trip; each call is atomic.
        Every item is validated before the first is sent: one bad item stores nothing."""
        rows = self._records(items)
        per_trip = ROWS_PER_CALL * CALLS_PER_ROUND_TRIP
        for trip in range(0, len(rows), per_trip):
            calls = []
            for start in range(trip, min(len(rows), trip + per_trip), ROWS_PER_CALL):
                calls.append(
                    self._args(b"A", *(part for row in rows[start : start + ROWS_PER_CALL] for part in row))
                )
            self._redis.run_many(calls, "adding sketches")
        return len(rows)

    def check_and_add(self, key: str, sketch: Any, meta: Meta | None = None) -> list[LSHMatch]:
        """The matches before this insert (``key``'s old sketch included), then the insert: atomic."""
        ((key_bytes, record),) = self._records([(key, sketch, meta)])
        reply = self._redis.run(self._args(b"c", key_bytes, record), "checking and adding a sketch")
        return self._answer(self._values(sketch), reply)

    def remove(self, key: str) -> bool:
        """Forget ``key``; True if it was stored."""
        check_key(key)
        return bool(self._redis.run(self._args(b"r", key.encode()), "removing a key"))

    # -- lookups -------------------------------------------------------------------------------

    def query(self, sketch: Any) -> list[LSHMatch]:
        """Stored sketches sharing a band with ``sketch`` and estimated Jaccard >= threshold,
        best first, ties oldest first."""
        values = self._values(sketch)
        probe = self._hasher.keys(values).astype(">u8").tobytes()
        return self._answer(values, self._redis.run(self._args(b"q", probe), "querying"))

    def query_many(self, sketches: Any) -> list[list[LSHMatch]]:
        """``query`` for each sketch of a batch: 50 per script call, 10 calls per round trip."""
        batch = self._bits.reduce(as_sketch_batch(sketches, self.num_values))
        if not batch.shape[0]:
            return []
        probes = [row.tobytes() for row in self._hasher.keys_many(batch).astype(">u8")]
        calls = [
            self._args(b"Q", *probes[i : i + ROWS_PER_CALL]) for i in range(0, len(probes), ROWS_PER_CALL)
        ]
        replies: list[Any] = []
        for start in range(0, len(calls), CALLS_PER_ROUND_TRIP):
            for reply in self._redis.run_many(calls[start : start + CALLS_PER_ROUND_TRIP], "querying"):
                replies.extend(reply)
        return [self._answer(batch[i], reply) for i, reply in enumerate(replies)]

    def _get(self, key: str) -> Candidate | None:
        check_key(key)
        reply = self._redis.run(self._args(b"g", key.encode()), "reading a key")
        return decode_record(reply[0], reply[1], self.num_values, self.bands, self._bits) if reply else None

    def get(self, key: str) -> np.ndarray | None:
        """A copy of the sketch stored under ``key``, or None."""
        found = self._get(key)
        return None if found is None else found.sketch

    def get_many(self, keys: Iterable[str]) -> dict[str, np.ndarray]:
        """``get`` for many keys: 1,000 per script call, 10 calls per round trip (not one round trip
        per key, as ``export`` and reports would otherwise pay); keys not stored are absent."""
        wanted = [check_key(key).encode() for key in keys]
        calls = [
            self._args(b"G", *wanted[i : i + GETS_PER_CALL]) for i in range(0, len(wanted), GETS_PER_CALL)
        ]
        out: dict[str, np.ndarray] = {}
        for start in range(0, len(calls), CALLS_PER_ROUND_TRIP):
            for reply in self._redis.run_many(calls[start : start + CALLS_PER_ROUND_TRIP], "reading keys"):
                for found in reply:
                    if found:
                        record = decode_record(found[0], found[1], self.num_values, self.bands, self._bits)
                        out[record.key] = record.sketch
        return out

    def meta(self, key: str) -> dict[str, Any] | None:
        """The meta stored with ``key`` (``{}`` for none), or None when the key is not stored."""
        found = self._get(key)
        if found is None:
            return None
        return json.loads(found.meta) if found.meta else {}

    def keys(self) -> list[str]:
        """Stored keys, oldest first (1,000 sequence numbers per call; not a snapshot)."""
        out: list[str] = []
        first, chunk, last = 1, 1000, 1
        while first <= last:
            reply = self._redis.run(
                self._args(b"e", str(first).encode(), str(chunk).encode()), "listing keys"
            )
            last = int(reply[0])
            out += [key.decode() for key in reply[1:]]
            first += chunk
        return out

    def __len__(self) -> int:
        return int(self._redis.run(self._args(b"n"), "counting keys"))

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and bool(key) and self._get(key) is not None

    def stats(self) -> dict[str, Any]:
        """Sizes for monitoring: the settings, the count, and Redis's used memory."""
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
            "threshold": self.threshold,
            "num_values": self.num_values,
            "bands": self.bands,
            "rows": self.rows,
            "value_bits": self.value_bits,
            "buckets": self.buckets,
            "redis_used_memory": used,
        }

    # -- lifetime ------------------------------------------------------------------------------

    def clear(self, *, reopen: bool = True) -> int:
        """Delete this namespace: its config first (every other client then gets IndexLostError),
        then the data keys of its epoch, in batches. Returns the number of data keys deleted."""
        self._redis.keys = [self._config]
        epoch = self._redis.call(
            lambda: self._redis.client.hget(self._config, "epoch"), "reading the namespace"
        )
        self._redis.run([b"x", b"", b"", b"", b""], "deleting the namespace")
        deleted = 0
        if epoch:
            tag = epoch.decode() if isinstance(epoch, bytes) else str(epoch)
            pattern = f"simhash:{{{self.prefix}}}:m:{tag}:*"

            def sweep() -> int:
                n, batch = 0, []
                for name in self._redis.client.scan_iter(match=pattern, count=1000):
                    batch.append(name)
                    if len(batch) == 1000:
                        n += self._redis.client.unlink(*batch)
                        batch = []
                if batch:
                    n += self._redis.client.unlink(*batch)
                return n

            deleted = self._redis.call(sweep, "deleting the namespace")
        if reopen:
            self._open(self.threshold, self.num_values, self.bands, self.rows, self.value_bits, self.buckets)
        return deleted

    def close(self) -> None:
        """Close the connection. Idempotent."""
        self._redis.close()

    def __enter__(self) -> RedisMinHashIndex:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"<RedisMinHashIndex {self.location} prefix={self.prefix!r} threshold={self.threshold} "
            f"num_values={self.num_values} bands={self.bands} rows={self.rows} value_bits={self.value_bits} "
            f"buckets={self.buckets}>"
        )
