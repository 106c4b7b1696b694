"""The reprocessing pipeline shared by ``tag`` and ``dedupe``: parallel fingerprinting and events over
the planned inputs (:mod:`.read.inputs`).

The main process reads records in file order and sends batches of HTML pages
to worker processes, which run :func:`~scrapy_simhash.page.fingerprint_page`
(the expensive part, the same function the crawl uses). Results come back in
input order, so index decisions ("the earlier record") and outputs do not
depend on the number of workers. At most a few batches per worker are in
flight, so memory stays bounded on archives of any size.
"""

from __future__ import annotations

import multiprocessing
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from typing import Any

from ..decision import Rule
from ..defaults import DISTANCE, MIN_TOKENS, MODE, MODES, SIMILARITY
from ..extract import DEFAULT_EXTRACTOR, DEFAULT_MAX_BYTES, Extractor
from ..fingerprint.minhash import MinHash
from ..page import PageFingerprint, fingerprint_page
from ..workers import exit_with_parent
from .progress import Progress
from .read.inputs import Input, InputProblem, is_sidecar_name
from .read.payload import html_page, record_payload_digest
from .read.reader import ArchiveReader, ArchiveRecord, ReadProblem
from .records import valid_date
from .revisits import RevisitBook

BATCH_SIZE = 16
DATE_NOTES_PER_FILE = 3
"""Invalid dates listed one by one per file; the rest are counted in one note (one writer, one bug)."""
WINDOW_PER_WORKER = 4


# -- fingerprinting (runs in workers) ----------------------------------------------------------------


@dataclass(frozen=True)
class PageTask:
    offset: int
    record_id: str | None
    uri: str | None
    date: str | None
    body: bytes
    encoding: str | None
    reason: str | None = None
    """Already known not to be fingerprinted (``too_large``): the worker only reports it."""
    payload_digest: str | None = None
    """The record's payload digest (:func:`~.payload.record_payload_digest`)."""


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
    minhash: MinHash | None = None
    """The page's sketch, in runs that use one (:attr:`Options.sketches`); None in simhash mode."""
    payload_digest: str | None = None
    """The record's payload digest, ``sha1:<BASE32>`` (:func:`~.payload.record_payload_digest`)."""
    text_digest: str | None = None
    """The digest of the page's main text (:func:`~scrapy_simhash.page.text_digest`); None without
    a fingerprint, or from a replacement fingerprint function that gives none."""


FingerprintFunction = Callable[..., PageFingerprint]


def unfingerprinted(file: str, task: PageTask, reason: str) -> PageResult:
    """The result of a page that has no fingerprint, for ``reason``; its record's digest is kept."""
    simhash, tokens = None, 0
    return PageResult(
        file,
        task.offset,
        task.record_id,
        task.uri,
        task.date,
        simhash,
        tokens,
        reason,
        payload_digest=task.payload_digest,
    )


def fingerprint_tasks(
    file: str,
    tasks: list[PageTask],
    extractor: Extractor,
    min_tokens: int,
    function: FingerprintFunction = fingerprint_page,
    minhash: bool = False,
) -> list[PageResult]:
    """Fingerprint a batch; ``minhash`` keeps each page's sketch (verified mode, ``--method minhash``).

    ``fingerprint_page`` is told whether to sketch, so simhash-mode runs pay nothing for sketches;
    a replacement function is never passed the option, so functions written before sketches keep
    working (their pages have the sketch the function gives, or none: then judged by simhash).
    """
    results = []
    extra = {"minhash": minhash} if function is fingerprint_page else {}
    for task in tasks:
        if task.reason is not None:
            results.append(unfingerprinted(file, task, task.reason))
            continue
        fp = function(task.body, task.uri, task.encoding, extractor=extractor, min_tokens=min_tokens, **extra)
        results.append(
            PageResult(
                file,
                task.offset,
                task.record_id,
                task.uri,
                task.date,
                fp.simhash,
                fp.tokens,
                fp.reason,
                getattr(fp, "minhash", None) if minhash else None,
                payload_digest=task.payload_digest,
                text_digest=getattr(fp, "text_digest", None) if fp.simhash is not None else None,
            )
        )
    return results


@dataclass
class _Batch:
    file: str
    tasks: list[PageTask]
    future: Future[list[PageResult]]
    generation: int
    """Which pool it was sent to: after a crash only the first failed batch replaces the pool."""


