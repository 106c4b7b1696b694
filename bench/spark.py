"""near_duplicates on a local Spark against the in-process joins on the same planted pages.

    python bench/spark.py --n 1000000 --master local[2]             # simhash tables vs find_all
    python bench/spark.py --n 1000000 --master local[2] --verified  # and LSH bands vs rule_pairs

Planted data: random fingerprints plus a share of near copies (1..3 bits flipped) so the
output is not empty; with ``--verified`` also random 128-value uint32 sketches, the near copies
keeping most of their source's values (0..96 of 128 replaced, so some fall below the rule's
similarity and are rejected). Prints both times, the ratio, whether the pair sets agree, and the
rows and bytes shuffled per fingerprint as Spark counts them: the shuffle write records and bytes
of every stage of the timed jobs, read from the driver's REST API (``/api/v1``, the UI bound to
127.0.0.1), so they include every exchange of the join (the band join's candidate ``distinct`` and
its sketch join too), not only the grouped rows.

The pages reach Spark from ``.npy`` files in a temporary directory, each task reading its slice
(no driver-side ``createDataFrame`` of a million rows), so the master must be local; the input
is cached and counted before any timing starts. ``--stages`` prints each timed stage's figures,
``--no-compress`` turns shuffle compression off to show the raw bytes per row, ``--no-simhash``
times the band join alone (10M sketched pages in one run on a small machine). The measured runs
and the cost model built on them: docs/scaling.md, "Apache Spark: a cost model for 1 billion pages".
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from typing import Any

import numpy as np

from scrapy_simhash.decision import Rule
from scrapy_simhash.fingerprint.minhash import MAGIC
from scrapy_simhash.index.tables.batch import find_all
from scrapy_simhash.index.tables.layouts import resolve
from scrapy_simhash.warc.dedupe import rule_pairs

NUM_VALUES = 128


def planted(n: int, near_share: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Fingerprints (uint64) and, per row, its source row (itself for a random page)."""
    rng = np.random.default_rng(seed)
    h = rng.integers(0, 2**64, size=n, dtype=np.uint64)
    near = int(n * near_share)
    rnd = random.Random(seed)
    src = np.arange(n)
    src[n - near :] = rng.integers(0, n - near, size=near)
    flips = np.array(
        [sum(1 << b for b in rnd.sample(range(64), rnd.randint(1, 3))) for _ in range(near)], dtype=np.uint64
    )
    h[n - near :] = h[src[n - near :]] ^ flips
    return h, src


def planted_sketches(src: np.ndarray, seed: int) -> np.ndarray:
    """Random sketches; a near copy keeps its source's values but for 0..96 replaced ones."""
    rng = np.random.default_rng(seed + 1)
    n = len(src)
    s = rng.integers(0, 2**32, size=(n, NUM_VALUES), dtype=np.uint32)
    copies = np.flatnonzero(src != np.arange(n))
    fresh = s[copies].copy()
    s[copies] = s[src[copies]]
    replaced = rng.integers(0, 97, size=len(copies))
    columns = rng.random((len(copies), NUM_VALUES)).argsort(axis=1)
    drop = columns < replaced[:, None]
    s[copies] = np.where(drop, fresh, s[copies])
    return s


def _rows(folder: str, parts: int, n: int, verified: bool, part: int) -> Any:
    """The rows of one input slice, read by the task from the .npy files (runs on the executor)."""
    h = np.load(os.path.join(folder, "h.npy"), mmap_mode="r")
    s = np.load(os.path.join(folder, "s.npy"), mmap_mode="r") if verified else None
    lo, hi = part * n // parts, (part + 1) * n // parts
    for i in range(lo, hi):
        if s is None:
            yield i, int(h[i])
        else:
            yield i, int(h[i]), bytearray(MAGIC + s[i].astype("<u4").tobytes())


class Shuffle:
    """Shuffle write records and bytes of a job group's stages, from the driver's REST API."""

    def __init__(self, spark: Any, verbose: bool = False) -> None:
        self.sc = spark.sparkContext
        self.verbose = verbose
        self.base = f"{self.sc.uiWebUrl}/api/v1/applications/{self.sc.applicationId}"

    def _get(self, path: str) -> Any:
        with urllib.request.urlopen(self.base + path, timeout=30) as response:
            return json.load(response)

    def measure(self, group: str, action: Callable[[], Any]) -> tuple[Any, float, int, int]:
        """(action's result, seconds, shuffle records, shuffle bytes) of running ``action`` in ``group``."""
        self.sc.setJobGroup(group, group)
        start = time.perf_counter()
        result = action()
        seconds = time.perf_counter() - start
        self.sc.setLocalProperty("spark.jobGroup.id", None)
        for _ in range(60):  # the listener that feeds the REST API is asynchronous
            jobs = [j for j in self._get("/jobs") if j.get("jobGroup") == group]
            if jobs and all(j["status"] != "RUNNING" for j in jobs):
                break
            time.sleep(0.5)
        stage_ids = {s for j in jobs for s in j["stageIds"]}
        done = [s for s in self._get("/stages?status=complete") if s["stageId"] in stage_ids]
        if self.verbose:
            for s in sorted(done, key=lambda s: s["stageId"]):
                print(
                    f"    stage {s['stageId']:>3} {s['numTasks']:>3} tasks  shuffle write "
                    f"{s['shuffleWriteRecords']:>12,} rows {s['shuffleWriteBytes']:>14,} B  "
                    f"read {s['shuffleReadBytes']:>14,} B  {s['name'][:60]}"
                )
        records = sum(s["shuffleWriteRecords"] for s in done)
        written = sum(s["shuffleWriteBytes"] for s in done)
        return result, seconds, records, written


