"""Detecting damage to the embedded index's database, which SQLite does not checksum.

SQLite checksums WAL frames but not database pages, and when a WAL frame fails its checksum
it silently drops that frame *and every later one*: committed transactions vanish without
an error. Three cheap checks turn such damage into :class:`IndexCorruptError`:

- **Row checksums** (:func:`row_check`): every row carries ``chk``, the CRC-32 of its key and
  meta (high 32 bits) and a mix of its seq and fingerprint (low 32 bits, computable with numpy
  over a whole column). Rows are verified whenever they are read; a row whose ``chk`` is NULL is damage.
- **The commit mark** (:class:`CommitMark`, file ``COMMITTED``): after every acknowledged write
  the writer records the database's high-water mark (the largest seq handed out; removals
  advance it too) and its row count. A database behind its mark has lost acknowledged writes.
  The mark is not fsynced after a write: it survives a killed process, and after a power cut it can
  only lag behind a ``synchronous=full`` database; with ``"normal"`` a power cut may legitimately lose the
  last commits, so a database behind a mark written before the last boot is only a warning.
- **SQLite's own checks** (:func:`check_sqlite`): ``PRAGMA integrity_check`` for a writer,
  ``PRAGMA quick_check`` for a reader. Only the former compares the key index with the table: a
  flipped bit in the key index otherwise makes ``get`` miss a stored key silently (about one flip in
  ten in a small index's file did).

When they run (:func:`sqlite_check_at_open`). SQLite's checks and the CRC-32s of the table files read
every page of the index: minutes at 10M pages. What they guard against differs. A process killed or a
power cut while writing can leave a damaged WAL or database, so after an *unclean shutdown* the next
opener runs them. A cleanly closed index can only be damaged at rest (a disk, a copy, a hand): that
is found by ``scrapy-simhash index check`` (or ``verify="full"``), which a cron job can run, and by the
checks every read makes (each row's checksum, the sizes and headers of the table files). The mark
carries the clean-close flag: a writer writes the mark *unclean* and fsyncs it before its first write,
and writes it *clean* and fsyncs it only after its database closed whole; so the flag is set exactly
when the last writer closed cleanly, and a crash at any point leaves it unset. A cleanly closed index
thus opens in constant time: the manifest, the files' sizes and headers, the commit mark, and the row
count (taken from the mark when the database's high-water seq is the mark's: every write moves it).
"""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
import sqlite3
import struct
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..base import IndexCorruptError
from .lock import LOCK, acquire_write_lock

logger = logging.getLogger(__name__)

MARK = "COMMITTED"
_MASK64 = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15
_MIXER = 0xD6E8FEB86659FD93
_MARK_FORMAT = struct.Struct("<8s32sQQBB16s")
_MARK_MAGIC = b"SSHMARK2"
_MARK_FORMAT_1 = struct.Struct("<8s32sQQB16s")
"""The mark before the clean-close flag (magic ``SSHMARK1``): read as written by an unclean shutdown."""
_RESTORE = (
    "It is the source of truth and cannot be rebuilt: restore it from a backup (then delete {mark} "
    "and manifest.json beside it) or export what `sqlite3 .recover` finds"
)


# -- row checksums -------------------------------------------------------------------------------
def _mix(seq: int, h: int) -> int:
    x = (h ^ (seq * _GOLDEN)) & _MASK64
    x = ((x ^ (x >> 32)) * _MIXER) & _MASK64
    return ((x ^ (x >> 32)) & 0x7FFFFFFF) | 0x80000000  # never 0: 0 marks an unverified row


def mix_array(seqs: np.ndarray, hashes: np.ndarray) -> np.ndarray:
    """:func:`_mix` over columns (uint64 arithmetic wraps like the masked ints above)."""
    x = hashes.astype(np.uint64) ^ (seqs.astype(np.int64).view(np.uint64) * np.uint64(_GOLDEN))
    x = (x ^ (x >> np.uint64(32))) * np.uint64(_MIXER)
    return ((x ^ (x >> np.uint64(32))) & np.uint64(0x7FFFFFFF)) | np.uint64(0x80000000)


def row_check(seq: int, h: int, key: str, meta: str | None, sketch: bytes | None = None) -> int:
    """The unsigned 64-bit checksum of one row (``h`` unsigned, ``meta`` as stored).

    The high half is the CRC-32 of ``key NUL meta``, continued from the CRC-32 of the row's sketch
    bytes when it has one (a verified index's rows), so a row without sketch checks as it always did.
    """
    return _text_crc(key, meta, sketch) << 32 | _mix(seq, h)


