"""Load an index into a report: its stored pages, clustered by the rule the index answers with.

The index is opened without its write lock (a crawl may still hold it); what it cannot say (pages
skipped, pages stored by earlier runs, pages of other extractors) is named in the report's notes.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..index import is_server_uri, open_index
from ..index.extractor_record import BEFORE_RECORDS, recorded_extractors
from .model import DEFAULT_K, Page, ReportData, build, group_clusters, rule_for
from .values import whole_number


def open_for_reading(location: str, k: int | None = None, similarity: float | None = None) -> Any:
    """The index at ``location`` without taking its write lock (a crawl may still hold it).

    ``similarity``: the threshold it was created with, when known (a crawl's). An index created with
    another is opened with the shipped one's: the report applies its own rule to the stored
    sketches, it does not ask the index."""
    from ..index.base import IndexSettingsError

    def opened(threshold: float | None) -> Any:
        if is_server_uri(location):
            return open_index(location, k=k or DEFAULT_K, similarity=threshold)
        return open_index(location, k=k, read_only=True, similarity=threshold)  # type: ignore[arg-type]

    try:
        return opened(similarity)
    except IndexSettingsError:
        if similarity is None:
            raise
    return opened(None)


def pages_of_index(index: Iterable[Any], sketch_of: Any = None) -> list[Page]:
    """Every stored fingerprint, oldest first (the index iterates in age order), with its sketch
    when ``sketch_of(key)`` gives one (a verified index)."""
    pages = []
    for match in index:
        meta = match.meta or {}
        pages.append(
            Page(
                key=match.key,
                uri=meta.get("url") or match.key,
                date=meta.get("date"),
                file=meta.get("file"),
                offset=whole_number(meta.get("offset")),
                record_id=meta.get("record_id"),
                simhash=match.simhash,
                sketch=None if sketch_of is None else sketch_of(match.key),
                replaces=meta.get("replaces"),
            )
        )
    return pages


def load_index(
    location: str,
    *,
    k: int | None = None,
    threshold: float | None = None,
    mode: str | None = None,
    stats: dict[str, Any] | None = None,
    archives: list[str] | None = None,
) -> ReportData:
    """Clusters of the decision rule's graph over everything stored (verified where the index keeps
    sketches; ``k``, ``threshold``: the index's own by default; ``mode``: verified by default).

    ``stats`` (a crawl's Scrapy stats) adds the pages seen and skipped by reason; ``archives`` (the
    crawl's WARCs) are where the pair texts are looked up by record id.
    """
    index = open_for_reading(location, k, threshold)
    try:
        k = k if k is not None else int(index.k)
        own = getattr(index, "rule", None)  # a VerifiedIndex's: the threshold it answers by
        if threshold is None and own is not None:
            threshold = own.similarity
        recorded, mixed = recorded_extractors(index.notes())
        sketch_many = getattr(index, "sketch_many", None)  # a VerifiedIndex's: 1,000 a round trip
        if sketch_many is None:
            pages = pages_of_index(index)
        else:
            matches = list(index)
            pages = pages_of_index(matches, sketch_many([m.key for m in matches]).get)
    finally:
        close = getattr(index, "close", None)
        if close:
            close()
    rule = rule_for(k, threshold, mode)
    notes = []
    skipped: dict[str, int] | None = None
    seen = None
    if stats:
        skipped = {
            name.rsplit("/", 1)[1]: int(value)
            for name, value in stats.items()
            if name.startswith("simhash/skipped/")
        }
        computed = int(stats.get("simhash/computed", len(pages)))
        seen = computed + sum(skipped.values())
        again = int(stats.get("simhash/revisit", 0))  # fingerprinted again, stored by an earlier run
        earlier = len(pages) - (computed - again)
        if earlier > 0:
            notes.append(
                f"pages seen and skipped are this run's; the index, and so the fingerprinted pages and "
                f"clusters, also hold {earlier:,} page(s) stored by earlier runs ({again:,} seen again)"
            )
    else:
        notes.append("an index holds only the fingerprinted pages: pages skipped are not in it")
    if recorded is None and pages:
        recorded = BEFORE_RECORDS  # the only extractor then: its texts, not the default's, are the pages'
        notes.append(
            "the index does not record its extractor (written before indexes recorded it, with "
            "trafilatura, its options unknown): the pair texts are re-extracted with trafilatura's defaults"
        )
    elif mixed:
        notes.append(
            f"the index also holds pages of other extractors ({', '.join(mixed)}), stored when mixing was "
            f"allowed: they are not comparable with its own ({recorded})"
        )
    replacements = sum(1 for page in pages if page.replaces)
    if replacements:
        notes.append(
            f"{replacements:,} page(s) replaced the stored original of their cluster as a more preferred "
            'copy (SIMHASH_KEEP = "preferred": the canonical URL, or one without tracking parameters): '
            "each cluster's original is its newest such copy"
        )
    return build(
        "index",
        [location],
        pages,
        group_clusters(pages, rule),
        k=rule.distance,
        threshold=rule.similarity if rule.verified else threshold,
        seen=seen,
        skipped=skipped,
        fingerprinted=len(pages),
        notes=notes,
        mode=rule.mode,
        archives=archives,
        extractor=recorded,
        extractors=tuple(e for e in (recorded, *mixed) if e),
    )
