"""RedisMinHashIndex, checked against the in-memory MinHashLSH: inserts/s, queries/s, memory per document.

Starts its own redis-server on 127.0.0.1 (free port, temp dir, AOF on; ``--fsync always`` is the
setting under which an acknowledged insert survives a crash of Redis) and fills the Redis index
with N uniform random sketches (128 values, threshold 0.8: 16 bands of 8 rows). Queries: half are
stored sketches with ``--noise`` of their values replaced (hits), half random (misses); the Redis
answers must equal the in-memory MinHashLSH's, which the script checks.

Figures:
- bulk inserts/s: ``add_many`` (pipelines of 10 scripts of 50 inserts);
- batched queries/s: ``query_many`` (one round trip per 500 queries);
- single queries/s and check_and_add/s: one call at a time, as a crawler does (one round trip each);
- Redis memory per document: ``INFO memory`` used_memory after the load minus before, divided by N
  (the sketch alone is 512 bytes).

Run: python bench/redis_minhash.py [--n 100000] [--queries 10000] [--buckets hash] [--fsync everysec]

``--verified``: instead, the verified index (simhash store + sketch store) on one server, side by
side in one run: each store written by its own script calls (the path before issue #13's one
script, still used on Redis Cluster) against one atomic script per write. Both indexes get the same
N pages and the same single ``check_and_add`` calls, in alternating blocks (the machine's load hits
both alike); their answers must be identical. Also ``sketch`` per key against ``sketch_many``.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import redis
from redis_index import start_redis

from scrapy_simhash.index import open_index
from scrapy_simhash.index.lsh.lsh import MinHashLSH


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=10_000)
    parser.add_argument("--singles", type=int, default=2_000)
    parser.add_argument("--noise", type=float, default=0.1)
    parser.add_argument("--fsync", default="always", choices=["always", "everysec", "no"])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--buckets", default="set", choices=["set", "hash"])
    parser.add_argument(
        "--value-bits",
        type=int,
        default=32,
        choices=[8, 16, 32],
        help="bits kept of each value (8: the verified index's)",
    )
    parser.add_argument("--verified", action="store_true", help="the verified index, before vs after")
    args = parser.parse_args()
    if args.verified:
        verified_side_by_side(args)
        return

    rng = np.random.default_rng(args.seed)
    data = rng.integers(0, 2**32, size=(args.n, 128), dtype=np.uint32)
    picks = rng.integers(0, args.n, size=args.queries)
    queries = rng.integers(0, 2**32, size=(args.queries, 128), dtype=np.uint32)
    hits = data[picks[::2]].copy()
    noisy = rng.random(hits.shape) < args.noise
    hits[noisy] = rng.integers(0, 2**32, size=int(noisy.sum()), dtype=np.uint32)
    queries[::2] = hits

    with tempfile.TemporaryDirectory() as tmp:
        process, port = start_redis(Path(tmp), args.fsync)
        client = redis.Redis(host="127.0.0.1", port=port)
        try:
            index = open_index(
                f"redis://127.0.0.1:{port}/0?prefix=bench&buckets={args.buckets}&value_bits={args.value_bits}",
                kind="minhash",
            )
            before = int(client.info("memory")["used_memory"])
            start = time.perf_counter()
            chunk = 50_000
            for s in range(0, args.n, chunk):
                index.add_many(
                    (f"https://example.com/page/{i}", data[i], None) for i in range(s, min(args.n, s + chunk))
                )
            load = time.perf_counter() - start
            used = int(client.info("memory")["used_memory"]) - before

            start = time.perf_counter()
            batched = index.query_many(queries)
            batch_time = time.perf_counter() - start
            start = time.perf_counter()
            single = [index.query(q) for q in queries[: args.singles]]
            single_time = time.perf_counter() - start
            start = time.perf_counter()
            for i, q in enumerate(queries[: args.singles]):
                index.check_and_add(f"new{i}", q)
            cadd_time = time.perf_counter() - start

            model = MinHashLSH(
                index.threshold, index.num_values, index.bands, index.rows, value_bits=index.value_bits
            )
            model.add_many((f"https://example.com/page/{i}", data[i]) for i in range(args.n))
            want = model.query_many(queries)
            got = [[(m.key, m.similarity) for m in r] for r in batched]
            assert got == want, "Redis answers differ from the in-memory MinHashLSH"
            assert [[(m.key, m.similarity) for m in r] for r in single] == want[: args.singles]
            index.close()
        finally:
            client.close()
            process.terminate()
            process.wait(10)

    print(
        f"RedisMinHashIndex, n={args.n:,}, 128 values, threshold 0.8 "
        f"({index.bands} bands x {index.rows} rows), {args.value_bits}-bit values, buckets={args.buckets}, "
        f"appendfsync {args.fsync}, hits {sum(map(bool, batched)):,}/{args.queries:,}"
    )
    print(f"  bulk inserts/s (add_many):       {args.n / load:>10,.0f}")
    print(f"  batched queries/s (query_many):  {args.queries / batch_time:>10,.0f}")
    print(f"  single queries/s (query):        {args.singles / single_time:>10,.0f}")
    print(f"  check_and_add/s:                 {args.singles / cadd_time:>10,.0f}")
    print(f"  Redis memory per document:       {used / args.n:>10,.0f} B (INFO memory used_memory)")


def _evalsha_calls(client: redis.Redis) -> tuple[int, int]:
    """EVALSHA calls so far and the microseconds Redis spent in them."""
    stats = client.info("commandstats").get("cmdstat_evalsha", {})
    return int(stats.get("calls", 0)), int(stats.get("usec", 0))


def verified_side_by_side(args: argparse.Namespace) -> None:
    """Verified check_and_add/s with per-store script calls ("before") and one script ("after")."""
    rng = np.random.default_rng(args.seed)
    data = rng.integers(0, 2**32, size=(args.n, 128), dtype=np.uint32)
    hashes = [int(h) for h in rng.integers(1, 2**63, size=args.n, dtype=np.int64)]
    singles = args.singles
    picks = rng.integers(0, args.n, size=singles)
    probes = rng.integers(0, 2**32, size=(singles, 128), dtype=np.uint32)
    probe_hashes = [int(h) for h in rng.integers(1, 2**63, size=singles, dtype=np.int64)]
    for i in range(0, singles, 2):  # half near-duplicates of a stored page: 10 % of values, 2 bits changed
        probes[i] = data[picks[i]]
        noisy = rng.random(128) < args.noise
        probes[i][noisy] = rng.integers(0, 2**32, size=int(noisy.sum()), dtype=np.uint32)
        probe_hashes[i] = hashes[picks[i]] ^ 0b101
    names = ("before", "after")
    with tempfile.TemporaryDirectory() as tmp:
        process, port = start_redis(Path(tmp), args.fsync)
        client = redis.Redis(host="127.0.0.1", port=port)
        try:
            indexes = {name: open_index(f"redis://127.0.0.1:{port}/0?prefix=v{name}") for name in names}
            indexes["before"]._pair = None  # each store's own script calls, as before issue #13
            load, load_usec = dict.fromkeys(names, 0.0), dict.fromkeys(names, 0)
            for s in range(0, args.n, 10_000):  # alternating blocks: the machine's load hits both alike
                for name in names if s % 20_000 == 0 else names[::-1]:  # and each goes first half the time
                    index = indexes[name]
                    evalsha = _evalsha_calls(client)
                    start = time.perf_counter()
                    index.add_many(
                        (hashes[i], f"https://example.com/page/{i}", None, data[i])
                        for i in range(s, min(args.n, s + 10_000))
                    )
                    load[name] += time.perf_counter() - start
                    load_usec[name] += _evalsha_calls(client)[1] - evalsha[1]
            spent, answers = dict.fromkeys(names, 0.0), {n: [] for n in names}
            calls, usec = dict.fromkeys(names, 0), dict.fromkeys(names, 0)
            block = 100
            for first in range(0, singles, block):
                for name, index in indexes.items():
                    evalsha = _evalsha_calls(client)
                    start = time.perf_counter()
                    for i in range(first, min(singles, first + block)):
                        found = index.check_and_add(probe_hashes[i], f"new{i}", sketch=probes[i])
                        answers[name].append([(m.key, m.distance, m.similarity) for m in found])
                    spent[name] += time.perf_counter() - start
                    now = _evalsha_calls(client)
                    calls[name] += now[0] - evalsha[0]
                    usec[name] += now[1] - evalsha[1]
            assert answers["before"] == answers["after"], "the two paths answered differently"
            # lookups: one query at a time, then a batch, both paths in alternating blocks
            q_spent, q_calls, q_answers = (
                dict.fromkeys(names, 0.0),
                dict.fromkeys(names, 0),
                {n: [] for n in names},
            )
            for first in range(0, singles, block):
                for name, index in indexes.items():
                    evalsha = _evalsha_calls(client)
                    start = time.perf_counter()
                    for i in range(first, min(singles, first + block)):
                        found = index.query(probe_hashes[i], sketch=probes[i])
                        q_answers[name].append([(m.key, m.distance, m.similarity) for m in found])
                    q_spent[name] += time.perf_counter() - start
                    q_calls[name] += _evalsha_calls(client)[0] - evalsha[0]
            assert q_answers["before"] == q_answers["after"], "the two paths' lookups differ"
            batch_spent = dict.fromkeys(names, float("inf"))
            for turn in range(4):  # alternating, each first twice: the best of each
                for name in names if turn % 2 else names[::-1]:
                    start = time.perf_counter()
                    indexes[name].query_many(probe_hashes, sketches=probes)
                    batch_spent[name] = min(batch_spent[name], time.perf_counter() - start)
            keys = [f"https://example.com/page/{i}" for i in range(min(args.n, 2000))]
            start = time.perf_counter()
            one_by_one = {key: indexes["after"].sketch(key) for key in keys}
            per_key = time.perf_counter() - start
            start = time.perf_counter()
            batch = indexes["after"].sketch_many(keys)
            batched = time.perf_counter() - start
            assert {k: v.values.tolist() for k, v in batch.items()} == {
                k: v.values.tolist() for k, v in one_by_one.items() if v is not None
            }
            for index in indexes.values():
                index.close()
        finally:
            client.close()
            process.terminate()
            process.wait(10)
    hits = sum(map(bool, answers["after"]))
    print(
        f"verified Redis index, n={args.n:,} pages, {singles:,} single check_and_add ({hits:,} with a "
        f"match), appendfsync {args.fsync}; before: each store's own scripts; after: one script"
    )
    print(f"{'':34}{'before':>12}{'after':>12}")
    print(
        f"  {'bulk inserts/s (add_many)':32}{args.n / load['before']:>12,.0f}{args.n / load['after']:>12,.0f}"
    )
    cpu = [load_usec[name] / args.n for name in names]
    print(f"  {'Redis us per page (add_many)':32}{cpu[0]:>12.0f}{cpu[1]:>12.0f}")
    rates = [singles / spent[name] for name in names]
    print(f"  {'check_and_add/s (one at a time)':32}{rates[0]:>12,.0f}{rates[1]:>12,.0f}")
    per_call = [calls[name] / singles for name in names]
    print(f"  {'EVALSHA per check_and_add':32}{per_call[0]:>12.2f}{per_call[1]:>12.2f}")
    cpu = [usec[name] / singles for name in names]
    print(f"  {'Redis us per check_and_add':32}{cpu[0]:>12.0f}{cpu[1]:>12.0f}")
    rates = [singles / q_spent[name] for name in names]
    print(f"  {'query/s (one at a time)':32}{rates[0]:>12,.0f}{rates[1]:>12,.0f}")
    per_call = [q_calls[name] / singles for name in names]
    print(f"  {'EVALSHA per query':32}{per_call[0]:>12.2f}{per_call[1]:>12.2f}")
    rates = [singles / batch_spent[name] for name in names]
    print(f"  {'query_many/s (best of 2)':32}{rates[0]:>12,.0f}{rates[1]:>12,.0f}")
    print(
        f"  {len(keys):,} sketches read: sketch() per key {per_key * 1000:,.0f} ms, "
        f"sketch_many {batched * 1000:,.0f} ms"
    )


if __name__ == "__main__":
    main()
