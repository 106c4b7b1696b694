"""Reprocess archives: fingerprint every HTML record, then tag (sidecar WARCs) or deduplicate (clusters).

The pipeline: the main process reads records in file order and sends batches
of HTML pages to worker processes, which run
:func:`~scrapy_simhash.page.fingerprint_page` (the expensive part, the same
function the crawl uses); results come back in input order, so index
decisions ("the earlier record") and sidecar contents do not depend on the
number of workers. At most a few batches per worker are in flight, so memory
stays bounded on archives of any size.

Inputs are never modified: ``tag`` writes ``<input>.simhash.warc.gz`` next to
each input (or under ``--out``), first as ``.open``, renamed when the input is
done, so a rerun skips finished inputs and redoes an interrupted one.
"""

from __future__ import annotations

import csv
import json
import os
import re
import sys
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from ..defaults import DISTANCE, MIN_TOKENS
from ..extract import DEFAULT_EXTRACTOR, Extractor
from ..fingerprint import SCHEME, hamming, to_base32
from ..page import fingerprint_page
from .payload import html_page
from .progress import Progress
from .reader import ArchiveReader, ArchiveRecord, ReadProblem
from .records import Duplicate, SimhashFields, metadata_record
from .writer import OPEN_SUFFIX, WarcFileWriter, base_warcinfo_fields, warcinfo_record

SIDECAR_SUFFIX = ".simhash.warc.gz"
BATCH_SIZE = 16
WINDOW_PER_WORKER = 4

_ARCHIVE_NAME = re.compile(r"\.w?arc(\.|$)")
_NOT_ARCHIVES = (".cdx", ".cdxj", ".json", ".idx", ".txt", ".md")


# -- inputs ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Input:
    path: Path
    sidecar: Path


def is_archive_name(name: str) -> bool:
    """Names with a ``.warc``/``.arc`` part (``x.warc.gz``, ``x.arc``, ``x.warc.gz.open``); not sidecars."""
    lower = name.lower()
    if lower.endswith((SIDECAR_SUFFIX, SIDECAR_SUFFIX + OPEN_SUFFIX)) or lower.endswith(_NOT_ARCHIVES):
        return False
    return bool(_ARCHIVE_NAME.search(lower))


def plan_inputs(
    inputs: Iterable[str | os.PathLike[str]], out: str | os.PathLike[str] | None = None
) -> list[Input]:
    """Expand directories (recursively, sorted) and name each input's sidecar.

    The sidecar is ``<name>.simhash.warc.gz`` beside the input; with ``out``, under ``out``
    at the input's path relative to the directory argument it was found in.
    """
    planned: list[Input] = []
    for item in inputs:
        path = Path(item)
        if path.is_dir():
            found = sorted(p for p in path.rglob("*") if p.is_file() and is_archive_name(p.name))
            for file in found:
                rel = file.relative_to(path)
                base = Path(out) / rel.parent if out else file.parent
                planned.append(Input(file, base / (file.name + SIDECAR_SUFFIX)))
        elif path.is_file():
            base = Path(out) if out else path.parent
            planned.append(Input(path, base / (path.name + SIDECAR_SUFFIX)))
        else:
            raise ValueError(f"no such file or directory: {path}")
    seen: dict[Path, Path] = {}
    for entry in planned:
        other = seen.setdefault(entry.sidecar.resolve(), entry.path)
        if other != entry.path:
            raise ValueError(
                f"{other} and {entry.path} would share the sidecar {entry.sidecar}; "
                f"pass their directory instead, or run them separately"
            )
    return planned


# -- fingerprinting (runs in workers) ----------------------------------------------------------------


@dataclass(frozen=True)
class PageTask:
    offset: int
    record_id: str | None
    uri: str | None
    date: str | None
    body: bytes
    encoding: str | None


