"""What kind of archive a file is: compression, WARC or ARC, and how it is gzipped.

Read from the first bytes (and the first intact gzip member), before any record is parsed, so
the reader can pick its path: per-record gzip, one gzip stream, uncompressed, or LZ4/zstd.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import BinaryIO, Literal

from .gzip_members import GZIP_MAGIC, next_intact

LZ4_MAGIC = b"\x04\x22\x4d\x18"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


@dataclass(frozen=True)
class FileKind:
    compression: Literal["gzip", "lz4", "zstd", "none"]
    archive_format: Literal["warc", "arc", "unknown"]
    single_stream: bool = False
    empty: bool = False
    damaged_start: bool = False
    """The first gzip member is damaged: format and layout were read from the first intact one."""


def _format_of(head: bytes) -> Literal["warc", "arc", "unknown"]:
    stripped = head.lstrip(b"\r\n")
    if stripped.startswith(b"WARC/"):
        return "warc"
    if stripped.startswith(b"filedesc:") or stripped[:8].split(b":")[0].isalpha():
        # ARC v1 records start "<url> <ip> <date> ..."; the first is filedesc://
        return "arc"
    return "unknown"


def _first_member_is_single_record(fh: BinaryIO) -> tuple[bool, bytes] | None:
    """Decompress the first gzip member; False if it holds more than one record (one-stream gzip).

    None when the member is damaged."""
    decomp = zlib.decompressobj(wbits=31)
    out = bytearray()
    expected: int | None = None
    while True:
        chunk = fh.read(65536)
        if not chunk:
            break
        try:
            out += decomp.decompress(chunk)
        except zlib.error:
            return None
        if expected is None:
            expected = _expected_record_size(bytes(out[:65536]))
        if decomp.eof:
            break
        if expected is not None and len(out) > expected + 64:
            return False, bytes(out[:64])
    if expected is None:
        return True, bytes(out[:64])
    return len(out) <= expected + 64, bytes(out[:64])


def _expected_record_size(head: bytes) -> int | None:
    """Size of the first record (with its trailing newlines) from its header, once the header is complete."""
    if head.startswith(b"WARC/"):
        end = head.find(b"\r\n\r\n")
        return None if end < 0 else end + 4 + _declared_length(head[:end]) + 4
    end = head.find(b"\n")  # ARC: "<url> <ip> <date> <mime> <length>\n<length bytes>\n"
    if end < 0:
        return None
    try:
        return end + 1 + int(head[:end].split()[-1]) + 1
    except (ValueError, IndexError):
        return None


def _declared_length(header: bytes) -> int:
    for line in header.split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            try:
                return int(value.strip())
            except ValueError:
                return 0
    return 0


def sniff(path: str) -> FileKind:
    """Compression and format of a file, and whether it is gzipped as a single stream."""
    with open(path, "rb") as fh:
        magic = fh.read(4)
        if magic.startswith(GZIP_MAGIC):
            fh.seek(0)
            first = _first_member_is_single_record(fh)
            if first is None:  # damaged: not "empty"; the reader reports it and resumes after it
                member = next_intact(fh, 1)
                head = b"WARC/" if member is None else member.data.read(64)
                if member is not None:
                    member.data.close()
                return FileKind("gzip", _format_of(head), damaged_start=True)
            single_record, head = first
            return FileKind("gzip", _format_of(head), single_stream=not single_record, empty=not head.strip())
        if magic == LZ4_MAGIC:
            return FileKind("lz4", "warc")
        if magic == ZSTD_MAGIC:
            return FileKind("zstd", "warc")
        fh.seek(0)
        return FileKind("none", _format_of(fh.read(64)))
