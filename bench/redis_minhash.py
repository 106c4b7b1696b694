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
from scrapy_simhash.index.lsh import MinHashLSH


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=10_000)
    parser.add_argument("--singles", type=int, default=2_000)
    parser.add_argument("--noise", type=float, default=0.1)
    parser.add_argument("--fsync", default="always", choices=["always", "everysec", "no"])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--buckets", default="set", choices=["set", "hash"])
    args = parser.parse_args()

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
                f"redis://127.0.0.1:{port}/0?prefix=bench&buckets={args.buckets}", kind="minhash"
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

            model = MinHashLSH(index.threshold, index.num_values, index.bands, index.rows)
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
        f"({index.bands} bands x {index.rows} rows), buckets={args.buckets}, "
        f"appendfsync {args.fsync}, hits {sum(map(bool, batched)):,}/{args.queries:,}"
    )
    print(f"  bulk inserts/s (add_many):       {args.n / load:>10,.0f}")
    print(f"  batched queries/s (query_many):  {args.queries / batch_time:>10,.0f}")
    print(f"  single queries/s (query):        {args.singles / single_time:>10,.0f}")
    print(f"  check_and_add/s:                 {args.singles / cadd_time:>10,.0f}")
    print(f"  Redis memory per document:       {used / args.n:>10,.0f} B (INFO memory used_memory)")


if __name__ == "__main__":
    main()
