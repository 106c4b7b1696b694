"""The captures an input holds, for the timeline view: from WARC metadata records (a crawl's, written
after the response or revisit record they describe, or ``tag``'s sidecars, which point at their
record), and from ``dedupe --report`` rows (their ``text_change`` columns).

A capture is a fingerprinted page: the URLs whose main text the report can follow over time.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any, NamedTuple

from ..warc.read.reader import ArchiveRecord
from ..warc.records import (
    PREVIOUS_CAPTURE,
    PREVIOUS_CAPTURE_DATE,
    SOURCE_FILE,
    SOURCE_OFFSET,
    TEXT_CHANGE,
    TEXT_SIMILARITY,
)
from ..warc.revisits import REVISIT_METHOD, REVISIT_OF, REVISIT_OF_FILE, REVISIT_OF_OFFSET
from .model import Page
from .texts import fetch_records
from .timeline.model import Capture, Timelines, build_timelines, captured_again, group_by_uri

CAPTURE_TYPES = ("response", "resource", "revisit")


class Head(NamedTuple):
    """What a capture needs of its record (not its block)."""

    record_type: str
    record_id: str | None
    offset: int
    date: str | None
    refers_to: str | None


def head_of(record: ArchiveRecord) -> Head:
    refers_to = record.links.refers_to if record.links else None
    return Head(record.record_type, record.record_id, record.offset, record.date, refers_to)


def _number(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if 0.0 <= number <= 1.0 else None


def _offset(value: Any) -> int | None:
    try:
        number = int(value)
    except (TypeError, ValueError):
        return None
    return number if number >= 0 else None


def _change(capture: Capture, values: dict[str, Any], names: tuple[str, str, str, str]) -> Capture:
    kind, similarity, previous, previous_date = (values.get(name) for name in names)
    if isinstance(kind, str) and kind:
        capture.kind = kind
        capture.similarity = _number(similarity)
        capture.previous_id = previous or None
        capture.previous_date = previous_date or None
    return capture


FIELD_NAMES = (TEXT_CHANGE, TEXT_SIMILARITY, PREVIOUS_CAPTURE, PREVIOUS_CAPTURE_DATE)
COLUMN_NAMES = ("text_change", "text_similarity", "previous_capture", "previous_capture_date")
"""The ``dedupe --report`` columns of the same fields."""


def capture_of_metadata(
    record: ArchiveRecord, values: dict[str, str], described: Head | None, order: int
) -> Capture | None:
    """The capture a simhash metadata record describes: a sidecar's record names it (``source-file``,
    ``source-offset``; its date is read from that record later, the sidecar's is when ``tag`` ran), a
    crawl's follows it in the same file (``described``: the last capture record of its URL there)."""
    if not record.target_uri:
        return None
    revisit = REVISIT_OF in values or REVISIT_OF_FILE in values
    if SOURCE_FILE in values:
        folder = Path(record.file).parent
        capture = Capture(
            uri=record.target_uri,
            date=None,
            file=os.path.abspath(folder / values[SOURCE_FILE]),
            offset=_offset(values.get(SOURCE_OFFSET)),
            record_id=record.links.refers_to if record.links else None,
            record_type="revisit" if revisit else "response",
            order=order,
        )
        if revisit:
            text_file = values.get(REVISIT_OF_FILE)
            capture.text_file = None if text_file is None else os.path.abspath(folder / text_file)
            capture.text_offset = _offset(values.get(REVISIT_OF_OFFSET))
            capture.text_id = values.get(REVISIT_OF)
    elif described is not None:
        capture = Capture(
            uri=record.target_uri,
            date=described.date or record.date,
            file=os.path.abspath(record.file),
            offset=described.offset,
            record_id=described.record_id,
            record_type=described.record_type,
            text_id=described.refers_to if described.record_type == "revisit" else None,
            order=order,
        )
    else:
        return None
    return _change(capture, values, FIELD_NAMES)