def _text_crc(key: str, meta: str | None, sketch: bytes | None) -> int:
    """A row check's high half: the CRC-32 of ``key NUL meta``, continued from the sketch's."""
    return key_meta_crc(key, meta, zlib.crc32(sketch) if sketch else 0)


def key_meta_crc(key: str, meta: str | None, crc: int = 0) -> int:
    """The CRC-32 of ``key NUL meta`` as UTF-8 (lone surrogates kept), continued from ``crc``: how both
    row stores (this module's rows, :mod:`.sketch_rows`' sketches) check a row's text."""
    return zlib.crc32(f"{key}\x00{meta or ''}".encode("utf-8", "surrogatepass"), crc)


def row_checks(start: int, items: Sequence[tuple[int, str, str | None, bytes | None]]) -> list[int]:
    """Signed :func:`row_check` of ``(simhash, key, meta, sketch)`` rows, seqs ``start, start + 1, ...``."""
    return row_columns(start, items)[1]


def row_columns(
    start: int, items: Sequence[tuple[int, str, str | None, bytes | None]]
) -> tuple[list[int], list[int]]:
    """The simhashes as SQLite stores them (signed) and the signed :func:`row_check` of ``(simhash, key,
    meta, sketch)`` rows given seqs ``start, start + 1, ...``.

    Vectorised for batches: the per-row cost is the CRC-32 of the sketch, key and meta, in one list
    comprehension; the fingerprint's half and the sign conversion are array operations.
    """
    if len(items) < 32:
        return (
            [_signed(row[0]) for row in items],
            [_signed(row_check(seq, *row[:3], sketch=row[3])) for seq, row in enumerate(items, start)],
        )
    n = len(items)
    crc32 = zlib.crc32
    crcs = np.array(
        [
            crc32(f"{key}\x00{meta or ''}".encode("utf-8", "surrogatepass"), crc32(sketch) if sketch else 0)
            for _, key, meta, sketch in items
        ],
        dtype=np.uint64,
    )
    hashes = np.array([row[0] for row in items], dtype=np.uint64)
    checks = (crcs << np.uint64(32)) | mix_array(np.arange(start, start + n, dtype=np.int64), hashes)
    return hashes.view(np.int64).tolist(), checks.view(np.int64).tolist()


def stored_row_checks(rows: Sequence[tuple[int, str, int, str | None, Any, bytes | None]]) -> np.ndarray:
    """Unsigned :func:`row_check` of rows as the database returns them (``seq, key, simhash as stored
    (signed), meta, chk, sketch``), vectorised: an index's every sketch row is checked at open."""
    n = len(rows)
    crcs = np.fromiter((_text_crc(row[1], row[3], row[5]) for row in rows), dtype=np.uint64, count=n)
    seqs = np.fromiter((row[0] for row in rows), dtype=np.int64, count=n)
    hashes = np.fromiter((row[2] for row in rows), dtype=np.int64, count=n).view(np.uint64)
    return (crcs << np.uint64(32)) | mix_array(seqs, hashes)


def _signed(value: int) -> int:
    return value - (1 << 64) if value >> 63 else value


def bad_rows(seqs: np.ndarray, hashes: np.ndarray, checks: np.ndarray) -> np.ndarray:
    """Positions whose (seq, fingerprint) disagree with their stored check, or that have none (0)."""
    low = checks.view(np.uint64) & np.uint64(0xFFFFFFFF)
    return np.flatnonzero((checks == 0) | (low != mix_array(seqs, hashes)))


# -- the commit mark -----------------------------------------------------------------------------
def _boot_id() -> bytes:
    try:
        return bytes.fromhex(Path("/proc/sys/kernel/random/boot_id").read_text().strip().replace("-", ""))
    except (OSError, ValueError):
        return bytes(16)


@dataclass(frozen=True)
class Mark:
    """What the last writer acknowledged: database id, high-water seq, row count; ``clean``: it closed
    the database cleanly (no writer since)."""

    db_id: str
    high: int
    count: int
    full_sync: bool
    boot: bytes
    clean: bool = False


def read_mark(directory: Path) -> Mark | None:
    """The commit mark, None when absent; a damaged mark is logged and treated as absent."""
    path = directory / MARK
    for _ in range(3):  # a read racing the writer's pwrite may see half a record: read again
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return None
        layout = _MARK_FORMAT if len(data) == _MARK_FORMAT.size + 4 else _MARK_FORMAT_1
        body = data[: layout.size]
        if len(data) == layout.size + 4 and zlib.crc32(body) == int.from_bytes(data[-4:], "little"):
            break
    else:
        logger.warning("index %s: %s is damaged; acknowledged writes cannot be checked", directory, MARK)
        return None
    if layout is _MARK_FORMAT_1:
        magic, db_id, high, count, full, boot = layout.unpack(body)
        clean = 0
        if magic != b"SSHMARK1":
            return None
    else:
        magic, db_id, high, count, full, clean, boot = layout.unpack(body)
        if magic != _MARK_MAGIC:
            return None
    return Mark(db_id.decode("ascii", "replace"), high, count, bool(full), boot, clean == 1)


