"""``report --timeline URL``: one page of one URL's history, every capture the inputs hold and the word
diff of the main text between each two consecutive ones."""

from __future__ import annotations

import difflib
import os
import time
from collections import Counter
from pathlib import Path

from ..captures import fill_dates
from ..data import captures_of_rows, input_kind
from ..html import write_page
from ..model import named_extractor
from ..textdiff import MAX_CHANGED_ONE_URL
from ..warcs import read_pages
from .diffs import diff_steps
from .html import timeline_page
from .model import Capture, Timeline, group_by_uri, timeline_of

CAPTURES_ON_PAGE = 1000
"""Captures of the URL listed (its latest), each step diffed."""


def _captures(
    inputs: list[str], url: str, backend: str
) -> tuple[list[Capture], set[str], str | None, list[str]]:
    """The captures of ``url`` in ``inputs``, every URL captured there, the extractor named, notes."""
    kinds = {input_kind(i) for i in inputs}
    if "index" in kinds:
        raise ValueError(
            "an index keeps one entry per page, not its captures over time: give the WARCs (or their "
            "sidecars) or dedupe reports for --timeline"
        )
    if len(kinds) > 1:
        raise ValueError(f"give inputs of one kind (dedupe reports or WARCs), not {sorted(kinds)}")
    if kinds == {"rows"}:
        captures, uris, notes = captures_of_rows(inputs, url)
        notes.append("a dedupe report lists only the pages in clusters: captures in no cluster are not here")
        return captures, uris, None, notes
    captures = []
    pages, _html, notes = read_pages(inputs, backend=backend, captures=captures)
    extractor, several = named_extractor(Counter(p.extractor for p in pages if p.extractor), "the records")
    return [c for c in captures if c.uri == url], {c.uri for c in captures}, extractor, notes + several


def url_timeline(
    inputs: list[str], url: str, *, backend: str = "auto"
) -> tuple[Timeline, str | None, list[str]]:
    """``url``'s timeline with every step diffed, the extractor named, and notes; ValueError when
    the inputs hold no capture of it (naming the captured URLs most like it)."""
    from ...extract import extractor_for

    found, uris, extractor, notes = _captures(inputs, url, backend)
    if not uris:
        raise ValueError(
            "the inputs hold no fingerprinted capture: archives carry fingerprints only in simhash metadata "
            "records; run `scrapy-simhash tag ARCHIVES` first and give the archives with their "
            "`.simhash.warc.gz` sidecars"
        )
    if not found:
        like = difflib.get_close_matches(url, sorted(uris), n=5, cutoff=0.6)
        hint = f"; captured URLs like it: {', '.join(like)}" if like else ""
        raise ValueError(f"no capture of {url} in the inputs{hint}")
    missing = fill_dates(found, backend=backend)
    if missing:
        notes.append(f"{missing} capture(s) whose record is not in the inputs: date unknown, listed last")
    timeline = timeline_of(url, group_by_uri(found)[url], listed=CAPTURES_ON_PAGE)
    diff_steps(
        [timeline],
        steps_per_url=None,
        backend=backend,
        extractor=extractor_for(extractor),
        max_changed=MAX_CHANGED_ONE_URL,
    )
    return timeline, extractor, notes


def timeline_report(
    inputs: list[str], output: str | os.PathLike[str], url: str, *, backend: str = "auto"
) -> tuple[Path, int, float, Timeline, list[str]]:
    """Write the page of ``url``'s history; returns where, its size, seconds, the timeline and notes."""
    start = time.monotonic()
    timeline, extractor, notes = url_timeline(inputs, url, backend=backend)
    text = timeline_page(timeline, sources=inputs, extractor=extractor, notes=notes)
    path, size = write_page(text, output)
    return path, size, time.monotonic() - start, timeline, notes
