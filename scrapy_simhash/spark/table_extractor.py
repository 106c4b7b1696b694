"""A saved table remembers its extractor: ``spark dedupe --against`` checks it as an index is checked.

Fingerprints of different extractors (or of one extractor with other options) are not comparable, so
``--save`` writes the description of the run's extractor in every row (column ``extractor``), and a
later run given the table with ``--against`` compares its own with what the table holds, with the
outcomes of an index (:mod:`..index.extractor_record`):

- the same name and options: goes on; another version only: goes on, one warning;
- another name or other options: :class:`TableExtractorMismatch` (the command's status 2), naming
  both and ``--mix-extractors``, unless mixing is allowed (then one warning);
- no ``extractor`` column (a table saved before tables recorded it, when trafilatura was the only
  extractor): a trafilatura run goes on with one warning (the options cannot be checked); any other
  extractor is a mismatch with ``trafilatura`` of unknown version and options.

The check reads the distinct values of one column, before this run reads or saves anything, so a
refused run writes no table.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from ..extract.identity import ExtractorIdentity, other_name
from ..index.extractor_record import BEFORE_RECORDS  # a table saved before records: an index's rule

COLUMN = "extractor"
"""The column of a saved table that holds the description of the extractor of its rows."""


class TableExtractorMismatch(ValueError):
    """A table given with ``--against`` holds pages of another extractor than the run's."""

    def __init__(self, table: str, recorded: str, current: str, *, before_records: bool = False) -> None:
        self.table, self.recorded, self.current = table, recorded, current
        made_by = recorded
        if before_records:
            made_by += " (of unknown version and options: saved before tables recorded their extractor)"
        differences = ExtractorIdentity.read(recorded).differences(ExtractorIdentity.read(current))
        name = other_name(recorded, current)
        switch = f"--extractor {name}" if name else "--extractor"
        super().__init__(
            f"--against {table} holds pages fingerprinted by the extractor {made_by}, and this run's is "
            f"{current} ({differences}): their fingerprints are not comparable. Run with the "
            f"table's extractor ({switch}), save the stored archives again with this run's, or pass "
            "--mix-extractors to cluster them together"
        )


def table_extractors(stored: Any) -> list[str] | None:
    """The extractors a saved table's rows name (None: the table has no ``extractor`` column)."""
    if COLUMN not in stored.columns:
        return None
    return sorted(row[0] for row in stored.select(COLUMN).distinct().collect() if row[0])


def check_tables(
    tables: Iterable[tuple[str, Any]], current: str, *, mix: bool, warn: Callable[[str], None]
) -> None:
    """Check the run's extractor ``current`` against each ``(name, stored DataFrame)``; calls ``warn``
    with what a run that goes on should be told; :class:`TableExtractorMismatch` otherwise."""
    me = ExtractorIdentity.read(current)
    for table, stored in tables:
        recorded = table_extractors(stored)
        if recorded is None:
            if me.name == BEFORE_RECORDS:
                warn(
                    f"--against {table} does not record its extractor (saved by an earlier version of "
                    f"scrapy-simhash, with trafilatura): it is taken to be this run's, {current}; if its "
                    "pages were made with other trafilatura options, save them again"
                )
                continue
            recorded = [BEFORE_RECORDS]
        for other in recorded:
            theirs = ExtractorIdentity.read(other)
            if theirs.same_extractor(me):
                if theirs.version != me.version:
                    warn(
                        f"--against {table} holds pages made by {other}; this run uses the same extractor "
                        f"and options at another version ({current}): a few pages may extract differently"
                    )
                continue
            if not mix:
                raise TableExtractorMismatch(table, other, current, before_records=other == BEFORE_RECORDS)
            warn(
                f"--against {table} holds pages made by {other}; this run's are made by {current}, "
                "clustered together as asked: pages of different extractors are not comparable"
            )


__all__ = ["BEFORE_RECORDS", "COLUMN", "TableExtractorMismatch", "check_tables", "table_extractors"]
