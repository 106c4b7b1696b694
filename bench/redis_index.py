"""Redis index beside the embedded index, one run: inserts/s, lookups/s, Redis memory per fingerprint.

Starts its own redis-server on 127.0.0.1 (free port, temp dir, AOF on with ``appendfsync always``, the
setting under which an acknowledged insert survives a crash) and fills both indexes with the same N
random fingerprints. Lookups: half are planted near-duplicates (1-3 bits from a stored fingerprint),
half random; both backends must return identical answers, which the script checks.

Both Redis table kinds run: sorted sets (``tables=zset``, the default) and hash buckets (``tables=hash``).

Figures:
- bulk inserts/s: ``add_many`` (Redis: pipelines of 500 scripts);
- batched lookups/s: ``query_many`` (Redis: pipelined, one round trip per 500 lookups);
- single lookups/s and check_and_add/s: one call at a time, as a crawler does (one round trip each);
- Redis memory per fingerprint: ``INFO memory`` used_memory after the load minus before, divided by N;
- Redis CPU per insert and per batched lookup (``INFO cpu``): what one Redis can serve to all crawlers.

Run: python bench/redis_index.py [--n 1000000] [--lookups 20000] [--tables zset,hash] [--fsync everysec]
(about 6 minutes at 1M on a loaded 2-core machine)
"""

from __future__ import annotations

import argparse
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import redis

from scrapy_simhash.index import SimhashIndex, open_index

MASK = (1 << 64) - 1


def start_redis(directory: Path, fsync: str) -> tuple[subprocess.Popen[bytes], int]:
    server = shutil.which("redis-server")
    if server is None:
        sys.exit("redis-server is not installed (Debian: apt-get install redis-server)")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    args = [server, "--bind", "127.0.0.1", "--port", str(port), "--dir", str(directory), "--save", ""]
    args += ["--appendonly", "yes", "--appendfsync", fsync, "--logfile", str(directory / "redis.log")]
    process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    client = redis.Redis(host="127.0.0.1", port=port)
    for _ in range(200):
        try:
            client.ping()
            break
        except redis.ConnectionError:
            time.sleep(0.05)
    else:
        process.kill()
        sys.exit(f"redis-server did not start; see {directory / 'redis.log'}")
    client.close()
    return process, port


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def workload(n: int, lookups: int, seed: int) -> tuple[list[int], list[int]]:
    rng = np.random.default_rng(seed)
    hashes = rng.integers(1, MASK, size=n, dtype=np.uint64, endpoint=True).tolist()
    pick = random.Random(seed)
    queries = []
    for i in range(lookups):
        if i % 2:
            queries.append(pick.getrandbits(64) or 1)
        else:
            h = hashes[pick.randrange(n)]
            for bit in pick.sample(range(64), pick.randint(1, 3)):
                h ^= 1 << bit
            queries.append(h or 1)
    return hashes, queries


def answers(results: list[list[Any]]) -> list[list[tuple[str, int]]]:
    return [[(m.key, m.distance) for m in r] for r in results]


def measure(
    name: str,
    index: Any,
    hashes: list[int],
    queries: list[int],
    singles: int,
    server_cpu: Callable[[], float],
) -> dict[str, Any]:
    """Throughputs seen by one client, and the server's CPU time per operation (``server_cpu``: seconds
    used so far; the capacity of one Redis, shared by all crawlers, and less noisy than wall time)."""
    n = len(hashes)
    chunk = 50_000  # a crawler flushes in batches; also bounds the client's memory
    cpu = server_cpu()
    load, _ = timed(
        lambda: [
            index.add_many((hashes[i], f"k{i}", None) for i in range(s, min(n, s + chunk)))
            for s in range(0, n, chunk)
        ]
    )
    insert_cpu = (server_cpu() - cpu) / n
    index.compact()
    cpu = server_cpu()
    batch_time, batched = timed(lambda: index.query_many(queries))
    lookup_cpu = (server_cpu() - cpu) / len(queries)
    sample = queries[:singles]
    single_time, single = timed(lambda: [index.query(q) for q in sample])
    assert answers(single) == answers(batched[:singles]), f"{name}: query and query_many disagree"
    cadd_time, _ = timed(lambda: [index.check_and_add(q, f"new{i}") for i, q in enumerate(sample)])
    return {
        "name": name,
        "inserts/s": n / load,
        "batched lookups/s": len(queries) / batch_time,
        "single lookups/s": singles / single_time,
        "check_and_add/s": singles / cadd_time,
        "server CPU us/insert": insert_cpu * 1e6,
        "server CPU us/lookup": lookup_cpu * 1e6,
        "answers": answers(batched),
        "hits": sum(1 for r in batched if r),
    }


