"""How each URL's main text changed across the captures of archives: the one place where ``tag`` and
``dedupe`` turn archive captures into change kinds (:mod:`scrapy_simhash.change`).

A capture is a fingerprinted page (:func:`capture_of`), or an ``identical-payload-digest`` revisit
record resolved to its original (:func:`revisit_capture`): the revisit is a capture of its own URL,
with its own record id and date, and the original's payload, so a revisit of the same URL is
``unchanged`` since that original.

Ordering rule: a URL's captures are put in ``WARC-Date`` order, ties (the same date) in input order
(the order the inputs were given, then the offset in the file); every capture after the first is
compared with the one just before it. Dates are compared as instants, as ``--keep`` compares them
(:func:`~scrapy_simhash.keep.capture_instant`: fractions of a second, ``+01:00`` offsets and the 14
digits of an ARC date alike). A capture whose date is missing or invalid cannot be placed in time: it
gets no change and is never a previous capture.

``dedupe`` knows every capture before it writes a row, so it applies the rule to the whole run
(:func:`changes`). ``tag`` writes each sidecar record as it reads its page, so it cannot go back:
:class:`Timeline` keeps, per URL, only the latest-dated capture seen so far (in a capture store:
the index's own with ``--index``, else a temporary one) and compares a capture only with that one,
when it is not older; an older capture (inputs not in date order) gets no change and does not replace
it. With inputs in date order (archives added as they are made, the usual case) both give the same
changes.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Hashable, Iterable
from dataclasses import dataclass

from ..change import Change, classify
from ..decision import DEFAULT_RULE, Rule
from ..index.archive.captures import Capture, CaptureStore, CaptureStoreError
from ..keep import capture_instant
from .pipeline import PageResult
from .records import TextChange
from .revisits import Resolution, Revisit


def date_key(date: str | None) -> tuple[int, int] | None:
    """Where a capture's date puts it in time (UTC seconds, nanoseconds); None when it has no valid date."""
    return capture_instant(date)


def capture_of(result: PageResult, *, sketches: bool = True) -> Capture | None:
    """A fingerprinted page as a capture of its URL; None when it has no fingerprint, URL, date or
    payload digest. ``sketches=False`` leaves its sketch out (simhash mode compares by simhash)."""
    if result.simhash is None or not result.uri or not result.payload_digest or date_key(result.date) is None:
        return None
    assert result.date is not None
    sketch = result.minhash.to_text() if sketches and result.minhash is not None else None
    return Capture(
        url=result.uri,
        record_id=result.record_id,
        date=result.date,
        payload_digest=result.payload_digest,
        text_digest=result.text_digest,
        simhash=result.simhash,
        sketch=sketch,
    )


@dataclass(frozen=True)
class RevisitCapture:
    """A revisit record as a capture of its URL, before it is placed: ``original`` is the capture of
    the record whose payload it repeats (None when that record has no fingerprint in the run); then
    only a previous capture with the same payload digest can tell its text (:func:`settle`)."""

    url: str
    record_id: str | None
    date: str
    payload_digest: str | None
    original: Capture | None


Seen = Capture | RevisitCapture


def revisit_capture(revisit: Revisit, original: Capture | None) -> RevisitCapture | None:
    """A revisit record as a capture of its URL; None without URL or readable date."""
    if not revisit.uri or date_key(revisit.date) is None:
        return None
    assert revisit.date is not None
    digest = revisit.payload_digest or (original.payload_digest if original is not None else None)
    return RevisitCapture(revisit.uri, revisit.record_id, revisit.date, digest, original)


def settle(seen: Seen, previous: Capture | None) -> Capture | None:
    """The capture ``seen`` is, once its URL's previous capture is known; None when a revisit's text
    cannot be told (its original has no fingerprint and its payload is not the previous one's)."""
    if isinstance(seen, Capture):
        return seen
    if previous is not None and seen.payload_digest and previous.payload_digest == seen.payload_digest:
        source = previous  # the same payload: the same text, fingerprint and sketch
    elif seen.original is not None:
        source = seen.original
    else:
        return None
    return Capture(
        url=seen.url,
        record_id=seen.record_id,
        date=seen.date,
        payload_digest=seen.payload_digest or source.payload_digest,
        text_digest=source.text_digest,
        simhash=source.simhash,
        sketch=source.sketch,
    )


def _same_record(previous: Capture, seen: Seen) -> bool:
    """Whether ``seen`` is the record ``previous`` was made from (record ids are unique in archives)."""
    return previous.record_id is not None and previous.record_id == seen.record_id


def compare(previous: Capture, current: Capture, rule: Rule) -> Change | None:
    """:func:`~scrapy_simhash.change.classify`, None when a sketch cannot be read or compared."""
    try:
        return classify(previous, current, rule)
    except ValueError:
        return None


