"""MinHashLSH (in memory) at scale, side by side with datasketch's MinHashLSH, one run.

For N synthetic sketches (uniform random uint32 values: every query against them is a miss
unless it is a noisy copy of a stored one) the script measures:

- inserts/s: ``add`` one at a time (a crawler's ``check_and_add`` pattern) and ``add_many``;
- query latency p50/p99 (µs), one ``query`` at a time: misses (random sketches) and hits (a
  stored sketch with ``--noise`` of its values replaced: estimated Jaccard about 1 - noise);
  beside it, a fixed few microseconds of pure-Python work timed the same way: the noise of
  this shared machine (a p99 far above its p50 there means the machine, not the index);
- batched queries/s: ``query_many`` over ``--batch-queries`` sketches (half hits);
- RAM per document: the index's arrays (sketches + bucket array) / N, the keys (Python str and
  dict) / N, and the process's RSS growth while the index was built / N;
- batch mode: ``minhash_pairs`` and ``minhash_clusters`` over the N sketches with every tenth
  one replaced by a noisy copy of its predecessor (N/10 planted pairs), pairs/s and recall;
- the same for datasketch's MinHashLSH (in-memory dict storage, its own threshold-derived
  bands) over the first ``--datasketch-n`` sketches (it is much slower to fill).

Run:  python bench/lsh.py                          # N = 200,000 (about a minute)
      python bench/lsh.py --n 1000000              # the issue's 1M (a few minutes, ~2 GiB)
      python bench/lsh.py --n 1000000 --num-values 64
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from pathlib import Path

import numpy as np

from scrapy_simhash.index.lsh.lsh import MinHashLSH
from scrapy_simhash.index.lsh.minhash_batch import minhash_clusters, minhash_pairs


def rss() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def noisy(stored: np.ndarray, noise: float, rng: np.random.Generator) -> np.ndarray:
    out = stored.copy()
    mask = rng.random(out.shape) < noise
    out[mask] = rng.integers(0, 2**32, size=int(mask.sum()), dtype=np.uint32)
    return out


def latencies(fn, queries: np.ndarray) -> tuple[float, float, int]:
    times = np.empty(len(queries))
    found = 0
    for i, q in enumerate(queries):
        t0 = time.perf_counter_ns()
        res = fn(q)
        times[i] = time.perf_counter_ns() - t0
        found += bool(res)
    return float(np.percentile(times, 50)) / 1e3, float(np.percentile(times, 99)) / 1e3, found


def _fixed_work(_: object) -> int:
    return sum(range(400))


def bench_ours(
    args: argparse.Namespace, sketches: np.ndarray, keys: list[str], rng: np.random.Generator
) -> None:
    n, nv = sketches.shape
    gc.collect()
    before = rss()
    index = MinHashLSH(args.threshold, nv)
    half = n // 2
    t0 = time.perf_counter()
    for i in range(half):
        index.add(keys[i], sketches[i])
    single = half / (time.perf_counter() - t0)
    t0 = time.perf_counter()
    for start in range(half, n, 10000):
        stop = min(n, start + 10000)
        index.add_many(zip(keys[start:stop], sketches[start:stop], strict=True))
    index.flush()
    batched = (n - half) / (time.perf_counter() - t0)
    gc.collect()
    grown = rss() - before
    stats = index.stats()
    print(
        f"ours: {index.bands} bands x {index.rows} rows, threshold {args.threshold}, {nv} values, N = {n:,}"
    )
    print(f"  inserts/s: add {single:,.0f}   add_many(10k) {batched:,.0f}")

    picks = rng.integers(0, n, size=args.queries)
    misses = rng.integers(0, 2**32, size=(args.queries, nv), dtype=np.uint32)
    hits = noisy(sketches[picks], args.noise, rng)
    for name, queries in (("misses", misses), ("hits", hits)):
        p50, p99, found = latencies(index.query, queries)
        print(f"  query {name:6s}: p50 {p50:7.1f} us  p99 {p99:7.1f} us  (answered {found}/{len(queries)})")
    p50, p99, _ = latencies(_fixed_work, misses)
    print(f"  (machine noise: fixed pure-Python work timed alike: p50 {p50:.1f} us  p99 {p99:.1f} us)")
    batch = np.concatenate(
        [
            rng.integers(0, 2**32, size=(args.batch_queries // 2, nv), dtype=np.uint32),
            noisy(
                sketches[rng.integers(0, n, size=args.batch_queries - args.batch_queries // 2)],
                args.noise,
                rng,
            ),
        ]
    )
    t0 = time.perf_counter()
    results = index.query_many(batch)
    elapsed = time.perf_counter() - t0
    print(
        f"  query_many({len(batch):,}): {len(batch) / elapsed:,.0f} queries/s "
        f"(answered {sum(bool(r) for r in results):,})"
    )
    t0 = time.perf_counter()
    for i in range(0, min(n, 20000)):
        index.check_and_add(keys[i], hits[i % len(hits)])
    print(f"  check_and_add (hits, replacing): {min(n, 20000) / (time.perf_counter() - t0):,.0f}/s")
    arrays = stats["bytes_sketches"] + stats["bytes_buckets"]
    key_bytes = sum(sys.getsizeof(k) for k in keys[:10000]) / min(n, 10000)
    dict_bytes = sys.getsizeof(index._ids) / n + 8  # the dict, and one list slot per key
    print(
        f"  RAM/doc: sketches {stats['bytes_sketches'] / n:.0f} B (array capacity incl.) + buckets "
        f"{stats['bytes_buckets'] / n:.0f} B = {arrays / n:.0f} B; keys: str {key_bytes:.0f} B + dict/list "
        f"{dict_bytes:.0f} B; RSS growth {grown / n:.0f} B"
    )
    del index
    gc.collect()


def bench_batch(args: argparse.Namespace, sketches: np.ndarray, rng: np.random.Generator) -> None:
    s = sketches.copy()
    planted = np.arange(10, s.shape[0], 10)
    s[planted] = noisy(s[planted - 1], args.noise, rng)
    t0 = time.perf_counter()
    pairs = minhash_pairs(s, args.threshold)
    elapsed = time.perf_counter() - t0
    found = set(zip(pairs["i"].tolist(), pairs["j"].tolist(), strict=True))
    recall = np.mean([(int(p) - 1, int(p)) in found for p in planted])
    t0 = time.perf_counter()
    labels = minhash_clusters(s, args.threshold)
    clustered = time.perf_counter() - t0
    print(
        f"  minhash_pairs over {len(s):,}: {elapsed:.2f} s ({len(s) / elapsed:,.0f} sketches/s), "
        f"{len(pairs):,} pairs, planted recall {recall:.4f}; minhash_clusters {clustered:.2f} s, "
        f"{int((labels != np.arange(len(s))).sum()):,} items in a cluster but not first"
    )


def bench_datasketch(args: argparse.Namespace, sketches: np.ndarray, keys: list[str], rng) -> None:
    try:
        import datasketch
    except ImportError:
        print("datasketch: not installed (pip install -e '.[bench]')")
        return
    n = min(args.datasketch_n, sketches.shape[0])
    nv = sketches.shape[1]
    template = datasketch.MinHash(num_perm=nv, scheme="affine32")
    perms = template.permutations

    def sketch(values: np.ndarray) -> datasketch.LeanMinHash:
        m = datasketch.MinHash(num_perm=nv, hashvalues=values, permutations=perms, scheme="affine32")
        return datasketch.LeanMinHash(m)

    objects = [sketch(v) for v in sketches[:n]]
    gc.collect()
    before = rss()
    lsh = datasketch.MinHashLSH(threshold=args.threshold, num_perm=nv)
    t0 = time.perf_counter()
    for i in range(n // 2):
        lsh.insert(keys[i], objects[i], check_duplication=False)
    single = (n // 2) / (time.perf_counter() - t0)
    t0 = time.perf_counter()
    with lsh.insertion_session() as session:
        for i in range(n // 2, n):
            session.insert(keys[i], objects[i], check_duplication=False)
    batched = (n - n // 2) / (time.perf_counter() - t0)
    gc.collect()
    grown = rss() - before
    print(
        f"datasketch {datasketch.__version__}: {lsh.b} bands x {lsh.r} rows (candidates, unverified), "
        f"N = {n:,}"
    )
    print(f"  inserts/s: insert {single:,.0f}   insertion_session {batched:,.0f}")
    picks = rng.integers(0, n, size=args.queries)
    misses = [sketch(v) for v in rng.integers(0, 2**32, size=(args.queries, nv), dtype=np.uint32)]
    hits = [sketch(v) for v in noisy(sketches[picks], args.noise, rng)]
    for name, queries in (("misses", misses), ("hits", hits)):
        p50, p99, found = latencies(lsh.query, queries)  # type: ignore[arg-type]
        print(f"  query {name:6s}: p50 {p50:7.1f} us  p99 {p99:7.1f} us  (answered {found}/{len(queries)})")
    print(f"  RSS growth/doc (excl. the MinHash objects, built before): {grown / n:.0f} B")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, default=200_000)
    parser.add_argument("--num-values", type=int, default=128)
    parser.add_argument("--threshold", type=float, default=0.8)
    parser.add_argument("--noise", type=float, default=0.08, help="share of values replaced in hit queries")
    parser.add_argument("--queries", type=int, default=5000, help="single queries timed, per kind")
    parser.add_argument("--batch-queries", type=int, default=50_000)
    parser.add_argument("--datasketch-n", type=int, default=100_000, help="0 skips datasketch")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    sketches = rng.integers(0, 2**32, size=(args.n, args.num_values), dtype=np.uint32)
    keys = [f"https://example.com/site/{i}/page.html" for i in range(args.n)]
    bench_ours(args, sketches, keys, rng)
    bench_batch(args, sketches, rng)
    if args.datasketch_n:
        bench_datasketch(args, sketches, keys, rng)


if __name__ == "__main__":
    main()
