"""near_duplicates on a local Spark against in-process index.batch.find_all on the same fingerprints.

    python bench/spark.py --n 1000000 --master local[2]

Planted data: random fingerprints plus a share of near copies (1..3 bits flipped) so the
output is not empty. Prints both times, the ratio, the pair counts (they must agree) and the
rows the join emits per fingerprint (one per table: the shuffle volume of the join).
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time

import numpy as np

from scrapy_simhash.index.batch import find_all
from scrapy_simhash.index.layouts import resolve


def planted(n: int, near_share: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    h = rng.integers(0, 2**64, size=n, dtype=np.uint64)
    near = int(n * near_share)
    rnd = random.Random(seed)
    src = rng.integers(0, n - near, size=near)
    flips = np.array(
        [sum(1 << b for b in rnd.sample(range(64), rnd.randint(1, 3))) for _ in range(near)], dtype=np.uint64
    )
    h[n - near :] = h[src] ^ flips
    return h


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--k", type=int, default=3)
    parser.add_argument("--near", type=float, default=0.05, help="share of planted near copies")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--partitions", type=int, default=8, help="input partitions")
    args = parser.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from scrapy_simhash.spark import near_duplicates

    h = planted(args.n, args.near, 1)
    layout = resolve(None, args.k)
    start = time.perf_counter()
    local = find_all(h, args.k, layout=layout)
    local_s = time.perf_counter() - start

    spark = (
        SparkSession.builder.master(args.master)
        .config("spark.sql.shuffle.partitions", str(args.partitions))
        .config("spark.ui.enabled", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    signed = h.view(np.int64).tolist()
    df = (
        spark.createDataFrame(list(enumerate(signed)), "id long, simhash long")
        .repartition(args.partitions)
        .cache()
    )
    df.count()
    start = time.perf_counter()
    found = near_duplicates(df, args.k, layout=layout).count()
    spark_s = time.perf_counter() - start
    spark.stop()
    print(f"n={args.n:,} k={args.k} layout={layout.spec} ({layout.num_tables} tables) master={args.master}")
    print(f"find_all (in process): {local_s:8.2f} s  {len(local):,} pairs")
    print(f"near_duplicates:       {spark_s:8.2f} s  {found:,} pairs  ({spark_s / local_s:,.0f}x find_all)")
    print(
        f"join rows per fingerprint: {layout.num_tables} (one per table; plus map-side combined key counts)"
    )
    if found != len(local):
        print("MISMATCH: pair counts differ", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
