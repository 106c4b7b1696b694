"""Each URL's captures over time and how its main text changed between consecutive ones: the model of
the report's timeline view, built from the captures an input holds (:mod:`.captures`).

A capture's change kind is the one its record says (``text-change`` of a metadata record, the
``text_change`` column of a ``dedupe --report`` row), decided when the capture was made by the
crawl's or the run's rule against the URL's previous capture. The report never invents one: a
capture whose record says nothing (an older WARC) is ``not recorded``, and its word diff, when
embedded, shows what changed. Why not compute a kind here: ``unchanged`` needs the payload digests,
and ``minor``/``changed`` the crawl's own rule and threshold, which the report does not know.

Order: a URL's captures by the instant of their date, as ``dedupe``, ``tag`` and ``--keep`` order
them (:func:`scrapy_simhash.keep.capture_instant`: fractions of a second, ``+01:00`` offsets and ARC's
14 digits alike), ties in input order (files in the order given, then offset); captures without a
readable date come last.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from itertools import pairwise

from ...keep import capture_instant

NOT_RECORDED = "not recorded"
"""The kind of a capture whose record carries no change fields."""

KINDS = ("changed", "minor", "same-text", "unchanged", NOT_RECORDED)
"""Most changed first: the order of the counts and of the filter."""

IDENTICAL_TEXT = frozenset({"unchanged", "same-text"})
"""Recorded kinds whose main text is the previous capture's: no diff is needed."""

TIMELINES_LISTED = 1000
"""URLs listed in a report's timeline section (most changed first); the rest are counted."""

CAPTURES_LISTED = 50
"""Captures listed per URL in the report (its latest); earlier ones are counted (``--timeline URL``
lists more)."""


def date_key(date: str | None) -> tuple[int, int] | None:
    """Where a capture's date puts it in time; None when it is missing or not a valid date."""
    return capture_instant(date)


@dataclass(slots=True)
class Capture:
    """One capture of a URL: its record, and the change its record says."""

    uri: str
    date: str | None
    file: str | None
    offset: int | None
    record_id: str | None = None
    record_type: str = "response"
    kind: str | None = None
    """The recorded ``text-change`` (None: not recorded, or the URL's first capture)."""
    similarity: float | None = None
    previous_id: str | None = None
    """The record id the recorded change compares with (``previous-capture``)."""
    previous_date: str | None = None
    text_file: str | None = None
    """Where the main text is when not in the capture's own record (a revisit: its original)."""
    text_offset: int | None = None
    text_id: str | None = None
    """A revisit's ``WARC-Refers-To``: its original, looked up by id when its file is not known."""
    order: int = 0
    """Input order, for captures of the same date."""

    @property
    def locator(self) -> str:
        if self.file is not None and self.offset is not None:
            return f"{self.file}@{self.offset}"
        return self.record_id or "(record not named by the input)"

    @property
    def identity(self) -> tuple[str | None, int | None] | str:
        """What makes two descriptions the same capture (a crawl's record and a sidecar's of it)."""
        if self.file is not None and self.offset is not None:
            return (self.file, self.offset)
        return self.record_id or f"{self.uri} {self.date} {self.order}"


@dataclass(slots=True)
class Step:
    """From the capture before to this one: the kind shown, and the word diff when one was made."""

    kind: str
    similarity: float | None = None
    note: str | None = None
    """Why the recorded kind may not be about the capture listed before (another previous capture)."""
    diff: list[list[object]] | None = None
    """Runs ``["=", text]``, ``["-", text]``, ``["+", text]``, ``["…", words left out]``."""
    diff_note: str | None = None
    """Why no diff is shown (identical text, not embedded, a text that cannot be re-extracted)."""
    ratio: float | None = None


@dataclass
class Timeline:
    uri: str
    captures: list[Capture]
    """Oldest first (the latest :data:`CAPTURES_LISTED`)."""
    steps: list[Step | None]
    """One per capture: None for the first listed (nothing before it in the list)."""
    earlier: int = 0
    """Captures before the listed ones, not listed."""
    counts: Counter[str] = field(default_factory=Counter)
    """Steps by kind, over every capture of the URL (listed or not)."""

    @property
    def changes(self) -> int:
        return self.counts["changed"] + self.counts["minor"]


