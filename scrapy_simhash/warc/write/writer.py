"""WARC files on disk: one gzip member per record, flushed per record, size rollover, Annex C names.

One gzip member per record keeps every record individually addressable
(offset + length in a CDX index) and means a crash loses at most the record
being written. Files being written carry an ``.open`` suffix, removed when
they are closed, so a reader can tell a finished file from an interrupted one.
A writer holds an exclusive ``flock`` on its ``.open`` file for as long as it
writes, so an ``.open`` file nobody has locked is stale (its writer was
killed): see :mod:`.recover`.
"""

from __future__ import annotations

import os
import socket
import zlib
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import IO

from ... import __version__
from ..records import WarcRecord, warcinfo_record

OPEN_SUFFIX = ".open"
DEFAULT_MAX_SIZE = 1_000_000_000
"""WARC 1.1 Annex C suggests files of about 1 GB."""

SOFTWARE = f"scrapy-simhash/{__version__}"
CONFORMS_TO = "http://iipc.github.io/warc-specifications/specifications/warc-format/warc-1.1/"


try:
    import fcntl
except ImportError:  # not POSIX: no locks, so stale files cannot be told from live ones
    fcntl = None  # type: ignore[assignment]


def try_lock(fh: IO[bytes], *, wait: bool = False) -> bool:
    """Take an exclusive flock on ``fh`` (released when it is closed); False if another holds it.

    Where there are no locks (no ``fcntl`` on Windows, a file system without flock) a writer goes on
    (True when waiting) and every file counts as held by someone, so nothing is ever recovered.
    """
    if fcntl is None:
        return wait
    try:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
    except BlockingIOError:
        return False
    except OSError:  # ENOLCK, EOPNOTSUPP: this file system has no locks
        return wait
    return True


def same_file(fh: IO[bytes], path: Path) -> bool:
    """``path`` still names the file ``fh`` has open (not renamed or deleted meanwhile)."""
    try:
        on_disk = os.stat(path)
    except FileNotFoundError:
        return False
    mine = os.fstat(fh.fileno())
    return (on_disk.st_dev, on_disk.st_ino) == (mine.st_dev, mine.st_ino)


def gzip_member(data: bytes, level: int = 6) -> bytes:
    compressor = zlib.compressobj(level, zlib.DEFLATED, 31)
    return compressor.compress(data) + compressor.flush()


def base_warcinfo_fields(extra: Sequence[tuple[str, str]] = ()) -> list[tuple[str, str]]:
    return [
        ("software", SOFTWARE),
        ("format", "WARC File Format 1.1"),
        ("conformsTo", CONFORMS_TO),
        ("hostname", socket.gethostname()),
        *extra,
    ]


class WarcFileWriter:
    """Appends records to one WARC file (``path``, written as ``path + ".open"`` until closed)."""

    def __init__(self, path: str | os.PathLike[str], *, compress: bool = True, mode: str = "xb") -> None:
        self.path = Path(path)
        self.open_path = self.path.with_name(self.path.name + OPEN_SUFFIX)
        self.compress = compress
        self._fh = open(self.open_path, mode)  # noqa: SIM115 - kept open across records
        # Locked for as long as it is written; a recovery that got the file first (it was a stale
        # one of the same name) may have renamed it meanwhile: then this name is taken.
        try_lock(self._fh, wait=True)
        if not same_file(self._fh, self.open_path):
            self._fh.close()
            raise FileExistsError(f"{self.open_path} was taken over while being opened")
        self.size = self._fh.tell()
        self.records = 0

    def write(self, record: WarcRecord) -> tuple[int, int]:
        """Write and flush one record; returns its (offset, length) in the file."""
        data = record.to_bytes()
        if self.compress:
            data = gzip_member(data)
        offset = self.size
        self._fh.write(data)
        self._fh.flush()
        self.size += len(data)
        self.records += 1
        return offset, len(data)

    def abandon(self) -> None:
        """Stop writing (an interrupted run): the ``.open`` file stays, marking the output unfinished."""
        if not self._fh.closed:
            self._fh.close()

    def discard(self) -> None:
        """Stop writing and delete the unfinished file."""
        self.abandon()
        self.open_path.unlink(missing_ok=True)

    def close(self) -> Path:
        """Close and drop the ``.open`` suffix; returns the final path."""
        if not self._fh.closed:
            self._fh.flush()
            os.fsync(self._fh.fileno())
            os.replace(self.open_path, self.path)  # renamed while still locked: never seen as stale
            self._fh.close()
        return self.path


def annex_c_name(prefix: str, serial: int, host: str, moment: datetime | None = None, gz: bool = True) -> str:
    """``Prefix-Timestamp-Serial-Crawlhost.warc.gz`` (WARC 1.1 Annex C); 17-digit UTC timestamp."""
    moment = (moment or datetime.now(timezone.utc)).astimezone(timezone.utc)
    stamp = moment.strftime("%Y%m%d%H%M%S") + f"{moment.microsecond // 1000:03d}"
    safe_host = "".join(c if c.isalnum() or c in ".~" else "_" for c in host) or "localhost"
    return f"{prefix}-{stamp}-{serial:05d}-{safe_host}.warc" + (".gz" if gz else "")


class RollingWarcWriter:
    """WARC files in ``directory``, a new one (with its warcinfo) each time ``max_size`` is reached."""

    def __init__(
        self,
        directory: str | os.PathLike[str],
        prefix: str = "crawl",
        *,
        max_size: int = DEFAULT_MAX_SIZE,
        warcinfo_fields: Sequence[tuple[str, str]] = (),
        host: str | None = None,
    ) -> None:
        if max_size <= 0:
            raise ValueError(f"max_size must be positive, not {max_size}")
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.prefix = prefix
        self.max_size = max_size
        self.warcinfo_fields = list(warcinfo_fields)
        self.host = host or f"{socket.gethostname()}~{os.getpid()}"
        self.serial = 0
        self.files: list[Path] = []
        self._current: WarcFileWriter | None = None

    def _open_next(self) -> WarcFileWriter:
        while True:
            name = annex_c_name(self.prefix, self.serial, self.host)
            self.serial += 1
            path = self.directory / name
            if path.exists() or path.with_name(name + OPEN_SUFFIX).exists():
                continue
            try:
                writer = WarcFileWriter(path)
            except FileExistsError:  # another process took the name between the check and the open
                continue
            writer.write(warcinfo_record(name, self.warcinfo_fields))
            return writer

    def write(self, record: WarcRecord) -> tuple[Path, int]:
        """Write one record; returns (final file path, offset). Rolls over after the record when full."""
        if self._current is None:
            self._current = self._open_next()
        writer = self._current
        offset, _ = writer.write(record)
        if writer.size >= self.max_size:
            self.files.append(writer.close())
            self._current = None
        return writer.path, offset

    def close(self) -> list[Path]:
        if self._current is not None:
            self.files.append(self._current.close())
            self._current = None
        return self.files
