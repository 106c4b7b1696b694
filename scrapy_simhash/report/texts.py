"""The records and main texts of chosen pages, read again from their WARC files for the report's
side-by-side and timeline diffs: each file read once, up to the last record wanted from it, and a
reason in place of every text that cannot be shown.
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..warc.read.payload import html_page
from ..warc.read.reader import ArchiveReader, ArchiveRecord
from ..warc.read.wacz import archive_exists, split_location
from .archive_files import archive_files

if TYPE_CHECKING:
    from ..extract import Extractor

MAX_TEXT = 20_000
"""Characters of each main text kept for a diff: a report stays small, the start shows the change."""


def locate_records(
    record_ids: set[str], archives: list[str], *, backend: str = "auto"
) -> dict[str, tuple[str, int]]:
    """(file, offset) of the response records with these ``WARC-Record-ID`` s in ``archives``
    (files or directories, read until every one is found): a crawl's index keeps the id of each
    page's record, its WARC writer the record."""
    return {
        record_id: (os.path.abspath(record.file), record.offset)
        for record_id, record in find_records(record_ids, archives, backend=backend)
    }


def find_records(
    record_ids: set[str], archives: list[str], *, backend: str = "auto"
) -> Iterator[tuple[str, ArchiveRecord]]:
    """The records with these ``WARC-Record-ID`` s in ``archives``, as they are found (each file read
    until every one is found; a file that cannot be read is passed over)."""
    left = set(record_ids)
    reader = ArchiveReader(backend)
    for path in archive_files(archives):
        if not left:
            return
        try:
            for item in reader.read(path):
                if isinstance(item, ArchiveRecord) and item.record_id in left:
                    left.discard(item.record_id)
                    yield item.record_id, item
                    if not left:
                        return
        except OSError:
            continue  # the file's pages keep "the input does not say which WARC record holds this page"


@dataclass(frozen=True)
class Text:
    """A record's main text, or why the report cannot show it."""

    text: str | None
    reason: str | None = None


Locator = tuple[str | None, int | None]


def fetch_records(locators: list[Locator], *, backend: str = "auto") -> dict[Locator, ArchiveRecord | Text]:
    """The records at (file, offset), or a :class:`Text` saying why not; each file is read once, up
    to the last record wanted from it."""
    out: dict[Locator, ArchiveRecord | Text] = {}
    by_file: dict[str, set[int]] = defaultdict(set)
    for file, offset in locators:
        if not file or offset is None:
            out[(file, offset)] = Text(None, "the input does not say which WARC record holds this page")
        elif not archive_exists(file):
            out[(file, offset)] = Text(None, f"file missing: {file}")
        else:
            by_file[file].add(offset)
    reader = ArchiveReader(backend)
    for file, offsets in by_file.items():
        left = set(offsets)
        try:
            for item in reader.read(file):
                if isinstance(item, ArchiveRecord) and item.offset in left:
                    left.discard(item.offset)
                    out[(file, item.offset)] = item
                    if not left:
                        break
        except OSError as exc:
            for offset in left:
                out[(file, offset)] = Text(None, f"cannot read {file}: {exc}")
            left = set()
        for offset in left:
            out[(file, offset)] = Text(None, f"no record starts at offset {offset} of {file}")
    return out


def fetch_texts(
    locators: list[Locator], *, backend: str = "auto", extractor: Extractor | None = None
) -> dict[Locator, Text]:
    """Main texts of the records at (file, offset), extracted as the fingerprint was: by ``extractor``
    (default: the default extractor)."""
    from ..extract import DEFAULT_EXTRACTOR

    chosen = extractor or DEFAULT_EXTRACTOR
    records = fetch_records(locators, backend=backend)
    originals = revisited_records(records, backend=backend)
    texts: dict[Locator, Text] = {}
    for where, found in records.items():
        if isinstance(found, ArchiveRecord) and found.record_type == "revisit":
            found = originals.get(found.links.refers_to if found.links else None, found)
        texts[where] = found if isinstance(found, Text) else text_of(found, chosen)
    return texts


def revisited_records(
    records: dict[Locator, ArchiveRecord | Text], *, backend: str = "auto"
) -> dict[str | None, ArchiveRecord]:
    """The originals of the ``revisit`` records among ``records``, by the id their ``WARC-Refers-To``
    names, looked for in the files that hold the revisits: a revisit repeats its original's payload
    without a copy of it, so the text shown for it is its original's (a crawl writes identical
    payloads as revisits of the first one it wrote)."""
    wanted: set[str] = set()
    files: list[str] = []  # each revisit's own file first (where a crawl writes the original), then
    around: list[str] = []  # the directory or WACZ that holds it
    for found in records.values():
        if isinstance(found, ArchiveRecord) and found.record_type == "revisit" and found.links:
            if not found.links.refers_to:
                continue
            wanted.add(found.links.refers_to)
            files.append(found.file)
            member = split_location(found.file)
            around.append(member[0] if member else os.path.dirname(found.file) or ".")
    if not wanted:
        return {}
    originals = find_records(wanted, list(dict.fromkeys(files + around)), backend=backend)
    return {record_id: record for record_id, record in originals if record.record_type != "revisit"}


def text_of(record: ArchiveRecord, extractor: object) -> Text:
    page = html_page(record)
    if page is None:
        return Text(None, f"the record is not an HTML page ({record.record_type})")
    if page.too_large:
        return Text(None, "the page is over the size limit")
    extraction = extractor(page.body, page.url, page.encoding)  # type: ignore[operator]
    if extraction.text is None:
        return Text(None, f"no main text ({extraction.reason})")
    return Text(extraction.text[:MAX_TEXT])