@dataclass(frozen=True)
class PageResult:
    """One HTML record's fingerprint (``simhash`` None with a ``reason`` when it has none)."""

    file: str
    offset: int
    record_id: str | None
    uri: str | None
    date: str | None
    simhash: int | None
    tokens: int
    reason: str | None


def fingerprint_tasks(
    file: str, tasks: list[PageTask], extractor: Extractor, min_tokens: int
) -> list[PageResult]:
    results = []
    for task in tasks:
        fp = fingerprint_page(task.body, task.uri, task.encoding, extractor=extractor, min_tokens=min_tokens)
        results.append(
            PageResult(
                file, task.offset, task.record_id, task.uri, task.date, fp.simhash, fp.tokens, fp.reason
            )
        )
    return results


# -- the event stream --------------------------------------------------------------------------------


@dataclass
class FileStats:
    records: int = 0
    pages: int = 0
    problems: list[ReadProblem] = field(default_factory=list)

    @property
    def skipped(self) -> bool:
        return any(p.skipped for p in self.problems)


@dataclass(frozen=True)
class FileStart:
    input: Input


@dataclass(frozen=True)
class FileEnd:
    input: Input
    stats: FileStats


@dataclass(frozen=True)
class FileSkipped:
    input: Input
    reason: str


Event = FileStart | FileEnd | FileSkipped | ReadProblem | list[PageResult]


@dataclass
class Options:
    workers: int = 1
    reader: str = "auto"
    extractor: Extractor = DEFAULT_EXTRACTOR
    min_tokens: int = MIN_TOKENS
    distance: int = DISTANCE
    progress: bool = False


class Pipeline:
    """Reads inputs, fingerprints their HTML records (in parallel), yields events in input order."""

    def __init__(self, options: Options, progress: Progress) -> None:
        self.options = options
        self.reader = ArchiveReader(options.reader)
        self.progress = progress

    def _produce(
        self, inputs: list[Input], skip: Callable[[Input], str | None]
    ) -> Iterator[FileStart | FileEnd | FileSkipped | ReadProblem | tuple[str, list[PageTask]]]:
        for entry in inputs:
            reason = skip(entry)
            if reason:
                yield FileSkipped(entry, reason)
                continue
            yield FileStart(entry)
            stats = FileStats()
            file = str(entry.path)
            batch: list[PageTask] = []
            for item in self.reader.read(entry.path):
                if isinstance(item, ReadProblem):
                    stats.problems.append(item)
                    if batch:
                        yield file, batch
                        batch = []
                    yield item
                    continue
                stats.records += 1
                self.progress.update(records=1)
                task = _task(item)
                if task is not None:
                    stats.pages += 1
                    batch.append(task)
                    if len(batch) >= BATCH_SIZE:
                        yield file, batch
                        batch = []
            if batch:
                yield file, batch
            yield FileEnd(entry, stats)

    def run(
        self, inputs: list[Input], skip: Callable[[Input], str | None] = lambda _: None
    ) -> Iterator[Event]:
        opts = self.options
        if opts.workers <= 1:
            for event in self._produce(inputs, skip):
                if isinstance(event, tuple):
                    yield fingerprint_tasks(event[0], event[1], opts.extractor, opts.min_tokens)
                else:
                    yield event
            return
        # Import and warm the extractor here, before the fork, so workers inherit it instead of each
        # paying the import (about a second) on its first page.
        fingerprint_page(b"<html><body><p>warm up</p></body></html>", None, None, extractor=opts.extractor)
        window: deque[Any] = deque()
        limit = opts.workers * WINDOW_PER_WORKER
        with ProcessPoolExecutor(max_workers=opts.workers) as pool:
            for event in self._produce(inputs, skip):
                if isinstance(event, tuple):
                    event = pool.submit(
                        fingerprint_tasks, event[0], event[1], opts.extractor, opts.min_tokens
                    )
                window.append(event)
                while len(window) > limit or (window and not isinstance(window[0], Future)):
                    yield _resolve(window.popleft())
            while window:
                yield _resolve(window.popleft())