class CommitMark:
    """The writer's side of the mark: rewritten in place (one small pwrite) after every commit, and
    fsynced twice a session: *unclean* before the first write (:meth:`opened`), *clean* after the
    database closed (:meth:`closed_cleanly`)."""

    def __init__(self, directory: Path, db_id: str, full_sync: bool) -> None:
        self.path = directory / MARK
        self._head = (_MARK_MAGIC, db_id.encode("ascii"))
        self._full_sync = int(full_sync)
        self._boot = _boot_id()
        self._fd: int | None = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)

    def write(self, high: int, count: int, clean: bool = False) -> None:
        if self._fd is None:
            return
        body = _MARK_FORMAT.pack(*self._head, high, count, self._full_sync, int(clean), self._boot)
        os.pwrite(self._fd, body + zlib.crc32(body).to_bytes(4, "little"), 0)

    def opened(self, high: int, count: int) -> None:
        """Before the writer's first write: the index is open for writing (not clean), durably."""
        self.write(high, count)
        if self._fd is not None:
            os.fsync(self._fd)

    def closed_cleanly(self, high: int, count: int) -> None:
        """After the database closed whole: the clean-close flag, durably; then the mark is closed."""
        self.write(high, count, clean=True)
        if self._fd is not None:
            os.fsync(self._fd)
        self.close()

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def check_mark(db_file: Path, mark: Mark | None, db_id: str, high: int, count: int) -> None:
    """IndexCorruptError when the database lacks writes the mark says were acknowledged."""
    if mark is None:
        return
    restore = _RESTORE.format(mark=db_file.parent / MARK)
    if mark.db_id != db_id:
        if high == 0 and mark.high > 0:
            raise IndexCorruptError(
                f"the index database {db_file} is empty, but {mark.count} fingerprints were written to "
                f"this index. {restore}"
            )
        logger.warning("index %s: %s belongs to another database; ignored", db_file.parent, MARK)
        return
    if high > mark.high or (high == mark.high and count == mark.count):
        return  # up to date (or one unacknowledged write ahead: the writer died before marking it)
    loss = (
        f"the index database {db_file} has lost acknowledged writes: it holds {count} rows up to seq "
        f"{high}, the last acknowledged write left {mark.count} rows up to seq {mark.high}"
    )
    if not mark.full_sync and mark.boot != _boot_id():
        logger.warning("index %s: %s (a power cut with synchronous=normal can do that)", db_file.parent, loss)
        return
    raise IndexCorruptError(
        f"{loss}; the database or its write-ahead log ({db_file.name}-wal) is damaged. {restore}"
    )


def check_manifest(db_file: Path, manifest: dict, db_id: str, high: int) -> bool:
    """Whether the table files describe this database; IndexCorruptError when they prove that
    the database lost rows (it is empty or behind the tables' high-water mark)."""
    restore = _RESTORE.format(mark=db_file.parent / MARK)
    if manifest.get("db_id") != db_id:
        if high == 0 and int(manifest["count"]) > 0:
            raise IndexCorruptError(
                f"the index database {db_file} is empty, but the table files hold {manifest['count']} "
                f"fingerprints. {restore}"
            )
        return False
    if int(manifest["max_seq"]) > high:
        raise IndexCorruptError(
            f"the index database {db_file} is behind its table files (rows up to seq {high}, the tables "
            f"up to {manifest['max_seq']}): committed rows were lost. {restore}"
        )
    return True


# -- presence and SQLite's checks ----------------------------------------------------------------
def index_files(directory: Path, database: str) -> list[str]:
    """Files other than the lock and the database that show an index lived here."""
    found = [name for name in ("manifest.json", MARK) if (directory / name).exists()]
    found += sorted(p.name for p in directory.glob("tables-*.npy"))[:1]
    wal = directory / f"{database}-wal"
    if wal.exists() and wal.stat().st_size > 0:
        found.append(wal.name)
    return found


