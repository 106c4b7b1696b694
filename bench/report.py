"""How big and how slow is ``scrapy-simhash report`` at scale? A synthetic ``dedupe --report`` file.

    python bench/report.py [--pages 1000000] [--out DIR]

Writes DIR/synthetic.jsonl: ``--pages`` rows in clusters whose sizes follow a heavy tail (most are
pairs, a few hold thousands), members 0..3 bits from their original, 5,000 hosts, every row with a
``similarity``; the files named do not exist, so the pair texts are reported missing (the cost of
re-extracting 20 pairs is that of reading their WARCs, not of the report). Then times the report
end to end (load, nearest neighbours, render, write) and prints its size.
"""

from __future__ import annotations

import argparse
import json
import resource
import tempfile
import time
from pathlib import Path

import numpy as np

from scrapy_simhash.fingerprint import to_base32
from scrapy_simhash.report import report


def synthetic_rows(pages: int, seed: int = 1) -> list[dict]:
    rng = np.random.default_rng(seed)
    rows: list[dict] = []
    cluster = 0
    while len(rows) < pages:
        size = min(int(rng.pareto(1.2)) + 2, 5000, pages - len(rows)) if pages - len(rows) >= 2 else 1
        base = int(rng.integers(1, 2**63))
        host = f"host{int(rng.integers(5000))}.example"
        for i in range(size):
            flips = rng.choice(64, size=int(rng.integers(0, 4)) if i else 0, replace=False)
            value = base
            for bit in flips:
                value ^= 1 << int(bit)
            rows.append(
                {
                    "cluster": cluster,
                    "role": "duplicate" if i else "original",
                    "record_id": f"<urn:uuid:{cluster:08x}-{i:04x}-0000-0000-000000000000>",
                    "uri": f"https://{host}/article/{cluster}/{i}",
                    "date": f"2024-05-{1 + i % 28:02d}T12:00:00Z",
                    "file": f"/archive/crawl-{cluster % 997:05d}.warc.gz",
                    "offset": 1000 * i,
                    "simhash": to_base32(value),
                    "distance": len(flips),
                    "similarity": round(1.0 - 0.05 * len(flips) - float(rng.random()) * 0.05, 4),
                }
            )
        cluster += 1
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pages", type=int, default=1_000_000)
    parser.add_argument(
        "--out", default=None, help="directory for the input and the report (default: a temp dir)"
    )
    args = parser.parse_args()
    out = Path(args.out or tempfile.mkdtemp(prefix="report-bench-"))
    out.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    rows = synthetic_rows(args.pages)
    source = out / "synthetic.jsonl"
    with source.open("w") as fh:
        for row in rows:
            fh.write(json.dumps(row) + "\n")
    clusters = rows[-1]["cluster"] + 1
    del rows
    size = source.stat().st_size / 1e6
    made = time.monotonic() - start
    print(f"input: {source} ({size:.1f} MB, {args.pages:,} rows, {clusters:,} clusters, made in {made:.1f}s)")
    written = report([str(source)], out / "report.html")
    t = written.data.totals
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"report: {written.path}: {written.bytes / 1e6:.2f} MB written in {written.seconds:.1f}s "
        f"({t.clusters:,} clusters, {t.near_duplicates:,} near-duplicates; peak RSS {peak:.0f} MB)"
    )


if __name__ == "__main__":
    main()
