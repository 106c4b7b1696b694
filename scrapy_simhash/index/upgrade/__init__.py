"""A one-off converter: an index written by an earlier development version into this version's format.

``scrapy-simhash index upgrade OLD NEW`` (:func:`upgrade`). The run-time stores read one format
(:mod:`.store_format`); this module alone knows the earlier ones, from their shapes in the database,
with nothing but :mod:`sqlite3` and numpy:

- **format 1** (no ``format``, no settings ``check``, no ``chk`` column): rows without checksums;
- **checksums without a format** (``chk`` and ``check``, no ``format``): rows from before checksums
  may still lack one;
- **format 2**: rows and settings checksummed, except rows up to ``unchecked_upto``;
- **no sketch column** (written before sketches, or only ever in simhash mode): pages without sketch;
- **a second sketch store** ``sketches/`` (a MinHash index database, ``minhash.sqlite3``): the
  sketches move into their pages' rows; a sketch whose page is missing (an insert a crash cut) is
  dropped, as that version's first writer dropped it;
- **32-bit sketch values** (``sketch_value_bits`` 32, or a ``sketches/`` store without
  ``value_bits``): each value keeps its low 8 bits, as this version's verified index keeps them;
- **a MinHash-kind index** (``minhash.sqlite3``, ``dedupe --method minhash --index``) without
  ``format``: its rows are copied as they are, its settings gain ``format`` and ``value_bits``
  (32 when it was not recorded).

Every row keeps its seq (its age), key, fingerprint and meta; tombstones and table files are derived
and rebuilt. A row that carries a checksum must pass it, the settings' ``check`` too, SQLite's
``integrity_check`` must pass and the database must hold what its commit mark acknowledged: any
damage stops the conversion (:class:`UpgradeDamaged`) and NEW is not created. Pages without a
sketch cannot get one from nothing: they are kept as rows without sketch, which the verified index
judges by simhash alone (``index stats``: ``without_sketch``) until re-fingerprinted.

NEW is written in a temporary directory beside it, opened once by the run-time index (which builds
its tables and checks every row), then renamed: a failed conversion leaves no NEW.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path

from .. import open_index
from ..archive.captures import DATABASE as CAPTURES
from ..archive.payload_digests import DATABASE as PAYLOAD_DIGESTS
from .minhash_kind import OldMinHashIndex
from .old_files import DATABASE, SKETCH_DATABASE, UpgradeDamaged, UpgradeError, UpgradeReport
from .simhash_kind import OldIndex, write

__all__ = ["UpgradeDamaged", "UpgradeError", "UpgradeReport", "upgrade"]


def upgrade(
    old: str | Path, new: str | Path, progress: Callable[[str], None] = lambda line: None
) -> UpgradeReport:
    """Convert the embedded index at ``old`` into a new index at ``new`` in this version's format.

    ``old`` is only read. ``new`` must not exist; it appears whole or not at all.
    ``progress`` receives a line now and then (the command prints them on stderr).
    """
    old, new = Path(old), Path(new)
    if new.exists():
        raise UpgradeError(f"{new} exists: give a new directory for the converted index")
    database = old / DATABASE
    minhash = not database.is_file() and (old / SKETCH_DATABASE).is_file()
    if not database.is_file() and not minhash:
        raise UpgradeError(f"{old} holds no index ({DATABASE} is missing)")
    staging = new.parent / f".{new.name}.upgrading-{os.getpid()}"
    with _writer_excluded(old):
        reader: OldIndex | OldMinHashIndex
        reader = OldMinHashIndex(old / SKETCH_DATABASE) if minhash else OldIndex(database)
        try:
            report = UpgradeReport(reader.format or "none")
            new.parent.mkdir(parents=True, exist_ok=True)
            staging.mkdir()
            try:
                if isinstance(reader, OldMinHashIndex):
                    reader.write(staging / SKETCH_DATABASE, report, progress)
                else:
                    write(reader, staging / DATABASE, report, progress)
                progress(f"upgrade: {report.pages} pages copied; building the index's tables")
                _open_once(staging, reader)
                report.payload_digests = _copy_crawl_file(old, staging, PAYLOAD_DIGESTS, "payload_digests")
                report.captures = _copy_crawl_file(old, staging, CAPTURES, "captures")
                staging.rename(new)
                _sync_directory(new.parent)
            except BaseException:
                shutil.rmtree(staging, ignore_errors=True)
                raise
        finally:
            reader.close()
    return report


class _writer_excluded:
    """Holds OLD's write lock (``LOCK``) while it is read, so that no writer changes it meanwhile."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / "LOCK"
        self.fd: int | None = None

    def __enter__(self) -> None:
        if not self.path.exists():
            return
        self.fd = os.open(self.path, os.O_RDONLY)
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self.fd)
            self.fd = None
            raise UpgradeError(
                f"another process is writing the index at {self.path.parent}: stop it first"
            ) from None

    def __exit__(self, *exc: object) -> None:
        if self.fd is not None:
            os.close(self.fd)


def _copy_crawl_file(old: Path, new: Path, name: str, table: str) -> int:
    """A file a crawl keeps in OLD beside the index (the WARC payload digests, each URL's last
    capture): not the index's data, but a crawl pointed at NEW should still write revisit records for
    payloads archived before and compare pages with their last captures. Copied with SQLite's backup,
    which reads a consistent state; the number of rows of ``table``."""
    source = old / name
    if not source.is_file():
        return 0
    try:
        reader = sqlite3.connect(f"file:{source}?mode=ro", uri=True)
        try:
            writer = sqlite3.connect(new / name)
            try:
                reader.backup(writer)
                return int(writer.execute(f"SELECT count(*) FROM {table}").fetchone()[0])
            finally:
                writer.close()
        finally:
            reader.close()
    except sqlite3.DatabaseError as exc:
        raise UpgradeDamaged(
            f"{source} is damaged ({exc}); nothing was written. Move the file away and upgrade again "
            "(a crawl then stores every payload in full once more and has no last captures to compare with)"
        ) from exc


def _sync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _open_once(directory: Path, reader: OldIndex | OldMinHashIndex) -> None:
    """Open the new index once as its writer: every row is checked, and a simhash index's tables (and
    its sketches' LSH files) are written, so that NEW opens by mapping them."""
    if isinstance(reader, OldMinHashIndex):
        open_index(directory, kind="minhash").close()
        return
    mode = "verified" if reader.sketch_params is not None else "simhash"
    with open_index(directory, mode=mode) as index:
        index.compact()
