"""``scrapy-simhash index info|stats|query|compact|export|check PATH``: inspect and maintain an index;
``scrapy-simhash index upgrade OLD NEW``: convert one written by an earlier development version.

``stats``, ``query`` and ``export`` open a local index read-only, so they work while a
crawler is writing to it; ``compact`` needs the write lock. PATH may also be a
``redis://`` URI (where the backend supports the command).

The index is opened in verified mode (the default decision rule) unless ``--mode simhash``:
``query`` then takes a sketch (``--minhash``, or ``--html FILE`` fingerprinted with its sketch)
and prints each match's distance and similarity; ``export`` writes each page's sketch beside its
simhash; ``stats`` counts the pages stored without a sketch (judged by simhash alone). ``info`` and
``stats`` show the extractor the index's pages were made with (:mod:`..index.extractor_record`).
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "index",
        help="inspect or maintain a near-duplicate index (info, stats, query, compact, export, check, "
        "upgrade)",
        description="Inspect or maintain a near-duplicate index: a directory, or a redis:// URI.",
    )
    commands = parser.add_subparsers(dest="index_command", metavar="ACTION", required=True)

    info = commands.add_parser(
        "info",
        help="what the index is: pages, k, layout, decision rule, extractor",
        description="Print what the index is, one fact a line: its location, pages stored, k and "
        "layout, decision rule, and the extractor its pages were made with (and any other extractor "
        "mixed into it); for a MinHash index (dedupe --method minhash --index), its threshold instead "
        "of k. Read-only: safe beside a running crawl.",
    )
    info.add_argument("path", help="index directory or redis:// URI")
    _add_mode_option(info)
    info.set_defaults(func=_action("run_info"))

    stats = commands.add_parser(
        "stats",
        help="sizes and counters as JSON",
        description="Print the index's sizes and counters as one JSON object: pages stored, the layout "
        "and k it was built with, its decision rule, and how its pages are spread over the in-memory and "
        "on-disk layers. Read-only: safe beside a running crawl.",
    )
    stats.add_argument("path", help="index directory or redis:// URI")
    _add_mode_option(stats)
    stats.set_defaults(func=_action("run_stats"))

    query = commands.add_parser(
        "query",
        help="stored pages near the given ones (fingerprints, a sketch, HTML files)",
        description="Stored pages that the decision rule calls near-duplicates of each query: a "
        "FINGERPRINT (judged by simhash alone unless --minhash gives its sketch), or an --html FILE "
        "(fingerprinted with its sketch). Each match shows its distance (bits) and similarity "
        "(estimated Jaccard of the sketches; - when decided by simhash alone).",
    )
    query.add_argument("path", help="index directory or redis:// URI")
    query.add_argument("fingerprints", nargs="*", metavar="FINGERPRINT", help="base32 (13 chars) or hex (16)")
    query.add_argument(
        "--minhash",
        metavar="TEXT",
        help="the minhash-doc/1 sketch of the one FINGERPRINT (as `scrapy-simhash fingerprint "
        "--scheme minhash` prints it)",
    )
    query.add_argument(
        "--html",
        action="append",
        default=[],
        metavar="FILE",
        help="an HTML page to fingerprint (simhash and sketch) and look up; may be repeated",
    )
    query.add_argument("-k", type=int, default=None, help="simhash distance (default: the index's k)")
    query.add_argument("--format", choices=["text", "json"], default="text")
    _add_mode_option(query)
    query.set_defaults(func=_action("run_query"))

    compact = commands.add_parser(
        "compact",
        help="merge recent inserts into the on-disk tables",
        description="Merge the recent inserts into the sorted on-disk tables now, instead of waiting for "
        "the index to do it on its own, then print the stats as `index stats` does. Opens the index as its "
        "writer: not while a crawl writes to it. Answers do not change, only where they are read from.",
    )
    compact.add_argument("path", help="index directory or redis:// URI")
    _add_progress_option(compact)
    compact.set_defaults(func=_action("run_compact"))

    export = commands.add_parser(
        "export",
        help="every stored page as JSON lines, oldest first (simhash, and minhash where stored)",
    )
    export.add_argument("path", help="index directory or redis:// URI")
    _add_progress_option(export)
    _add_mode_option(export)
    export.set_defaults(func=_action("run_export"))

    check = commands.add_parser(
        "check",
        help="read the whole index and report any damage (exit 1 if found)",
        description="Read the whole embedded index once and report any damage: SQLite's integrity_check "
        "of the database, every row against its checksum, every table file against its CRC-32. Opening an "
        "index runs SQLite's check only after an unclean shutdown (a crash, a kill, a power cut), and checks "
        "the table files' CRC-32s in the background; damage at rest inside the database (a disk, a copy) is "
        "found here: run it from cron, or after copying an index. Read-only (unless --repair): safe beside a "
        "running crawl. Exit 0 when sound, 1 when damage was found, 2 on other errors.",
    )
    check.add_argument("path", help="index directory")
    check.add_argument(
        "--repair",
        action="store_true",
        help='first open the index as its writer with every check (verify="full"): damaged table files are '
        "written again from the database (the database itself cannot be rebuilt: restore it from a backup)",
    )
    check.set_defaults(func=_action("run_check"))

    upgrade = commands.add_parser(
        "upgrade",
        help="convert an index written by an earlier development version into this version's format",
        description="Convert the embedded index OLD, written by an earlier development version, into a new "
        "index NEW in this version's format (which refuses to open the old one). OLD is only read; NEW must "
        "not exist and appears whole or not at all. Every page keeps its key, fingerprint, meta and age; "
        "sketches become 8-bit; pages stored without a sketch stay so (judged by simhash alone). Exit 1 "
        "when OLD is damaged (nothing is written), 2 on other errors.",
    )
    upgrade.add_argument("old", metavar="OLD", help="the old index directory (read only)")
    upgrade.add_argument("new", metavar="NEW", help="where to write the converted index (must not exist)")
    upgrade.set_defaults(func=_action("run_upgrade"))


def _add_mode_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--mode",
        choices=["verified", "simhash"],
        default="verified",
        help="verified (default): the simhash store and the sketch store, the default rule; simhash: "
        "the simhash store alone (distance <= k, sketches ignored)",
    )


def _add_progress_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--no-progress",
        dest="progress",
        action="store_false",
        help="no progress on stderr (default: a bar on a terminal, elsewhere a line every 10 s "
        "and at the end)",
    )


def _action(name: str) -> Callable[[argparse.Namespace], int]:
    """The command ``name`` of :mod:`._index_actions`, imported when it runs: building the parser (every
    ``scrapy-simhash`` command, ``--help`` too) does not pay for numpy and the index."""

    def run(args: argparse.Namespace) -> int:
        return int(getattr(importlib.import_module(f"{__package__}._index_actions"), name)(args))

    run.__name__ = name
    return run
