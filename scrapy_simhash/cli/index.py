"""``scrapy-simhash index stats|query|compact|export PATH``: inspect and maintain an index.

``stats``, ``query`` and ``export`` open a local index read-only, so they work while a
crawler is writing to it; ``compact`` needs the write lock. PATH may also be a
``redis://`` URI (where the backend supports the command).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from ..fingerprint import to_base32, to_hex
from ..fingerprint.codecs import parse
from ..index import NearDuplicateIndex, SimhashIndexError, is_server_uri, open_index
from ..warc.progress import RowProgress, elapsed_spinner


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "index",
        help="inspect or maintain a near-duplicate index (stats, query, compact, export)",
        description="Inspect or maintain a near-duplicate index: a directory, or a redis:// URI.",
    )
    commands = parser.add_subparsers(dest="index_command", metavar="ACTION", required=True)

    stats = commands.add_parser("stats", help="sizes and counters as JSON")
    stats.add_argument("path", help="index directory or redis:// URI")
    stats.set_defaults(func=run_stats)

    query = commands.add_parser("query", help="stored fingerprints near the given ones")
    query.add_argument("path", help="index directory or redis:// URI")
    query.add_argument("fingerprints", nargs="+", metavar="FINGERPRINT", help="base32 (13 chars) or hex (16)")
    query.add_argument("-k", type=int, default=None, help="distance (default: the index's k)")
    query.add_argument("--format", choices=["text", "json"], default="text")
    query.set_defaults(func=run_query)

    compact = commands.add_parser("compact", help="merge recent inserts into the on-disk tables")
    compact.add_argument("path", help="index directory or redis:// URI")
    _add_progress_option(compact)
    compact.set_defaults(func=run_compact)

    export = commands.add_parser("export", help="every stored fingerprint as JSON lines, oldest first")
    export.add_argument("path", help="index directory or redis:// URI")
    _add_progress_option(export)
    export.set_defaults(func=run_export)


def _add_progress_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--no-progress",
        dest="progress",
        action="store_false",
        help="no progress on stderr (default: a bar on a terminal, elsewhere a line every 10 s "
        "and at the end)",
    )


def _open(path: str, write: bool = False) -> NearDuplicateIndex:
    if is_server_uri(path):
        # A person is waiting: read-only commands try once (no back-off loop of retry lines) unless the
        # URI asks for retries; compact keeps the crawler's retries.
        asked = "retries" in dict(parse_qsl(urlsplit(path).query))
        return open_index(path) if write or asked else open_index(path, retries=0)
    from ..index.embedded import SimhashIndex

    return SimhashIndex(path.removeprefix("file://"), read_only=not write)


def _record(match: Any) -> dict[str, Any]:
    return {
        "key": match.key,
        "simhash": to_base32(match.simhash),
        "simhash_hex": to_hex(match.simhash),
        "distance": match.distance,
        "seq": match.seq,
        "meta": match.meta,
    }


def _fail(args: argparse.Namespace, exc: Exception) -> int:
    print(f"scrapy-simhash index {args.index_command}: error: {exc}", file=sys.stderr)
    return 2


def run_stats(args: argparse.Namespace) -> int:
    try:
        with _open(args.path) as index:
            print(json.dumps(index.stats(), indent=2, sort_keys=True))
    except SimhashIndexError as exc:
        return _fail(args, exc)
    return 0


def run_query(args: argparse.Namespace) -> int:
    fingerprints = [parse(text) for text in args.fingerprints]  # ValueError: reported by main
    try:
        with _open(args.path) as index:
            results = index.query_many(fingerprints, args.k)
    except SimhashIndexError as exc:
        return _fail(args, exc)
    for text, h, matches in zip(args.fingerprints, fingerprints, results, strict=True):
        if args.format == "json":
            print(
                json.dumps(
                    {"query": to_base32(h), "matches": [_record(m) for m in matches]}, ensure_ascii=False
                )
            )
            continue
        print(f"{text}: {len(matches)} match{'es' if len(matches) != 1 else ''}")
        for m in matches:
            meta = json.dumps(m.meta, ensure_ascii=False) if m.meta else ""
            print(f"  {m.distance}\t{to_base32(m.simhash)}\t{m.key}\t{meta}".rstrip())
    return 0


def run_compact(args: argparse.Namespace) -> int:
    try:
        with _open(args.path, write=True) as index:
            with elapsed_spinner(f"compacting {len(index):,} fingerprints", enabled=args.progress):
                index.compact()
            print(json.dumps(index.stats(), indent=2, sort_keys=True))
    except SimhashIndexError as exc:
        return _fail(args, exc)
    return 0


def run_export(args: argparse.Namespace) -> int:
    try:
        with _open(args.path) as index:
            out = sys.stdout
            rows = RowProgress("export", len(index), enabled=args.progress)
            for match in rows.wrap(index):
                record = _record(match)
                del record["distance"]
                out.write(json.dumps(record, ensure_ascii=False) + "\n")
    except (SimhashIndexError, NotImplementedError) as exc:
        return _fail(args, exc)
    return 0
