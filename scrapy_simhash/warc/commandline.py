"""``tag`` and ``dedupe`` as commands: their arguments, options and run functions, in the WARC layer.

Both front ends call this module: the ``scrapy-simhash`` console script
(:mod:`scrapy_simhash.cli.warc`) and the ``scrapy simhash-tag`` /
``simhash-dedupe`` commands (:mod:`.commands`), so they cannot drift apart and
nothing outside the CLI package imports it.

Exit status: 0 when every input was read completely, 1 when the run finished
but some files or records were skipped (each reported on stderr with file,
offset and reason), 2 on a usage or environment error.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import sys
from collections.abc import Callable
from typing import Any, TypeVar

from ..defaults import DISTANCE, MIN_TOKENS, MODE, MODES, SIMILARITY
from ..extract import DEFAULT_MAX_BYTES, Extractor, extractor_names, get_extractor
from ..extract.registry import DEFAULT_NAME as DEFAULT_EXTRACTOR_NAME
from ..keep import DEFAULT_KEEP, KEEP_POLICIES
from ..shown import shown_location

T = TypeVar("T")

TAG_HELP = "write a sidecar WARC of simhash metadata records for each WARC/ARC input"
TAG_DESCRIPTION = (
    "Fingerprint every HTML response/resource record of the inputs and write "
    "<input>.simhash.warc.gz next to each (inputs are never modified). Without --index only the "
    "fingerprints are written: nothing is detected as a near-duplicate (in verified mode each record "
    "also carries the page's sketch). With --index each page is looked up and stored, and "
    "near-duplicates of earlier pages get near-duplicate-of-* fields "
    "(with near-duplicate-distance and, when both pages have sketches, near-duplicate-similarity). "
    "--mode verified (the default) decides by the pages' minhash-doc/1 sketches: a shared LSH band and "
    "estimated Jaccard similarity at least --similarity; --mode simhash by Hamming distance (--distance). "
    "Pages stored without a sketch (indexes written before sketches) are judged by simhash alone. "
    "Inputs whose sidecar is complete are skipped, so an interrupted run resumes; sidecars given "
    "as inputs (a glob such as *.warc.gz matches them) are not read, with a note."
)
DEDUPE_HELP = "near-duplicate clusters across WARC/ARC files"
DEDUPE_DESCRIPTION = (
    "Fingerprint every HTML record of the inputs and report clusters of near-duplicates "
    "(record id, URI, date, file, offset, distance, similarity and method) as JSON Lines or CSV. "
    "--mode verified (the default) pairs pages whose minhash-doc/1 sketches share an LSH band and "
    "estimate Jaccard similarity at least --similarity; --mode simhash pairs pages within --distance "
    "bits; pages without a sketch are judged by simhash alone. With --method minhash, "
    "pages are compared by MinHash sketches (minhash-doc/1) and paired when their estimated Jaccard "
    "similarity is at least --threshold; the report then gives each record's similarity to its "
    "cluster's original instead of the distance."
)
DEFAULT_THRESHOLD = 0.8


def _workers(value: str) -> int:
    number = int(value)
    if number < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return number


def _threshold(value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {value!r}") from None
    if not 0.0 < number <= 1.0:
        raise argparse.ArgumentTypeError("must be greater than 0 and at most 1")
    return number


def _size(value: str) -> int:
    number = int(value)
    if number < 1:
        raise argparse.ArgumentTypeError("must be at least 1 byte")
    return number


def add_extractor_argument(parser: argparse.ArgumentParser) -> None:
    """``--extractor NAME``: the main-text extractor, for every command that fingerprints HTML.

    The default is None, so that the ``scrapy simhash-*`` commands can tell "not given" from the
    default and take the project's ``SIMHASH_EXTRACTOR``; :func:`extractor_from` resolves it.
    """
    parser.add_argument(
        "--extractor",
        choices=extractor_names(),
        metavar="NAME",
        help=f"main-text extractor: {', '.join(extractor_names())} ({DEFAULT_EXTRACTOR_NAME}); "
        "its name and version are written next to every fingerprint",
    )


def extractor_from(args: argparse.Namespace, max_bytes: int = DEFAULT_MAX_BYTES) -> Extractor:
    """The extractor ``--extractor`` names (the default when not given), capped at ``max_bytes``;
    ValueError (status 2) naming the option when it cannot be used (its library is missing).

    ``args.extractor`` may also be a configured :class:`Extractor` (the project's, set by the
    ``scrapy simhash-*`` commands), which is kept with its options.
    """
    chosen = getattr(args, "extractor", None)
    if isinstance(chosen, Extractor):
        return dataclasses.replace(chosen, max_bytes=max_bytes)
    name = chosen or DEFAULT_EXTRACTOR_NAME
    try:
        return get_extractor(name, max_bytes=max_bytes)
    except (ImportError, ValueError) as exc:
        raise ValueError(f"--extractor {name}: {exc}") from None


def add_rule_arguments(parser: argparse.ArgumentParser) -> None:
    """``--mode``, ``--similarity`` and ``--distance``: the decision rule (also used by ``spark dedupe``)."""
    parser.add_argument(
        "--mode",
        choices=MODES,
        help=f"how a near-duplicate is decided ({MODE}): verified = the sketches share an LSH band and "
        "their estimated Jaccard similarity is at least --similarity; simhash = within --distance bits "
        "(the earlier rule, no sketches computed)",
    )
    parser.add_argument(
        "--similarity",
        type=_threshold,
        metavar="J",
        help=f"verified mode: the least estimated Jaccard similarity of a near-duplicate ({SIMILARITY})",
    )
    parser.add_argument(
        "--distance",
        "-k",
        type=int,
        default=DISTANCE,
        help=f"max Hamming distance in simhash mode, and for pages without a sketch ({DISTANCE})",
    )


def add_common_arguments(parser: argparse.ArgumentParser, index_help: str) -> None:
    parser.add_argument(
        "inputs",
        nargs="+",
        metavar="INPUT",
        help="WARC/ARC files (gzip or not), WACZ packages (their WARCs are read in place and named "
        "PACKAGE.wacz#archive/NAME), or directories (searched recursively for them)",
    )
    parser.add_argument("--index", help=index_help)
    parser.add_argument(
        "--mix-extractors",
        action="store_true",
        help="let pages made by another extractor (name or options) than the one --index records be "
        "stored in it (their fingerprints are not comparable; default: refuse the run)",
    )
    parser.add_argument(
        "--workers",
        type=_workers,
        default=os.cpu_count() or 1,
        help="fingerprinting processes (default: CPUs)",
    )
    add_rule_arguments(parser)
    add_extractor_argument(parser)
    parser.add_argument(
        "--min-tokens",
        type=int,
        default=MIN_TOKENS,
        help=f"pages with fewer tokens are not fingerprinted ({MIN_TOKENS})",
    )
    parser.add_argument(
        "--max-body-size",
        type=_size,
        default=DEFAULT_MAX_BYTES,
        metavar="BYTES",
        help=f"bodies larger than this once decoded are not fingerprinted (too_large); "
        f"decoding stops there, so gzip bombs cost no memory ({DEFAULT_MAX_BYTES})",
    )
    parser.add_argument(
        "--reader",
        choices=["auto", "warcio", "fastwarc"],
        default="auto",
        help="record reader: FastWARC when installed (auto), else warcio; same output either way",
    )
    progress = parser.add_mutually_exclusive_group()
    progress.add_argument(
        "--progress",
        dest="progress",
        action="store_true",
        default=True,
        help="show progress on stderr (default): a bar on a terminal, elsewhere a plain line every 10 s "
        "and at the end",
    )
    progress.add_argument("--no-progress", dest="progress", action="store_false", help="no progress output")


def add_tag_arguments(parser: argparse.ArgumentParser) -> None:
    add_common_arguments(
        parser,
        "near-duplicate index: a directory or a redis:// URI; without it only fingerprints are "
        "written and nothing is detected as a near-duplicate",
    )
    parser.add_argument("--out", metavar="DIR", help="write sidecars here instead of next to each input")


def add_keep_argument(parser: argparse.ArgumentParser) -> None:
    """``--keep``: which member of a cluster is its original (also used by ``spark dedupe``)."""
    parser.add_argument(
        "--keep",
        choices=KEEP_POLICIES,
        default=DEFAULT_KEEP,
        help=f"which record of a cluster is the original ({DEFAULT_KEEP}): earliest or latest capture "
        "date, longest main text, or shortest URL; ties go to the earlier capture, then URL, file name "
        "and offset",
    )


def add_dedupe_arguments(parser: argparse.ArgumentParser) -> None:
    add_common_arguments(
        parser,
        "near-duplicate index: a directory or a redis:// URI (clusters then include pages stored by "
        "earlier runs); without it the inputs are compared with each other only",
    )
    parser.add_argument(
        "--report", metavar="FILE", help="write clusters here (.csv for CSV); default: stdout"
    )
    parser.add_argument(
        "--format", choices=["jsonl", "csv"], help="report format (default: from FILE, else jsonl)"
    )
    parser.add_argument(
        "--method",
        choices=["simhash", "minhash"],
        help="default: the --mode rule; simhash: the same as --mode simhash; minhash: the MinHash-only "
        "method, estimated Jaccard similarity of word-shingle sets at least --threshold, no band rule "
        "(--index is then a MinHash index)",
    )
    parser.add_argument(
        "--threshold",
        type=_threshold,
        metavar="J",
        help=f"with --method minhash: the least estimated Jaccard similarity of a pair ({DEFAULT_THRESHOLD}; "
        "an existing --index keeps the threshold it was created with)",
    )
    add_keep_argument(parser)


def run_mode(args: argparse.Namespace) -> str:
    """The decision mode of a run: ``--mode``, ``simhash`` for ``--method simhash``, else the default.

    ValueError (status 2) for options that would otherwise be silently ignored or contradict
    each other: ``--similarity`` in simhash mode, ``--mode`` with ``--method minhash``,
    ``--method simhash --mode verified``."""
    method, mode = getattr(args, "method", None), getattr(args, "mode", None)
    similarity = getattr(args, "similarity", None)
    if method == "minhash":
        if mode is not None or similarity is not None:
            raise ValueError("--mode and --similarity do not apply to --method minhash; it uses --threshold")
        return "minhash"
    if method == "simhash":
        if mode == "verified":
            raise ValueError("--method simhash is --mode simhash: it cannot be --mode verified")
        mode = "simhash"
    mode = mode or MODE
    if mode == "simhash" and similarity is not None:
        raise ValueError("--similarity applies to --mode verified only; simhash mode uses --distance")
    return mode


def dedupe_method(args: argparse.Namespace) -> tuple[str, float]:
    """``(method, threshold)`` from parsed arguments: ``rule`` (the ``--mode`` rule) or ``minhash``;
    ValueError (status 2) for ``--threshold`` without ``--method minhash``, which would otherwise be
    silently ignored."""
    run_mode(args)
    method = getattr(args, "method", None)
    threshold = getattr(args, "threshold", None)
    if method != "minhash":
        if threshold is not None:
            raise ValueError(
                "--threshold applies to --method minhash only; verified mode uses --similarity, "
                "simhash uses --distance"
            )
        return "rule", DEFAULT_THRESHOLD
    return method, DEFAULT_THRESHOLD if threshold is None else threshold


def options_from(args: argparse.Namespace) -> Any:
    """:class:`~.pipeline.Options` from parsed arguments; raises ValueError on a bad value."""
    from .pipeline import Options

    # warcio logs "Replacing spaces in invalid WARC-Target-URI" per record of old archives: noise here
    logging.getLogger("warcio.recordloader").setLevel(logging.ERROR)
    if args.distance < 0 or args.distance > 64:
        raise ValueError(f"--distance must be between 0 and 64, not {args.distance}")
    max_body = getattr(args, "max_body_size", DEFAULT_MAX_BYTES)
    mode = run_mode(args)
    similarity = getattr(args, "similarity", None)
    return Options(
        mode="simhash" if mode == "minhash" else mode,
        similarity=SIMILARITY if similarity is None else similarity,
        workers=args.workers,
        reader=args.reader,
        extractor=extractor_from(args, max_body),
        min_tokens=args.min_tokens,
        distance=args.distance,
        progress=args.progress,
        max_body_size=max_body,
    )


def _open_index(args: argparse.Namespace, extractor: str | None) -> Any:
    if not args.index:
        return None
    from ..index import SimhashIndexError, open_index

    index: Any
    try:
        mode = run_mode(args)
        _check_kind(args, mode)
        if mode == "minhash":  # a new one gets the threshold, 0.8 by default
            index = open_index(args.index, kind="minhash", threshold=args.threshold)
        else:
            index = open_index(
                args.index, k=args.distance, mode=mode, similarity=getattr(args, "similarity", None)
            )
    except SimhashIndexError as exc:  # locked, corrupt, unreachable: a usage/environment error (status 2)
        raise ValueError(f"cannot open the index {shown_location(args.index)}: {exc}") from exc
    if extractor is not None and not hasattr(index, "notes"):  # the Redis MinHash index keeps none
        print(
            f"warning: the MinHash index {shown_location(args.index)} cannot record the extractor of its "
            f"pages (a Redis MinHash index keeps no notes): every run writing to it must use the same "
            f"extractor, this run's is {extractor}",
            file=sys.stderr,
        )
    elif extractor is not None:
        try:
            _check_extractor(index, args, extractor)
        except BaseException:
            index.close()
            raise
    return index


def _check_extractor(index: Any, args: argparse.Namespace, extractor: str) -> None:
    """ValueError (status 2) when ``--index`` records another extractor and ``--mix-extractors`` is off."""
    from ..index import SimhashIndexError
    from ..index.extractor_record import ExtractorMismatch, check_extractor, describe, notice

    try:
        check = check_extractor(index, extractor, mix=getattr(args, "mix_extractors", False))
    except ExtractorMismatch as exc:
        way_back = (
            f"Pass --extractor {exc.other_name} (the index's extractor), re-" if exc.other_name else "Re-"
        )
        raise ValueError(
            f"the index {shown_location(args.index)} stores pages fingerprinted by the extractor "
            f"{describe(exc.recorded, exc.before_records)}, and this run's is {exc.current} "
            f"({exc.differences}): their fingerprints are not comparable. {way_back}fingerprint into a new "
            "index (--index NEW_DIR), or pass --mix-extractors to store this run's pages beside them"
        ) from exc
    except SimhashIndexError as exc:
        raise ValueError(f"cannot open the index {shown_location(args.index)}: {exc}") from exc
    warning = notice(check, shown_location(args.index), "this run")
    if warning is not None:
        print(f"warning: {warning}", file=sys.stderr)


def _check_kind(args: argparse.Namespace, mode: str) -> None:
    """ValueError (status 2) when ``--index`` is a directory of the other kind, in the command's options."""
    from ..index import stored_kind

    kind = stored_kind(args.index)
    if kind == "minhash" and mode != "minhash":
        if hasattr(args, "method"):
            fix = "add --method minhash to use it, or give --index another directory"
        else:
            fix = "only dedupe --method minhash uses one: give --index another directory"
        raise ValueError(
            f"{shown_location(args.index)} holds a MinHash index (written with --method minhash): {fix}"
        )
    if kind == "simhash" and mode == "minhash":
        raise ValueError(
            f"{shown_location(args.index)} holds a simhash index, which --method minhash cannot use: "
            "leave out --method minhash to use it, or give --index another directory"
        )