def _resolve(event: Any) -> Event:
    return event.result() if isinstance(event, Future) else event


def _task(record: ArchiveRecord) -> PageTask | None:
    page = html_page(record)
    if page is None:
        return None
    return PageTask(record.offset, record.record_id, record.target_uri, record.date, page.body, page.encoding)


# -- shared reporting --------------------------------------------------------------------------------


@dataclass
class RunSummary:
    files: int = 0
    files_skipped_complete: int = 0
    records: int = 0
    pages: int = 0
    fingerprinted: int = 0
    near_duplicates: int = 0
    reasons: dict[str, int] = field(default_factory=dict)
    problems: list[ReadProblem] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def skipped_anything(self) -> bool:
        return any(p.skipped for p in self.problems)

    @property
    def exit_status(self) -> int:
        """0: everything read; 1: finished, but some files or records were skipped (see the report)."""
        return 1 if self.skipped_anything else 0

    def lines(self) -> list[str]:
        rate = self.records / self.seconds if self.seconds else 0.0
        out = [
            f"files: {self.files} processed, {self.files_skipped_complete} already complete",
            f"records: {self.records} read ({rate:,.0f}/s), {self.pages} HTML, "
            f"{self.fingerprinted} fingerprinted, {self.near_duplicates} near-duplicates",
        ]
        if self.reasons:
            out.append("not fingerprinted: " + ", ".join(f"{k} {v}" for k, v in sorted(self.reasons.items())))
        skipped = [p for p in self.problems if p.skipped]
        notes = [p for p in self.problems if not p.skipped]
        out.append(f"problems: {len(skipped)} skipped data, {len(notes)} notices")
        return out


def _count_result(summary: RunSummary, result: PageResult) -> None:
    if result.simhash is None:
        reason = result.reason or "unknown"
        summary.reasons[reason] = summary.reasons.get(reason, 0) + 1
    else:
        summary.fingerprinted += 1


def record_key(result: PageResult) -> str:
    """Index key of a reprocessed record: its file and offset, the address CDX indexes use."""
    return f"{os.path.abspath(result.file)}#{result.offset}"


def index_meta(result: PageResult) -> dict[str, Any]:
    return {
        "url": result.uri,
        "date": result.date,
        "record_id": result.record_id,
        "file": os.path.abspath(result.file),
        "offset": result.offset,
    }


def _duplicate_from(matches: list[Any], key: str) -> tuple[Any, Duplicate] | None:
    for match in matches:
        if match.key == key:
            continue  # this very record, stored by an earlier interrupted run
        meta = match.meta or {}
        return match, Duplicate(
            record_id=meta.get("record_id"),
            uri=meta.get("url"),
            date=meta.get("date"),
            distance=match.distance,
            file=meta.get("file"),
            offset=meta.get("offset"),
        )
    return None


def _report_problem(progress: Progress, problem: ReadProblem) -> None:
    label = "skipped" if problem.skipped else "note"
    progress.message(f"{label}: {problem}")


# -- tag ---------------------------------------------------------------------------------------------


def sidecar_complete(entry: Input) -> str | None:
    return "sidecar complete" if entry.sidecar.exists() else None


