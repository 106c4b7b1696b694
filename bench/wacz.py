"""What reading WARCs from inside a WACZ costs, side by side with the same WARCs as plain files.

Two WARCs are built from the corpus pages (``--pages`` response records in all, as bench/reprocess.py
builds them: every other one gzip-encoded, pages reused under new URLs, so there are clusters) and
packed, stored as the WACZ spec asks, into one ``bench.wacz`` beside them (zip + datapackage.json,
built with :mod:`zipfile`: the benchmark needs no WACZ tool). Then, in one run, alternating the order:

(1) reading only (records + HTML payloads, CPU seconds, best of 5), plain files vs the package, per reader;
(2) ``dedupe`` (read, fingerprint, cluster; verified mode, ``--workers``), plain vs package: wall
    and CPU seconds, medians over ``--rounds``; the clusters must be the same.

Run: python bench/wacz.py [--pages 1000] [--rounds 2] [--workers 1]
Goal: the package costs at most 15 % more than the plain files ((2), CPU seconds: the figure a shared
machine's load disturbs least; wall seconds printed beside it).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from reprocess import _cpu_seconds, build_warc

from scrapy_simhash.warc.read.payload import html_page
from scrapy_simhash.warc.read.reader import ArchiveReader, ArchiveRecord, fastwarc_available
from scrapy_simhash.warc.reprocess import Options, dedupe, plan_inputs

GOAL = 1.15


def build(base: Path, pages: int) -> tuple[Path, Path]:
    """Two WARCs in ``base/plain`` and the same two, stored, in ``base/bench.wacz``."""
    plain = base / "plain"
    plain.mkdir(parents=True)
    for name, count in (("a", pages // 2), ("b", pages - pages // 2)):
        path, _ = build_warc(base / f"build-{name}", count)
        path.rename(plain / f"{name}.warc.gz")
    package = base / "bench.wacz"
    with zipfile.ZipFile(package, "w", zipfile.ZIP_STORED) as out:
        for warc in sorted(plain.iterdir()):
            out.write(warc, f"archive/{warc.name}")
        out.writestr("datapackage.json", json.dumps({"profile": "data-package", "wacz_version": "1.1.1"}))
    return plain, package


def read_all(target: Path, backend: str) -> float:
    """CPU seconds to read every record of ``target``'s archives and decode its HTML payload (CPU, not
    wall: on a shared machine the wall clock measures the neighbours)."""
    started = time.process_time()
    for entry in plan_inputs([target]):
        for item in ArchiveReader(backend).read(entry.path):
            if isinstance(item, ArchiveRecord):
                html_page(item)
    return time.process_time() - started


def run_dedupe(target: Path, workers: int) -> tuple[float, float, list[tuple]]:
    """Wall and CPU seconds of ``dedupe`` over ``target``, and its clusters with file names made
    comparable (the member's name for the package, the base name for plain files)."""
    cpu, started = _cpu_seconds(), time.perf_counter()
    summary, rows = dedupe(plan_inputs([target]), Options(workers=workers))
    elapsed, cpu = time.perf_counter() - started, _cpu_seconds() - cpu
    if summary.exit_status:
        sys.exit(f"benchmark input reported problems: {summary.problems[:3]}")
    clusters = [(r["cluster"], r["role"], Path(r["file"]).name, r["offset"], r["simhash"]) for r in rows]
    return elapsed, cpu, clusters


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pages", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=2, help="dedupe runs of each, order alternating")
    parser.add_argument("--workers", type=int, default=1)
    args = parser.parse_args()
    readers = ["warcio", *(["fastwarc"] if fastwarc_available() else [])]
    with tempfile.TemporaryDirectory(prefix="bench-wacz-") as tmp:
        plain, package = build(Path(tmp), args.pages)
        size = sum(p.stat().st_size for p in plain.iterdir())
        print(
            f"input: {args.pages} response records in 2 WARCs, {size / 1e6:.1f} MB; "
            f"the same in {package.name}"
        )
        print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} (shared: figures vary)")

        print("\n(1) reading only (records + HTML payloads), records per CPU-second, best of 5")
        for reader in readers:
            seconds = {kind: [] for kind in ("plain", "wacz")}
            for round_ in range(5):
                order = [("plain", plain), ("wacz", package)]
                for kind, target in order if round_ % 2 == 0 else reversed(order):
                    seconds[kind].append(read_all(target, reader))
            best = {kind: min(values) for kind, values in seconds.items()}
            print(
                f"  {reader:8s} plain {args.pages / best['plain']:9,.0f}   "
                f"wacz {args.pages / best['wacz']:9,.0f}   "
                f"wacz / plain time: {best['wacz'] / best['plain']:.3f}x"
            )

        print(f"\n(2) dedupe, {args.workers} worker(s), {args.rounds} round(s) of each, order alternating")
        wall: dict[str, list[float]] = {"plain": [], "wacz": []}
        cpu: dict[str, list[float]] = {"plain": [], "wacz": []}
        clusters: dict[str, list[tuple]] = {}
        for round_ in range(args.rounds):
            order = [("plain", plain), ("wacz", package)]
            for kind, target in order if round_ % 2 == 0 else reversed(order):
                elapsed, used, found = run_dedupe(target, args.workers)
                wall[kind].append(elapsed)
                cpu[kind].append(used)
                clusters[kind] = found
                print(f"  {kind:5s}: {elapsed:6.1f}s wall, {used:6.1f}s CPU, load {os.getloadavg()[0]:.1f}")
        if clusters["plain"] != clusters["wacz"]:
            sys.exit("the package gave other clusters than the plain files: a bug")
        cpu_ratio = statistics.median(cpu["wacz"]) / statistics.median(cpu["plain"])
        wall_ratio = statistics.median(wall["wacz"]) / statistics.median(wall["plain"])
        count = len({c for c, *_ in clusters["plain"]})
        print(f"  same clusters: {count} clusters, {len(clusters['plain'])} rows")
        print(
            f"  wacz / plain: {cpu_ratio:.3f}x CPU seconds, {wall_ratio:.3f}x wall seconds "
            f"(goal <= {GOAL:.2f}x: {'met' if cpu_ratio <= GOAL else 'NOT met'})"
        )


if __name__ == "__main__":
    main()