def step_of(previous: Capture, current: Capture) -> Step:
    """The step from ``previous`` to ``current`` as their records tell it. A change recorded against
    another capture (one not in the inputs, or dated otherwise) says nothing about this pair: the
    step is ``not recorded`` and the note says what the record says."""
    same_date = "the same date as the capture before" if _same_date(previous, current) else None
    if current.kind is None:
        return Step(NOT_RECORDED, note=same_date)
    if current.previous_id and previous.record_id and current.previous_id != previous.record_id:
        when = f" of {current.previous_date}" if current.previous_date else ""
        note = (
            f"its record says {current.kind} since the capture {current.previous_id}{when}, not the one "
            "listed before (that one is not in the inputs, or the dates order them otherwise)"
        )
        return Step(NOT_RECORDED, note=note)
    return Step(current.kind, current.similarity, same_date)


def _same_date(a: Capture, b: Capture) -> bool:
    return a.date is not None and date_key(a.date) == date_key(b.date)


def ordered(captures: list[Capture]) -> list[Capture]:
    """Oldest first; same date: input order; no readable date: last."""
    return sorted(captures, key=lambda c: (date_key(c.date) is None, date_key(c.date) or (0, 0), c.order))


def captured_again(captures: Iterable[Capture]) -> list[Capture]:
    """The captures of the URLs that have more than one (most URLs of a crawl have one: they are not
    grouped, which would cost a dictionary each)."""
    captures = list(captures)
    again = {uri for uri, n in Counter(c.uri for c in captures).items() if n > 1}
    return [c for c in captures if c.uri in again]


def group_by_uri(captures: Iterable[Capture]) -> dict[str, list[Capture]]:
    """Captures by URI, each capture once (a crawl's record and a sidecar's description of it are one:
    the one that records a change is kept)."""
    by_uri: dict[str, dict[object, Capture]] = defaultdict(dict)
    for capture in captures:
        seen = by_uri[capture.uri]
        known = seen.get(capture.identity)
        if known is None or (known.kind is None and capture.kind is not None):
            seen[capture.identity] = capture
    return {uri: list(found.values()) for uri, found in by_uri.items()}


def timeline_of(uri: str, captures: list[Capture], listed: int = CAPTURES_LISTED) -> Timeline:
    """``uri``'s timeline (its captures ordered, a step per capture after the first)."""
    every = ordered(captures)
    steps: list[Step | None] = [None] + [step_of(a, b) for a, b in pairwise(every)]
    counts = Counter(step.kind for step in steps if step is not None)
    start = max(0, len(every) - listed)
    shown_steps = steps[start:]
    if start:
        shown_steps[0] = None  # its previous capture is not listed
    return Timeline(uri, every[start:], shown_steps, earlier=start, counts=counts)


def most_changed_first(timeline: Timeline) -> tuple[int, int, int, str]:
    return (
        -timeline.changes,
        -timeline.counts["changed"],
        -len(timeline.captures) - timeline.earlier,
        timeline.uri,
    )


@dataclass
class Timelines:
    """The timelines of the URLs captured more than once (most changed first, the first listed ones)."""

    listed: list[Timeline]
    urls: int
    """URLs captured more than once in the input."""
    counts: Counter[str]
    """Steps by kind, over all of them."""
    notes: list[str] = field(default_factory=list)


def build_timelines(captures: Iterable[Capture], *, listed: int = TIMELINES_LISTED) -> Timelines:
    """The timelines of every URL with more than one capture; the ``listed`` most changed kept."""
    twice = group_by_uri(captured_again(captures))
    timelines = [timeline_of(uri, found) for uri, found in twice.items() if len(found) > 1]
    timelines.sort(key=most_changed_first)
    counts: Counter[str] = Counter()
    for timeline in timelines:
        counts.update(timeline.counts)
    return Timelines(timelines[:listed], len(timelines), counts)
