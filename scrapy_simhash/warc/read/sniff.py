"""What kind of archive a file is: compression, WARC or ARC, and how it is gzipped.

Read from the first bytes (and the first intact gzip member), before any record is parsed, so
the reader can pick its path: per-record gzip, one gzip stream, uncompressed, or LZ4/zstd.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import BinaryIO, Literal

from .gzip_members import GZIP_MAGIC, next_intact
from .wacz import open_archive

LZ4_MAGIC = b"\x04\x22\x4d\x18"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"

ONE_STREAM_PROOF = 1 << 20
"""Compressed bytes of the first member read without error before a file is taken for one gzip stream."""


@dataclass(frozen=True)
class FileKind:
    compression: Literal["gzip", "lz4", "zstd", "none"]
    archive_format: Literal["warc", "arc", "unknown"]
    single_stream: bool = False
    empty: bool = False


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

    None when the member is damaged. Damaged deflate data can produce more than the first record, even
    text copied from it that looks like the next record; so a one-stream file is only concluded from the
    next record starting right after the first and from ``ONE_STREAM_PROOF`` compressed bytes read without
    error (or from the member's end, where zlib checks CRC32 and length).
    """
    decomp = zlib.decompressobj(wbits=31)
    out = bytearray()
    produced = 0
    consumed = 0
    expected: int | None = None
    while True:
        chunk = fh.read(65536)
        if not chunk:
            break
        consumed += len(chunk)
        try:
            data = decomp.decompress(chunk)
        except zlib.error:
            return None
        produced += len(data)
        if expected is None or len(out) < expected + 64:
            out += data
        if expected is None:
            expected = _expected_record_size(bytes(out[:65536]))
            if expected is None and len(out) > 65536:
                return True, bytes(out[:64])  # no record header in 64 KiB: let the reader report it
        if decomp.eof:
            break
        if (
            consumed >= ONE_STREAM_PROOF
            and expected is not None
            and len(out) > expected + 64
            and _format_of(bytes(out[expected:])) != "unknown"
        ):
            return False, bytes(out[:64])
    if not decomp.eof and (not out or _intact_member_after(fh, 1)):
        return None  # the file ended inside it: damaged (a header field, or deflate data running on)
    if expected is None:
        return True, bytes(out[:64])
    return produced <= expected + 64, bytes(out[:64])


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
    with open_archive(path) as fh:
        magic = fh.read(4)
        if magic.startswith(GZIP_MAGIC):
            fh.seek(0)
            first = _first_member_is_single_record(fh)
            if first is None:  # damaged: not "empty"; the reader reports it and resumes after it
                return _damaged_gzip(fh) or FileKind("gzip", "warc")
            single_record, head = first
            return FileKind("gzip", _format_of(head), single_stream=not single_record, empty=not head.strip())
        if magic == LZ4_MAGIC:
            return FileKind("lz4", "warc")
        if magic == ZSTD_MAGIC:
            return FileKind("zstd", "warc")
        fh.seek(0)
        archive_format = _format_of(fh.read(64))
        if archive_format == "unknown":  # perhaps gzip whose first bytes are damaged
            return _damaged_gzip(fh) or FileKind("none", archive_format)
        return FileKind("none", archive_format)


def _intact_member_after(fh: BinaryIO, offset: int) -> bool:
    member = next_intact(fh, offset)
    if member is not None:
        member.data.close()
    return member is not None


def _damaged_gzip(fh: BinaryIO) -> FileKind | None:
    """A gzip file whose start is damaged, described by its first intact member (None: there is none)."""
    member = next_intact(fh, 1)
    if member is None:
        return None
    head = member.data.read(64)
    member.data.close()
    return FileKind("gzip", _format_of(head))