def _report(name: str, n: int, seconds: float, local_s: float, records: int, written: int) -> None:
    print(
        f"{name:<22} {seconds:8.2f} s  ({seconds / local_s:,.0f}x in process, "
        f"{n / seconds:,.0f} fingerprints/s)  shuffle write: {records / n:.1f} rows, "
        f"{written / n:,.0f} bytes per fingerprint ({records:,} rows, {written / 2**20:,.1f} MiB)"
    )


def _pairs(df: Any) -> set[tuple[int, int]]:
    return {(int(r[0]), int(r[1])) for r in df.select("a", "b").collect()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--k", type=int, default=3)
    parser.add_argument("--near", type=float, default=0.05, help="share of planted near copies")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--partitions", type=int, default=8, help="input and shuffle partitions")
    parser.add_argument("--driver-memory", default="4g", help="local mode: the driver is the executor")
    parser.add_argument("--verified", action="store_true", help="plant sketches; time the band join too")
    parser.add_argument(
        "--no-compress", action="store_true", help="spark.shuffle.compress=false: raw shuffle bytes"
    )
    parser.add_argument("--stages", action="store_true", help="print each timed stage's shuffle figures")
    parser.add_argument(
        "--no-simhash",
        action="store_true",
        help="with --verified: time the band join only (saves a run at 10M)",
    )
    args = parser.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from scrapy_simhash.spark import near_duplicates

    h, src = planted(args.n, args.near, 1)
    layout = resolve(None, args.k)
    start = time.perf_counter()
    local = find_all(h, args.k, layout=layout)
    local_s = time.perf_counter() - start
    if args.verified:
        sketches = planted_sketches(src, 1)
        rule = Rule(mode="verified", distance=args.k)
        start = time.perf_counter()
        local_rule = rule_pairs([int(x) for x in h], list(sketches), rule)
        rule_s = time.perf_counter() - start
        expected_rule = {(int(a), int(b)) for a, b in local_rule.tolist()}
        del local_rule

    spark = (
        SparkSession.builder.master(args.master)
        .config("spark.sql.shuffle.partitions", str(args.partitions))
        .config("spark.driver.memory", args.driver_memory)
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.enabled", "true")
        .config("spark.ui.port", "0")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.shuffle.compress", str(not args.no_compress).lower())
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    shuffle = Shuffle(spark, args.stages)
    status = 0
    with tempfile.TemporaryDirectory(prefix="bench-spark-") as folder:
        np.save(os.path.join(folder, "h.npy"), h.view(np.int64))
        schema = "id long, simhash long"
        if args.verified:
            np.save(os.path.join(folder, "s.npy"), sketches)
            del sketches  # the tasks read the .npy file: no second copy in the driver while Spark runs
            schema += ", minhash binary"
        read = lambda part: _rows(folder, args.partitions, args.n, args.verified, part)  # noqa: E731
        rdd = spark.sparkContext.parallelize(range(args.partitions), args.partitions).flatMap(read)
        df = spark.createDataFrame(rdd, schema).cache()
        df.count()

        print(
            f"n={args.n:,} k={args.k} layout={layout.spec} ({layout.num_tables} tables) master={args.master} "
            f"shuffle.compress={not args.no_compress}"
        )
        if not (args.verified and args.no_simhash):
            found, spark_s, records, written = shuffle.measure(
                "simhash", lambda: _pairs(near_duplicates(df, args.k, layout=layout, mode="simhash"))
            )
            expected = {(int(a), int(b)) for a, b in local.tolist()}
            print(f"{'find_all (in process)':<22} {local_s:8.2f} s  {len(expected):,} pairs")
            _report("near_duplicates simhash", args.n, spark_s, local_s, records, written)
            print(f"  {len(found):,} pairs, {'same pair set' if found == expected else 'MISMATCH'}")
            status |= found != expected
        if args.verified:
            found, spark_s, records, written = shuffle.measure(
                "verified",
                lambda: _pairs(near_duplicates(df, args.k, sketch_col="minhash", mode="verified")),
            )
            expected = expected_rule
            print(f"{'rule_pairs (in process)':<22} {rule_s:8.2f} s  {len(expected):,} pairs")
            _report("near_duplicates verified", args.n, spark_s, rule_s, records, written)
            print(f"  {len(found):,} pairs, {'same pair set' if found == expected else 'MISMATCH'}")
            status |= found != expected
    spark.stop()
    if status:
        print("MISMATCH: pair sets differ", file=sys.stderr)
    return int(status)


if __name__ == "__main__":
    sys.exit(main())
