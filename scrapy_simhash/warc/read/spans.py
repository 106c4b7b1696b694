"""The byte ranges of an archive that read without damage, for tools that parse the raw file themselves.

cdxj-indexer reads archives with warcio, which stops at the first damaged gzip member ("Unknown archive
format") and indexes a clipped last record as if it were whole, without a word. So an archive is first
read by :class:`~.reader.ArchiveReader`, the damage-aware reader ``tag`` uses, and only the stretches
between the problems it reports are handed on: each damaged range is named and costs only itself.
"""

from __future__ import annotations

import io
import os
from dataclasses import dataclass
from typing import BinaryIO

from .reader import ArchiveReader, ArchiveRecord, ReadProblem
from .sniff import sniff
from .wacz import archive_size


@dataclass(frozen=True)
class Lost:
    """A skipped range: from the problem's offset to ``end``, where the next readable record starts."""

    problem: ReadProblem
    end: int

    def describe(self) -> str:
        """The problem and the bytes passed over (``reason`` minus the words about fingerprints)."""
        reason = self.problem.reason.removesuffix("; the record is not fingerprinted")
        where = self.problem.file
        if self.problem.offset is None:
            return f"{where}: {reason}"
        if self.end <= self.problem.offset:  # the next record starts right there: no byte left out
            return f"{where} @ {self.problem.offset}: {reason}"
        return (
            f"{where} @ {self.problem.offset}: {reason}; bytes {self.problem.offset}-{self.end} not indexed"
        )


@dataclass(frozen=True)
class Readable:
    """An archive's readable stretches (file offsets, ``end`` exclusive) and what was lost between them.

    ``spans`` is None when the reader's offsets are not file offsets (a file gzipped as one stream, or
    LZ4/zstd): such a file is handed on whole, as it is."""

    spans: list[tuple[int, int]] | None
    lost: list[Lost]


def readable_spans(path: str | os.PathLike[str], reader: ArchiveReader) -> Readable:
    """Read ``path`` with ``reader``; the stretches between its skipped-data problems, and those problems.

    A stretch ends where a problem starts (a damaged gzip member, a clipped record, a cut header) and
    the next one begins at the next record read after it. Notes (nothing lost) cut nothing."""
    path = os.fspath(path)
    size = archive_size(path)
    kind = sniff(path)
    if kind.single_stream or kind.compression in ("lz4", "zstd"):
        return Readable(None, [])
    spans: list[tuple[int, int]] = []
    lost: list[Lost] = []
    waiting: list[ReadProblem] = []  # problems whose range ends at the next record read
    start: int | None = 0  # from the file's start: an ARC file's header record is not yielded
    for item in reader.read(path):
        if isinstance(item, ArchiveRecord):
            if item.clipped or start is not None:
                continue  # a clipped record is followed by its problem
            start = item.offset
            lost.extend(Lost(problem, start) for problem in waiting)
            waiting = []
            continue
        if not item.skipped:
            continue
        if start is not None:
            cut = size if item.offset is None else item.offset  # no offset: let the indexer find the end
            if cut > start:
                spans.append((start, cut))
            start = None
        waiting.append(item)
    if start is not None:
        spans.append((start, size))
    lost.extend(Lost(problem, size) for problem in waiting)
    return Readable(spans, lost)


class SpanStream(io.RawIOBase):
    """Bytes ``start`` to ``end`` of ``fh``; ``tell`` gives file offsets, so a parser started here names
    each record by its real offset."""

    def __init__(self, fh: BinaryIO, start: int, end: int) -> None:
        fh.seek(start)
        self._fh = fh
        self._position = start
        self._end = end

    def readable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._position

    def readinto(self, buffer) -> int:
        want = min(len(buffer), self._end - self._position)
        if want <= 0:
            return 0
        data = self._fh.read(want)
        buffer[: len(data)] = data
        self._position += len(data)
        return len(data)