def run_with_index(args: argparse.Namespace, function: Callable[[Any], T], extractor: str | None = None) -> T:
    """``function(index)`` with the index open; an index failure mid-run is reported, not a traceback.

    ``extractor``: the description of the run's extractor, checked against the one the index records.

    Sidecars finished before the failure stay; the interrupted one is redone by the next run.
    """
    from ..index import SimhashIndexError

    index = _open_index(args, extractor)
    try:
        return function(index)
    except SimhashIndexError as exc:
        raise ValueError(f"index error, run stopped (rerun to resume): {exc}") from exc
    finally:
        if index is not None:
            index.close()


def run_tag(args: argparse.Namespace) -> int:
    """``tag`` from parsed arguments; prints the summary, returns the exit status."""
    from .outcome import RunSummary
    from .reprocess import plan_inputs, tag

    inputs = plan_inputs(args.inputs, args.out)
    options = options_from(args)

    def run(index: Any) -> RunSummary:
        captures = _open_captures(args) if index is not None else None
        try:
            return tag(inputs, options, index, captures=captures)
        finally:
            if captures is not None:
                captures.close()

    summary = run_with_index(args, run, options.extractor.description)
    for line in summary.lines():
        print(line)
    return summary.exit_status


def _open_captures(args: argparse.Namespace) -> Any:
    """The last-capture store beside ``--index`` (what ``tag`` compares each page with and updates);
    None, with a warning, when it cannot be opened: the run then compares only its own inputs."""
    from ..index.archive.captures import CaptureStoreError, open_captures

    try:
        return open_captures(args.index)
    except CaptureStoreError as exc:
        print(
            f"warning: the last captures beside {shown_location(args.index)} cannot be used ({exc}): "
            "text changes are found among this run's inputs only",
            file=sys.stderr,
        )
        return None


def run_dedupe(args: argparse.Namespace) -> int:
    """``dedupe`` from parsed arguments; writes the report, prints the summary, returns the exit status."""
    from .reprocess import dedupe, plan_inputs, write_report

    method, threshold = dedupe_method(args)
    inputs = plan_inputs(args.inputs)
    options = options_from(args)
    summary, rows = run_with_index(
        args,
        lambda index: dedupe(inputs, options, index, method=method, threshold=threshold, keep=args.keep),
        options.extractor.description,
    )
    write_report(rows, args.report, args.format, method)
    clustered = [row for row in rows if row["cluster"] is not None]  # not: revisits of records not in input
    clusters = len({row["cluster"] for row in clustered})
    out = sys.stdout if args.report not in (None, "-") else sys.stderr
    for line in summary.lines():
        print(line, file=out)
    redundant = len(clustered) - clusters
    print(f"clusters: {clusters} covering {len(clustered)} records ({redundant} redundant)", file=out)
    print(f"originals: chosen by --keep {args.keep}", file=out)
    return summary.exit_status
