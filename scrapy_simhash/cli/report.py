"""``scrapy-simhash report``: one self-contained HTML page of what a run found.

Exit status: 0 when the report was written from every row/record, 1 when it was written but
something was passed over (named in the report and on stderr), 2 on a usage or environment error.
"""

from __future__ import annotations

import argparse
import sys

HELP = "write a self-contained HTML report of the near-duplicates found"
DESCRIPTION = (
    "Totals, histograms of the distances (and similarities) with the threshold drawn, clusters by "
    "size with their original marked, hosts, and the main texts of chosen pairs side by side with "
    "their differences, re-extracted from the WARC records, and the timeline of each URL captured "
    "more than once: how its main text changed between consecutive captures, with word diffs. "
    "INPUT: `dedupe --report` files "
    "(JSON lines or CSV), WARC/ARC files holding simhash metadata records (a crawl's or `tag`'s "
    "sidecars; WACZ packages and directories are searched for them), or one index (a directory or "
    "redis:// URI). The page opens from disk and makes no network request."
)


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("report", help=HELP, description=DESCRIPTION)
    parser.add_argument("inputs", nargs="+", metavar="INPUT", help="dedupe reports, WARCs, or one index")
    parser.add_argument("-o", "--output", required=True, help="the HTML file to write")
    parser.add_argument(
        "-k",
        "--distance",
        type=int,
        default=None,
        help="the distance drawn, and used to cluster an index or WARCs: simhash mode's threshold, "
        "verified mode's for pages without a sketch (default: the run's own: a dedupe report's rule "
        "column, the index's k, else 3)",
    )
    parser.add_argument(
        "--threshold",
        type=float,
        default=None,
        help="the similarity drawn, and used to cluster an index or WARCs by the verified rule "
        "(default: the run's own: a dedupe report's rule column, the index's threshold, else 0.5; "
        "0.8 for --method minhash rows without one)",
    )
    parser.add_argument(
        "--diffs", type=int, default=20, help="pairs of texts re-extracted and compared (default 20)"
    )
    parser.add_argument(
        "--timeline-diffs",
        type=int,
        default=20,
        help="URLs captured more than once whose main texts are re-extracted and diffed between "
        "consecutive captures, the most changed first (default 20; 0 for none)",
    )
    parser.add_argument(
        "--timeline",
        metavar="URL",
        default=None,
        help="write instead a page of this URL's history: every capture in the inputs (WARCs, sidecars "
        "or dedupe reports) and the word diff of the main text between each two consecutive ones",
    )
    parser.add_argument("--reader", default="auto", help="WARC reader: auto, warcio or fastwarc")
    parser.set_defaults(func=run_report)


def run_report(args: argparse.Namespace) -> int:
    from ..report import report

    if args.timeline is not None:
        return run_timeline(args)

    if args.distance is not None and not 0 <= args.distance <= 64:
        raise ValueError(f"--distance must be in 0..64, not {args.distance}")
    if args.threshold is not None and not 0 < args.threshold <= 1:
        raise ValueError(f"--threshold must be in (0, 1], not {args.threshold}")
    written = report(
        args.inputs,
        args.output,
        k=args.distance,
        threshold=args.threshold,
        diffs=max(0, args.diffs),
        timeline_diffs=max(0, args.timeline_diffs),
        backend=args.reader,
    )
    t = written.data.totals
    print(
        f"report: {written.path} ({written.bytes:,} bytes, {written.seconds:.1f}s): {t.clusters:,} clusters, "
        f"{t.near_duplicates:,} near-duplicates",
        file=sys.stderr,
    )
    passed_over = [n for n in written.data.notes if "passed over" in n or "@" in n]
    for note in passed_over:
        print(f"report: {note}", file=sys.stderr)
    return 1 if passed_over else 0


def run_timeline(args: argparse.Namespace) -> int:
    """``--timeline URL``: the page of one URL's history."""
    from ..report.timeline.page import timeline_report

    path, size, seconds, timeline, notes = timeline_report(
        args.inputs, args.output, args.timeline, backend=args.reader
    )
    print(
        f"report: {path} ({size:,} bytes, {seconds:.1f}s): {timeline.uri}: "
        f"{len(timeline.captures) + timeline.earlier:,} captures, {timeline.changes:,} text changes",
        file=sys.stderr,
    )
    passed_over = [n for n in notes if "passed over" in n]
    for note in passed_over:
        print(f"report: {note}", file=sys.stderr)
    return 1 if passed_over else 0
