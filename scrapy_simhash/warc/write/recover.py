"""Finish the ``.warc.gz.open`` files of crawls that were killed.

A killed writer leaves its ``.open`` file complete up to its last record (one
gzip member per record, flushed per record), perhaps followed by part of the
record it was writing. :func:`recover_stale` finds such files in a directory,
cuts each at the end of its last complete member and gives it its final name,
so the next crawl does not leave them behind forever.

A file is touched only when

- no live writer holds it: every writer keeps an exclusive ``flock`` on its
  ``.open`` file (:class:`.writer.WarcFileWriter`), so two crawls can share a
  directory;
- its first record says who wrote it and ``owned`` accepts that (the crawl
  accepts only crawl files: the sidecars of an interrupted ``warc tag`` run
  must stay ``.open``, as they mean "redo this input");
- whatever follows the last complete record is a cut member or zero bytes. A
  file damaged in the middle is left as it is, with a warning saying so.

Every member is decompressed and must hold exactly one whole WARC record.
"""

from __future__ import annotations

import os
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from .writer import OPEN_SUFFIX, same_file, try_lock

_CHUNK = 1 << 20
_HEAD = 1 << 16
"""Bytes kept of each record's start: enough for the WARC headers and a warcinfo block."""
EMPTY_AGE = 60.0
"""An empty ``.open`` file older than this (seconds) is removed: a writer locks its file at once."""


@dataclass(frozen=True)
class Recovery:
    """What was done with one stale ``.open`` file."""

    open_path: Path
    action: str
    """``recovered`` (renamed to ``path``), ``removed`` (empty) or ``left`` (see ``reason``)."""
    path: Path | None = None
    records: int = 0
    dropped_bytes: int = 0
    reason: str = ""


@dataclass
class _Scan:
    good_end: int = 0
    records: int = 0
    tail: str = "none"
    """After the last good member: ``none``, ``cut`` (a partial member), ``zeros``, ``garbage``."""


def _whole_record(head: bytes, size: int) -> bool:
    """The member's output is one WARC record: headers, Content-Length bytes of block, CRLF CRLF."""
    if not head.startswith(b"WARC/"):
        return False
    end = head.find(b"\r\n\r\n")
    if end < 0:
        return False
    for line in head[:end].split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            try:
                return size == end + 4 + int(value) + 4
            except ValueError:
                return False
    return False


def _rest_is_zeros(fh: IO[bytes], offset: int) -> bool:
    fh.seek(offset)
    while chunk := fh.read(_CHUNK):
        if chunk.count(0) != len(chunk):
            return False
    return True


def _scan(fh: IO[bytes], owned: Callable[[bytes], bool]) -> _Scan | None:
    """Walk the gzip members; None as soon as the first record is not ``owned``."""
    scan = _Scan()
    fh.seek(0)
    decomp = zlib.decompressobj(wbits=31)
    head = bytearray()
    out_size = 0
    fed = 0  # bytes of the current member fed to ``decomp`` so far
    pending = b""
    while True:
        if not pending:
            pending = fh.read(_CHUNK)
            if not pending:
                break
        try:
            out = decomp.decompress(pending)
        except zlib.error:  # not a cut: bad data, unless it is the zeros a crash can leave
            scan.tail = "zeros" if _rest_is_zeros(fh, scan.good_end) else "garbage"
            return scan
        out_size += len(out)
        if len(head) < _HEAD:
            head += out[: _HEAD - len(head)]
        if not decomp.eof:
            fed += len(pending)
            pending = b""
            continue
        if not _whole_record(bytes(head), out_size):
            scan.tail = "garbage"
            return scan
        if scan.records == 0 and not owned(bytes(head)):
            return None
        used = len(pending) - len(decomp.unused_data)
        scan.good_end += fed + used
        scan.records += 1
        pending = decomp.unused_data
        decomp = zlib.decompressobj(wbits=31)
        head = bytearray()
        out_size = fed = 0
    if fed or head:
        scan.tail = "cut"
    return scan


def recover_file(open_path: Path, owned: Callable[[bytes], bool]) -> Recovery | None:
    """Recover one ``.open`` file; None when it is not ours to touch (live, foreign, gone)."""
    try:
        fh = open(open_path, "r+b")  # noqa: SIM115 - closed below, after the rename
    except FileNotFoundError:  # finished (or recovered by another crawl) meanwhile
        return None
    with fh:
        if not try_lock(fh) or not same_file(fh, open_path):
            return None  # a live writer holds it, or another recovery renamed it
        size = os.fstat(fh.fileno()).st_size
        if size == 0:
            if time.time() - os.fstat(fh.fileno()).st_mtime < EMPTY_AGE:
                return None
            open_path.unlink()
            return Recovery(open_path, "removed", reason="empty")
        scan = _scan(fh, owned)
        if scan is None:
            return None
        if scan.records == 0:
            return Recovery(open_path, "left", reason="no complete record in it")
        dropped = size - scan.good_end
        if scan.tail == "garbage":
            return Recovery(
                open_path,
                "left",
                records=scan.records,
                reason=f"damaged after its first {scan.records} record(s), at byte {scan.good_end}",
            )
        final = open_path.with_name(open_path.name[: -len(OPEN_SUFFIX)])
        if final.exists():
            return Recovery(open_path, "left", records=scan.records, reason=f"{final.name} already exists")
        if dropped:
            fh.truncate(scan.good_end)
        fh.flush()
        os.fsync(fh.fileno())
        os.replace(open_path, final)  # still locked: no other recovery can get in between
    return Recovery(open_path, "recovered", final, scan.records, dropped)


def recover_stale(directory: str | os.PathLike[str], owned: Callable[[bytes], bool]) -> list[Recovery]:
    """Recover the stale ``*.warc.gz.open`` files directly in ``directory`` whose first record
    (headers and block, as bytes) ``owned`` accepts. Never raises for one bad file."""
    results = []
    for open_path in sorted(Path(directory).glob("*.warc.gz" + OPEN_SUFFIX)):
        try:
            result = recover_file(open_path, owned)
        except OSError as exc:
            result = Recovery(open_path, "left", reason=f"cannot be read or renamed: {exc}")
        if result is not None:
            results.append(result)
    return results
