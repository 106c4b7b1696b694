"""``scrapy-simhash spark dedupe``: ``dedupe`` on Apache Spark (needs the ``[spark]`` extra and Java)."""

from __future__ import annotations

import argparse
import sys

from ..defaults import DISTANCE, MIN_TOKENS

HELP = "run on Apache Spark (spark dedupe)"
DEDUPE_DESCRIPTION = (
    "Near-duplicate clusters across WARC/ARC files, computed on Spark: one task per file, Manku's "
    "tables as a distributed join, connected components. Writes the same report as `dedupe`. "
    "Run it directly (--master) or under spark-submit (the session spark-submit configures is used)."
)


def register(subparsers: argparse._SubParsersAction) -> None:
    spark = subparsers.add_parser("spark", help=HELP, description=HELP)
    commands = spark.add_subparsers(dest="spark_command", metavar="SUBCOMMAND", required=True)
    dedupe = commands.add_parser(
        "dedupe", help="near-duplicate clusters on Spark", description=DEDUPE_DESCRIPTION
    )
    dedupe.add_argument(
        "inputs", nargs="+", metavar="INPUT", help="WARC/ARC files or directories (or file: URIs)"
    )
    dedupe.add_argument(
        "--report", metavar="FILE", help="write clusters here (.csv for CSV); default: stdout"
    )
    dedupe.add_argument(
        "--format", choices=["jsonl", "csv"], help="report format (default: from FILE, else jsonl)"
    )
    dedupe.add_argument("--master", help="Spark master URL (default: spark-submit's, else local[*])")
    dedupe.add_argument(
        "--distance", "-k", type=int, default=DISTANCE, help=f"max Hamming distance ({DISTANCE})"
    )
    dedupe.add_argument(
        "--min-tokens", type=int, default=MIN_TOKENS, help=f"fewer tokens: no fingerprint ({MIN_TOKENS})"
    )
    dedupe.add_argument(
        "--reader", choices=["auto", "warcio", "fastwarc"], default="auto", help="WARC reader"
    )
    dedupe.set_defaults(func=run_dedupe)


def run_dedupe(args: argparse.Namespace) -> int:
    """Writes the report; exit status 1 when data was skipped (as ``dedupe``), 2 on a bad argument."""
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        raise ValueError("pyspark is not installed: pip install 'scrapy-simhash[spark]'") from None
    from ..spark.dedupe import dedupe_rows
    from ..warc.dedupe import write_report

    builder = SparkSession.builder.appName("scrapy-simhash spark dedupe")
    if args.master:
        builder = builder.master(args.master)
    spark = builder.getOrCreate()
    rows, problems = dedupe_rows(
        spark, args.inputs, args.distance, min_tokens=args.min_tokens, reader=args.reader
    )
    write_report(rows, args.report, args.format)
    out = sys.stdout if args.report not in (None, "-") else sys.stderr
    for problem in problems:
        where = problem.file if problem.offset is None else f"{problem.file} @ {problem.offset}"
        print(f"{'skipped' if problem.skipped else 'note'}: {where}: {problem.problem}", file=out)
    clusters = len({row["cluster"] for row in rows})
    print(f"clusters: {clusters} covering {len(rows)} records ({len(rows) - clusters} redundant)", file=out)
    return 1 if any(p.skipped for p in problems) else 0
