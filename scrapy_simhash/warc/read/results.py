"""What :class:`~.reader.ArchiveReader` yields: records (framing only) and the problems met on the way.

Values without behaviour, kept apart from the reading so that the layers that consume records (payload
decoding, CDXJ, dedupe, reports) can name them without the backends' code.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from .links import RecordLinks


@dataclass(frozen=True)
class ArchiveRecord:
    """One record, framing only: the block is raw (HTTP headers, chunking and compression kept)."""

    file: str
    offset: int
    """Where the record (its gzip member, for per-record gzip) starts in the file."""
    record_type: str
    record_id: str | None
    """``WARC-Record-ID``; None for ARC records, which have none (warcio would invent a random one)."""
    target_uri: str | None
    date: str | None
    content_type: str | None
    """The record's own ``Content-Type`` (``application/http;msgtype=response`` for HTTP responses)."""
    block: bytes
    truncated: bool = False
    """The block was longer than the reader's limit, or shorter than its declared length."""
    archive_format: Literal["warc", "arc"] = "warc"
    clipped: bool = False
    """The file (or its gzip member) ends before the declared length: the end of the record is lost,
    so the record is not fingerprinted (a partial page would get a misleading fingerprint)."""
    header_cut: bool = False
    """A WARC record without ``Content-Length`` (mandatory): its header was cut off, by the end of the
    file or by damage, so its length and block are unknown. Always ``clipped`` as well."""
    links: RecordLinks | None = None
    """The headers that tie a record to another one (payload digest, revisit profile and references);
    None for ARC records and WARC records without any of them."""


@dataclass(frozen=True)
class ReadProblem:
    """Something in a file could not be read; ``skipped`` says whether data was lost."""

    file: str
    offset: int | None
    reason: str
    skipped: bool = True

    def __str__(self) -> str:
        where = self.file if self.offset is None else f"{self.file} @ {self.offset}"
        return f"{where}: {self.reason}"


def clean_uri(uri: str | None) -> str | None:
    """``<http://x>`` (wget, some WARC/1.0 writers) to ``http://x``; surrounding spaces removed,
    inner spaces (invalid in a URI) escaped as ``%20``."""
    if uri is None:
        return None
    uri = uri.strip()
    if len(uri) >= 2 and uri[0] == "<" and uri[-1] == ">":
        uri = uri[1:-1].strip()
    return uri.replace(" ", "%20") or None  # as warcio does, so that both backends give the same URI