def refuse_missing_database(directory: Path, database: str) -> None:
    """IndexCorruptError when an existing index lost its database (missing or emptied).

    A new index is a directory without index files; anything else with a missing or empty
    database would otherwise reopen as an empty index and forget everything.
    """
    db = directory / database
    state = "missing" if not db.exists() else "empty" if db.stat().st_size == 0 else None
    if state is None:
        return
    others = index_files(directory, database)
    if others:
        raise IndexCorruptError(
            f"the index database {db} is {state}, but {directory} holds an index ({', '.join(others)}); "
            f"nothing was deleted. Restore {database} from a backup, or empty the index explicitly "
            f"(SIMHASH_RESET, or SimhashIndex(..., reset=True))"
        )


def check_sqlite(conn: sqlite3.Connection, db_file: Path, thorough: bool) -> None:
    """``PRAGMA integrity_check`` (thorough) or ``quick_check``; IndexCorruptError on any problem.

    Measured on a 1M-row index (224 MB database, warm cache, 2 shared cores): quick_check 0.2 s,
    integrity_check 0.55 s, against 0.12 s for the rest of opening it.
    """
    pragma = "integrity_check" if thorough else "quick_check"
    try:
        problems = [row[0] for row in conn.execute(f"PRAGMA {pragma}(3)").fetchall()]
    except sqlite3.DatabaseError as exc:
        problems = [str(exc)]
    if problems != ["ok"]:
        raise IndexCorruptError(
            f"the index database {db_file} is damaged ({pragma}: {'; '.join(problems)}). "
            + _RESTORE.format(mark=db_file.parent / MARK)
        )


def check_verify(verify: bool | str) -> None:
    """``verify`` is True (checks after an unclean shutdown), ``"full"`` (always) or False (never)."""
    if verify not in (True, False, "full"):
        raise ValueError(f"verify must be True, False or 'full', not {verify!r}")


def writer_running(directory: Path) -> bool:
    """Whether a process holds the index's write lock now (probed without waiting, and released)."""
    try:
        fd = os.open(directory / LOCK, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        os.close(fd)  # drops the probe's lock
    return False


def sqlite_check_at_open(
    directory: Path, mark: Mark | None, verify: bool | str, read_only: bool
) -> str | None:
    """Which SQLite check an opener runs (``"thorough"``, ``"quick"``, or None): see the module's
    docstring. ``mark``: read before the database was opened.

    A cleanly closed index needs none; a reader also needs none while a writer holds the index (that
    writer checked it when it opened, if the writer before it had not closed cleanly). Otherwise the
    last writer's shutdown was unclean, or is unknown (no mark): a writer runs integrity_check, a
    reader quick_check."""
    if verify is False:
        return None
    if verify == "full":
        return "thorough"
    if mark is not None and mark.clean:
        return None
    if read_only:
        return None if writer_running(directory) else "quick"
    return "thorough"


def remove_index(directory: Path, database: str) -> None:
    """Delete every file of an index (an explicit reset, under the write lock), other files stay.

    The database goes last: a reset interrupted before it leaves the old index whole, after it
    an index that :func:`refuse_missing_database` refuses; never a silently older one.
    """
    logger.info("index %s: reset, removing its files", directory)
    if database == "index.sqlite3":  # the sketch store of an earlier format (a reset needs no upgrade)
        shutil.rmtree(directory / "sketches", ignore_errors=True)
    paths = [directory / MARK, directory / "manifest.json", directory / "manifest.json.tmp"]
    paths += sorted(directory.glob("tables-*.npy"))
    paths += [directory / f"{database}{suffix}" for suffix in ("", "-wal", "-shm", "-journal")]
    for path in paths:
        path.unlink(missing_ok=True)


def open_directory(directory: Path, database: str, *, read_only: bool, reset: bool, what: str) -> int | None:
    """The first steps of opening an index directory, shared by the simhash and MinHash indexes.

    A reader: the database must be there (never reset). A writer: the directory is created, its
    ``LOCK`` taken (IndexLockedError when held) and, with ``reset``, the index emptied under it.
    Either way a database that an existing index lost is refused. Returns the lock's descriptor
    (None for a reader); on failure the lock is already released.
    """
    if read_only:
        if reset:
            raise ValueError("an index opened read_only cannot be reset")
        refuse_missing_database(directory, database)
        if not (directory / database).exists():
            raise FileNotFoundError(f"no {what} at {directory} (missing {database})")
        return None
    directory.mkdir(parents=True, exist_ok=True)
    fd = acquire_write_lock(directory / LOCK)
    try:
        if reset:  # under the lock: no writer can be using the files
            remove_index(directory, database)
        refuse_missing_database(directory, database)
    except BaseException:
        os.close(fd)
        raise
    return fd
