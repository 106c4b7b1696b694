"""WARCs as report input (the simhash metadata records of a crawl or of ``tag``'s sidecars), and the
main texts of chosen records, re-extracted from their files for the side-by-side diffs."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

from ..warc.read.payload import html_page
from ..warc.read.reader import ArchiveReader, ArchiveRecord, ReadProblem
from ..warc.records import WARC_FIELDS, SimhashFields, parse_fields
from ..warc.revisits import NOT_IN_INPUT, REVISIT_RESOLVED_BY, RevisitBook
from .archive_files import archive_files
from .captures import CAPTURE_TYPES, Head, archive_timelines, capture_of_metadata, head_of
from .model import MAX_NOTES, Page, ReportData, build, group_clusters, named_extractor, rule_for

if TYPE_CHECKING:
    from .timeline.model import Capture


def read_pages(
    inputs: list[str],
    *,
    backend: str = "auto",
    revisits: Counter[bool] | None = None,
    captures: list[Capture] | None = None,
) -> tuple[list[Page], int, list[str]]:
    """The pages of the simhash metadata records (earliest capture first), the HTML responses seen,
    and notes on what was passed over. Revisit records are not pages: each is counted in ``revisits``
    (True: its original is in the input), as ``tag``'s sidecar record of it says (``revisit-*`` fields),
    else as resolved among the inputs (:mod:`..warc.revisits`). ``captures`` collects every capture
    the metadata records describe, revisits included, for the timelines (:mod:`.captures`)."""
    reader = ArchiveReader(backend)
    pages: list[Page] = []
    notes: list[str] = []
    problems = html = 0
    known: set[str] = set()
    book = RevisitBook()
    described: dict[str, bool] = {}
    """Revisits a sidecar describes (by the revisit's record id): whether their original is in the input."""
    for path in archive_files(inputs):
        last_response: dict[str | None, int] = {}
        last_capture: dict[str | None, Head] = {}
        for item in reader.read(path):
            if isinstance(item, ReadProblem):
                problems += 1
                if len(notes) < MAX_NOTES:
                    notes.append(str(item))
                continue
            book.see(item)  # a damaged revisit is simply not counted
            if captures is not None and item.record_type in CAPTURE_TYPES:
                last_capture[item.target_uri] = head_of(item)
            if item.record_type in ("response", "resource", "revisit"):
                last_response[item.target_uri] = item.offset  # the record a crawl's metadata describes
                if item.record_type != "revisit" and html_page(item) is not None:
                    html += 1
            elif item.record_type == "metadata" and (item.content_type or "").startswith(WARC_FIELDS):
                resolved = _revisit_of_metadata(item)
                page = None if resolved is not None else _page_of_metadata(item, last_response)
                if captures is not None and (resolved is not None or page is not None):
                    values = dict(parse_fields(item.block))
                    described_by = last_capture.get(item.target_uri)
                    capture = capture_of_metadata(item, values, described_by, len(captures))
                    if capture is not None:
                        captures.append(capture)
                if resolved is not None:
                    refers_to = item.links.refers_to if item.links else None
                    described[refers_to or f"{item.file}#{item.offset}"] = resolved != NOT_IN_INPUT
                    continue
                if page is not None and page.key not in known:  # a record described twice counts once
                    known.add(page.key)
                    pages.append(page)
    if revisits is not None:
        for found in book.resolve_all().values():
            for resolution in found:
                revisit = resolution.revisit
                described.setdefault(
                    revisit.record_id or f"{revisit.file}#{revisit.offset}", resolution.original is not None
                )
        revisits.update(described.values())
    if problems:
        notes.append(f"{problems} read problem(s) in the inputs (records passed over)")
    # the earliest capture is a cluster's original; without dates, the first in the files, as dedupe
    pages.sort(key=lambda p: (p.date or "", p.file or "", p.offset or 0))
    return pages, html, notes


def load_warcs(
    inputs: list[str], *, k: int | None = None, threshold: float | None = None, backend: str = "auto"
) -> ReportData:
    """Pages from the simhash metadata records; clusters recomputed by the rule over all of them
    (verified where the records carry sketches with ``threshold``, the shipped one by default;
    simhash within ``k`` elsewhere)."""
    rule = rule_for(k, threshold)
    revisits = Counter[bool]()
    captures: list[Capture] = []
    pages, html, notes = read_pages(inputs, backend=backend, revisits=revisits, captures=captures)
    seen = html if html else None
    skipped = {"no fingerprint record": max(0, html - len(pages))} if html else None
    if not html:
        notes.append("the inputs hold no HTML responses (sidecars?): pages seen and skipped are unknown")
    named = Counter(p.extractor for p in pages if p.extractor)
    extractor, several = named_extractor(named, "the metadata records")
    data = build(
        "WARC",
        inputs,
        pages,
        group_clusters(pages, rule),
        k=rule.distance,
        threshold=rule.similarity,
        seen=seen,
        skipped=skipped,
        fingerprinted=len(pages),
        notes=notes + several,
        mode=rule.mode,
        extractor=extractor,
        extractors=tuple(named),
        revisits=(revisits[True], revisits[False]) if revisits else None,
    )
    data.timelines = archive_timelines(captures, backend=backend)
    return data


def _revisit_of_metadata(record: ArchiveRecord) -> str | None:
    """How a sidecar's revisit record was resolved (``revisit-resolved-by``); None for other records."""
    if REVISIT_RESOLVED_BY.encode() not in record.block:
        return None
    return dict(parse_fields(record.block)).get(REVISIT_RESOLVED_BY)


def _page_of_metadata(record: ArchiveRecord, last_response: dict[str | None, int]) -> Page | None:
    """The page a simhash metadata record describes: a sidecar names its record; a crawl's is the last
    response (or revisit, for a payload archived before) of its URL in the same file."""
    try:
        fields = SimhashFields.from_pairs(parse_fields(record.block))
    except (KeyError, ValueError):
        return None  # another tool's metadata record
    date = record.date
    if fields.source_file is not None:  # a sidecar: the record is in another file
        file = str(Path(record.file).parent / fields.source_file)
        offset = fields.source_offset
        date = None  # the sidecar record's date is when `tag` ran, not when the page was captured
    else:  # written by the crawl next to its response
        file, offset = record.file, last_response.get(record.target_uri)
    file = os.path.abspath(file)
    return Page(
        key=f"{file}#{offset}",
        uri=record.target_uri,
        date=date,
        file=file,
        offset=offset,
        simhash=fields.simhash,
        sketch=fields.minhash,
        extractor=fields.extractor or None,
    )
