"""The pairs a report shows side by side: per large cluster, its original and its farthest member."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from .model import Cluster, Page
from .textdiff import ratio, side_by_side
from .texts import Text, fetch_texts, locate_records

if TYPE_CHECKING:
    from ..extract import Extractor


@dataclass(frozen=True)
class PairDiff:
    cluster: int
    """Position of the cluster in the report's (largest first) list."""
    a: Page
    b: Page
    left: str | None
    """HTML of ``a``'s main text with its own words marked; None with ``reason``."""
    right: str | None
    reason: str | None = None
    word_ratio: float | None = None


def farthest(cluster: Cluster) -> Page:
    """The member least like the original: the pair nearest the threshold is the instructive one."""
    rest = cluster.members[1:]
    return max(rest, key=lambda m: (m.distance or 0, -(m.similarity if m.similarity is not None else 1.0)))


def explain(text: Text, page: Page) -> str:
    return f"{page.uri or page.key}: {text.reason}"


def pair_diffs(
    clusters: list[Cluster],
    count: int,
    *,
    backend: str = "auto",
    archives: list[str] | None = None,
    extractor: Extractor | None = None,
) -> list[PairDiff]:
    """Diffs of (original, farthest member) for the ``count`` largest clusters; texts re-extracted
    (by ``extractor``, default: the default extractor).

    A page whose input names no file (a crawl's index) is looked up by its record id in ``archives``
    (the crawl's WARCs), and takes the file and offset found."""
    chosen = [(i, c.members[0], farthest(c)) for i, c in enumerate(clusters[:count]) if c.size > 1]
    unplaced = [p for _, a, b in chosen for p in (a, b) if p.file is None and p.record_id]
    if archives and unplaced:
        found = locate_records({p.record_id for p in unplaced if p.record_id}, archives, backend=backend)
        for page in unplaced:
            if page.record_id in found:
                page.file, page.offset = found[page.record_id]
    locators = [(p.file, p.offset) for _, a, b in chosen for p in (a, b)]
    texts = fetch_texts(locators, backend=backend, extractor=extractor)
    out = []
    for position, a, b in chosen:
        ta, tb = texts[(a.file, a.offset)], texts[(b.file, b.offset)]
        if ta.text is None or tb.text is None:
            why = "; ".join(explain(t, p) for t, p in ((ta, a), (tb, b)) if t.text is None)
            out.append(PairDiff(position, a, b, None, None, reason=why))
            continue
        left, right = side_by_side(ta.text, tb.text)
        out.append(PairDiff(position, a, b, left, right, word_ratio=ratio(ta.text, tb.text)))
    return out
