"""Batch mode: ``find_all`` over N fingerprints beside a plain numpy sort of the same data (the floor).

One run, same machine moment, so the ratio is meaningful even on a busy shared machine:

- floor: ``np.sort`` of the N uint64 fingerprints (find_all needs at least one sort per table);
- ``find_all(hashes, k=3, blocks=5)``: 10 tables of two 12/13-bit blocks, every pair within 3;
- ``clusters``: find_all plus union-find labels;
- the same on a clustered dataset (10% seeds with 9 near-duplicates each), where the output is large;
- correctness: the pairs of a random 3,000-item sample are compared with brute force.

Run:  python bench/find_all.py [--n 1000000] [--repeat 3]      (~20 s)
Goal: find_all on 1M random fingerprints <= 1.5 s (seomoz simhash-py's C++ takes about 3 s).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from scrapy_simhash.index.tables.batch import clusters, find_all, popcount64


def best_of(repeat: int, fn, *args, **kwargs):  # type: ignore[no-untyped-def]
    times, result = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn(*args, **kwargs)
        times.append(time.perf_counter() - start)
    return min(times), result


def clustered(n: int, rng: np.random.Generator) -> np.ndarray:
    seeds = rng.integers(1, 2**64, size=(n + 9) // 10, dtype=np.uint64)
    out = np.repeat(seeds, 10)[:n]
    flips = rng.integers(0, 5, size=n)
    for bit in range(4):
        active = flips > bit
        out[active] ^= np.uint64(1) << rng.integers(0, 64, size=int(active.sum())).astype(np.uint64)
    return out


def check_sample(hashes: np.ndarray, rng: np.random.Generator) -> bool:
    sample = hashes[rng.choice(hashes.shape[0], size=3000, replace=False)]
    got = find_all(sample, 3, blocks=5)
    dist = popcount64(sample[:, None] ^ sample[None, :])
    i, j = np.nonzero(np.triu(dist <= 3, 1))
    return bool(np.array_equal(got, np.stack([i, j], axis=1)))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3, help="best of this many runs per figure")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    print(f"{'':44}{'seconds':>10}{'x floor':>10}{'pairs|groups':>14}")
    for name, hashes in (
        ("random", rng.integers(1, 2**64, size=args.n, dtype=np.uint64)),
        ("clustered", clustered(args.n, rng)),
    ):
        floor, _ = best_of(args.repeat, np.sort, hashes)
        found, pairs = best_of(args.repeat, find_all, hashes, 3, blocks=5)
        grouped, labels = best_of(args.repeat, clusters, hashes, 3, blocks=5)
        groups = int((np.bincount(labels) > 1).sum())
        label = f"{name} {args.n:,}"
        print(f"{label + ': np.sort (floor)':44}{floor:10.3f}{1:10.1f}")
        print(f"{label + ': find_all k=3 blocks=5':44}{found:10.3f}{found / floor:10.1f}{len(pairs):12,}")
        print(f"{label + ': clusters (+ union-find)':44}{grouped:10.3f}{grouped / floor:10.1f}{groups:12,}")
        print(f"{name}: sample of 3,000 agrees with brute force: {check_sample(hashes, rng)}")
    print("goal: find_all on 1M random <= 1.5 s")


if __name__ == "__main__":
    main()
