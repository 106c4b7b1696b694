"""``scrapy-simhash cdxj``: pywb-style CDXJ lines with the simhash fields, or those fields added to an index.

Exit status: 0 when every input was indexed and every sidecar read, 1 when the index was written but
something was passed over (each reported on stderr: a damaged range with its bytes), 2 on a usage or
environment error.
"""

from __future__ import annotations

import argparse
import sys

from ..warc.commandline import add_extractor_argument, extractor_from

HELP = "write CDXJ index lines with simhash fields (or add them to an existing CDXJ index)"
DESCRIPTION = (
    "Index the response/revisit/resource records of WARC/ARC files as pywb's cdxj-indexer does "
    "(identical lines) and add the JSON keys simhash, simhash-scheme, text-extractor (and minhash, "
    "minhash-scheme when present) for every record with a fingerprint: from the crawl's own metadata "
    "records (WARC-Concurrent-To) or from the input's sidecar <input>.simhash.warc.gz written by `tag`. "
    "With --merge, copy an existing CDXJ index instead, adding the keys to the lines of the same "
    "filename+offset and leaving every other byte unchanged."
)


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("cdxj", help=HELP, description=DESCRIPTION)
    parser.add_argument(
        "inputs", nargs="+", metavar="INPUT", help="WARC/ARC files, WACZ packages, or directories of them"
    )
    parser.add_argument("-o", "--output", help="write here (replaced atomically) instead of stdout")
    parser.add_argument(
        "--merge",
        metavar="EXISTING.cdxj",
        help="add the fields to the lines of this (sorted, uncompressed) CDXJ index instead of indexing",
    )
    parser.add_argument(
        "--sidecar-dir",
        metavar="DIR",
        help="where `tag --out DIR` wrote the sidecars (default: beside each input)",
    )
    parser.add_argument(
        "--dir-root",
        metavar="DIR",
        help="filename fields relative to DIR, as cdxj-indexer --dir-root (default: the base name)",
    )
    parser.add_argument(
        "--compute",
        action="store_true",
        help="fingerprint HTML responses that have no recorded fingerprint, as `tag` would (slower: every "
        "HTML page of the inputs is extracted; a recorded fingerprint wins)",
    )
    parser.add_argument(
        "--workers", type=int, default=1, help="processes fingerprinting with --compute (default 1)"
    )
    add_extractor_argument(parser)
    parser.set_defaults(func=run_cdxj)


def run_cdxj(args: argparse.Namespace) -> int:
    # imported here, not with the parser: every other command would pay for the WARC writer and numpy
    from ..warc.cdxj import (
        CdxjLine,
        CdxjSummary,
        Options,
        SortedWriter,
        has_keys,
        index_lines,
        iter_lines,
        merge_index,
        replace_atomically,
    )

    summary = CdxjSummary()
    if args.workers < 1:
        raise ValueError(f"--workers must be at least 1, not {args.workers}")
    if args.extractor is not None and not args.compute:
        raise ValueError(
            "--extractor applies to --compute only (the other fingerprints are read as they were "
            "recorded, with the extractor each record names)"
        )
    compute = Options(workers=args.workers, extractor=extractor_from(args)) if args.compute else None
    if args.output:
        out, commit = replace_atomically(args.output)
    else:
        out, commit = sys.stdout, None
    ok = False
    try:
        if args.merge:
            # only the lines with keys are kept in memory, to be matched against the existing index
            keyed: list[CdxjLine] = []
            index_lines(
                args.inputs,
                sidecar_dir=args.sidecar_dir,
                dir_root=args.dir_root,
                summary=summary,
                compute=compute,
                emit=lambda line: keyed.append(line) if has_keys(line) else None,
            )
            merged = CdxjSummary()
            merge_index(iter_lines(args.merge), keyed, out, merged)
            summary.lines, summary.with_fields = merged.lines, merged.with_fields
            summary.already_had_fields, summary.not_cdxj = merged.already_had_fields, merged.not_cdxj
            summary.unmatched_fingerprints = merged.unmatched_fingerprints
        else:
            writer = SortedWriter(out)
            index_lines(
                args.inputs,
                sidecar_dir=args.sidecar_dir,
                dir_root=args.dir_root,
                summary=summary,
                compute=compute,
                emit=writer,
            )
            writer.close()
        out.flush()
        ok = True
    finally:
        if commit is not None:
            commit(ok)
    for problem in summary.problems:
        print(f"scrapy-simhash cdxj: {problem}", file=sys.stderr)
    print(f"scrapy-simhash cdxj: {summary.describe()}", file=sys.stderr)
    return 1 if summary.problems else 0
