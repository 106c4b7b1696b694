"""Record framing helpers for the two parser backends of :mod:`.reader`.

warcio's iterator with its length warnings collected instead of printed, and a
stream wrapper that lets the FastWARC path check what FastWARC stepped over
between records (it does not report a wrong Content-Length; warcio does).
"""

from __future__ import annotations

import io
from typing import Any, BinaryIO

from .gzip_members import GZIP_MAGIC
from .sniff import FileKind


def record_type(value: str | None) -> str:
    """``response``, ``resource``...; anything that is not a short word (a damaged header) is ``unknown``."""
    value = (value or "").strip().lower()
    return value if value and len(value) <= 32 and value.replace("-", "").isalnum() else "unknown"


class LengthMismatches:
    """Stands in for warcio's warning template: collects (offset, line) instead of printing them."""

    def __init__(self) -> None:
        self.found: list[tuple[int, str]] = []

    def format(self, offset: int, line: bytes | str) -> str:
        self.found.append((offset, line.decode("latin-1") if isinstance(line, bytes) else line))
        return ""


def warcio_iterator(stream: BinaryIO, is_arc: bool) -> Any:
    """warcio's ArchiveIterator for one known format, with its "record not followed by newline"
    warnings collected (in ``iterator.INC_RECORD.found``) instead of written to stderr.

    The format is fixed: left to guess per record, warcio reads any stray text line in a WARC
    file as an ARC header and invents a record from it. warcio's gzip handling is off: the reader
    hands it decompressed, checked data only (:mod:`.gzip_members`), and on damage warcio would
    print the zlib error to stderr and silently drop the rest of the member stream."""
    from warcio.archiveiterator import ArchiveIterator

    iterator = ArchiveIterator(stream, arc2warc=True, no_record_parse=True)
    iterator.reader.set_decomp(None)
    iterator.INC_RECORD = LengthMismatches()
    iterator.known_format = "arc" if is_arc else "warc"
    iterator.mixed_arc_warc = True  # keep it fixed (warcio would overwrite it after each record)
    return iterator


class FramingMismatch(Exception):
    """FastWARC's view of where a record ends differs from the bytes: warcio must look."""


class Recorder(io.RawIOBase):
    """A stream that keeps the last bytes read, to check what FastWARC stepped over between records."""

    WINDOW = 1 << 18

    def __init__(self, inner: BinaryIO | io.RawIOBase) -> None:
        self._inner: Any = inner
        self._window = bytearray()
        self.total = 0

    def readable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._inner.tell()

    def readinto(self, buffer) -> int:
        n = self._inner.readinto(buffer)
        if n:
            self._window += memoryview(buffer)[:n]
            if len(self._window) > 2 * self.WINDOW:
                del self._window[: len(self._window) - self.WINDOW]
            self.total += n
        return n

    def check_end(self, end: int, next_start: int | None) -> None:
        """Unless the block ending at ``end`` (counted from the start of reading, as FastWARC counts)
        is followed by exactly CRLF CRLF and then the next record or the end: FramingMismatch."""
        expected = end + 4
        if (self.total if next_start is None else next_start) != expected:
            raise FramingMismatch(f"record end at {end} is not where the next record starts")
        first = self.total - len(self._window)
        if end < first or bytes(self._window[end - first : expected - first]) != b"\r\n\r\n":
            raise FramingMismatch(f"no blank lines after the record ending at {end}")


class OffsetStream(io.RawIOBase):
    """``fh`` seen from ``base`` on, for readers that must start at a resynchronisation point."""

    def __init__(self, fh: BinaryIO, base: int) -> None:
        self._fh = fh
        self._base = base

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._fh.tell() - self._base

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        if whence == io.SEEK_SET:
            return self._fh.seek(self._base + offset) - self._base
        return self._fh.seek(offset, whence) - self._base

    def readinto(self, buffer) -> int:
        data = self._fh.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)


def resync(fh: BinaryIO, start: int, kind: FileKind) -> int | None:
    """Offset of the next plausible record start at or after ``start``: a gzip member or a WARC line."""
    needles = [GZIP_MAGIC] if kind.compression == "gzip" else [b"\nWARC/1.", b"\nWARC/0."]
    if kind.archive_format == "arc" and kind.compression == "none":
        needles = [b"\nhttp://", b"\nhttps://", b"\ndns:", b"\nfiledesc:"]
    if kind.compression != "gzip" and start > 0:
        start -= 1  # the needles begin with the newline that ends the previous line
    fh.seek(start)
    offset = start
    tail = b""
    while True:
        chunk = fh.read(1 << 20)
        if not chunk:
            return None
        data = tail + chunk
        hits = [i for i in (data.find(n) for n in needles) if i >= 0]
        if hits:
            hit = min(hits)
            base = offset - len(tail)
            return base + hit + (0 if kind.compression == "gzip" else 1)
        tail = data[-16:]
        offset += len(chunk)
