"""The one model every report input is loaded into, and what is derived from it (pairs, hosts, totals).

Inputs differ in what they know: a ``dedupe --report`` file holds only the pages that are in a
cluster, an index holds every fingerprinted page, WARCs also hold the pages that were not
fingerprinted. Whatever an input does not know stays ``None`` and the report says so.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import numpy as np


@dataclass
class Page:
    """One fingerprinted page (or a report row): where it is and how it compares."""

    key: str
    uri: str | None = None
    date: str | None = None
    file: str | None = None
    offset: int | None = None
    record_id: str | None = None
    simhash: int | None = None
    distance: int | None = None
    """Hamming distance to its cluster's original (None when unknown, or for MinHash rows)."""
    similarity: float | None = None
    """Estimated Jaccard similarity to its cluster's original, when the input carries it."""
    original: bool = False

    @property
    def host(self) -> str:
        try:
            return (urlsplit(self.uri).hostname or "(no host)") if self.uri else "(no URI)"
        except ValueError:
            return "(bad URI)"

    @property
    def locator(self) -> str:
        """file@offset when the page's record is known, else its key (a crawl's URL)."""
        if self.file is not None and self.offset is not None:
            return f"{self.file}@{self.offset}"
        return self.key


@dataclass
class Cluster:
    number: int
    members: list[Page]
    """The original first."""

    @property
    def size(self) -> int:
        return len(self.members)


@dataclass
class Totals:
    pages: int | None
    """Pages (HTML responses) seen, when the input knows (WARCs, a crawl's stats)."""
    fingerprinted: int | None
    skipped: dict[str, int] | None
    near_duplicates: int
    clusters: int
    in_clusters: int

    @property
    def unique(self) -> int | None:
        return None if self.fingerprinted is None else self.fingerprinted - self.near_duplicates


@dataclass
class ReportData:
    """Everything the HTML page shows, input-independent."""

    kind: str
    """``dedupe report``, ``index`` or ``WARC``."""
    sources: list[str]
    totals: Totals
    clusters: list[Cluster]
    """Largest first (ties: first seen first)."""
    pair_distances: np.ndarray
    """Each near-duplicate's distance to its cluster's original (the decisions made)."""
    nearest_distances: np.ndarray
    """Each page's distance to its nearest other page, for pages with one within ``k``."""
    no_neighbour: int | None
    """Pages without any other page within ``k`` (None when the input cannot tell)."""
    pair_similarities: np.ndarray
    k: int | None
    threshold: float | None
    hosts: list[tuple[str, int, int]]
    """(host, pages, near-duplicates), most near-duplicates first."""
    notes: list[str] = field(default_factory=list)
    """What the input could not tell, and records passed over (each said once)."""


def build(
    kind: str,
    sources: list[str],
    pages: list[Page],
    clusters: list[Cluster],
    *,
    k: int | None,
    threshold: float | None,
    seen: int | None = None,
    skipped: dict[str, int] | None = None,
    fingerprinted: int | None = None,
    notes: list[str] | None = None,
) -> ReportData:
    """Derive the histograms, hosts and totals from ``pages`` (every page the input knows) and clusters."""
    clusters = sorted(clusters, key=lambda c: -c.size)
    near = sum(c.size - 1 for c in clusters)
    duplicates = [m for c in clusters for m in c.members[1:]]
    distances = np.array([m.distance for m in duplicates if m.distance is not None], dtype=np.int64)
    similarities = np.array([m.similarity for m in duplicates if m.similarity is not None], dtype=float)
    nearest, no_neighbour = nearest_neighbours(pages, k)
    per_host: Counter[str] = Counter(p.host for p in pages)
    near_host: Counter[str] = Counter(m.host for m in duplicates)
    hosts = sorted(((h, n, near_host[h]) for h, n in per_host.items()), key=lambda t: (-t[2], -t[1], t[0]))
    totals = Totals(
        pages=seen,
        fingerprinted=fingerprinted,
        skipped=skipped,
        near_duplicates=near,
        clusters=len(clusters),
        in_clusters=sum(c.size for c in clusters),
    )
    return ReportData(
        kind=kind,
        sources=sources,
        totals=totals,
        clusters=clusters,
        pair_distances=distances,
        nearest_distances=nearest,
        no_neighbour=no_neighbour,
        pair_similarities=similarities,
        k=k,
        threshold=threshold,
        hosts=hosts,
        notes=list(notes or []),
    )


def nearest_neighbours(pages: list[Page], k: int | None) -> tuple[np.ndarray, int | None]:
    """Each page's distance to its nearest other page within ``k`` (exact, all pairs by
    :func:`~scrapy_simhash.index.find_all`), and how many pages have none."""
    from ..index import find_all

    hashed = [p.simhash for p in pages if p.simhash is not None]
    if k is None or len(hashed) < 2:
        return np.zeros(0, dtype=np.int64), None
    values = np.array(hashed, dtype=np.uint64)
    pairs = find_all(values, k)
    best = np.full(values.shape[0], 65, dtype=np.int64)
    if pairs.size:
        from ..index.batch import popcount64

        d = popcount64(values[pairs[:, 0]] ^ values[pairs[:, 1]]).astype(np.int64)
        np.minimum.at(best, pairs[:, 0], d)
        np.minimum.at(best, pairs[:, 1], d)
    found = best <= 64
    return best[found], int((~found).sum())


def group_clusters(pages: list[Page], k: int) -> list[Cluster]:
    """Connected components of the "within k" graph over ``pages`` (in age order: the first is the
    original), with each member's distance to its original filled in."""
    from ..index.batch import cluster_groups, clusters

    hashed = [p for p in pages if p.simhash is not None]
    if len(hashed) < 2:
        return []
    values = np.array([p.simhash for p in hashed], dtype=np.uint64)
    out = []
    for number, group in enumerate(cluster_groups(clusters(values, k))):
        members = [hashed[int(i)] for i in group]
        first = members[0].simhash
        assert first is not None
        for i, member in enumerate(members):
            assert member.simhash is not None
            member.distance = (member.simhash ^ first).bit_count()
            member.original = i == 0
        out.append(Cluster(number, members))
    return out
