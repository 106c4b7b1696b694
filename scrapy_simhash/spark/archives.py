"""Fingerprint WARC/ARC files on Spark: one task per file, the same reader and ``fingerprint_page`` as tag.

Each executor reads its file with :class:`~scrapy_simhash.warc.read.reader.ArchiveReader` and turns
every record into a page task exactly as the single-machine pipeline does
(:func:`scrapy_simhash.warc.pipeline.fingerprint_tasks`), so the simhash of a record is the
same whichever tool computed it. Reading problems become rows (``problem`` set, ``skipped``
saying whether data was lost); a damaged file never fails the job.

Local paths and ``file:`` URIs are streamed from a filesystem every executor can open (a shared
filesystem on a cluster); any other URI Spark's Hadoop filesystem reads (``hdfs:``, ``s3a:``, ...)
is listed and read through Spark (:mod:`.sources`). Directories are expanded on the driver in
``tag``'s order either way, so input positions are ``tag``'s.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import replace
from functools import reduce
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from ..warc.pipeline import Options, _task, fingerprint_tasks
from ..warc.read.inputs import plan_inputs
from ..warc.read.reader import ArchiveReader, ReadProblem
from .convert import to_signed
from .sources import (
    NOT_READ_BY_SPARK,
    SPARK_BINARY_LIMIT,
    Source,
    binary_files,
    is_remote,
    list_sources,
    spooled,
)

COLUMNS = [
    ("input", "int"),
    ("file", "string"),
    ("offset", "long"),
    ("record_id", "string"),
    ("uri", "string"),
    ("date", "string"),
    ("simhash", "long"),
    ("tokens", "int"),
    ("reason", "string"),
    ("problem", "string"),
    ("skipped", "boolean"),
    ("minhash", "binary"),
    ("payload_digest", "string"),
    ("text_digest", "string"),
]
"""``input``: position of the file in the expanded input list; (input, offset) is the order
``dedupe`` calls "earlier". ``simhash`` is the signed LongType reading of the 64 bits. ``minhash``
is the page's minhash-doc/1 sketch in its byte form (``MinHash.to_bytes()``), null in simhash mode
(``mode="simhash"``) and for rows without a fingerprint. ``payload_digest`` and ``text_digest``: the
record's payload digest and the main text's digest (:class:`~scrapy_simhash.warc.pipeline.PageResult`),
what tells how a URL's captures changed."""


def local_path(path: str | os.PathLike[str]) -> str:
    """A local path from a path or ``file:`` URI; other schemes are refused with a clear error."""
    text = os.fspath(path)
    parsed = urlparse(text)
    if parsed.scheme == "file":
        return unquote(parsed.path)
    if parsed.scheme and len(parsed.scheme) > 1:
        raise ValueError(f"{text}: only local paths and file: URIs are read (on a shared filesystem)")
    return text


def fingerprint_archives(
    spark: Any,
    paths: Iterable[str | os.PathLike[str]],
    *,
    via_hadoop: bool = False,
    max_file_bytes: int = SPARK_BINARY_LIMIT,
    **options: Any,
) -> Any:
    """DataFrame of one row per HTML record (and one per reading problem) of the archives in ``paths``.

    ``options`` are those of :class:`scrapy_simhash.warc.pipeline.Options` (``reader``,
    ``extractor``, ``min_tokens``, ``max_body_size``, ``function``, ``mode``: sketches are computed
    in verified mode, the default); ``workers`` and ``progress`` do not apply. Local paths and
    ``file:`` URIs are read one Spark task per file, streamed from the shared filesystem. Other URIs
    (``hdfs:``, ``s3a:``, ...; all paths with ``via_hadoop``) go through Spark's Hadoop filesystem:
    see :mod:`scrapy_simhash.spark.sources`; files over ``max_file_bytes`` are problem rows.
    """
    opts = replace(Options(), **options)
    names = [os.fspath(p) for p in paths]
    if not via_hadoop and not any(is_remote(name) for name in names):
        planned = plan_inputs([local_path(name) for name in names])
        return _local_frame(spark, [(i, str(e.path), e.not_read) for i, e in enumerate(planned)], opts)
    cap = min(max_file_bytes, SPARK_BINARY_LIMIT)
    tasks: list[tuple[int, str, str | None]] = []
    sources: list[Source] = []
    for name in names:  # positions in argument order, whichever way each argument is read
        first = len(tasks) + len(sources)
        if via_hadoop or is_remote(name):
            sources.extend(list_sources(spark, name, first, cap))
        else:
            for offset, entry in enumerate(plan_inputs([local_path(name)])):
                tasks.append((first + offset, str(entry.path), entry.not_read))
    frames = [_local_frame(spark, tasks, opts)] if tasks else []
    if sources:
        frames.append(_hadoop_frame(spark, sources, opts))
    return reduce(lambda a, b: a.union(b), frames)