def capture_of_row(row: dict[str, Any], order: int) -> Capture | None:
    """A ``dedupe --report`` row as a capture (None without a URI); revisit rows are captures too,
    their text is their original's (``revisit_of``, a record id)."""
    uri = row.get("uri")
    if not isinstance(uri, str) or not uri:
        return None
    file = row.get("file")
    capture = Capture(
        uri=uri,
        date=row.get("date") if isinstance(row.get("date"), str) else None,
        file=file if isinstance(file, str) and file else None,
        offset=_offset(row.get("offset")),
        record_id=row.get("record_id") if isinstance(row.get("record_id"), str) else None,
        record_type="revisit" if row.get("method") == REVISIT_METHOD else "response",
        order=order,
    )
    if capture.record_type == "revisit" and isinstance(row.get("revisit_of"), str):
        capture.text_id = row["revisit_of"] if row["revisit_of"].startswith("<") else None
    return _change(capture, row, COLUMN_NAMES)


class RowCaptures:
    """The captures of ``dedupe --report`` rows, made cheaply: a row that records a change, and a
    revisit row, is a capture at once; a page row without a change only when its URL turns out to be
    captured more than once (most are not: a capture each would cost memory over a million rows)."""

    def __init__(self) -> None:
        self.pages: list[Page] = []
        self.recorded: dict[str, Capture] = {}
        self.revisits: list[Capture] = []
        self.has_change_column = False

    def add_page(self, page: Page, row: dict[str, Any]) -> None:
        self.has_change_column = self.has_change_column or COLUMN_NAMES[0] in row
        if row.get(COLUMN_NAMES[0]):
            capture = capture_of_row(row, 0)
            if capture is not None:
                self.recorded[page.key] = capture
        self.pages.append(page)

    def add_revisit(self, row: dict[str, Any]) -> None:
        self.has_change_column = self.has_change_column or COLUMN_NAMES[0] in row
        capture = capture_of_row(row, 2 * len(self.pages) + 1)  # after the pages before it
        if capture is not None:
            self.revisits.append(capture)

    def captures(self) -> list[Capture]:
        """The captures of the URLs with more than one, in input order."""
        seen = Counter(p.uri for p in self.pages if p.uri)
        seen.update(c.uri for c in self.revisits)
        again = {uri for uri, n in seen.items() if n > 1}
        out = []
        for position, page in enumerate(self.pages):
            if page.uri in again:
                capture = self.recorded.get(page.key) or capture_of_page(page)
                capture.order = 2 * position
                out.append(capture)
        return out + [c for c in self.revisits if c.uri in again]


def capture_of_page(page: Page) -> Capture:
    """A dedupe row's page whose row records no change, as a capture."""
    assert page.uri is not None
    return Capture(page.uri, page.date, page.file, page.offset, page.record_id)


def fill_dates(captures: Iterable[Capture], *, backend: str = "auto") -> int:
    """Give the captures whose date is unknown (described by a sidecar) their record's date, id and
    type, read from the record itself; returns how many could not be found."""
    undated = [c for c in captures if c.date is None]
    records = fetch_records([(c.file, c.offset) for c in undated], backend=backend)
    missing = 0
    for capture in undated:
        item = records.get((capture.file, capture.offset))
        if not isinstance(item, ArchiveRecord):  # no locator, file missing or unreadable, not found
            missing += 1
            continue
        capture.date = item.date
        capture.record_id = capture.record_id or item.record_id
        if item.record_type == "revisit":
            capture.record_type = "revisit"
            refers_to = item.links.refers_to if item.links else None
            capture.text_id = capture.text_id or refers_to
    return missing


def archive_timelines(captures: list[Capture], *, backend: str = "auto") -> Timelines:
    """The timelines of the URLs captured more than once; the dates of their sidecar-described
    captures read from the records first (only theirs: the others need no second read)."""
    twice = [c for found in group_by_uri(captured_again(captures)).values() if len(found) > 1 for c in found]
    missing = fill_dates(twice, backend=backend)
    timelines = build_timelines(twice)
    if missing:
        timelines.notes.append(
            f"{missing:,} capture(s) described by a sidecar whose record is not in the inputs: their "
            "date is unknown, they are listed last"
        )
    return timelines
