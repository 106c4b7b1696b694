"""What ``scrapy-simhash index upgrade`` costs: an index of an earlier format converted into format 3.

Builds, with raw sqlite3 (``tests/index_old_layouts.py``), a format-2 verified index of ``--n`` pages
whose sketches are in a second store (``sketches/``, 8-bit values), with crawl-like keys and meta,
then runs the command (a process of its own: reading, checking every checksum, writing, and the new
index's first open, which writes its table files), and prints its time and peak memory, the new
index's next open, and the bytes a page of both.

    python bench/upgrade.py --n 1000000
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))  # the old layouts' builders

from index_old_layouts import NV, two_stores

from scrapy_simhash.index import open_index


def disk_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def crawl_pages(n: int) -> list:
    rng = np.random.default_rng(1)
    sketches = rng.integers(0, 2**32, size=(n, NV), dtype=np.uint32)
    hashes = rng.integers(1, 2**64, size=n, dtype=np.uint64).tolist()
    meta = {"date": "2024-05-01T00:00:00Z"}
    return [
        (h, f"https://www.example.org/news/2024/article-{i}.html", meta, sketches[i])
        for i, h in enumerate(hashes)
    ]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, default=200_000, help="pages")
    parser.add_argument("--dir", default=None, help="working directory (default: a temporary one)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        old, new = Path(tmp) / "old", Path(tmp) / "new"
        start = time.perf_counter()
        two_stores(old, crawl_pages(args.n), orphan=False)
        built = time.perf_counter() - start
        print(f"built a format-2 index with a sketches/ store: {args.n:,} pages in {built:.0f} s")
        start = time.perf_counter()
        command = "import sys; from scrapy_simhash.cli import main; sys.exit(main())"
        done = subprocess.run(
            [sys.executable, "-c", command, "index", "upgrade", str(old), str(new)],
            capture_output=True,
            text=True,
            check=True,
        )
        converted = time.perf_counter() - start
        assert f"moved from a sketch store: {args.n}" in done.stdout, done.stdout
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
        start = time.perf_counter()
        with open_index(new) as index:
            assert len(index) == args.n
            opened = time.perf_counter() - start
        print(
            f"upgrade (read, check, write, first open): {converted:.1f} s ({args.n / converted:,.0f} pages/s)"
        )
        print(
            f"its peak memory (max RSS):                {peak / 2**20:,.0f} MiB "
            f"({peak / args.n:,.0f} B a page)"
        )
        print(f"next open (writer):                        {opened:.1f} s")
        print(
            f"directory bytes a page: {disk_bytes(old) / args.n:,.0f} old (no table files), "
            f"{disk_bytes(new) / args.n:,.0f} new (table files included)"
        )


if __name__ == "__main__":
    main()