def _schema() -> Any:
    from pyspark.sql.types import StructType

    return StructType.fromDDL(", ".join(f"{name} {kind}" for name, kind in COLUMNS))


def _local_frame(spark: Any, tasks: list[tuple[int, str, str | None]], opts: Options) -> Any:
    if not tasks:
        return spark.createDataFrame([], _schema())
    rdd = spark.sparkContext.parallelize(tasks, len(tasks)).flatMap(
        lambda task: read_file(task[0], task[1], task[2], opts)
    )
    return spark.createDataFrame(rdd, _schema())


def _hadoop_frame(spark: Any, sources: list[Source], opts: Options) -> Any:
    """Rows of the listed sources: problems known on the driver, the files Spark read, and a problem
    row for every listed file Spark gave no bytes for (gone since, or passed over): none is lost."""
    from pyspark.sql import functions as F

    problems = [
        _problem_row(s.position, ReadProblem(s.uri, None, s.not_read, skipped=True))
        for s in sources
        if s.not_read
    ]
    frame = spark.createDataFrame(problems, _schema())
    wanted = [s for s in sources if not s.not_read]
    if not wanted:
        return frame
    positions: dict[str, list[int]] = {}
    for source in wanted:
        positions.setdefault(source.uri, []).append(source.position)
    files = binary_files(spark, list(positions))
    rows = files.select("path", "content").rdd.flatMap(
        lambda row: read_bytes(positions.get(row.path, []), row.path, row.content, opts)
    )
    listed = spark.createDataFrame([(s.position, s.uri) for s in wanted], "position int, uri string")
    gone = listed.join(files.select("path"), listed.uri == files.path, "left_anti")
    missing = {"input": F.col("position"), "file": F.col("uri"), "tokens": F.lit(0)}
    missing |= {"problem": F.lit(NOT_READ_BY_SPARK), "skipped": F.lit(True)}
    gone = gone.select(*[(missing.get(name, F.lit(None))).cast(kind).alias(name) for name, kind in COLUMNS])
    return frame.union(spark.createDataFrame(rows, _schema())).union(gone)


def read_bytes(positions: list[int], uri: str, content: bytes, options: Options) -> Iterator[tuple[Any, ...]]:
    """Rows of one file Spark brought to the executor (once per input position it was given at),
    read from a temporary local copy and named by ``uri``; never raises."""
    try:
        with spooled(uri, bytes(content)) as local:
            del content
            for position in positions:
                yield from read_file(position, local, None, options, name=uri)
    except Exception as exc:  # e.g. no room for the copy: report it, never fail the job
        for position in positions:
            yield _problem_row(position, ReadProblem(uri, None, f"file failed: {type(exc).__name__}: {exc}"))


def read_file(
    position: int, path: str, not_read: str | None, options: Options, name: str | None = None
) -> Iterator[tuple[Any, ...]]:
    """Rows of one file, as the executor task sees it, under ``name`` (default: ``path``); never raises."""
    name = path if name is None else name
    if not_read:
        yield _problem_row(position, ReadProblem(name, None, not_read, skipped=True))
        return
    try:
        yield from _read(position, path, options, name)
    except Exception as exc:  # a bug or an unreadable file must not fail the job: report it
        yield _problem_row(position, ReadProblem(name, None, f"file failed: {type(exc).__name__}: {exc}"))


def _read(position: int, path: str, options: Options, name: str) -> Iterator[tuple[Any, ...]]:
    reader = ArchiveReader(options.reader)
    for item in reader.read(Path(path)):
        if isinstance(item, ReadProblem):
            yield _problem_row(position, item if item.file == name else replace(item, file=name))
            continue
        task = _task(item, options.max_body_size)
        if isinstance(task, ReadProblem):  # a page this installation cannot decode (a missing module)
            yield _problem_row(position, replace(task, file=name))
            continue
        if task is None:
            continue
        for result in fingerprint_tasks(
            name, [task], options.extractor, options.min_tokens, options.function, options.sketches
        ):
            yield (
                position,
                result.file,
                result.offset,
                result.record_id,
                result.uri,
                result.date,
                None if result.simhash is None else to_signed(result.simhash),
                result.tokens,
                result.reason,
                None,
                None,
                None if result.minhash is None else result.minhash.to_bytes(),
                result.payload_digest,
                result.text_digest,
            )


def _problem_row(position: int, problem: ReadProblem) -> tuple[Any, ...]:
    return (
        position,
        problem.file,
        problem.offset,
        None,
        None,
        None,
        None,
        0,
        None,
        problem.reason,
        problem.skipped,
        None,
        None,
        None,
    )
