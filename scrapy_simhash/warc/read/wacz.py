"""WACZ packages as archive input: the WARCs inside a ``.wacz`` zip, read in place.

A WACZ (what browsertrix-crawler and ArchiveWeb.page produce) is a zip whose ``archive/``
folder holds WARC files. Each one is named ``collection.wacz#archive/data.warc.gz`` (a
*location*) and read like a plain file, with offsets inside that WARC, so every tool that
takes a WARC path takes such a name: records, problems, index keys, sidecar fields, CDXJ
lines and reports all say where a record is in the same words.

Nothing is extracted to disk. WACZ stores its members uncompressed (``ZIP_STORED``), so a
member is a byte range of the zip file: :func:`open_archive` gives a seekable view of that
range, and reading costs what reading the plain file costs. A member compressed in the zip
(not what the WACZ spec asks for, but readable) is streamed through :mod:`zipfile` instead.
The zip is never written to: WACZ hashes and signatures cover its bytes.
"""

from __future__ import annotations

import io
import os
import struct
import zipfile
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, BinaryIO, cast

__all__ = [
    "SEPARATOR",
    "WaczError",
    "archive_exists",
    "archive_size",
    "expand_archive",
    "is_wacz_name",
    "location",
    "open_archive",
    "split_location",
    "wacz_members",
]

SEPARATOR = "#"
"""Between the WACZ's path and the member's name in a location."""
ARCHIVE_FOLDER = "archive/"
_LOCAL_HEADER = struct.Struct("<4s2B4HL2L2H")
_LOCAL_SIGNATURE = b"PK\x03\x04"
_WARC_ENDINGS = (".warc", ".warc.gz", ".arc", ".arc.gz")
_PREAD = getattr(os, "pread", None)  # not on Windows


class WaczError(OSError):
    """A WACZ that cannot be read as a zip, or a member that is not in it: an error for that file only."""


def is_wacz_name(name: str) -> bool:
    return name.lower().endswith(".wacz")


def location(wacz: str | os.PathLike[str], member: str) -> str:
    """``collection.wacz#archive/data.warc.gz``: how records of a member name their file."""
    return f"{os.fspath(wacz)}{SEPARATOR}{member}"


def split_location(name: str | os.PathLike[str]) -> tuple[str, str] | None:
    """(WACZ path, member name) of a location; None for a plain path (an existing file's name is
    never split, even when it contains ``.wacz#``)."""
    name = os.fspath(name)
    if SEPARATOR not in name or os.path.exists(name):
        return None
    lower = name.lower()
    start = 0
    while (found := lower.find(".wacz" + SEPARATOR, start)) >= 0:
        wacz = name[: found + 5]
        if os.path.isfile(wacz):
            return wacz, name[found + 6 :]
        start = found + 1
    return None


@dataclass(frozen=True)
class _Member:
    name: str
    stored: bool
    size: int
    header_offset: int


def _table(wacz: str) -> dict[str, _Member]:
    stat = os.stat(wacz)
    return _table_cached(os.path.abspath(wacz), stat.st_mtime_ns, stat.st_size)


@lru_cache(maxsize=64)
def _table_cached(wacz: str, _mtime: int, _size: int) -> dict[str, _Member]:
    """The zip's members by name (cached per file version: every record read asks for one)."""
    try:
        with zipfile.ZipFile(wacz) as archive:
            infos = archive.infolist()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, EOFError) as exc:
        raise WaczError(f"not a readable WACZ (zip) file: {exc}") from exc
    return {
        info.filename: _Member(
            info.filename, info.compress_type == zipfile.ZIP_STORED, info.file_size, info.header_offset
        )
        for info in infos
        if not info.is_dir()
    }


def wacz_members(wacz: str | os.PathLike[str]) -> list[str]:
    """Names of the WARC (and ARC) files in the package's ``archive/`` folder, sorted.

    Raises :class:`WaczError` when the file is not a readable zip."""
    table = _table(os.fspath(wacz))
    return sorted(
        name for name in table if name.startswith(ARCHIVE_FOLDER) and name.lower().endswith(_WARC_ENDINGS)
    )


