"""WARC reprocessing speed, side by side in one run, on a WARC built from real corpus pages.

The WARC (``--pages``, default 2,000 response records; corpus pages reused
under new URLs when the corpus has fewer, every other one gzip-encoded as
crawlers store them) is written to a temporary directory and deleted at the end.

(1) reading only (records -> HTML payloads, no fingerprint): warcio vs FastWARC;
(2) ``tag`` (read, fingerprint, write the sidecar) with 1 and 2 workers (the default, verified mode);
(3) ``tag`` with an index, verified mode (sketches computed, written and verified) side by side with
    simhash mode, 1 worker, order alternating;
(4) with ``--stored N``: ``tag --index`` and ``dedupe --index`` (verified, 1 worker) into an index that
    already holds N pages (synthetic fingerprints and sketches, as ``bench/index.py`` writes them,
    compacted to its files as a long-lived index is) side by side with an empty index, order alternating.

Run: python bench/reprocess.py [--pages 2000] [--workers 1 2] [--rounds 2] [--readers warcio fastwarc]
                               [--stored 10000000] [--only-stored]
Goals on 2 cores: (2) with 2 workers >= 1.8x 1 worker in records/s; (3) verified mode within 10 % of
simhash mode in records per CPU-second (the figure a shared machine's load disturbs least); (4) an index of
N stored pages within 20 % of an empty one in records per CPU-second.
"cores busy" (CPU seconds of this process and its workers / wall seconds) shows how much CPU the run
actually got: on a shared machine 2 workers cannot go faster than the cores they are given.
"""

from __future__ import annotations

import argparse
import gzip
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import quote

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _corpus import corpus

from scrapy_simhash.index import open_index
from scrapy_simhash.warc.dedupe import dedupe
from scrapy_simhash.warc.read.payload import html_page
from scrapy_simhash.warc.read.reader import ArchiveReader, ArchiveRecord, fastwarc_available
from scrapy_simhash.warc.records import http_head, response_record, warc_date
from scrapy_simhash.warc.reprocess import Options, plan_inputs, tag
from scrapy_simhash.warc.write.writer import RollingWarcWriter


def build_warc(directory: Path, pages: int) -> tuple[Path, int]:
    sources = sorted((corpus() / "pages").rglob("*.html.gz"))
    if not sources:
        sys.exit(f"no pages under {corpus() / 'pages'}")
    writer = RollingWarcWriter(directory, "bench", max_size=1 << 40, host="bench")
    size = 0
    for i in range(pages):
        html = gzip.decompress(sources[i % len(sources)].read_bytes())
        headers = [("Content-Type", "text/html")]
        body = html
        if i % 2:
            headers.append(("Content-Encoding", "gzip"))
            body = gzip.compress(html, 6)
        rel = sources[i % len(sources)].relative_to(corpus() / "pages")
        uri = f"http://bench.example/{i // len(sources)}/{quote(rel.as_posix())}"
        writer.write(response_record(uri, warc_date(), http_head("HTTP/1.1 200 OK", headers), body))
        size += len(html)
    [path] = writer.close()
    return path, size


def read_only(path: Path, backend: str, decode: bool) -> float:
    """Seconds to read every record (and, with ``decode``, its HTML payload: HTTP parsing, gunzip)."""
    started = time.perf_counter()
    for item in ArchiveReader(backend).read(path):
        if decode and isinstance(item, ArchiveRecord):
            html_page(item)
    return time.perf_counter() - started


