"""Moving an older verified index's ``sketches/`` store into its pages' rows: what the upgrade costs.

An embedded verified index written before the sketch column kept its sketches in a second store
(``sketches/``, a MinHash index). Its first writer now moves them into the pages' rows, once
(:func:`scrapy_simhash.index.sketch_column.adopt_sketch_store`). This builds such an index of ``--n``
pages (8-bit sketches, crawl-like keys and meta), then prints the time of that first opening, of the
next one (the plain open, side by side), and the directory's bytes a page before and after.

    python bench/sketch_move.py --n 1000000
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from scrapy_simhash.decision import DEFAULT_RULE
from scrapy_simhash.index import open_index
from scrapy_simhash.index.embedded import SimhashIndex
from scrapy_simhash.index.minhash_store import MinHashIndex
from scrapy_simhash.index.sketch_column import SKETCHES

NUM_VALUES = 128


def disk_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def build_old_index(path: Path, n: int, batch: int = 50_000) -> None:
    """The layout before the column: sketches first (as that version wrote them), then the pages."""
    rng = np.random.default_rng(1)
    rule = DEFAULT_RULE
    with (
        MinHashIndex(
            path / SKETCHES, rule.similarity, NUM_VALUES, rule.bands, rule.rows, value_bits=8
        ) as store,
        SimhashIndex(path) as simhashes,
    ):
        for start in range(0, n, batch):
            count = min(batch, n - start)
            keys = [
                f"https://www.example.org/news/2024/article-{i}.html" for i in range(start, start + count)
            ]
            sketches = rng.integers(0, 2**32, size=(count, NUM_VALUES), dtype=np.uint32)
            hashes = rng.integers(1, 2**64, size=count, dtype=np.uint64).tolist()
            store.add_many([(key, s, None) for key, s in zip(keys, sketches, strict=True)])
            simhashes.add_many(
                [(h, key, {"date": "2024-05-01T00:00:00Z"}) for h, key in zip(hashes, keys, strict=True)]
            )
        simhashes.compact()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, default=200_000, help="pages")
    parser.add_argument("--dir", default=None, help="working directory (default: a temporary one)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        path = Path(tmp) / "ix"
        start = time.perf_counter()
        build_old_index(path, args.n)
        print(
            f"built an index with a sketches/ store: {args.n:,} pages in {time.perf_counter() - start:.0f} s"
        )
        before = disk_bytes(path) / args.n
        start = time.perf_counter()
        with open_index(path) as index:
            moved = time.perf_counter() - start
            assert not (path / SKETCHES).exists() and index.stats()["without_sketch"] == 0
            index.compact()  # the WAL checkpointed, as a compacted index would be
        start = time.perf_counter()
        with open_index(path):
            plain = time.perf_counter() - start
        after = disk_bytes(path) / args.n
    print(f"first writer's open (moves the sketches): {moved:.1f} s")
    print(f"next open (plain):                        {plain:.1f} s ({moved / plain:.1f}x)")
    print(f"directory bytes a page: {before:,.0f} with sketches/, {after:,.0f} after the move")


if __name__ == "__main__":
    main()
