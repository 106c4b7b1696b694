"""``scrapy-simhash spark dedupe`` / ``spark tag``: ``dedupe`` and ``tag`` on Apache Spark (needs the
``[spark]`` extra and Java)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..defaults import DISTANCE, MIN_TOKENS

HELP = "run on Apache Spark (spark dedupe, spark tag)"
DEDUPE_DESCRIPTION = (
    "Near-duplicate clusters across WARC/ARC files, computed on Spark: one task per file, Manku's "
    "tables as a distributed join, connected components. Writes the same report as `dedupe`. "
    "Run it directly (--master) or under spark-submit (the session spark-submit configures is used)."
)

TAG_DESCRIPTION = (
    "Write <input>.simhash.warc.gz for each WARC/ARC input (or under --out) from the Spark executors, "
    "one task per file, with the records `tag` writes without --index: fingerprints only. There is no "
    "index here, so nothing is detected as a near-duplicate: for near-duplicate-of-* fields run `tag "
    "--index`, or `spark dedupe` for a clusters report. Complete sidecars are skipped; a sidecar stays "
    ".open when records of its input were lost, and the next run redoes it, as with `tag`."
)


def _positive(value: str) -> int:
    number = int(value)
    if number < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return number


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
    tag = commands.add_parser(
        "tag", help="sidecar metadata WARCs written on Spark (no index)", description=TAG_DESCRIPTION
    )
    tag.add_argument(
        "inputs", nargs="+", metavar="INPUT", help="WARC/ARC files or directories (or file: URIs)"
    )
    tag.add_argument("--out", metavar="DIR", help="write sidecars here instead of next to each input")
    tag.add_argument("--master", help="Spark master URL (default: spark-submit's, else local[*])")
    tag.add_argument(
        "--workers", type=_positive, default=1, help="fingerprinting processes in each Spark task (1)"
    )
    tag.add_argument(
        "--min-tokens", type=int, default=MIN_TOKENS, help=f"fewer tokens: no fingerprint ({MIN_TOKENS})"
    )
    tag.add_argument("--reader", choices=["auto", "warcio", "fastwarc"], default="auto", help="WARC reader")
    tag.set_defaults(func=run_tag)


def _session(name: str, master: str | None) -> Any:
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        raise ValueError("pyspark is not installed: pip install 'scrapy-simhash[spark]'") from None
    builder = SparkSession.builder.appName(name)
    if master:
        builder = builder.master(master)
    return builder.getOrCreate()


def run_dedupe(args: argparse.Namespace) -> int:
    """Writes the report; exit status 1 when data was skipped (as ``dedupe``), 2 on a bad argument."""
    spark = _session("scrapy-simhash spark dedupe", args.master)
    from ..spark.dedupe import dedupe_rows
    from ..warc.dedupe import write_report

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


def run_tag(args: argparse.Namespace) -> int:
    """Problems and notes on stderr, then ``tag``'s summary lines; ``tag``'s exit status (1: data lost)."""
    spark = _session("scrapy-simhash spark tag", args.master)
    from ..spark.tag import tag_archives

    summary, lines = tag_archives(
        spark, args.inputs, args.out, workers=args.workers, reader=args.reader, min_tokens=args.min_tokens
    )
    for line in lines:
        print(line, file=sys.stderr)
    for line in summary.lines():
        print(line)
    return summary.exit_status