class _CrashTolerantPool:
    """A process pool that outlives a worker crash (lxml and friends can take a process down).

    When the pool breaks, it is replaced and every batch that was in flight is
    redone page by page; a page that breaks a worker again is reported with
    the reason ``worker_crash`` and the run goes on.
    """

    def __init__(self, options: Options) -> None:
        self.options = options
        self.pool = self._new_pool()
        self.generation = 0

    def _new_pool(self) -> ProcessPoolExecutor:
        """Workers forked from this process where the platform can fork, whatever the interpreter's default
        (Python 3.14 made it forkserver on Linux): they inherit the extractor :meth:`_Pipeline.run` warmed,
        where a fresh interpreter would pay its import (about a second) on its first page, and they can run
        the fingerprint functions tests and experiments define anywhere. Reprocessing runs no reactor
        whose threads and sockets a fork would copy, as a crawl does (its workers are started by
        :mod:`scrapy_simhash.workers`)."""
        context = (
            multiprocessing.get_context("fork") if "fork" in multiprocessing.get_all_start_methods() else None
        )
        return ProcessPoolExecutor(
            max_workers=self.options.workers, initializer=exit_with_parent, mp_context=context
        )

    def _fingerprint(self, file: str, tasks: list[PageTask]) -> Future[list[PageResult]]:
        opts = self.options
        return self.pool.submit(
            fingerprint_tasks, file, tasks, opts.extractor, opts.min_tokens, opts.function, opts.sketches
        )

    def submit(self, file: str, tasks: list[PageTask]) -> _Batch:
        return _Batch(file, tasks, self._fingerprint(file, tasks), self.generation)

    def result(self, batch: _Batch) -> list[PageResult]:
        try:
            return batch.future.result()
        except BrokenProcessPool:
            self._restart(batch.generation)
        results = []
        for task in batch.tasks:
            generation = self.generation
            try:
                results.extend(self._fingerprint(batch.file, [task]).result())
            except BrokenProcessPool:
                self._restart(generation)
                results.append(unfingerprinted(batch.file, task, "worker_crash"))
        return results

    def _restart(self, broken_generation: int) -> None:
        if broken_generation != self.generation:
            return  # that pool was already replaced
        self.pool.shutdown(wait=False, cancel_futures=True)
        self.pool = self._new_pool()
        self.generation += 1

    def close(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)


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
    """How to reprocess; ``function`` (a module-level function, so workers can import it) replaces
    :func:`~scrapy_simhash.page.fingerprint_page`, for tests and experiments."""

    workers: int = 1
    reader: str = "auto"
    extractor: Extractor = DEFAULT_EXTRACTOR
    min_tokens: int = MIN_TOKENS
    distance: int = DISTANCE
    progress: bool = False
    function: FingerprintFunction = fingerprint_page
    max_body_size: int = DEFAULT_MAX_BYTES
    """Bodies larger than this once decoded are ``too_large``; decoding stops there (gzip bombs)."""
    minhash: bool = False
    """Workers compute each page's minhash-doc/1 sketch even in simhash mode (``dedupe --method minhash``)."""
    mode: str = MODE
    """``verified`` (the default: workers sketch every page, decisions by
    :data:`~scrapy_simhash.decision.DEFAULT_RULE`) or ``simhash`` (distance <= ``distance``, no sketches)."""
    similarity: float = SIMILARITY
    """Verified mode: the least estimated Jaccard similarity of a near-duplicate pair."""

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, not {self.mode!r}")
        if not 0.0 < float(self.similarity) <= 1.0:
            raise ValueError(f"similarity must be greater than 0 and at most 1, not {self.similarity}")

    @property
    def sketches(self) -> bool:
        """Whether the workers compute sketches (verified mode, or ``--method minhash``)."""
        return self.minhash or self.mode == "verified"

    @property
    def rule(self) -> Rule:
        """The decision rule of this run (the shipped rule with this run's mode, distance, similarity)."""
        return Rule(mode=self.mode, distance=self.distance, similarity=self.similarity)


