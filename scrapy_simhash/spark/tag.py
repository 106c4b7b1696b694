"""``spark tag``: each Spark task writes the sidecar metadata WARC of its own input file.

A task runs the single-machine :func:`scrapy_simhash.warc.reprocess.tag` on its one input, so the
sidecar is written by the very same code (same records, same ``.open`` then rename, left ``.open``
when records of the input were lost, complete sidecars skipped). There is no index: records get
no near-duplicate fields (use ``tag --index`` or ``spark dedupe`` for those). What the task would
have printed (problems, "left unfinished" notes) and its counts go back to the driver, which prints
them in input order with ``tag``'s summary lines and exit status. A failing task never fails the job.
"""

from __future__ import annotations

import io
import logging
import os
import time
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from ..warc.outcome import RunSummary
from ..warc.pipeline import Input, Options, plan_inputs
from ..warc.reader import ReadProblem
from ..warc.reprocess import tag
from .archives import local_path


def tag_archives(
    spark: Any,
    paths: Iterable[str | os.PathLike[str]],
    out: str | os.PathLike[str] | None = None,
    **options: Any,
) -> tuple[RunSummary, list[str]]:
    """Write ``<input>.simhash.warc.gz`` for every input (under ``out`` if given), one task per file.

    ``options`` are those of :class:`~scrapy_simhash.warc.pipeline.Options` (``workers`` is the
    fingerprinting processes of each task, 1 by default; ``progress`` does not apply). Returns the
    merged summary and the lines ``tag`` prints while it runs (problems, notes), in input order.
    """
    opts = replace(Options(), **{**options, "progress": False})
    planned = plan_inputs([local_path(p) for p in paths], local_path(out) if out is not None else None)
    started = time.perf_counter()
    results: list[tuple[int, RunSummary, str]] = []
    if planned:
        tasks = list(enumerate(planned))
        results = (
            spark.sparkContext.parallelize(tasks, len(tasks))
            .map(lambda task: (task[0], *tag_input(task[1], opts)))
            .collect()
        )
    summary = merge(summary for _, summary, _ in sorted(results, key=lambda r: r[0]))
    summary.seconds = time.perf_counter() - started
    lines = [line for _, _, text in sorted(results, key=lambda r: r[0]) for line in text.splitlines()]
    return summary, lines


def tag_input(entry: Input, options: Options) -> tuple[RunSummary, str]:
    """Run on an executor: ``tag`` of one input; never raises (a failure becomes a skipped problem)."""
    logging.getLogger("warcio.recordloader").setLevel(logging.ERROR)  # as the tag command does
    stream = io.StringIO()
    try:
        summary = tag([entry], options, None, stream=stream)
    except Exception as exc:  # a bug or an unwritable sidecar must not fail the job: report it
        problem = ReadProblem(str(entry.path), None, f"file failed: {type(exc).__name__}: {exc}")
        summary = RunSummary(problems=[problem])
        stream.write(f"skipped: {problem}\n")
    return summary, stream.getvalue()


def merge(summaries: Iterable[RunSummary]) -> RunSummary:
    """One summary of several tasks' summaries (counts added, problems in order)."""
    total = RunSummary()
    for part in summaries:
        total.mode = part.mode
        total.by_simhash += part.by_simhash
        total.unsketched += part.unsketched
        total.files += part.files
        total.files_skipped_complete += part.files_skipped_complete
        total.sidecars_not_read += part.sidecars_not_read
        total.records += part.records
        total.pages += part.pages
        total.fingerprinted += part.fingerprinted
        total.near_duplicates += part.near_duplicates
        for reason, count in part.reasons.items():
            total.reasons[reason] = total.reasons.get(reason, 0) + count
        total.problems.extend(part.problems)
    return total
