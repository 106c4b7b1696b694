"""Fingerprint WARC/ARC files on Spark: one task per file, the same reader and ``fingerprint_page`` as tag.

Each executor reads its file with :class:`~scrapy_simhash.warc.reader.ArchiveReader` and turns
every record into a page task exactly as the single-machine pipeline does
(:func:`scrapy_simhash.warc.pipeline.fingerprint_tasks`), so the simhash of a record is the
same whichever tool computed it. Reading problems become rows (``problem`` set, ``skipped``
saying whether data was lost); a damaged file never fails the job.

Paths are local paths or ``file:`` URIs that every executor can open (a shared filesystem on
a cluster); directories are expanded on the driver like ``tag`` does.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from ..warc.pipeline import Options, _task, fingerprint_tasks, plan_inputs
from ..warc.reader import ArchiveReader, ReadProblem
from .convert import to_signed

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
]
"""``input``: position of the file in the expanded input list; (input, offset) is the order
``dedupe`` calls "earlier". ``simhash`` is the signed LongType reading of the 64 bits. ``minhash``
is the page's minhash-doc/1 sketch in its byte form (``MinHash.to_bytes()``), null in simhash mode
(``mode="simhash"``) and for rows without a fingerprint."""


def local_path(path: str | os.PathLike[str]) -> str:
    """A local path from a path or ``file:`` URI; other schemes are refused with a clear error."""
    text = os.fspath(path)
    parsed = urlparse(text)
    if parsed.scheme == "file":
        return unquote(parsed.path)
    if parsed.scheme and len(parsed.scheme) > 1:
        raise ValueError(f"{text}: only local paths and file: URIs are read (on a shared filesystem)")
    return text


def fingerprint_archives(spark: Any, paths: Iterable[str | os.PathLike[str]], **options: Any) -> Any:
    """DataFrame of one row per HTML record (and one per reading problem) of the archives in ``paths``.

    ``options`` are those of :class:`scrapy_simhash.warc.pipeline.Options` (``reader``,
    ``extractor``, ``min_tokens``, ``max_body_size``, ``function``, ``mode``: sketches are computed
    in verified mode, the default); ``workers`` and ``progress`` do not apply. Inputs are read one
    Spark task per file.
    """
    from pyspark.sql.types import StructType

    opts = replace(Options(), **options)
    planned = plan_inputs([local_path(p) for p in paths])
    tasks = [(position, str(entry.path), entry.not_read) for position, entry in enumerate(planned)]
    schema = StructType.fromDDL(", ".join(f"{name} {kind}" for name, kind in COLUMNS))
    if not tasks:
        return spark.createDataFrame([], schema)
    rdd = spark.sparkContext.parallelize(tasks, len(tasks)).flatMap(lambda task: read_file(*task, opts))
    return spark.createDataFrame(rdd, schema)


def read_file(position: int, path: str, not_read: str | None, options: Options) -> Iterator[tuple[Any, ...]]:
    """Rows of one file, as the executor task sees it; never raises."""
    if not_read:
        yield _problem_row(position, ReadProblem(path, None, not_read, skipped=True))
        return
    try:
        yield from _read(position, path, options)
    except Exception as exc:  # a bug or an unreadable file must not fail the job: report it
        yield _problem_row(position, ReadProblem(path, None, f"file failed: {type(exc).__name__}: {exc}"))


def _read(position: int, path: str, options: Options) -> Iterator[tuple[Any, ...]]:
    reader = ArchiveReader(options.reader)
    for item in reader.read(Path(path)):
        if isinstance(item, ReadProblem):
            yield _problem_row(position, item)
            continue
        task = _task(item, options.max_body_size)
        if task is None:
            continue
        for result in fingerprint_tasks(
            path, [task], options.extractor, options.min_tokens, options.function, options.sketches
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
    )
