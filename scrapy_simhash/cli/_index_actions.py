"""The ``scrapy-simhash index`` commands themselves (:mod:`.index` defines their options and imports
this module only to run one)."""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from ..fingerprint import to_base32, to_hex
from ..fingerprint.codecs import parse
from ..fingerprint.minhash import SCHEME as MINHASH_SCHEME
from ..fingerprint.minhash import MinHash
from ..index import (
    IndexCorruptError,
    NearDuplicateIndex,
    SimhashIndexError,
    is_server_uri,
    open_index,
    stored_kind,
)
from ..index.extractor_record import NotedIndex, recorded_extractors
from ..shown import shown_location
from ..warc.progress import RowProgress, elapsed_spinner


def _open(path: str, write: bool = False, mode: str = "verified") -> NearDuplicateIndex:
    if is_server_uri(path):
        # A person is waiting: read-only commands try once (no back-off loop of retry lines) unless the
        # URI asks for retries; compact keeps the crawler's retries.
        asked = "retries" in dict(parse_qsl(urlsplit(path).query))
        return open_index(path, mode=mode) if write or asked else open_index(path, mode=mode, retries=0)
    return open_index(path.removeprefix("file://"), mode=mode, read_only=not write)


def _record(match: Any) -> dict[str, Any]:
    return {
        "key": match.key,
        "simhash": to_base32(match.simhash),
        "simhash_hex": to_hex(match.simhash),
        "distance": match.distance,
        "similarity": match.similarity,
        "seq": match.seq,
        "meta": match.meta,
    }


def _queries(args: argparse.Namespace) -> list[tuple[str, int, MinHash | None]]:
    """(label, simhash, sketch or None) of each query; ValueError (reported by main) for bad input."""
    queries: list[tuple[str, int, MinHash | None]] = [(text, parse(text), None) for text in args.fingerprints]
    if args.minhash is not None:
        if len(queries) != 1:
            raise ValueError("--minhash is the sketch of one page: give exactly one FINGERPRINT with it")
        queries[0] = (queries[0][0], queries[0][1], MinHash.from_text(args.minhash))
    if args.html:
        from ..page import fingerprint_page

        for name in args.html:
            with open(name, "rb") as handle:
                page = fingerprint_page(handle.read())
            if page.simhash is None:
                raise ValueError(f"{name} has no fingerprint ({page.reason})")
            queries.append((name, page.simhash, page.minhash))
    if not queries:
        raise ValueError("nothing to look up: give a FINGERPRINT or --html FILE")
    return queries