def tag(inputs: list[Input], options: Options, index: Any = None, stream: TextIO | None = None) -> RunSummary:
    """Write a sidecar metadata WARC per input; with ``index``, near-duplicate fields too."""
    progress = Progress(len(inputs), enabled=options.progress, stream=stream)
    summary = RunSummary()
    writer: WarcFileWriter | None = None
    current: Input | None = None
    extractor_name = options.extractor.description
    try:
        for event in Pipeline(options, progress).run(inputs, skip=sidecar_complete):
            if isinstance(event, FileSkipped):
                summary.files_skipped_complete += 1
                progress.update(files=1)
            elif isinstance(event, FileStart):
                current = event.input
                writer = _open_sidecar(current, extractor_name)
            elif isinstance(event, ReadProblem):
                summary.problems.append(event)
                _report_problem(progress, event)
            elif isinstance(event, FileEnd):
                summary.files += 1
                summary.records += event.stats.records
                summary.pages += event.stats.pages
                assert writer is not None
                if event.stats.records == 0 and event.stats.skipped:
                    writer.discard()  # refused outright (e.g. unreadable compression): retry next run
                else:
                    writer.close()
                writer = None
                progress.update(files=1)
            else:
                assert writer is not None and current is not None
                for result in event:
                    _count_result(summary, result)
                    if result.simhash is None:
                        continue
                    progress.update(pages=1)
                    duplicate = None
                    if index is not None:
                        key = record_key(result)
                        found = _duplicate_from(
                            index.check_and_add(result.simhash, key, index_meta(result)), key
                        )
                        if found is not None:
                            duplicate = found[1]
                            summary.near_duplicates += 1
                    writer.write(_sidecar_record(current, result, extractor_name, duplicate))
    finally:
        if writer is not None:
            writer.abandon()  # interrupted: the .open file stays, the input is redone next run
        progress.clear()
    summary.seconds = progress.elapsed
    return summary


def _open_sidecar(entry: Input, extractor_name: str) -> WarcFileWriter:
    entry.sidecar.parent.mkdir(parents=True, exist_ok=True)
    writer = WarcFileWriter(entry.sidecar, mode="wb")
    source = os.path.relpath(entry.path, entry.sidecar.parent)
    fields = base_warcinfo_fields(
        [
            (
                "description",
                f"simhash metadata for the records of {source}; offsets are positions in that file",
            ),
            ("source-file", source),
            ("source-size", str(entry.path.stat().st_size)),
            ("simhash-scheme", SCHEME),
            ("text-extractor", extractor_name),
        ]
    )
    writer.write(warcinfo_record(entry.sidecar.name, fields))
    return writer


def _sidecar_record(
    entry: Input, result: PageResult, extractor_name: str, duplicate: Duplicate | None
) -> Any:
    assert result.simhash is not None
    fields = SimhashFields(
        simhash=result.simhash,
        tokens=result.tokens,
        extractor=extractor_name,
        duplicate=duplicate,
        source_file=os.path.relpath(entry.path, entry.sidecar.parent),
        source_offset=result.offset,
    )
    if result.record_id:
        return metadata_record(result.uri, fields, refers_to=result.record_id)
    # ARC records have no id: name the capture by URI and date instead
    return metadata_record(result.uri, fields, refers_to_uri=result.uri, refers_to_date=result.date)


# -- dedupe ------------------------------------------------------------------------------------------


REPORT_FIELDS = ["cluster", "record_id", "uri", "date", "file", "offset", "simhash", "distance"]


def dedupe(
    inputs: list[Input], options: Options, index: Any = None, stream: TextIO | None = None
) -> tuple[RunSummary, list[dict[str, Any]]]:
    """Near-duplicate clusters across all inputs; rows ordered by cluster, the first row its original."""
    progress = Progress(len(inputs), enabled=options.progress, stream=stream)
    summary = RunSummary()
    results: list[PageResult] = []
    try:
        for event in Pipeline(options, progress).run(inputs):
            if isinstance(event, ReadProblem):
                summary.problems.append(event)
                _report_problem(progress, event)
            elif isinstance(event, FileEnd):
                summary.files += 1
                summary.records += event.stats.records
                summary.pages += event.stats.pages
                progress.update(files=1)
            elif isinstance(event, list):
                for result in event:
                    _count_result(summary, result)
                    if result.simhash is not None:
                        progress.update(pages=1)
                        results.append(result)
    finally:
        progress.clear()
    rows = (
        _clusters_with_index(results, index)
        if index is not None
        else _clusters_batch(results, options.distance)
    )
    summary.near_duplicates = sum(
        1 for row in rows if row["distance"] is not None and row["role"] == "duplicate"
    )
    summary.seconds = progress.elapsed
    return summary, rows


