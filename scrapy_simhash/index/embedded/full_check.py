"""The full check of an embedded index, for ``scrapy-simhash index check`` (a user or a cron job).

A cleanly closed index opens without reading every page (:mod:`.integrity` says why): damage at
rest (a disk, a copy, a hand) is found here, by reading everything once: SQLite's
``integrity_check``, every row against its checksum, and every file the manifest names against its
CRC-32 (the LSH files too). Read-only: safe beside a running writer, which it does not disturb.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ..base import IndexCorruptError
from ..tables.manifest import EarlierLayout, TablesInvalid, crc_problems, read_manifest


@dataclass
class CheckReport:
    """What :func:`check_index` found: ``problems`` (empty: sound) and what it read."""

    rows: int = 0
    files: int = 0
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    """What is not damage but worth knowing (table files of an earlier layout)."""


def check_index(path: str | Path, progress: Callable[[str], None] | None = None) -> CheckReport:
    """Read the whole embedded index at ``path`` and report every kind of damage found.

    The database is the source of truth: its damage is reported as is (restore it). Damaged table
    files are derived: a writer opened with ``verify="full"`` writes them again from the database."""
    from .embedded import SimhashIndex

    report = CheckReport()
    say = progress or (lambda line: None)
    directory = Path(path)
    earlier = False
    try:
        read_manifest(directory)
    except EarlierLayout:
        earlier = True  # sound files a writer will write again: the open below reads the rows
    except TablesInvalid:
        pass  # reported below, after the database
    try:
        with SimhashIndex(directory, read_only=True, verify="full") as index:
            say("database: SQLite's integrity_check passed; reading every row")
            for _ in index:
                report.rows += 1
            if index.stats()["rebuilds"] and not earlier:
                report.problems.append("the table files do not describe the database (see the log)")
    except IndexCorruptError as exc:
        report.problems.append(str(exc))
    try:
        manifest = read_manifest(directory)
    except EarlierLayout as exc:
        report.notes.append(
            f"{exc}: each open reads the rows until a writer (a crawl, `tag --index`, or "
            "`scrapy-simhash index check --repair`) writes them again in this version's layout"
        )
        return report
    except TablesInvalid as exc:
        report.problems.append(f"table files: {exc}")
        return report
    if manifest is not None:
        say("table files: checking their CRC-32s")
        checked, problems = crc_problems(directory, manifest)
        report.files = checked
        report.problems += [f"table files: {problem}" for problem in problems]
    return report