def _similarity(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"


def _fail(args: argparse.Namespace, exc: Exception) -> int:
    print(f"scrapy-simhash index {args.index_command}: error: {exc}", file=sys.stderr)
    return 2


def _extractor_fields(index: NotedIndex) -> dict[str, Any]:
    """``extractor`` (None: not recorded, an index written before indexes recorded it) and
    ``extractors_mixed`` (the others stored beside it when mixing was allowed)."""
    recorded, mixed = recorded_extractors(index.notes())
    return {"extractor": recorded, "extractors_mixed": list(mixed)}


def _minhash_info(args: argparse.Namespace) -> int:
    """``index info`` of a MinHash index's directory (``dedupe --method minhash --index``)."""
    try:
        with open_index(args.path.removeprefix("file://"), kind="minhash", read_only=True) as index:
            stats = index.stats()
            extractor = _extractor_fields(index)
            where = index.path
    except SimhashIndexError as exc:
        return _fail(args, exc)
    lines = [
        f"index: {where} (minhash)",
        f"pages: {stats['size']}",
        f"rule: minhash (threshold {stats['threshold']:g}, {stats['num_values']} values)",
        *_extractor_lines(extractor),
    ]
    print("\n".join(lines))
    return 0


def _extractor_lines(extractor: dict[str, Any]) -> list[str]:
    """``index info``'s lines on the extractor an index records, and those mixed into it."""
    recorded = extractor["extractor"]
    lines = [f"extractor: {recorded or 'not recorded (written before indexes recorded their extractor)'}"]
    return lines + [f"mixed with: {other}" for other in extractor["extractors_mixed"]]


def run_info(args: argparse.Namespace) -> int:
    if stored_kind(args.path) == "minhash":
        return _minhash_info(args)
    try:
        with _open(args.path, mode=args.mode) as index:
            stats = index.stats()
            extractor = _extractor_fields(index)
    except SimhashIndexError as exc:
        return _fail(args, exc)
    verified = stats.get("mode") == "verified"
    rule = f"verified (similarity >= {stats['similarity']:g})" if verified else "simhash"
    lines = [
        f"index: {stats.get('path') or shown_location(args.path)} ({stats['backend']})",
        f"pages: {stats['size']}",
        f"k: {stats['k']} (layout {stats['layout']})",
        f"rule: {rule}",
        *_extractor_lines(extractor),
    ]
    print("\n".join(lines))
    return 0


def run_stats(args: argparse.Namespace) -> int:
    try:
        with _open(args.path, mode=args.mode) as index:
            print(json.dumps({**index.stats(), **_extractor_fields(index)}, indent=2, sort_keys=True))
    except SimhashIndexError as exc:
        return _fail(args, exc)
    return 0


def run_query(args: argparse.Namespace) -> int:
    queries = _queries(args)
    sketches = None if args.mode == "simhash" else [sketch for _, _, sketch in queries]
    try:
        with _open(args.path, mode=args.mode) as index:
            hashes = [h for _, h, _ in queries]
            if sketches is None:
                results = index.query_many(hashes, args.k)
            else:
                results = index.query_many(hashes, args.k, sketches=sketches)  # type: ignore[call-arg]
    except SimhashIndexError as exc:
        return _fail(args, exc)
    for (text, h, sketch), matches in zip(queries, results, strict=True):
        if args.format == "json":
            record: dict[str, Any] = {"query": to_base32(h), "matches": [_record(m) for m in matches]}
            if sketch is not None and args.mode != "simhash":
                record["minhash"] = sketch.to_text()
            print(json.dumps(record, ensure_ascii=False))
            continue
        print(f"{text}: {len(matches)} match{'es' if len(matches) != 1 else ''}")
        for m in matches:
            meta = json.dumps(m.meta, ensure_ascii=False) if m.meta else ""
            line = f"  {m.distance}\t{_similarity(m.similarity)}\t{to_base32(m.simhash)}\t{m.key}\t{meta}"
            print(line.rstrip())
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


def _export_batch(out: Any, batch: list[Any], sketch_many: Any, value_bits: int) -> None:
    """Write ``batch``'s records, each page's sketch beside its simhash (read for the whole batch):
    the values as the index keeps them, the low ``minhash_bits`` of each minhash-doc/1 value."""
    sketches = sketch_many([m.key for m in batch]) if sketch_many is not None else {}
    for match in batch:
        record = _record(match)
        del record["distance"], record["similarity"]
        sketch = sketches.get(match.key)
        if sketch is not None:  # beside the simhash; pages stored without one have neither field
            record["minhash"] = sketch.to_text()
            record["minhash_scheme"] = MINHASH_SCHEME
            record["minhash_bits"] = value_bits
        out.write(json.dumps(record, ensure_ascii=False) + "\n")


def run_export(args: argparse.Namespace) -> int:
    try:
        with _open(args.path, mode=args.mode) as index:
            out = sys.stdout
            sketch_many = getattr(index, "sketch_many", None)  # a VerifiedIndex's: 1,000 a round trip
            rule = getattr(index, "rule", None)
            value_bits = rule.value_bits if rule is not None else 32
            rows = RowProgress("export", len(index), enabled=args.progress)
            batch: list[Any] = []
            for match in itertools.chain(rows.wrap(index), [None]):  # None: the end
                if match is not None:
                    batch.append(match)
                if batch and (match is None or len(batch) == 1000):
                    _export_batch(out, batch, sketch_many, value_bits)
                    batch = []
    except (SimhashIndexError, NotImplementedError) as exc:
        return _fail(args, exc)
    return 0


def run_check(args: argparse.Namespace) -> int:
    from ..index.embedded.full_check import check_index

    if is_server_uri(args.path) or stored_kind(args.path) != "simhash":
        return _fail(args, SimhashIndexError(f"no embedded simhash or verified index at {args.path}"))
    try:
        if args.repair:
            before = _generation(args.path)
            with open_index(args.path, verify="full"):  # the writer writes damaged table files again
                pass
            if _generation(args.path) != before:
                print("repair: the table files were written again from the database")
            else:
                print("repair: no table file needed writing again")
        report = check_index(args.path, lambda line: print(line, file=sys.stderr, flush=True))
    except IndexCorruptError as exc:  # the database itself
        print(f"damaged: {exc}")
        return 1
    except (SimhashIndexError, OSError) as exc:
        return _fail(args, exc)
    for note in report.notes:
        print(f"note: {note}")
    for problem in report.problems:
        print(f"damaged: {problem}")
    verdict = "DAMAGED" if report.problems else "ok"
    print(f"{args.path}: {verdict} ({report.rows} rows and {report.files} table files read)")
    return 1 if report.problems else 0


def _generation(path: str) -> int | None:
    """The table generation the index's manifest names (None: none, or unreadable)."""
    from pathlib import Path

    from ..index.tables.manifest import TablesInvalid, read_manifest

    try:
        manifest = read_manifest(Path(path))
    except TablesInvalid:
        return None
    return None if manifest is None else manifest.get("generation")


def run_upgrade(args: argparse.Namespace) -> int:
    from ..index.upgrade import UpgradeError, upgrade

    try:
        report = upgrade(args.old, args.new, lambda line: print(line, file=sys.stderr, flush=True))
    except (UpgradeError, OSError) as exc:
        return _fail(args, exc)
    except SimhashIndexError as exc:  # damage: UpgradeDamaged, or a row the new index refuses
        print(f"scrapy-simhash index upgrade: error: {exc}", file=sys.stderr)
        return 1
    print(f"upgraded {args.old} (format {report.found_format}) to {args.new}: {report.pages} pages")
    print(
        f"with sketch: {report.with_sketch} (moved from a sketch store: {report.moved}, narrowed to 8 bits: "
        f"{report.narrowed}); sketches without a page dropped: {report.orphans}"
    )
    if report.payload_digests:
        print(f"payload digests (for revisit records) copied: {report.payload_digests}")
    if report.captures:
        print(f"last captures of URLs (for change kinds) copied: {report.captures}")
    if report.unchecked:
        print(f"rows that had no checksum, now checksummed as they were: {report.unchecked}")
    if report.without_sketch:
        print(
            f"without sketch: {report.without_sketch} pages, judged by simhash alone; to judge them by the "
            "verified rule, re-fingerprint them: re-add them from their WARCs or re-crawl into a new index"
        )
    return 0