def _row(cluster: int, meta: dict[str, Any], simhash: int, distance: int | None, role: str) -> dict[str, Any]:
    return {
        "cluster": cluster,
        "role": role,
        "record_id": meta.get("record_id"),
        "uri": meta.get("url"),
        "date": meta.get("date"),
        "file": meta.get("file"),
        "offset": meta.get("offset"),
        "simhash": to_base32(simhash),
        "distance": distance,
    }


def _clusters_batch(results: list[PageResult], k: int) -> list[dict[str, Any]]:
    from ..index.batch import cluster_groups, clusters

    if len(results) < 2:
        return []
    labels = clusters([r.simhash for r in results], k)
    rows: list[dict[str, Any]] = []
    for number, group in enumerate(cluster_groups(labels)):
        first = results[int(group[0])]
        for position in group:
            member = results[int(position)]
            assert member.simhash is not None and first.simhash is not None
            distance = hamming(member.simhash, first.simhash)
            role = "original" if position == group[0] else "duplicate"
            rows.append(_row(number, index_meta(member), member.simhash, distance, role))
    return rows


def _clusters_with_index(results: list[PageResult], index: Any) -> list[dict[str, Any]]:
    """Clusters of the "within k" graph built from the index's answers (earlier runs' records included)."""
    parent: dict[str, str] = {}
    nodes: dict[str, tuple[dict[str, Any], int]] = {}
    rank: dict[str, tuple[int, int]] = {}  # (position of the record that found it, 0 if already stored)

    def find(key: str) -> str:
        while parent.setdefault(key, key) != key:
            parent[key] = parent[parent[key]]
            key = parent[key]
        return key

    for position, result in enumerate(results):
        assert result.simhash is not None
        key = record_key(result)
        nodes[key] = (index_meta(result), result.simhash)
        rank[key] = (position, 1)
        for match in index.check_and_add(result.simhash, key, index_meta(result)):
            if match.key == key:
                continue
            if match.key not in nodes:
                nodes[match.key] = (dict(match.meta or {}), match.simhash)
                rank[match.key] = (position, 0)
            a, b = find(match.key), find(key)
            if a != b:
                parent[max(a, b, key=rank.__getitem__)] = min(a, b, key=rank.__getitem__)
    groups: dict[str, list[str]] = {}
    for key in sorted(nodes, key=rank.__getitem__):
        groups.setdefault(find(key), []).append(key)
    rows: list[dict[str, Any]] = []
    members_list = [members for members in groups.values() if len(members) > 1]
    for number, members in enumerate(members_list):
        first_hash = nodes[members[0]][1]
        for i, key in enumerate(members):
            meta, value = nodes[key]
            rows.append(
                _row(number, meta, value, hamming(value, first_hash), "original" if i == 0 else "duplicate")
            )
    return rows


def write_report(rows: list[dict[str, Any]], path: str | None, fmt: str | None = None) -> None:
    """JSON Lines (default) or CSV (``fmt="csv"`` or a ``.csv`` file name); ``-`` or None is stdout."""
    fmt = fmt or ("csv" if path and path.lower().endswith(".csv") else "jsonl")
    fields = ["cluster", "role", *REPORT_FIELDS[1:]]
    out: TextIO
    if path in (None, "-"):
        out = sys.stdout
        _write_rows(out, rows, fields, fmt)
        return
    with open(path, "w", encoding="utf-8", newline="") as out:
        _write_rows(out, rows, fields, fmt)


def _write_rows(out: TextIO, rows: list[dict[str, Any]], fields: list[str], fmt: str) -> None:
    if fmt == "csv":
        writer = csv.DictWriter(out, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)
    else:
        for row in rows:
            out.write(json.dumps({k: row[k] for k in fields}, ensure_ascii=False) + "\n")
