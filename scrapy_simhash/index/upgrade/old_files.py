"""What the converter's readers of earlier formats share: opening an old database read-only after
SQLite's full check, its signed settings, its sketch parameters, and the errors and report."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...fingerprint.minhash import SCHEME
from ..base import SimhashIndexError
from ..embedded.database import settings_check

DATABASE = "index.sqlite3"
SKETCH_STORE = "sketches"
"""Where earlier versions kept a verified index's sketches: a MinHash index directory in the index's."""
SKETCH_DATABASE = "minhash.sqlite3"
BATCH = 50_000
EVERYTHING = (1 << 63) - 1
SIGN, WRAP = 1 << 63, 1 << 64


class UpgradeError(SimhashIndexError):
    """The conversion cannot start (NEW exists, OLD is no index or already in this format)."""


class UpgradeDamaged(SimhashIndexError):
    """OLD is damaged: a row or setting fails its checksum, SQLite finds errors, writes were lost."""


@dataclass
class UpgradeReport:
    """What the conversion found and wrote."""

    found_format: str
    pages: int = 0
    with_sketch: int = 0
    unchecked: int = 0
    """Rows that had no checksum (written before checksums): copied as they were, now checksummed."""
    narrowed: int = 0
    """Sketches whose 32-bit values were reduced to their low 8 bits."""
    moved: int = 0
    """Sketches moved from a second store (``sketches/``) into their pages' rows."""
    orphans: int = 0
    """Sketches of that store whose page was missing (dropped)."""
    payload_digests: int = 0
    """The crawl's WARC payload digests copied from OLD (``payload-digests.sqlite``)."""
    captures: int = 0
    """The crawl's last captures of URLs copied from OLD (``captures.sqlite``)."""

    @property
    def without_sketch(self) -> int:
        return self.pages - self.with_sketch


def damaged(database: Path, what: str) -> UpgradeDamaged:
    return UpgradeDamaged(
        f"the index database {database} is damaged ({what}); nothing was written. Restore it from a "
        f"backup, or rebuild the index from the pages' WARCs"
    )


def read_only_uri(database: Path) -> str:
    """The URI :func:`connect` opens ``database`` by (also to attach it to another connection)."""
    mode = "ro" if Path(f"{database}-wal").exists() else "ro&immutable=1"
    return f"file:{database}?mode={mode}"


def connect(database: Path) -> sqlite3.Connection:
    """Read-only, after SQLite's full check (pages, indexes, free list). Without a write-ahead log (a
    writer closed it cleanly) the file is read as immutable, so that not even SQLite's shared-memory
    file is left beside it; with one (a writer was killed), SQLite reads it, as the old version would."""
    try:
        conn = sqlite3.connect(read_only_uri(database), uri=True)
        problems = [row[0] for row in conn.execute("PRAGMA integrity_check(3)").fetchall()]
    except sqlite3.DatabaseError as exc:
        raise damaged(database, f"{type(exc).__name__}: {exc}") from exc
    if problems != ["ok"]:
        conn.close()
        raise damaged(database, "integrity_check: " + "; ".join(problems))
    return conn


def signed_settings(conn: sqlite3.Connection, database: Path) -> dict[str, str]:
    """The settings, checked against their ``check`` when they have one."""
    stored = dict(conn.execute("SELECT name, value FROM settings").fetchall())
    check = stored.pop("check", None)
    if check is not None and check != settings_check(stored):
        raise damaged(database, "the settings fail their checksum")
    return stored


def sketch_params(stored: dict[str, str], where: Path) -> dict[str, Any]:
    """A sketch store's or column's parameters (value_bits 32 when not recorded: before the setting)."""
    if stored.get("scheme") != SCHEME:
        raise UpgradeError(
            f"{where} holds {stored.get('scheme')!r} sketches, not {SCHEME!r}: "
            "rebuild the index from the pages"
        )
    try:
        params = {
            "num_values": int(stored["num_values"]),
            "threshold": float(stored["threshold"]),
            "bands": int(stored["bands"]),
            "rows": int(stored["rows"]),
            "value_bits": int(stored.get("value_bits", 32)),
        }
    except (KeyError, ValueError) as exc:
        raise damaged(where, f"its sketch settings are incomplete: {exc}") from exc
    if params["value_bits"] not in (8, 32):
        raise damaged(where, f"{params['value_bits']}-bit sketch values")
    return params