def redis_cpu(client: redis.Redis) -> Callable[[], float]:
    def used() -> float:
        info = client.info("cpu")
        return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])

    return used


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, default=1_000_000, help="fingerprints stored (default 1M)")
    parser.add_argument("--lookups", type=int, default=20_000, help="batched lookups (default 20,000)")
    parser.add_argument("--singles", type=int, default=5_000, help="one-at-a-time calls (default 5,000)")
    parser.add_argument("--layout", default=None, help="Redis layout (default blocks:k+1, the least memory)")
    parser.add_argument("--tables", default="zset,hash", help="Redis table kinds to run (default zset,hash)")
    parser.add_argument("--fsync", default="always", choices=["always", "everysec"], help="Redis appendfsync")
    parser.add_argument("--no-embedded", action="store_true", help="skip the embedded index")
    args = parser.parse_args()

    hashes, queries = workload(args.n, args.lookups, seed=6)
    rows = []
    memory: dict[str, int] = {}
    with tempfile.TemporaryDirectory(prefix="bench-redis-") as tmp:
        process, port = start_redis(Path(tmp), args.fsync)
        try:
            client = redis.Redis(host="127.0.0.1", port=port)
            for kind in args.tables.split(","):
                before = int(client.info("memory")["used_memory"])
                options = {"layout": args.layout} if args.layout else {}
                index = open_index(f"redis://127.0.0.1:{port}/0?prefix=bench-{kind}", tables=kind, **options)
                name = f"redis {kind} {index.layout.spec}"
                rows.append(measure(name, index, hashes, queries, args.singles, redis_cpu(client)))
                # the N bulk fingerprints plus the `singles` added by check_and_add
                memory[name] = int(client.info("memory")["used_memory"]) - before
                index.clear()
                index.close()
                while int(client.info("memory").get("lazyfree_pending_objects", 0)):  # UNLINK frees later
                    time.sleep(0.1)
            client.close()
        finally:
            process.terminate()
            process.wait(30)
        if not args.no_embedded:
            embedded = SimhashIndex(Path(tmp) / "embedded", k=3)
            name = f"embedded {embedded.layout.spec}"
            rows.append(measure(name, embedded, hashes, queries, args.singles, lambda: 0.0))
            embedded.close()

    print(f"{args.n:,} fingerprints, k=3, {args.lookups:,} batched lookups (half planted near-duplicates), ")
    print(f"{args.singles:,} single calls; Redis appendfsync {args.fsync} on 127.0.0.1, one client process")
    header = ["backend", "inserts/s", "batched lookups/s", "single lookups/s", "check_and_add/s"]
    print(" | ".join(f"{h:>26}" for h in header))
    for row in rows:
        print(" | ".join([f"{row['name']:>26}", *(f"{row[h]:>26,.0f}" for h in header[1:])]))
    embedded = rows[-1] if rows[-1]["name"].startswith("embedded") else None
    for row in rows:
        if embedded is not None and row is not embedded:
            ratios = [f"{row[h] / embedded[h]:>26.2f}" for h in header[1:]]
            print(" | ".join([f"{row['name'].split(' ')[1] + ' / embedded':>26}", *ratios]))
    same = all(row["answers"] == rows[0]["answers"] for row in rows)
    for row in rows:
        if not row["name"].startswith("embedded"):
            insert_cpu, lookup_cpu = row["server CPU us/insert"], row["server CPU us/lookup"]
            print(
                f"{row['name']}: Redis CPU {insert_cpu:,.1f} us per insert, {lookup_cpu:,.1f} us per lookup"
            )
    hits = rows[0]["hits"]
    print(f"identical answers from all backends on {args.lookups:,} lookups: {same} ({hits:,} with matches)")
    stored = args.n + args.singles
    for name, used in memory.items():
        mib, each = used / 2**20, used / stored
        print(f"{name}: Redis used_memory {mib:,.1f} MiB for {stored:,} fingerprints = {each:,.0f} B each")
    if not same:
        sys.exit("the backends disagree: a bug")


if __name__ == "__main__":
    main()
