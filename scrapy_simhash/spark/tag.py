"""``spark tag``: each Spark task writes the sidecar metadata WARC of its own input file.

A task runs the single-machine :func:`scrapy_simhash.warc.reprocess.tag` on its one input, so the
sidecar is written by the very same code (same records, same ``.open`` then rename, left ``.open``
when records of the input were lost, complete sidecars skipped). There is no index: records get
no near-duplicate fields (use ``tag --index`` or ``spark dedupe`` for those). What the task would
have printed (problems, "left unfinished" notes) and its counts go back to the driver, which prints
them in input order with ``tag``'s summary lines and exit status. A failing task never fails the job.
Inputs on ``hdfs:``, ``s3a:``, ... arrive as bytes from Spark (:mod:`.sources`): the task tags a local
copy, and the sidecar (under ``--out``) and the messages name the URI.
"""

from __future__ import annotations

import io
import logging
import os
import time
from collections.abc import Iterable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..warc.outcome import RunSummary
from ..warc.pipeline import Options
from ..warc.read.inputs import SIDECAR_SUFFIX, Input, InputProblem, is_sidecar_name, plan_inputs
from ..warc.read.reader import ReadProblem
from ..warc.reprocess import tag
from .archives import local_path
from .sources import NOT_READ_BY_SPARK, SPARK_BINARY_LIMIT, binary_files, is_remote, list_sources, spooled

Result = tuple[int, RunSummary, str]
"""(input position, its summary, what tag printed for it)."""


def tag_archives(
    spark: Any,
    paths: Iterable[str | os.PathLike[str]],
    out: str | os.PathLike[str] | None = None,
    *,
    via_hadoop: bool = False,
    max_file_bytes: int = SPARK_BINARY_LIMIT,
    **options: Any,
) -> tuple[RunSummary, list[str]]:
    """Write ``<input>.simhash.warc.gz`` for every input (under ``out`` if given), one task per file.

    ``options`` are those of :class:`~scrapy_simhash.warc.pipeline.Options` (``workers`` is the
    fingerprinting processes of each task, 1 by default; ``progress`` does not apply). Returns the
    merged summary and the lines ``tag`` prints while it runs (problems, notes), in input order.
    URIs of other filesystems (``hdfs:``, ``s3a:``, ...; every path with ``via_hadoop``) are read
    through Spark (:mod:`.sources`); their sidecars go under ``out``, which is then required, at
    the path ``tag`` would give them there, and name the URI as their ``source-file``.
    """
    opts = replace(Options(), **{**options, "progress": False})
    names = [os.fspath(p) for p in paths]
    started = time.perf_counter()
    if via_hadoop or any(is_remote(name) for name in names):
        cap = min(max_file_bytes, SPARK_BINARY_LIMIT)
        results = _tag_through_hadoop(spark, names, out, via_hadoop, cap, opts)
    else:
        planned = plan_inputs([local_path(p) for p in names], local_path(out) if out is not None else None)
        results = _tag_local(spark, list(enumerate(planned)), opts)
    results.sort(key=lambda r: r[0])
    summary = merge(summary for _, summary, _ in results)
    summary.seconds = time.perf_counter() - started
    lines = [line for _, _, text in results for line in text.splitlines()]
    return summary, lines


def _tag_local(spark: Any, tasks: list[tuple[int, Input]], opts: Options) -> list[Result]:
    if not tasks:
        return []
    return (
        spark.sparkContext.parallelize(tasks, len(tasks))
        .map(lambda task: (task[0], *tag_input(task[1], opts)))
        .collect()
    )


def _tag_through_hadoop(
    spark: Any,
    names: list[str],
    out: str | os.PathLike[str] | None,
    via_hadoop: bool,
    cap: int,
    opts: Options,
) -> list[Result]:
    """Local arguments as ever; the others listed on the driver and tagged from the bytes Spark
    brings. Inputs not to be read, and complete sidecars, are settled on the driver, reading nothing."""
    if out is None:
        raise ValueError(
            "inputs read through Spark's Hadoop filesystem (hdfs:, s3a:, ...) get their sidecars under "
            "--out DIR (a local or shared directory every executor writes to): pass --out"
        )
    base = Path(local_path(out))
    results: list[Result] = []
    local: list[tuple[int, Input]] = []
    wanted: dict[str, list[tuple[int, Path]]] = {}
    sidecars: dict[Path, str] = {}
    position = 0
    for name in names:
        if via_hadoop or is_remote(name):
            for source in list_sources(spark, name, position, cap):
                position = source.position + 1
                sidecar = base / (source.rel + SIDECAR_SUFFIX)
                if source.not_read:
                    results.append((source.position, *_not_read(source.uri, source.not_read, opts)))
                    continue
                _claim(sidecars, sidecar, source.uri)
                if sidecar.exists():  # complete: tag skips it, so nothing needs reading
                    results.append(
                        (source.position, RunSummary(mode=opts.mode, files_skipped_complete=1), "")
                    )
                else:
                    wanted.setdefault(source.uri, []).append((source.position, sidecar))
        else:
            for entry in plan_inputs([local_path(name)], base):
                if not entry.not_read:
                    _claim(sidecars, entry.sidecar, str(entry.path))
                local.append((position, entry))
                position += 1
    results.extend(_tag_local(spark, local, opts))
    if wanted:
        rows = binary_files(spark, list(wanted)).select("path", "content").rdd
        done = rows.flatMap(lambda row: tag_bytes(wanted.get(row.path, []), row.path, row.content, opts))
        results.extend(done.collect())
        seen = {position for position, _, _ in results}
        for uri, targets in wanted.items():
            for position, _ in targets:
                if position not in seen:
                    results.append((position, *_not_read(uri, NOT_READ_BY_SPARK, opts)))
    return results


def _claim(sidecars: dict[Path, str], sidecar: Path, origin: str) -> None:
    other = sidecars.setdefault(sidecar.resolve(), origin)
    if other != origin:
        raise ValueError(
            f"{other} and {origin} would share the sidecar {sidecar}; "
            f"pass their directory instead, or run them separately"
        )


def _not_read(uri: str, reason: str, opts: Options) -> tuple[RunSummary, str]:
    """What ``tag`` reports for an input it does not read (a sidecar given as input is a note)."""
    sidecar = is_sidecar_name(uri.rsplit("/", 1)[-1])
    problem = InputProblem(uri, None, reason, skipped=not sidecar, kind="sidecar" if sidecar else "input")
    summary = RunSummary(mode=opts.mode, problems=[problem], sidecars_not_read=int(sidecar))
    return summary, f"{'note' if sidecar else 'skipped'}: {problem}\n"


def tag_bytes(
    targets: list[tuple[int, Path]], uri: str, content: bytes, options: Options
) -> Iterator[Result]:
    """Run on an executor: ``tag`` of one file Spark brought, from a temporary local copy, its
    sidecar naming ``uri`` as its source and its messages naming ``uri``; never raises."""
    try:
        with spooled(uri, bytes(content)) as local:
            del content
            for position, sidecar in targets:
                summary, text = tag_input(Input(Path(local), sidecar, source=uri), options)
                summary.problems = [p if p.file != local else replace(p, file=uri) for p in summary.problems]
                yield position, summary, text.replace(local, uri)
    except Exception as exc:  # e.g. no room for the copy: report it, never fail the job
        for position, _ in targets:
            problem = ReadProblem(uri, None, f"file failed: {type(exc).__name__}: {exc}")
            yield position, RunSummary(mode=options.mode, problems=[problem]), f"skipped: {problem}\n"


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
