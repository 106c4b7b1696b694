"""The gzip members of a per-record-gzip archive, each checked before any of its data is used.

WARC writers compress each record as its own gzip member, so one damaged member
(a flipped bit, a bad CRC32 or length trailer, garbage between members) should
cost one record, not the rest of the file. warcio prints the zlib error and
silently drops the rest of the member stream; FastWARC stops. So the reader
does the gzip layer itself: every member is decompressed completely and its
trailer checked (zlib checks CRC32 and ISIZE) before its data is handed to a
record parser, a damaged member becomes one :class:`Damage`, and reading
resumes at the next gzip member that decompresses intact. Both backends then
parse the same verified, uncompressed bytes, so they cannot disagree about
which records a damaged file holds.
"""

from __future__ import annotations

import io
import tempfile
import zlib
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO

GZIP_MAGIC = b"\x1f\x8b\x08"

FIRST_CHUNK = 1 << 13
"""Compressed bytes read first for a member; doubled on each further read (most members are small, and
zlib copies whatever follows the member's end)."""
MAX_CHUNK = 1 << 20

MEMBER_IN_MEMORY = 32 * 1024 * 1024
"""A member's decompressed data is held in memory up to this size, in a temporary file beyond it."""

MAX_CANDIDATES = 10_000
"""Gzip magic bytes tried after a damaged member before the rest of the file is given up."""


@dataclass
class Member:
    """One gzip member that decompressed without error (``complete``: its trailer was there and matched)."""

    offset: int
    end: int
    data: BinaryIO
    size: int
    complete: bool = True


@dataclass(frozen=True)
class Damage:
    """Bytes from ``offset`` to ``end`` that hold no intact gzip member; ``end`` is the next one (or EOF)."""

    offset: int
    end: int
    reason: str


def read_member(fh: BinaryIO, offset: int) -> Member | str:
    """The member at ``offset``, decompressed and checked; on damage the reason (zlib's words)."""
    fh.seek(offset)
    decomp = zlib.decompressobj(wbits=31)
    out = tempfile.SpooledTemporaryFile(max_size=MEMBER_IN_MEMORY)  # noqa: SIM115 - handed on open
    consumed = 0
    size = 0
    want = FIRST_CHUNK
    while True:
        chunk = fh.read(want)
        want = min(2 * want, MAX_CHUNK)
        if not chunk:
            if size == 0:
                out.close()
                return "gzip member truncated at end of file"
            out.seek(0)
            return Member(offset, offset + consumed, out, size, complete=False)  # type: ignore[arg-type]
        try:
            data = decomp.decompress(chunk)
        except zlib.error as exc:
            out.close()
            return _zlib_reason(exc)
        out.write(data)
        size += len(data)
        consumed += len(chunk)
        if decomp.eof:
            out.seek(0)
            end = offset + consumed - len(decomp.unused_data)
            return Member(offset, end, out, size)  # type: ignore[arg-type]


def _zlib_reason(exc: zlib.error) -> str:
    text = str(exc).removeprefix("Error -3 while decompressing data: ")
    known = {
        "incorrect data check": "CRC32 mismatch",
        "incorrect length check": "length (ISIZE) mismatch",
        "incorrect header check": "not a gzip header",
    }
    return known.get(text, text)


def next_intact(fh: BinaryIO, start: int) -> Member | None:
    """The first gzip member at or after ``start`` that decompresses without error."""
    tried = 0
    offset = start
    tail = b""
    fh.seek(start)
    while tried < MAX_CANDIDATES:
        chunk = fh.read(1 << 20)
        if not chunk:
            return None
        data = tail + chunk
        base = offset - len(tail)
        position = data.find(GZIP_MAGIC)
        while position >= 0 and tried < MAX_CANDIDATES:
            tried += 1
            member = read_member(fh, base + position)
            if isinstance(member, Member):
                return member
            position = data.find(GZIP_MAGIC, position + 1)
        tail = data[-(len(GZIP_MAGIC) - 1) :]
        offset += len(chunk)
        fh.seek(offset)
    return None


def scan(fh: BinaryIO, size: int, start: int = 0) -> Iterator[Member | Damage]:
    """Members from ``start`` in file order, each stretch of damage between them as one :class:`Damage`.

    An incomplete member at the end of the file (truncated) is yielded with ``complete=False`` and ends
    the scan; its data is what could be decompressed, and the record parser sees where it stops.
    """
    offset = start
    while offset < size:
        found = read_member(fh, offset)
        if isinstance(found, Member) and not found.complete:
            following = next_intact(fh, offset + 1)
            if following is not None:  # damage kept the deflate data going over the members after it
                following.data.close()
                found.data.close()
                found = "its deflate data runs on over the next gzip member"
        if isinstance(found, str):
            following = next_intact(fh, offset + 1)
            end = size if following is None else following.offset
            yield Damage(offset, end, _damage_reason(fh, offset, end, found, following is None))
            if following is None:
                return
            found = following
        yield found
        if not found.complete:
            return
        offset = found.end


