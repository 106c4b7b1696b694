"""What a ``tag``/``dedupe`` run reports and stores: its summary, each page's index key and meta, the
duplicate an index answer names. Shared by :mod:`.reprocess`, :mod:`.dedupe` and ``spark tag``."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from ..defaults import MODE
from .pipeline import FileStats, PageResult
from .progress import Progress
from .read.inputs import InputProblem
from .read.reader import ReadProblem
from .records import Duplicate
from .revisits import RevisitCounts


@dataclass
class RunSummary:
    files: int = 0
    files_skipped_complete: int = 0
    sidecars_not_read: int = 0
    records: int = 0
    pages: int = 0
    fingerprinted: int = 0
    near_duplicates: int = 0
    mode: str = MODE
    by_simhash: int = 0
    """Near-duplicate decisions made by simhash alone (a side without sketch, or simhash mode)."""
    unsketched: int = 0
    """Verified mode: fingerprinted pages without a sketch, judged by simhash alone."""
    reasons: dict[str, int] = field(default_factory=dict)
    revisits: RevisitCounts = field(default_factory=RevisitCounts)
    """Revisit records read: exact duplicates of a record in the input, or not, and those skipped."""
    problems: list[ReadProblem] = field(default_factory=list)
    seconds: float = 0.0

    def add_problem(self, problem: ReadProblem, progress: Progress) -> None:
        """Keep a reading problem for the summary and show it at once."""
        if isinstance(problem, InputProblem) and problem.kind == "sidecar":
            self.sidecars_not_read += 1
        self.problems.append(problem)
        report_problem(progress, problem)

    def add_file(self, stats: FileStats) -> None:
        """Count a file read to its end."""
        self.files += 1
        self.records += stats.records
        self.pages += stats.pages

    @property
    def skipped_anything(self) -> bool:
        return any(p.skipped for p in self.problems) or "worker_crash" in self.reasons

    @property
    def exit_status(self) -> int:
        """0: everything read; 1: finished, but some files or records were skipped (see the report)."""
        return 1 if self.skipped_anything else 0

    def decisions_line(self) -> str:
        """How the near-duplicates were decided: how many by simhash alone (old pages without sketch)."""
        if self.mode == "minhash":
            return f"decisions: minhash method, {self.near_duplicates} near-duplicates by estimated Jaccard"
        line = (
            f"decisions: {self.mode} mode, {self.near_duplicates - self.by_simhash} near-duplicates verified "
            f"by sketch, {self.by_simhash} by simhash alone"
        )
        if self.unsketched:
            line += f"; {self.unsketched} pages without sketch judged by simhash alone"
        return line

    def lines(self) -> list[str]:
        rate = self.records / self.seconds if self.seconds else 0.0
        files = f"files: {self.files} processed, {self.files_skipped_complete} already complete"
        if self.sidecars_not_read:
            files += f", {self.sidecars_not_read} sidecars given as input not read"
        out = [
            files,
            f"records: {self.records} read ({rate:,.0f}/s), {self.pages} HTML, "
            f"{self.fingerprinted} fingerprinted, {self.near_duplicates} near-duplicates",
        ]
        out.append(self.decisions_line())
        if self.reasons:
            out.append("not fingerprinted: " + ", ".join(f"{k} {v}" for k, v in sorted(self.reasons.items())))
        if self.revisits.any:
            out.append(self.revisits.line())
        skipped = [p for p in self.problems if p.skipped]
        notes = [p for p in self.problems if not p.skipped]
        out.append(f"problems: {len(skipped)} skipped data, {len(notes)} notices")
        return out


def count_result(summary: RunSummary, result: PageResult) -> None:
    if result.simhash is None:
        reason = result.reason or "unknown"
        summary.reasons[reason] = summary.reasons.get(reason, 0) + 1
    else:
        summary.fingerprinted += 1
        if summary.mode == "verified" and result.minhash is None:
            summary.unsketched += 1


def record_key(result: PageResult) -> str:
    """Index key of a reprocessed record: its file and offset, the address CDX indexes use."""
    return f"{os.path.abspath(result.file)}#{result.offset}"


def check_and_add(index: Any, result: PageResult) -> list[Any]:
    """``index.check_and_add`` of a page, with its sketch when it has one and the index keeps sketches
    (a :class:`~scrapy_simhash.index.verified.verified.VerifiedIndex`); a simhash-only index gets the
    simhash."""
    assert result.simhash is not None
    key, meta = record_key(result), index_meta(result)
    if result.minhash is not None and getattr(index, "rule", None) is not None:
        return index.check_and_add(result.simhash, key, meta, sketch=result.minhash)
    return index.check_and_add(result.simhash, key, meta)


def index_meta(result: PageResult) -> dict[str, Any]:
    """What an index stores with a page: where its record is, and its main text's token count (for
    ``dedupe --keep longest`` against pages stored by earlier runs)."""
    return {
        "url": result.uri,
        "date": result.date,
        "record_id": result.record_id,
        "file": os.path.abspath(result.file),
        "offset": result.offset,
        "tokens": result.tokens,
    }


def relative_file(file: str | None, directory: str | os.PathLike[str]) -> str | None:
    """``file`` relative to ``directory`` (``../`` as needed), so links survive moving a collection.

    Absolute only when no relative path exists (another drive on Windows).
    """
    if not file:
        return file
    try:
        return os.path.relpath(os.path.abspath(file), os.path.abspath(directory))
    except ValueError:
        return file


def same_record(meta: dict[str, Any] | None, record_id: str | None) -> bool:
    """Whether an index entry (its meta) is the crawl's entry for the record ``record_id``.

    A crawl stores each page by URL with the id of the response record it wrote, and no file, so
    reprocessing the crawl's WARC meets each page again. An entry of a reprocessing run names its
    file: the same id in another file is a copy of the record (another archive of it), and reported."""
    meta = meta or {}
    return bool(record_id) and meta.get("record_id") == record_id and not meta.get("file")


def duplicate_from(
    matches: list[Any],
    key: str,
    relative_to: str | os.PathLike[str] | None = None,
    record_id: str | None = None,
) -> tuple[Any, Duplicate] | None:
    """The first match that is not ``key`` itself (nor, by ``record_id``, the same record stored under
    another key), as a :class:`Duplicate`; with ``relative_to`` (the directory of the sidecar being
    written) its file is given relative to that directory."""
    for match in matches:
        if match.key == key or same_record(match.meta, record_id):
            continue  # this very record, stored by an earlier interrupted run or by the crawl
        meta = match.meta or {}
        return match, Duplicate(
            record_id=meta.get("record_id"),
            uri=meta.get("url"),
            date=meta.get("date"),
            distance=match.distance,
            file=meta.get("file") if relative_to is None else relative_file(meta.get("file"), relative_to),
            offset=meta.get("offset"),
            similarity=getattr(match, "similarity", None),
        )
    return None


def report_problem(progress: Progress, problem: ReadProblem) -> None:
    label = "skipped" if problem.skipped else "note"
    progress.message(f"{label}: {problem}")
