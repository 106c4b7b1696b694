"""MinHashIndex (persistent MinHash-LSH) at scale: durable inserts, open time, bytes on disk.

For N synthetic sketches (uniform random uint32 values, keys like a crawl's URLs, a small
meta) the script measures, in a fresh directory:

- durable batched inserts/s: ``add_many`` in batches of ``--batch`` (one SQLite commit each,
  the crawl's ``synchronous="normal"`` unless ``--sync full``), until N;
- single inserts/s: ``check_and_add`` one at a time for ``--singles`` more documents;
- open time: closing and reopening the index (every row read, verified and added to the
  in-memory LSH), with and without SQLite's integrity_check (``verify``), read-only too;
- bytes per document on disk (the database and its WAL after close) and the process's RSS
  growth during the reopen per document.

Run:  python bench/minhash_index.py                    # N = 100,000
      python bench/minhash_index.py --n 1000000        # the issue's 1M (~1 GB on disk)
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from scrapy_simhash.index.embedded.minhash_store import DATABASE, MinHashIndex


def rss() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def disk_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.glob(f"{DATABASE}*") if p.is_file())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--num-values", type=int, default=128)
    parser.add_argument("--threshold", type=float, default=0.8)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--singles", type=int, default=2000)
    parser.add_argument("--sync", choices=["normal", "full"], default="normal")
    parser.add_argument("--dir", type=Path, default=None, help="parent directory (default: a temp dir)")
    args = parser.parse_args()

    rng = np.random.default_rng(1)
    parent = Path(tempfile.mkdtemp(prefix="bench-minhash-index-", dir=args.dir))
    path = parent / "ix"
    try:
        index = MinHashIndex(path, args.threshold, args.num_values, synchronous=args.sync)
        shape = f"num_values={args.num_values} bands={index.bands} rows={index.rows}"
        print(f"N={args.n:,} {shape} sync={args.sync}")
        elapsed = 0.0
        for start in range(0, args.n, args.batch):
            count = min(args.batch, args.n - start)
            sketches = rng.integers(0, 2**32, size=(count, args.num_values), dtype=np.uint32)
            items = [
                (f"https://example.com/page/{start + i}", sketches[i], {"status": 200}) for i in range(count)
            ]
            t0 = time.perf_counter()
            index.add_many(items)
            elapsed += time.perf_counter() - t0
        print(f"durable batched inserts (add_many, batch {args.batch}): {args.n / elapsed:,.0f}/s")
        singles = rng.integers(0, 2**32, size=(args.singles, args.num_values), dtype=np.uint32)
        t0 = time.perf_counter()
        for i in range(args.singles):
            index.check_and_add(f"https://example.com/single/{i}", singles[i], {"status": 200})
        single_rate = args.singles / (time.perf_counter() - t0)
        print(f"durable single check_and_add: {single_rate:,.0f}/s")
        total = len(index)
        index.close()
        size = disk_bytes(path)
        print(f"disk: {size / 2**20:,.1f} MiB, {size / total:,.0f} bytes per document")
        for verify, read_only in [(True, False), (False, False), (True, True)]:
            before = rss()
            t0 = time.perf_counter()
            index = MinHashIndex(path, read_only=read_only, verify=verify)
            took = time.perf_counter() - t0
            grew = rss() - before
            assert len(index) == total
            index.close()
            mode = "read-only" if read_only else "writer"
            print(
                f"open ({mode}, verify={verify}): {took:.2f} s, {total / took:,.0f} rows/s; "
                f"RSS growth {grew / total:,.0f} bytes per document"
            )
            del index
    finally:
        shutil.rmtree(parent, ignore_errors=True)


if __name__ == "__main__":
    main()