def changes(captures: Iterable[tuple[Hashable, Seen]], rule: Rule = DEFAULT_RULE) -> dict[Hashable, Change]:
    """The change of every capture that has a previous one, by its key; ``captures`` come as
    ``(key, capture)`` in input order (the tie-break of equal dates)."""
    by_url: dict[str, list[tuple[tuple[int, int], int, Hashable, Seen]]] = {}
    for order, (key, seen) in enumerate(captures):
        when = date_key(seen.date)
        if when is not None:
            by_url.setdefault(seen.url, []).append((when, order, key, seen))
    found: dict[Hashable, Change] = {}
    for timeline in by_url.values():
        if len(timeline) < 2:
            continue
        timeline.sort(key=lambda item: (item[0], item[1]))
        previous: Capture | None = None
        for _, _, key, seen in timeline:
            current = settle(seen, previous)
            if current is None:
                continue  # off the timeline: a revisit whose text cannot be told
            if previous is not None and _same_record(previous, current):
                continue  # one record read twice (a copy of a file among the inputs): one capture
            if previous is not None:
                change = compare(previous, current, rule)
                if change is not None:
                    found[key] = change
            previous = current
    return found


def archive_captures(
    results: Iterable[PageResult], resolutions: Iterable[Resolution], files: list[str]
) -> list[tuple[tuple[str, int], Seen]]:
    """A run's captures of URLs captured more than once, keyed ``(absolute file, offset)`` as ``dedupe``
    rows locate records, in input order (``files``: the inputs' names in the order given): the
    fingerprinted pages and the identical-payload revisits, resolved or not."""
    results, resolutions = list(results), list(resolutions)
    urls = Counter(r.uri for r in results if r.simhash is not None)
    urls.update(r.revisit.uri for r in resolutions)
    rank = {name: position for position, name in enumerate(files)}
    pages = {(os.path.abspath(r.file), r.offset): r for r in results}
    found: list[tuple[tuple[int, int], tuple[str, int], Seen]] = []
    for result in results:
        capture = capture_of(result) if urls[result.uri] > 1 else None
        if capture is not None:
            where = (os.path.abspath(result.file), result.offset)
            found.append(((rank.get(result.file, len(rank)), result.offset), where, capture))
    for resolution in resolutions:
        revisit, original = resolution.revisit, resolution.original
        if urls[revisit.uri] < 2:
            continue
        page = None if original is None else pages.get((os.path.abspath(original.file), original.offset))
        seen = revisit_capture(revisit, None if page is None else capture_of(page))
        if seen is not None:
            where = (os.path.abspath(revisit.file), revisit.offset)
            found.append(((rank.get(revisit.file, len(rank)), revisit.offset), where, seen))
    found.sort(key=lambda item: item[0])
    return [(where, seen) for _, where, seen in found]


def text_change(change: Change | None) -> TextChange | None:
    """A change as the sidecar's ``previous-capture``/``text-change`` fields (similarity to 4 decimals)."""
    if change is None:
        return None
    similarity = None if change.similarity is None else round(change.similarity, 4)
    return TextChange(change.kind, change.previous.record_id, change.previous.date, similarity)


def change_columns(change: Change | None) -> dict[str, object]:
    """The ``dedupe --report`` columns of a change (all None for a URL's first capture)."""
    described = text_change(change)
    return {
        "text_change": None if described is None else described.kind,
        "text_similarity": None if described is None else described.similarity,
        "previous_capture": None if described is None else described.previous_record_id,
        "previous_capture_date": None if described is None else described.previous_date,
    }


CHANGE_FIELDS = ["text_change", "text_similarity", "previous_capture", "previous_capture_date"]
"""The ``dedupe --report`` columns of :func:`change_columns`."""


class Timeline:
    """``tag``'s streaming timeline: each capture compared with its URL's latest-dated capture seen
    before it, kept in ``store`` (which it updates as a crawl does, so later runs go on from it).

    A store that fails stops the changes, not the run: :attr:`error` says why (once), and every later
    capture gets no change."""

    def __init__(self, store: CaptureStore, rule: Rule = DEFAULT_RULE) -> None:
        self.store = store
        self.rule = rule
        self.error: CaptureStoreError | None = None

    def observe(self, seen: Seen) -> Change | None:
        """The change since the URL's latest capture (None: its first, an older capture, the same
        record seen again, or a failed store); ``seen`` becomes the latest unless it is older."""
        when = date_key(seen.date)
        if when is None or self.error is not None:
            return None
        try:
            latest = self.store.last(seen.url)
            if latest is not None:
                if _same_record(latest, seen):
                    return None  # this very record, stored by the crawl or an earlier run
                latest_when = date_key(latest.date)
                if latest_when is not None and latest_when > when:
                    return None  # older than a capture already seen: not placed
            current = settle(seen, latest)
            if current is None:
                return None
            self.store.put(current)
        except CaptureStoreError as exc:
            self.error = exc
            return None
        return None if latest is None else compare(latest, current, self.rule)

    def close(self) -> None:
        self.store.close()
