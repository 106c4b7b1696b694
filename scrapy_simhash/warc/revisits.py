"""Existing ``revisit`` records in the input, and which record of the input each one repeats.

Heritrix, warcprox, browsertrix-crawler and this project's crawls store a payload fetched again as a
``revisit`` record with the profile ``identical-payload-digest``: headers only, pointing at the record
that holds the payload. ``tag`` and ``dedupe`` report each one as an exact duplicate (distance 0,
similarity 1) of that record. It is found, in this order, by ``WARC-Refers-To`` (a record id) when
that record is in the input, else by ``WARC-Payload-Digest`` among the input's response records (the
first one read), else by ``WARC-Refers-To-Target-URI`` + ``WARC-Refers-To-Date``. A revisit whose
original is not in the input is reported as such. Resolution waits until every input is read, so the
answer does not depend on file order (a revisit often comes before its original in the same file).

``server-not-modified`` revisits (no payload, no digest to compare) are counted and skipped; a revisit
with an unknown profile, or with neither ``WARC-Refers-To`` nor ``WARC-Payload-Digest``, is counted
as damaged and noted.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

from .read.links import normalise_digest
from .read.reader import ArchiveRecord, ReadProblem

PROFILE_PREFIX = "http://netpreserve.org/warc/"
IDENTICAL_PAYLOAD = ("/revisit/identical-payload-digest", "/revisit/uri-agnostic-identical-payload-digest")
"""Profile endings of revisits that repeat a payload (WARC/1.0 and 1.1; the URI-agnostic variant
of Heritrix and warcprox names an original under another URL)."""
SERVER_NOT_MODIFIED = "/revisit/server-not-modified"

RESOLVED_BY_ID = "record-id"
RESOLVED_BY_DIGEST = "payload-digest"
RESOLVED_BY_CAPTURE = "uri-date"
NOT_IN_INPUT = "original not in input"
"""How a revisit was resolved (the ``revisit`` column of ``dedupe`` rows, ``revisit-resolved-by`` in
sidecars), or that its original is not in the input."""

REVISIT_METHOD = "revisit"
"""The ``method`` of a ``dedupe`` row that is a revisit record (an exact duplicate, not a judged pair)."""
ORIGINAL_TYPES = frozenset({"response", "resource"})


@dataclass(frozen=True)
class Capture:
    """A record that holds a payload (a response or resource): a possible original."""

    file: str
    offset: int
    record_id: str | None
    uri: str | None
    date: str | None
    page: bool
    """Whether it is an HTML page the run fingerprints (its fingerprint then comes with the pages)."""


@dataclass(frozen=True)
class Revisit:
    """An ``identical-payload-digest`` revisit record."""

    file: str
    offset: int
    record_id: str | None
    uri: str | None
    date: str | None
    refers_to: str | None
    refers_to_uri: str | None
    refers_to_date: str | None
    payload_digest: str | None
    profile: str


@dataclass(frozen=True)
class Resolution:
    """A revisit and the capture it repeats (None: not in the input); ``by`` says how it was found."""

    revisit: Revisit
    original: Capture | None
    by: str

    @property
    def refers_to(self) -> str | None:
        """The original's record id, else what the revisit itself names."""
        if self.original is not None and self.original.record_id:
            return self.original.record_id
        return self.revisit.refers_to


def capture_time(date: str | None) -> str | None:
    """The first 14 digits of a WARC date (to the second): ``2020-06-27T13:51:45Z`` and
    ``2020-06-27T13:51:45.123Z`` name the same capture."""
    if not date:
        return None
    digits = re.sub(r"\D", "", date)[:14]
    return digits or None


def revisit_profile(record: ArchiveRecord) -> tuple[str, str | None]:
    """``("identical", None)``, ``("not-modified", None)`` or ``("damaged", why)`` for a revisit record."""
    links = record.links
    profile = (links.profile if links else None) or ""
    if profile.startswith(PROFILE_PREFIX) and profile.endswith(SERVER_NOT_MODIFIED):
        return "not-modified", None
    if not (profile.startswith(PROFILE_PREFIX) and profile.endswith(IDENTICAL_PAYLOAD)):
        shown = repr(profile) if profile else "none"
        return "damaged", (
            f"revisit record with an unknown WARC-Profile ({shown}): not reported as a duplicate"
        )
    if links is None or not (links.refers_to or links.payload_digest):
        return "damaged", (
            "revisit record with neither WARC-Refers-To nor WARC-Payload-Digest: "
            "what it repeats cannot be told, it is not reported as a duplicate"
        )
    return "identical", None


