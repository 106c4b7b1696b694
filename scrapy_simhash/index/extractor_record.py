"""An index remembers the extractor of the pages it stores.

Fingerprints of different extractors (or of one extractor with other options) are not
comparable: the same page gives another text, so another simhash and sketch, and every page a
re-crawl with another extractor revisits would look changed. So an index records the description
of the extractor its pages were made with (:attr:`~scrapy_simhash.extract.Extractor.description`)
as its note ``extractor``, and a run that writes to it checks its own against it first
(:func:`check_extractor`):

- nothing recorded, no pages: the run's extractor is recorded (a new index);
- the same name and options: the run goes on; a difference only in the library's version is
  ``"version"``, which callers log as a warning (a few texts may change, the extraction is the same);
- another name or other options: :class:`ExtractorMismatch`, unless the caller allows mixing; the
  index then keeps its first extractor (what later runs are compared with) and lists every other
  one that wrote to it as a note ``extractor+<description>``, so that it says it is mixed;
- pages but nothing recorded: the index was written before indexes recorded their extractor, when
  trafilatura was the only one. A trafilatura run records its own description (``"assumed"``: the
  options the old pages were made with cannot be checked, callers warn); any other extractor is a
  mismatch with ``trafilatura`` of unknown version and options (mixed in when asked: the record is
  then ``trafilatura``, which the next trafilatura run replaces with its own description).

The record is compare-and-set (:meth:`~.base.NearDuplicateIndex.note`), so two crawlers opening a
server index at the same moment with different extractors cannot both record theirs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

from ..extract.identity import ExtractorIdentity, other_name
from .base import IndexSettingsError

EXTRACTOR = "extractor"
"""The note that holds the description of the extractor the index's pages were made with."""
MIXED = "extractor+"
"""Prefix of the notes naming the other extractors that wrote to a mixed index."""
BEFORE_RECORDS = "trafilatura"
"""The extractor of an index written before indexes recorded theirs (version and options unknown)."""

Outcome = Literal["recorded", "same", "version", "assumed", "mixed"]


class NotedIndex(Protocol):
    """An index that keeps notes: the simhash indexes (embedded, Redis, verified) and the embedded
    MinHash index."""

    def __len__(self) -> int: ...

    def notes(self) -> dict[str, str]: ...

    def note(self, name: str, value: str, *, replacing: str | None = None) -> str: ...


class ExtractorMismatch(IndexSettingsError):
    """The index's pages were made by another extractor than the run's (name or options differ)."""

    def __init__(self, recorded: str, current: str, *, before_records: bool = False) -> None:
        self.recorded = recorded
        self.current = current
        self.before_records = before_records
        made_by = describe(recorded, before_records)
        super().__init__(f"the index stores pages made by {made_by}, not {current}")

    @property
    def differences(self) -> str:
        """What differs (``precision=0 -> 1``, ``name trafilatura -> resiliparse``)."""
        return ExtractorIdentity.read(self.recorded).differences(ExtractorIdentity.read(self.current))

    @property
    def other_name(self) -> str | None:
        """The index's extractor's name when it is not the run's (the name a run can switch back to by
        itself, as when the default changed); None when only options or the version differ."""
        return other_name(self.recorded, self.current)


@dataclass(frozen=True)
class ExtractorCheck:
    """What :func:`check_extractor` found: ``recorded`` is the index's extractor afterwards."""

    outcome: Outcome
    recorded: str
    current: str
    mixed: tuple[str, ...] = ()
    """The other extractors recorded as having written to the index (this run's included when it mixed)."""


def describe(recorded: str, before_records: bool = False) -> str:
    """The recorded extractor for a message."""
    if before_records:
        return f"{recorded} (of unknown version and options: written before indexes recorded their extractor)"
    return recorded


def recorded_extractors(notes: dict[str, str]) -> tuple[str | None, tuple[str, ...]]:
    """The index's own extractor (None: not recorded) and the others mixed into it, from its notes."""
    return notes.get(EXTRACTOR), tuple(sorted(n[len(MIXED) :] for n in notes if n.startswith(MIXED)))


def check_extractor(index: NotedIndex, current: str, *, mix: bool = False) -> ExtractorCheck:
    """Check ``current`` (the run's extractor description) against what ``index`` records, and record
    it where the index has no record (module docstring). :class:`ExtractorMismatch` when the
    extractors differ in name or options and ``mix`` is off."""
    recorded, mixed = recorded_extractors(index.notes())
    me = ExtractorIdentity.read(current)
    pages = 0 if recorded is not None else len(index)
    if recorded is None and pages:
        # pages but no record: an index written before records, or a new one that another writer
        # recorded and filled between the two reads above; read again to tell them apart
        recorded, mixed = recorded_extractors(index.notes())
    if recorded is None:
        if pages and me.name != BEFORE_RECORDS:
            if not mix:
                raise ExtractorMismatch(BEFORE_RECORDS, current, before_records=True)
            recorded = index.note(EXTRACTOR, BEFORE_RECORDS)
        else:
            recorded = index.note(EXTRACTOR, current)
            if recorded == current:
                return ExtractorCheck("assumed" if pages else "recorded", recorded, current, mixed)
            # another writer recorded its own in the meantime: compared with it below
    elif recorded == BEFORE_RECORDS and me.name == BEFORE_RECORDS:  # mixed in before a trafilatura run
        recorded = index.note(EXTRACTOR, current, replacing=BEFORE_RECORDS)
        if recorded == current:
            return ExtractorCheck("assumed", recorded, current, mixed)
    stored = ExtractorIdentity.read(recorded)
    if stored.same_extractor(me):
        return ExtractorCheck("same" if stored.version == me.version else "version", recorded, current, mixed)
    if not mix:
        raise ExtractorMismatch(recorded, current, before_records=recorded == BEFORE_RECORDS)
    if current not in mixed:
        index.note(MIXED + current, "1")
        mixed = tuple(sorted((*mixed, current)))
    return ExtractorCheck("mixed", recorded, current, mixed)


def notice(check: ExtractorCheck, location: str, run: str) -> str | None:
    """The warning a check that let ``run`` ("this crawl", "this run") go on calls for, or None."""
    if check.outcome == "version":
        return (
            f"the index at {location} stores pages made by {check.recorded}; {run} uses the same extractor "
            f"and options at another version ({check.current}): a few pages may extract differently"
        )
    if check.outcome == "assumed":
        return (
            f"the index at {location} does not record its extractor (written by an earlier version of "
            f"scrapy-simhash, with trafilatura): it is taken to be {run}'s, {check.current}, and recorded "
            "now; if its pages were made with other trafilatura options, re-fingerprint into a new index"
        )
    if check.outcome == "mixed":
        return (
            f"the index at {location} stores pages made by {describe(check.recorded)}; {run} adds pages "
            f"made by {check.current}, as asked: pages of different extractors are not comparable"
        )
    if check.mixed:
        return (
            f"the index at {location} also holds pages of other extractors ({', '.join(check.mixed)}), "
            f"stored when mixing was allowed: they are not comparable with {run}'s pages"
        )
    return None