def _cpu_seconds() -> float:
    """CPU time of this process and its finished children (the worker processes)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def full(
    path: Path,
    out: Path,
    workers: int,
    reader: str,
    mode: str = "verified",
    index: Path | None = None,
    command: str = "tag",
) -> tuple[int, int, float, float]:
    entries = plan_inputs([path], out)
    cpu, started = _cpu_seconds(), time.perf_counter()
    options = Options(workers=workers, reader=reader, mode=mode)
    if index is None:
        summary = tag(entries, options)
    else:
        with open_index(index, k=3, mode=mode) as opened:
            summary = (
                dedupe(entries, options, opened)[0] if command == "dedupe" else tag(entries, options, opened)
            )
    elapsed = time.perf_counter() - started
    cpu = _cpu_seconds() - cpu  # the pool is shut down when tag() returns, so its workers are counted
    if summary.exit_status:
        sys.exit(f"benchmark WARC reported problems: {summary.problems[:3]}")
    return summary.records, summary.fingerprinted, elapsed, cpu


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pages", type=int, default=2000)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--readers", nargs="+", default=["warcio", "fastwarc"])
    parser.add_argument("--full-reader", default="auto", help="reader for the tag runs (default: auto)")
    parser.add_argument("--rounds", type=int, default=2, help="tag runs per setting, order alternating")
    parser.add_argument(
        "--stored", type=int, default=0, help="(4): pages the filled index holds (0: skip (4))"
    )
    parser.add_argument("--only-stored", action="store_true", help="run only (4)")
    args = parser.parse_args()
    readers = [r for r in args.readers if r != "fastwarc" or fastwarc_available()]
    if len(readers) < len(args.readers):
        print("FastWARC not installed: reading it is not measured (pip install 'scrapy-simhash[warc-fast]')")

    with tempfile.TemporaryDirectory(prefix="bench-reprocess-") as tmp:
        base = Path(tmp)
        started = time.perf_counter()
        path, html_bytes = build_warc(base / "in", args.pages)
        print(
            f"WARC: {args.pages} response records from corpus pages, {path.stat().st_size / 1e6:.1f} MB gzip "
            f"({html_bytes / 1e6:.1f} MB HTML), built in {time.perf_counter() - started:.1f}s"
        )
        print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} (shared: figures vary)")
        if args.only_stored:
            stored(base, path, args)
            return

        print("\n(1) reading only, records/s (best of 3): records | records + HTML payloads")
        rates: dict[tuple[str, bool], float] = {}
        for reader in readers:
            for decode in (False, True):
                rates[reader, decode] = args.pages / min(read_only(path, reader, decode) for _ in range(3))
            print(f"  {reader:9s} {rates[reader, False]:10,.0f} | {rates[reader, True]:10,.0f}")
        if len(readers) == 2:
            ratios = [rates["fastwarc", d] / rates["warcio", d] for d in (False, True)]
            print(f"  FastWARC / warcio: {ratios[0]:.2f}x | {ratios[1]:.2f}x")

        print(f"\n(2) tag (read + fingerprint + sidecar), reader {args.full_reader}, {args.rounds} round(s)")
        results: dict[int, list[float]] = {w: [] for w in args.workers}
        per_cpu: dict[int, list[float]] = {w: [] for w in args.workers}
        run = 0
        for round_ in range(args.rounds):
            # alternate the order, so a change in the machine's load does not favour one setting
            order = args.workers if round_ % 2 == 0 else list(reversed(args.workers))
            for workers in order:
                run += 1
                out = base / f"out-{run}"
                records, fingerprinted, elapsed, cpu = full(path, out, workers, args.full_reader)
                shutil.rmtree(out)
                results[workers].append(records / elapsed)
                per_cpu[workers].append(records / cpu)
                print(
                    f"  {workers} worker(s): {records / elapsed:8.1f} records/s  "
                    f"({records} records, {fingerprinted} fingerprinted, {elapsed:.1f}s wall, "
                    f"{cpu:.1f}s CPU = {cpu / elapsed:.2f} cores busy, load {os.getloadavg()[0]:.1f})"
                )
        medians = {w: statistics.median(r) for w, r in results.items()}
        if 1 in medians and 2 in medians:
            print(f"  median: 1 worker {medians[1]:.1f}, 2 workers {medians[2]:.1f} records/s")
            print(f"  2 workers / 1 worker: {medians[2] / medians[1]:.2f}x (goal >= 1.8x on 2 free cores)")
            cost = statistics.median(per_cpu[1]) / statistics.median(per_cpu[2]) - 1
            print(
                f"  records per CPU-second: 1 worker {statistics.median(per_cpu[1]):.1f}, 2 workers "
                f"{statistics.median(per_cpu[2]):.1f} (parallel overhead {cost:+.0%}: the speed-up 2 free "
                f"cores allow is about {2 / (1 + cost):.2f}x)"
            )
        modes(base, path, args)
        if args.stored:
            stored(base, path, args)
        print(f"load average at the end: {os.getloadavg()[0]:.2f}")


def modes(base: Path, path: Path, args: argparse.Namespace) -> None:
    """(3): verified mode against simhash mode, each with a fresh index, 1 worker, order alternating."""
    print(f"\n(3) tag --index, verified vs simhash mode, 1 worker, {args.rounds} round(s)")
    wall: dict[str, list[float]] = {"verified": [], "simhash": []}
    per_cpu: dict[str, list[float]] = {"verified": [], "simhash": []}
    for round_ in range(args.rounds):
        order = ["verified", "simhash"] if round_ % 2 == 0 else ["simhash", "verified"]
        for mode in order:
            out, index = base / f"mode-{mode}-{round_}", base / f"index-{mode}-{round_}"
            records, _, elapsed, cpu = full(path, out, 1, args.full_reader, mode, index)
            shutil.rmtree(out)
            shutil.rmtree(index)
            wall[mode].append(records / elapsed)
            per_cpu[mode].append(records / cpu)
            print(f"  {mode:8s}: {records / elapsed:8.1f} records/s, {records / cpu:8.1f} per CPU-second")
    ratio = statistics.median(per_cpu["verified"]) / statistics.median(per_cpu["simhash"])
    wall_ratio = statistics.median(wall["verified"]) / statistics.median(wall["simhash"])
    print(
        f"  verified / simhash: {ratio:.2f}x per CPU-second, {wall_ratio:.2f}x records/s "
        f"(goal >= 0.90x: within 10 %)"
    )


def fill(index_path: Path, n: int, batch: int = 10_000) -> None:
    """An index of ``n`` pages with bench/index.py's random fingerprints and sketches, compacted."""
    from index import Sketches, dataset

    rng = np.random.default_rng(0)
    made = Sketches("random", n, 0)
    with open_index(index_path, k=3, mode="verified") as index:
        for start in range(0, n, batch):
            count = min(batch, n - start)
            hashes = dataset("random", count, rng).tolist()
            values = list(made[start : start + count])
            keys = [f"https://site{(start + i) % 997}.example/article/{start + i}" for i in range(count)]
            index.add_many(list(zip(hashes, keys, [None] * count, values, strict=True)))
        index.compact()


