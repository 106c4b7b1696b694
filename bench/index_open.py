"""Opening a verified index: the sketch LSH mapped from its table files, or rebuilt from the rows.

One index of N pages (random simhashes and 128-value sketches, ``add_many`` batches of 10k, then
``compact()``), opened side by side in one run, each variant in a fresh process, alternating, so
that both see the same machine:

- ``mapped``: as it is (the generation's LSH files are memory-mapped; no row's sketch is read);
- ``rows``: a copy whose manifest names no LSH files, as an index written before them: every row's
  sketch is read and the LSH rebuilt in memory (what every open did before; a reader does not
  write the files, so each ``rows`` open stays such an open).

Each process opens the index read-only (a reader: no write lock, no integrity_check, the CRC-32
check of the table files) and then asks 20k single lookups: misses (random sketches) and hits (a
stored page's sketch with 10% of its values changed); it prints the open time, the anonymous memory
(RssAnon: heap, not the page cache) it grew by, and the lookups' p50/p99.

Run:  python bench/index_open.py                      # 1M pages (~3 min to build on 2 cores)
      python bench/index_open.py --size 200000 --rounds 3
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

CHILD = r"""
import gc, json, sys, time
from pathlib import Path
import numpy as np

def anon():
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("RssAnon:"):
            return int(line.split()[1]) * 1024
    return 0

from scrapy_simhash.index import open_index
path, n, queries = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
CHUNK = 10_000
rng = np.random.default_rng(7)
hashes = np.random.default_rng(1).integers(1, 2**63, size=n, dtype=np.uint64)
rows = rng.integers(0, n, size=queries)
chunks = {}
def sketch_of(i):  # page i's sketch as the build made it: row i % CHUNK of chunk i // CHUNK
    c = i // CHUNK
    if c not in chunks:
        chunks[c] = np.random.default_rng(1_000_003 + c).integers(0, 2**32, (CHUNK, 128), dtype=np.uint32)
    return chunks[c][i % CHUNK].copy()
probe_hits = []
for i in sorted(rows.tolist()):
    v = sketch_of(i)
    v[rng.choice(128, 13, replace=False)] = rng.integers(0, 2**32, 13, dtype=np.uint32)
    probe_hits.append((int(hashes[i]) ^ 1, v))
probe_misses = [(int(h), rng.integers(0, 2**32, 128, dtype=np.uint32))
                for h in rng.integers(1, 2**63, size=queries, dtype=np.uint64)]
del chunks
gc.collect()
before = anon()  # the probes are made: what grows now is the index's
start = time.perf_counter()
index = open_index(path, read_only=True)
opened = time.perf_counter() - start
def timed(probes):
    out = np.empty(len(probes))
    found = 0
    gc.disable()
    for j, (h, v) in enumerate(probes):
        t = time.perf_counter_ns()
        found += len(index.query(h, sketch=v))
        out[j] = time.perf_counter_ns() - t
    gc.enable()
    return out / 1e3, found
miss_t, miss_found = timed(probe_misses)
hit_t, hit_found = timed(probe_hits)
print(json.dumps({
    "open_s": opened,
    "anon_per_page": (anon() - before) / n,
    "miss_p50": float(np.percentile(miss_t, 50)), "miss_p99": float(np.percentile(miss_t, 99)),
    "hit_p50": float(np.percentile(hit_t, 50)), "hit_p99": float(np.percentile(hit_t, 99)),
    "hits_found": hit_found / len(probe_hits), "misses_found": miss_found,
}))
"""


CHUNK = 10_000


def build(path: Path, n: int) -> None:
    from scrapy_simhash.index import open_index

    hashes = np.random.default_rng(1).integers(1, 2**63, size=n, dtype=np.uint64).tolist()
    with open_index(path) as index:
        for chunk, start in enumerate(range(0, n, CHUNK)):  # batches of 10k, as a bulk load writes
            sketches = np.random.default_rng(1_000_003 + chunk).integers(
                0, 2**32, (CHUNK, 128), dtype=np.uint32
            )
            items = [
                (hashes[i], f"https://site{i % 997}.example/article/{i}", None, sketches[i - start])
                for i in range(start, min(n, start + CHUNK))
            ]
            index.add_many(items)
        index.compact()


def without_lsh_files(src: Path, dst: Path) -> None:
    """A copy of the index as one written before the LSH files (its manifest names none)."""
    shutil.copytree(src, dst)
    manifest = json.loads((dst / "manifest.json").read_text())
    for part in [name for name in manifest["files"] if name.startswith("lsh_")]:
        (dst / manifest["files"].pop(part)["name"]).unlink()
    manifest.pop("lsh", None)
    (dst / "manifest.json").write_text(json.dumps(manifest))
    (dst / "LOCK").unlink(missing_ok=True)


def main() -> None:
    formatter = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=formatter)
    parser.add_argument("--size", type=int, default=1_000_000)
    parser.add_argument("--queries", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--dir", default=None, help="working directory (default: a temporary one)")
    args = parser.parse_args()
    work = Path(args.dir or tempfile.mkdtemp(prefix="index-open-"))
    mapped, rows = work / "mapped", work / "rows"
    if not (mapped / "manifest.json").exists():
        start = time.perf_counter()
        build(mapped, args.size)
        print(f"# built {args.size:,} pages in {time.perf_counter() - start:.0f} s", flush=True)
    if not rows.exists():
        without_lsh_files(mapped, rows)
    results: dict[str, list[dict[str, float]]] = {"mapped": [], "rows": []}
    for _ in range(args.rounds):
        for name, path in (("mapped", mapped), ("rows", rows)):
            out = subprocess.run(
                [sys.executable, "-c", CHILD, str(path), str(args.size), str(args.queries)],
                capture_output=True,
                text=True,
                check=True,
            )
            results[name].append(json.loads(out.stdout.strip().splitlines()[-1]))
    load = Path("/proc/loadavg").read_text().split()[0]
    print(f"# {args.size:,} pages, {args.queries:,} lookups each, best of {args.rounds} (load {load})")
    print(f"{'':40} {'mapped (now)':>14} {'rows (before)':>14} {'ratio':>7}")
    for label, field in (
        ("open s (reader)", "open_s"),
        ("anonymous memory, bytes a page", "anon_per_page"),
        ("lookup p50 µs, miss", "miss_p50"),
        ("lookup p99 µs, miss", "miss_p99"),
        ("lookup p50 µs, hit", "hit_p50"),
        ("lookup p99 µs, hit", "hit_p99"),
        ("matches per hit (same answers)", "hits_found"),
    ):
        a = min(r[field] for r in results["mapped"])
        b = min(r[field] for r in results["rows"])
        print(f"{label:40} {a:14.2f} {b:14.2f} {a / b if b else float('nan'):7.2f}")
    disk = sum(p.stat().st_size for p in mapped.iterdir() if p.is_file())
    lsh = sum(p.stat().st_size for p in mapped.glob("tables-*.lsh_*.npy"))
    print(f"disk bytes a page: {disk / args.size:.0f} (of which the LSH files {lsh / args.size:.0f})")
    if args.dir is None:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