def _damage_reason(fh: BinaryIO, offset: int, end: int, zlib_reason: str, last: bool) -> str:
    fh.seek(offset)
    is_gzip = fh.read(2) == GZIP_MAGIC[:2]
    lost = end - offset
    after = (
        "the rest of the file is skipped" if last else f"reading resumes at the next intact member at {end}"
    )
    if not is_gzip:
        where = " after the last member" if last else ""
        return f"{lost}+ bytes of non-gzip data{where} ({zlib_reason}); {after}"
    return f"damaged gzip member ({zlib_reason}): {lost} bytes skipped, {after}"


class MemberStream(io.RawIOBase):
    """The decompressed data of consecutive intact members, as one uncompressed stream.

    It ends at the first :class:`Damage` (kept in ``stopped_by`` for the caller to report; the
    members iterator then goes on with the next intact member), after a truncated member
    (``truncated``), at the end of the file (``exhausted``) or, with ``one_member``, after one
    member. ``locate`` maps a position in this stream back to the member it lies in.
    """

    def __init__(self, members: Iterator[Member | Damage], one_member: bool = False) -> None:
        self._members = members
        self._one_member = one_member
        self.exhausted = False
        self._current: Member | None = None
        self._position = 0
        self._known: deque[tuple[int, Member]] = deque()  # (uncompressed start, member), read so far
        self._ended = False
        self.stopped_by: Damage | None = None
        self.truncated: Member | None = None

    def readable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._position

    def readinto(self, buffer) -> int:
        while not self._ended:
            if self._current is None:
                item = next(self._members, None)
                if not isinstance(item, Member):
                    self.stopped_by = item
                    self.exhausted = item is None
                    self._ended = True
                    return 0
                self._current = item
                self._known.append((self._position, item))
            data = self._current.data.read(len(buffer))  # SpooledTemporaryFile has no readinto before 3.11
            n = len(data)
            if n:
                buffer[:n] = data
                self._position += n
                return n
            self._current.data.close()
            if not self._current.complete:
                self.truncated = self._current
                self._ended = True
            self._ended = self._ended or self._one_member
            self._current = None
        return 0

    def locate(self, position: int) -> tuple[Member, int] | None:
        """The member holding uncompressed ``position`` and the position's distance into it.

        Positions must be asked in increasing order: members before the asked one are forgotten.
        """
        while len(self._known) > 1 and self._known[1][0] <= position:
            self._known.popleft()
        if not self._known:
            return None
        start, member = self._known[0]
        return member, position - start

    def first_member(self) -> Member | None:
        """The first member not yet forgotten by :meth:`locate` (the stream's first, if none was asked)."""
        return self._known[0][1] if self._known else None

    def starts_member(self, position: int) -> bool:
        """Whether uncompressed ``position`` is where a member's data begins."""
        return any(start == position for start, _ in self._known)

    def member_offset(self, position: int) -> int:
        """The file offset of the member holding uncompressed ``position`` (for reports; forgets nothing)."""
        for start, member in reversed(self._known):
            if start <= position:
                return member.offset
        return -1

    def close(self) -> None:
        if self._current is not None:
            self._current.data.close()
        super().close()


class SingleStream(io.RawIOBase):
    """A file gzipped as one stream (or a few members), decompressed as it is read; stops at damage.

    Unlike :class:`gzip.GzipFile` it does not raise on bytes after the last
    member: it records them in ``problem`` (compressed offset, reason) and ends.
    """

    def __init__(self, raw: BinaryIO) -> None:
        self._raw = raw
        self._decomp = zlib.decompressobj(wbits=31)
        self._pending = b""
        self._member_start = 0
        self._consumed = 0  # compressed bytes fed so far
        self._position = 0  # uncompressed bytes returned so far
        self._done = False
        self.problem: tuple[int, str] | None = None

    def readable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._position

    def _fill(self) -> None:
        while not self._pending and not self._done:
            chunk = self._raw.read(65536)
            if not chunk:
                if not self._decomp.eof and self._consumed > self._member_start:
                    self.problem = (self._member_start, "gzip member truncated at end of file")
                self._done = True
                return
            self._consumed += len(chunk)
            self._feed(chunk)

    def _feed(self, chunk: bytes) -> None:
        while chunk:
            try:
                self._pending += self._decomp.decompress(chunk)
            except zlib.error as exc:
                self.problem = (
                    self._member_start,
                    f"damaged gzip data: {exc}; the rest of the file is skipped",
                )
                self._done = True
                return
            if not self._decomp.eof:
                return
            rest = self._decomp.unused_data
            self._member_start = self._consumed - len(rest)
            if not rest:
                self._decomp = zlib.decompressobj(wbits=31)
                return
            if not rest.startswith(GZIP_MAGIC[:2]):
                self.problem = (
                    self._member_start,
                    f"{len(rest)}+ bytes of non-gzip data after the last member",
                )
                self._done = True
                return
            self._decomp = zlib.decompressobj(wbits=31)
            chunk = rest

    def readinto(self, buffer) -> int:
        self._fill()
        n = min(len(buffer), len(self._pending))
        buffer[:n] = self._pending[:n]
        self._pending = self._pending[n:]
        self._position += n
        return n