@dataclass
class RevisitBook:
    """What a run's inputs hold: their possible originals and their revisits, resolved at the end."""

    by_id: dict[str, Capture] = field(default_factory=dict)
    by_digest: dict[str, Capture] = field(default_factory=dict)
    by_capture: dict[tuple[str, str], Capture] = field(default_factory=dict)
    revisits: dict[str, list[Revisit]] = field(default_factory=dict)
    """Identical-payload revisits by the file they are in, in file order."""
    counts: Counter[str] = field(default_factory=Counter)
    """``identical``, ``not-modified``, ``damaged``: revisit records read."""

    def see(self, record: ArchiveRecord, page: bool = False) -> ReadProblem | None:
        """Note a record read; a damaged revisit is returned as a notice (nothing of the input is lost)."""
        if record.record_type in ORIGINAL_TYPES:
            self._add_capture(record, page)
            return None
        if record.record_type != "revisit" or record.archive_format != "warc":
            return None
        kind, why = revisit_profile(record)
        self.counts[kind] += 1
        if why is not None:
            return ReadProblem(record.file, record.offset, why, skipped=False)
        if kind == "identical":
            links = record.links
            assert links is not None
            self.revisits.setdefault(record.file, []).append(
                Revisit(
                    file=record.file,
                    offset=record.offset,
                    record_id=record.record_id,
                    uri=record.target_uri,
                    date=record.date,
                    refers_to=links.refers_to,
                    refers_to_uri=links.refers_to_uri,
                    refers_to_date=links.refers_to_date,
                    payload_digest=normalise_digest(links.payload_digest),
                    profile=links.profile or "",
                )
            )
        return None

    def _add_capture(self, record: ArchiveRecord, page: bool) -> None:
        capture = Capture(record.file, record.offset, record.record_id, record.target_uri, record.date, page)
        if record.record_id:
            self.by_id.setdefault(record.record_id, capture)
        digest = normalise_digest(record.links.payload_digest if record.links else None)
        if digest:
            self.by_digest.setdefault(digest, capture)  # the first read is the original
        when = capture_time(record.date)
        if record.target_uri and when:
            self.by_capture.setdefault((record.target_uri, when), capture)

    def resolve(self, revisit: Revisit) -> Resolution:
        """The capture ``revisit`` repeats, by record id, then payload digest, then URI and date."""
        if revisit.refers_to and revisit.refers_to in self.by_id:
            return Resolution(revisit, self.by_id[revisit.refers_to], RESOLVED_BY_ID)
        if revisit.payload_digest and revisit.payload_digest in self.by_digest:
            return Resolution(revisit, self.by_digest[revisit.payload_digest], RESOLVED_BY_DIGEST)
        when = capture_time(revisit.refers_to_date)
        if revisit.refers_to_uri and when and (revisit.refers_to_uri, when) in self.by_capture:
            return Resolution(revisit, self.by_capture[(revisit.refers_to_uri, when)], RESOLVED_BY_CAPTURE)
        return Resolution(revisit, None, NOT_IN_INPUT)

    def resolve_all(self) -> dict[str, list[Resolution]]:
        """Every identical-payload revisit of the run, resolved, by file (in the order files were read)."""
        return {file: [self.resolve(r) for r in found] for file, found in self.revisits.items()}


@dataclass
class RevisitCounts:
    """The summary's revisit line."""

    identical: int = 0
    resolved: int = 0
    not_in_input: int = 0
    not_modified: int = 0
    damaged: int = 0

    def add(self, book: RevisitBook, resolutions: list[Resolution]) -> None:
        self.identical += book.counts["identical"]
        self.not_modified += book.counts["not-modified"]
        self.damaged += book.counts["damaged"]
        self.resolved += sum(1 for r in resolutions if r.original is not None)
        self.not_in_input += sum(1 for r in resolutions if r.original is None)

    @property
    def any(self) -> bool:
        return bool(self.identical or self.not_modified or self.damaged)

    def line(self) -> str:
        return (
            f"revisits: {self.identical} identical-payload ({self.resolved} exact duplicates of records "
            f"in the input, {self.not_in_input} {NOT_IN_INPUT}), {self.not_modified} server-not-modified "
            f"(skipped: no payload to compare), {self.damaged} damaged"
        )


# -- how revisits appear in sidecars (``tag``) --------------------------------------------------------

REVISIT_PROFILE = "revisit-profile"
REVISIT_RESOLVED_BY = "revisit-resolved-by"
"""``record-id``, ``payload-digest``, ``uri-date``, or ``original not in input``."""
REVISIT_OF = "revisit-of"
"""The original's record id (unresolved: the revisit's own ``WARC-Refers-To``, when it has one)."""
REVISIT_OF_URI = "revisit-of-uri"
REVISIT_OF_DATE = "revisit-of-date"
REVISIT_OF_FILE = "revisit-of-file"
"""The original's file, relative to the directory of the sidecar holding the field."""
REVISIT_OF_OFFSET = "revisit-of-offset"


def revisit_pairs(resolution: Resolution, original_file: str | None) -> list[tuple[str, str]]:
    """The ``revisit-*`` fields of a revisit's sidecar record (``original_file`` as the sidecar names it)."""
    revisit, original = resolution.revisit, resolution.original
    if original is not None:
        named = [
            (REVISIT_OF, original.record_id),
            (REVISIT_OF_URI, original.uri),
            (REVISIT_OF_DATE, original.date),
            (REVISIT_OF_FILE, original_file),
            (REVISIT_OF_OFFSET, str(original.offset)),
        ]
    else:
        named = [
            (REVISIT_OF, revisit.refers_to),
            (REVISIT_OF_URI, revisit.refers_to_uri),
            (REVISIT_OF_DATE, revisit.refers_to_date),
        ]
    pairs = [(REVISIT_PROFILE, revisit.profile), (REVISIT_RESOLVED_BY, resolution.by)]
    return pairs + [(name, value) for name, value in named if value]
