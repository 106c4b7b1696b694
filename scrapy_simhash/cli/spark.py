"""``scrapy-simhash spark dedupe`` / ``spark tag``: ``dedupe`` and ``tag`` on Apache Spark (needs the
``[spark]`` extra and Java)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from ..defaults import MIN_TOKENS, MODE, MODES, SIMILARITY
from ..extract import Extractor
from ..warc.commandline import (
    add_extractor_argument,
    add_keep_argument,
    add_rule_arguments,
    extractor_from,
    run_mode,
)

HELP = "run on Apache Spark (spark dedupe, spark tag)"
DEDUPE_DESCRIPTION = (
    "Near-duplicate clusters across WARC/ARC files, computed on Spark: one task per file; in verified mode "
    "(the default) the sketches' LSH bands as a distributed join, each candidate checked by the rule "
    "(pages without sketch by Manku's tables at --distance); in simhash mode Manku's tables; then "
    "connected components. Writes the same report as `dedupe`. "
    "Run it directly (--master) or under spark-submit (the session spark-submit configures is used)."
)

TAG_DESCRIPTION = (
    "Write <input>.simhash.warc.gz for each WARC/ARC input (or under --out) from the Spark executors, "
    "one task per file, with the records `tag` writes without --index: fingerprints only. There is no "
    "index here, so nothing is detected as a near-duplicate: for near-duplicate-of-* fields run `tag "
    "--index`, or `spark dedupe` for a clusters report. Complete sidecars are skipped; a sidecar stays "
    ".open when records of its input were lost, and the next run redoes it, as with `tag`. Inputs on "
    "hdfs:, s3a:, ... are read through Spark and need --out (a local or shared directory)."
)


INPUTS_HELP = (
    "WARC/ARC files, WACZ packages (local paths: their WARCs are read in place) or directories: local "
    "paths or file: URIs on a filesystem every executor reads, or any URI Spark's Hadoop filesystem "
    "reads (hdfs:, s3a:, gs:, abfs:, ...; read through Spark, a whole file per task in executor memory)"
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
    dedupe.add_argument("inputs", nargs="+", metavar="INPUT", help=INPUTS_HELP)
    dedupe.add_argument(
        "--report", metavar="FILE", help="write clusters here (.csv for CSV); default: stdout"
    )
    dedupe.add_argument(
        "--format", choices=["jsonl", "csv"], help="report format (default: from FILE, else jsonl)"
    )
    dedupe.add_argument("--master", help="Spark master URL (default: spark-submit's, else local[*])")
    dedupe.add_argument(
        "--save",
        metavar="DIR",
        help="also write the fingerprinted records as a Parquet table (a new directory, any Hadoop URI), "
        "for a later run's --against",
    )
    dedupe.add_argument(
        "--against",
        metavar="DIR",
        action="append",
        default=[],
        help="a table an earlier run wrote with --save (repeatable, oldest first): its records join "
        "the clusters (the --keep policy chooses the originals among all); only clusters reached by a "
        "pair with a new record are reported; its WARCs are not read",
    )
    add_rule_arguments(dedupe)
    add_keep_argument(dedupe)
    add_extractor_argument(dedupe)
    dedupe.add_argument(
        "--mix-extractors",
        action="store_true",
        help="let an --against table of another extractor (name or options) than this run's be clustered "
        "with this run's pages (their fingerprints are not comparable; default: refuse the run)",
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
    tag.add_argument("inputs", nargs="+", metavar="INPUT", help=INPUTS_HELP)
    tag.add_argument(
        "--out",
        metavar="DIR",
        help="write sidecars here instead of next to each input (required with hdfs:, s3a:, ... inputs: "
        "their sidecars are named after the URI's path under its argument, as tag names them)",
    )
    tag.add_argument("--master", help="Spark master URL (default: spark-submit's, else local[*])")
    tag.add_argument(
        "--workers", type=_positive, default=1, help="fingerprinting processes in each Spark task (1)"
    )
    tag.add_argument(
        "--min-tokens", type=int, default=MIN_TOKENS, help=f"fewer tokens: no fingerprint ({MIN_TOKENS})"
    )
    tag.add_argument("--reader", choices=["auto", "warcio", "fastwarc"], default="auto", help="WARC reader")
    add_extractor_argument(tag)
    tag.add_argument(
        "--mode",
        choices=MODES,
        default=MODE,
        help=f"verified ({MODE}): records also carry the page's minhash-doc/1 sketch; "
        "simhash: fingerprints only",
    )
    tag.set_defaults(func=run_tag)


def _remote(location: str) -> bool:
    """A URI of a filesystem other than the local one (hdfs:, s3a:, ...)."""
    scheme = urlparse(location).scheme
    return len(scheme) > 1 and scheme != "file"


def _on_spark(command: str, master: str | None, job: Callable[[Any], int]) -> int:
    """``job(session)``'s exit status; when Spark itself fails (no Java, a task that fails on every try,
    a lost executor), one line saying what failed and what to do, and exit status 2."""
    from ..spark.failures import failure_line, spark_errors
    from ..spark.session import spark_session

    session = None
    try:
        session = spark_session(f"scrapy-simhash spark {command}", master)
        return job(session)
    except spark_errors() as exc:
        python = getattr(getattr(session, "sparkContext", None), "pythonExec", None)
        print(f"scrapy-simhash spark: error: {failure_line(exc, python)}", file=sys.stderr)
        return 2


def run_dedupe(args: argparse.Namespace) -> int:
    """Writes the report; exit status 1 when data was skipped (as ``dedupe``), 2 on a bad argument or
    when Spark fails."""
    mode = run_mode(args)  # a usage error before Spark starts
    extractor = extractor_from(args)
    similarity = SIMILARITY if args.similarity is None else args.similarity
    if args.save and not _remote(args.save) and Path(args.save.removeprefix("file://")).exists():
        raise ValueError(f"--save {args.save}: already exists (a table is written once; choose a new name)")
    for table in args.against:
        if not _remote(table) and not Path(table.removeprefix("file://")).is_dir():
            raise ValueError(f"--against {table}: no such table (a directory written by --save)")
    return _on_spark("dedupe", args.master, lambda spark: _dedupe(spark, args, mode, similarity, extractor))


def _dedupe(spark: Any, args: argparse.Namespace, mode: str, similarity: float, extractor: Extractor) -> int:
    from ..spark.dedupe import dedupe_rows
    from ..warc.dedupe import write_report

    rows, problems = dedupe_rows(
        spark,
        args.inputs,
        args.distance,
        mode=mode,
        similarity=similarity,
        min_tokens=args.min_tokens,
        reader=args.reader,
        extractor=extractor,
        save=args.save,
        against=args.against,
        keep=args.keep,
        mix_extractors=args.mix_extractors,
        warn=lambda message: print(f"warning: {message}", file=sys.stderr),
    )
    write_report(rows, args.report, args.format)
    out = sys.stdout if args.report not in (None, "-") else sys.stderr
    for problem in problems:
        where = problem.file if problem.offset is None else f"{problem.file} @ {problem.offset}"
        print(f"{'skipped' if problem.skipped else 'note'}: {where}: {problem.problem}", file=out)
    duplicates = [row for row in rows if row["role"] == "duplicate"]
    by_simhash = sum(1 for row in duplicates if row["method"] == "simhash")
    print(
        f"decisions: {mode} mode, {len(duplicates) - by_simhash} near-duplicates verified by sketch, "
        f"{by_simhash} by simhash alone",
        file=out,
    )
    clusters = len({row["cluster"] for row in rows})
    print(f"clusters: {clusters} covering {len(rows)} records ({len(rows) - clusters} redundant)", file=out)
    print(f"originals: chosen by --keep {args.keep}", file=out)
    return 1 if any(p.skipped for p in problems) else 0


def run_tag(args: argparse.Namespace) -> int:
    """Problems and notes on stderr, then ``tag``'s summary lines; ``tag``'s exit status (1: data lost),
    2 when Spark fails."""
    extractor = extractor_from(args)  # a usage error before Spark starts
    return _on_spark("tag", args.master, lambda spark: _tag(spark, args, extractor))


def _tag(spark: Any, args: argparse.Namespace, extractor: Extractor) -> int:
    from ..spark.tag import tag_archives

    summary, lines = tag_archives(
        spark,
        args.inputs,
        args.out,
        workers=args.workers,
        reader=args.reader,
        min_tokens=args.min_tokens,
        mode=args.mode,
        extractor=extractor,
    )
    for line in lines:
        print(line, file=sys.stderr)
    for line in summary.lines():
        print(line)
    return summary.exit_status