def stored(base: Path, path: Path, args: argparse.Namespace) -> None:
    """(4): tag --index and dedupe --index into an index holding --stored pages, against an empty one."""
    filled = base / "filled"
    started = time.perf_counter()
    fill(filled, args.stored)
    size = sum(p.stat().st_size for p in filled.rglob("*") if p.is_file())
    print(
        f"\n(4) an index of {args.stored:,} stored pages ({size / 1e9:.2f} GB, filled in "
        f"{time.perf_counter() - started:.0f}s) against an empty one, verified, 1 worker, "
        f"{args.rounds} round(s)"
    )
    for command in ("tag", "dedupe"):
        per_cpu: dict[str, list[float]] = {"empty": [], "stored": []}
        for round_ in range(args.rounds):
            for kind in ["empty", "stored"] if round_ % 2 == 0 else ["stored", "empty"]:
                index = base / f"index-{command}-{kind}-{round_}"
                if kind == "stored":
                    shutil.copytree(filled, index)  # each run writes its pages: a fresh copy each time
                out = base / f"{command}-{kind}-{round_}"
                records, _, elapsed, cpu = full(path, out, 1, args.full_reader, "verified", index, command)
                shutil.rmtree(out, ignore_errors=True)  # dedupe writes no sidecars
                shutil.rmtree(index)
                per_cpu[kind].append(records / cpu)
                print(
                    f"  {command:6s} {kind:6s}: {records / elapsed:8.1f} records/s, {records / cpu:8.1f} per "
                    f"CPU-second (load {os.getloadavg()[0]:.1f})"
                )
        ratio = statistics.median(per_cpu["stored"]) / statistics.median(per_cpu["empty"])
        print(f"  {command}: stored / empty {ratio:.2f}x per CPU-second (goal >= 0.80x: within 20 %)")


if __name__ == "__main__":
    main()