class Pipeline:
    """Reads inputs, fingerprints their HTML records (in parallel), yields events in input order."""

    def __init__(self, options: Options, progress: Progress) -> None:
        self.options = options
        self.reader = ArchiveReader(options.reader)
        self.progress = progress
        self.revisits = RevisitBook()
        """The inputs' possible originals and revisit records, resolved once every input is read."""

    def _produce(
        self, inputs: list[Input], skip: Callable[[Input], str | None]
    ) -> Iterator[FileStart | FileEnd | FileSkipped | ReadProblem | tuple[str, list[PageTask]]]:
        for entry in inputs:
            if entry.not_read:
                kind = "sidecar" if is_sidecar_name(entry.path.name) else "input"
                yield InputProblem(str(entry.path), None, entry.not_read, skipped=entry.lost, kind=kind)
                self.progress.update(files=1)
                continue
            reason = skip(entry)
            if reason:
                self.progress.file_skipped(entry.path)
                yield FileSkipped(entry, reason)
                continue
            yield FileStart(entry)
            self.progress.file_started(entry.path)
            stats = FileStats()
            file = str(entry.path)
            batch: list[PageTask] = []
            bad_dates = 0
            for item in self.reader.read(entry.path):
                if isinstance(item, ReadProblem):
                    stats.problems.append(item)
                    if batch:
                        yield file, batch
                        batch = []
                    yield item
                    continue
                stats.records += 1
                self.progress.update(records=1, offset=item.offset)
                task = _task(item, self.options.max_body_size)
                damaged = self.revisits.see(item, page=isinstance(task, PageTask))
                if damaged is not None:  # a revisit that names no original: noted, the run goes on
                    stats.problems.append(damaged)
                    if batch:
                        yield file, batch
                        batch = []
                    yield damaged
                if isinstance(task, ReadProblem):  # a page this installation cannot decode: not lost silently
                    stats.problems.append(task)
                    if batch:
                        yield file, batch
                        batch = []
                    yield task
                    continue
                if task is not None:
                    if not valid_date(item.date, item.archive_format):
                        bad_dates += 1
                        if bad_dates <= DATE_NOTES_PER_FILE:
                            yield _date_note(item)
                    stats.pages += 1
                    batch.append(task)
                    if len(batch) >= BATCH_SIZE:
                        yield file, batch
                        batch = []
            if batch:
                yield file, batch
            if bad_dates > DATE_NOTES_PER_FILE:
                more = bad_dates - DATE_NOTES_PER_FILE
                yield ReadProblem(
                    file,
                    None,
                    f"{more} more pages with an invalid or missing date, copied as they are "
                    f"({bad_dates} in all; only the first {DATE_NOTES_PER_FILE} are listed)",
                    skipped=False,
                )
            self.progress.file_done(entry.path)
            yield FileEnd(entry, stats)

    def run(
        self, inputs: list[Input], skip: Callable[[Input], str | None] = lambda _: None
    ) -> Iterator[Event]:
        opts = self.options
        self.progress.plan(entry.path for entry in inputs if not entry.not_read)
        if opts.workers <= 1:
            for event in self._produce(inputs, skip):
                if isinstance(event, tuple):
                    yield fingerprint_tasks(
                        event[0], event[1], opts.extractor, opts.min_tokens, opts.function, opts.sketches
                    )
                else:
                    yield event
            return
        # Import and warm the extractor here, before the fork, so workers inherit it instead of each
        # paying the import (about a second) on its first page.
        fingerprint_page(b"<html><body><p>warm up</p></body></html>", None, None, extractor=opts.extractor)
        window: deque[Any] = deque()
        limit = opts.workers * WINDOW_PER_WORKER
        pool = _CrashTolerantPool(opts)
        try:
            for event in self._produce(inputs, skip):
                window.append(pool.submit(*event) if isinstance(event, tuple) else event)
                while len(window) > limit or (window and not isinstance(window[0], _Batch)):
                    head = window.popleft()
                    yield pool.result(head) if isinstance(head, _Batch) else head
            while window:
                head = window.popleft()
                yield pool.result(head) if isinstance(head, _Batch) else head
        finally:
            pool.close()


def _task(record: ArchiveRecord, max_body_size: int) -> PageTask | ReadProblem | None:
    """The page to fingerprint; None for records that carry none; a problem for a page whose body needs
    a module that is not installed (skipped, so the input is read again once it is)."""
    if record.clipped:
        return None  # its end is lost (reported as skipped): a partial page would get a misleading simhash
    page = html_page(record, max_body_size)
    if page is None:
        return None
    if page.undecodable:
        return ReadProblem(record.file, record.offset, f"{page.undecodable}; the page is not fingerprinted")
    reason = "too_large" if page.too_large else None
    return PageTask(
        record.offset,
        record.record_id,
        record.target_uri,
        record.date,
        page.body,
        page.encoding,
        reason,
        record_payload_digest(record),
    )


def _date_note(record: ArchiveRecord) -> ReadProblem:
    """Not a loss: the page is fingerprinted and its date copied as it is (it names the capture)."""
    name = "date" if record.archive_format == "arc" else "WARC-Date"
    what = f"invalid {name} {record.date!r}" if record.date else f"no {name}"
    return ReadProblem(record.file, record.offset, f"{what}; copied as it is", skipped=False)