def expand_archive(path: str | os.PathLike[str]) -> list[str]:
    """A file's archives: itself, or for a ``.wacz`` the location of each WARC inside it.

    The one place a WACZ becomes its members, for every command that reads archives.
    Raises :class:`WaczError` for a WACZ that cannot be read."""
    path = os.fspath(path)
    if not is_wacz_name(path):
        return [path]
    return [location(path, member) for member in wacz_members(path)]


def _member(name: str) -> tuple[str, _Member] | None:
    split = split_location(name)
    if split is None:
        return None
    wacz, member = split
    found = _table(wacz).get(member)
    if found is None:
        raise WaczError(f"no member {member!r} in the WACZ {wacz}")
    return wacz, found


def archive_exists(name: str | os.PathLike[str]) -> bool:
    """Whether a file, or a WACZ member, of that name can be opened."""
    name = os.fspath(name)
    if os.path.isfile(name):
        return True
    try:
        return _member(name) is not None
    except OSError:
        return False


def archive_size(name: str | os.PathLike[str]) -> int:
    """Size in bytes of a file, or of a WACZ member's (uncompressed) data."""
    name = os.fspath(name)
    found = _member(name)
    return os.path.getsize(name) if found is None else found[1].size


def open_archive(name: str | os.PathLike[str]) -> BinaryIO:
    """A seekable binary stream of a file or a WACZ member; positions are offsets inside that WARC."""
    name = os.fspath(name)
    found = _member(name)
    if found is None:
        return open(name, "rb")
    wacz, member = found
    if not member.stored:
        with zipfile.ZipFile(wacz) as archive:  # the member's stream keeps the file open until it is closed
            return cast(BinaryIO, archive.open(member.name))  # zipfile's stream: seekable, decompressing
    raw = open(wacz, "rb")  # noqa: SIM115 - owned by the range
    try:
        start = _data_start(raw, member)
    except Exception:
        raw.close()
        raise
    return cast(BinaryIO, io.BufferedReader(_Range(raw, start, member.size)))


def _data_start(raw: BinaryIO, member: _Member) -> int:
    """Where a stored member's bytes start: after its local header, whose name and extra field
    lengths may differ from the central directory's."""
    raw.seek(member.header_offset)
    header = raw.read(_LOCAL_HEADER.size)
    if len(header) != _LOCAL_HEADER.size or header[:4] != _LOCAL_SIGNATURE:
        raise WaczError(f"damaged zip entry {member.name!r}: no local header at {member.header_offset}")
    fields = _LOCAL_HEADER.unpack(header)
    name_length, extra_length = fields[-2], fields[-1]
    return member.header_offset + _LOCAL_HEADER.size + name_length + extra_length


class _Range(io.RawIOBase):
    """Bytes ``start`` to ``start + size`` of ``raw``, positioned from 0: a member seen as its own file."""

    def __init__(self, raw: BinaryIO, start: int, size: int) -> None:
        self._raw = raw
        self._fd = raw.fileno()
        self._start = start
        self._size = size
        self._position = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._position

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        if whence == io.SEEK_SET:
            position = offset
        elif whence == io.SEEK_CUR:
            position = self._position + offset
        elif whence == io.SEEK_END:
            position = self._size + offset
        else:
            raise ValueError(f"invalid whence {whence}")
        if position < 0:
            raise ValueError(f"negative seek position {position}")
        self._position = position
        return position

    def readinto(self, buffer: Any) -> int:
        want = min(len(buffer), self._size - self._position)
        if want <= 0:
            return 0
        if _PREAD is not None:  # one call, and no shared file position to move
            data = _PREAD(self._fd, want, self._start + self._position)
        else:
            self._raw.seek(self._start + self._position)
            data = self._raw.read(want)
        buffer[: len(data)] = data
        self._position += len(data)
        return len(data)

    def close(self) -> None:
        if not self.closed:
            self._raw.close()
        super().close()
