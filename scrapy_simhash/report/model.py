"""The one model every report input is loaded into, and what is derived from it (pairs, hosts, totals).

Inputs differ in what they know: a ``dedupe --report`` file holds only the pages that are in a
cluster, an index holds every fingerprinted page, WARCs also hold the pages that were not
fingerprinted. Whatever an input does not know stays ``None`` and the report says so.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ..defaults import DISTANCE

if TYPE_CHECKING:
    from ..decision import Rule
    from .timeline.model import Timelines

DEFAULT_K = DISTANCE
"""The distance a report draws as the threshold when neither input nor caller gives one."""

MAX_NOTES = 20
"""Problems named one by one in a report's notes (the rest are counted)."""


@dataclass(slots=True)
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
    sketch: Any = field(default=None, repr=False, compare=False)
    """The page's minhash-doc/1 sketch when the input holds it: clusters then follow the verified rule."""
    replaces: str | None = None
    """The key of the stored original this page replaced as its cluster's original (a crawl with
    ``SIMHASH_KEEP = "preferred"``), as the index records it."""
    extractor: str | None = None
    """The description of the extractor that made the fingerprint, when the input says (a dedupe
    report's ``extractor`` column, a metadata record's ``text-extractor``)."""

    @property
    def host(self) -> str:
        return host_of(self.uri)

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
    revisits: int | None = None
    """Revisit records reported as exact duplicates of a record in the input (None: the input does not
    say); they are counted here, not among the near-duplicates."""
    revisits_not_in_input: int | None = None
    """Revisit records whose original is not in the input."""

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
    """Each clustered page's distance to its nearest other page (a sample at scale)."""
    no_neighbour: int | None
    """Fingerprinted pages with no other page within ``k`` (None when the input cannot tell)."""
    pair_similarities: np.ndarray
    k: int | None
    """The distance drawn: the rule's in simhash mode, and for pages without a sketch in verified mode."""
    threshold: float | None
    """The similarity drawn: the verified rule's (or ``--method minhash``'s) threshold."""
    hosts: list[tuple[str, int, int]]
    """(host, pages, near-duplicates), most near-duplicates first."""
    notes: list[str] = field(default_factory=list)
    """What the input could not tell, and records passed over (each said once)."""
    mode: str | None = None
    """The rule that made the clusters: ``verified``, ``simhash``, ``minhash``; None when unknown."""
    keep: str | None = None
    """The policy that chose each cluster's original (``dedupe --keep``); None when the input does not say."""
    archives: list[str] = field(default_factory=list)
    """WARC files or directories holding the pages' records, looked up by record id for the pair texts
    when the input names no file (a crawl's index, with the crawl's own WARCs)."""
    extractor: str | None = None
    """The description of the extractor that made the fingerprints (a dedupe report's ``extractor``
    column, the metadata records' ``text-extractor``, the index's record, a crawl's
    ``SIMHASH_EXTRACTOR``); the pair texts are re-extracted with it. None: unknown, or several."""
    extractors: tuple[str, ...] = ()
    """Every extractor the input names (several: the input mixes pages of different extractors)."""
    timelines: Timelines | None = None
    """The URLs captured more than once and how their main text changed (None: the input cannot
    tell, an index keeps one entry per page)."""


def named_extractor(named: Counter[str], what: str) -> tuple[str | None, list[str]]:
    """The one extractor ``named`` holds (None: none or several), and a note when it holds several
    (``what``: who names them, "the rows")."""
    if len(named) <= 1:
        return next(iter(named), None), []
    note = (
        f"{what} name {len(named)} extractors ({', '.join(sorted(named))}): fingerprints of different "
        "extractors are not comparable; the pair texts are re-extracted with the default"
    )
    return None, [note]


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
    mode: str | None = None,
    archives: list[str] | None = None,
    keep: str | None = None,
    extractor: str | None = None,
    extractors: tuple[str, ...] | None = None,
    revisits: tuple[int, int] | None = None,
) -> ReportData:
    """Derive the histograms, hosts and totals from ``pages`` (every page the input knows) and clusters;
    ``revisits``: (exact duplicates by revisit, revisits whose original is not in the input)."""
    clusters = sorted(clusters, key=lambda c: -c.size)
    near = sum(c.size - 1 for c in clusters)
    duplicates = [m for c in clusters for m in c.members[1:]]
    distances = np.array([m.distance for m in duplicates if m.distance is not None], dtype=np.int64)
    similarities = np.array([m.similarity for m in duplicates if m.similarity is not None], dtype=float)
    nearest = nearest_neighbours(clusters)
    notes = list(notes or [])
    hashed = sum(1 for c in clusters for m in c.members if m.simhash is not None)
    if 0 < nearest.size < hashed:
        notes.append(f"nearest neighbours: a sample of {nearest.size:,} of the {hashed:,} pages in clusters")
    if similarities.size and not hashed:
        notes.append(
            "each page's nearest-neighbour similarity needs every page's sketch, which the input does "
            "not hold: only each near-duplicate's similarity to its original is drawn"
        )
    no_neighbour = None if fingerprinted is None else fingerprinted - sum(c.size for c in clusters)
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
        revisits=None if revisits is None else revisits[0],
        revisits_not_in_input=None if revisits is None else revisits[1],
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
        notes=notes,
        mode=mode,
        archives=list(archives or []),
        keep=keep,
        extractor=extractor,
        extractors=tuple(
            sorted(extractors if extractors is not None else ([extractor] if extractor else []))
        ),
    )


NEAREST_SAMPLE = 20_000
"""Pages whose nearest neighbour is computed (a seeded sample beyond this): exact for each, against
every member of its cluster, so the cost stays bounded however large the clusters are."""


def nearest_neighbours(clusters: list[Cluster], sample: int = NEAREST_SAMPLE, seed: int = 0) -> np.ndarray:
    """Each (sampled) clustered page's distance to its nearest other page.

    Clusters are the components of the "within k" graph, so every page's neighbours within ``k``
    are members of its own cluster.
    """
    from ..index.tables.batch import popcount64

    sizes = np.array([sum(m.simhash is not None for m in c.members) for c in clusters], dtype=np.int64)
    total = int(sizes[sizes > 1].sum()) if sizes.size else 0
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    chosen: np.ndarray | None = None
    if total > sample:
        chosen = np.sort(np.random.default_rng(seed).choice(total, size=sample, replace=False))
    out: list[np.ndarray] = []
    start = 0
    for cluster, size in zip(clusters, sizes, strict=True):
        if size < 2:
            continue
        values = np.array([m.simhash for m in cluster.members if m.simhash is not None], dtype=np.uint64)
        if chosen is None:
            rows = np.arange(size)
        else:
            lo, hi = np.searchsorted(chosen, [start, start + size])
            rows = chosen[lo:hi] - start
        start += int(size)
        for block in range(0, rows.size, 256):
            part = rows[block : block + 256]
            d = popcount64(values[part][:, None] ^ values[None, :]).astype(np.int64)
            d[np.arange(part.size), part] = 65  # not itself
            out.append(d.min(axis=1))
    nearest = np.concatenate(out) if out else np.zeros(0, dtype=np.int64)
    return nearest


_HOST = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://(?:[^/?#@]*@)?(\[[^\]]*\]|[^/?#:]*)")


def host_of(uri: str | None) -> str:
    """The host of ``uri``, lowercased (a regex: urlsplit costs seconds over a million pages)."""
    if not uri:
        return "(no URI)"
    match = _HOST.match(uri)
    return (match.group(1).lower() or "(no host)") if match else "(no host)"


def rule_for(k: int | None = None, similarity: float | None = None, mode: str | None = None) -> Rule:
    """The shipped rule, with what the caller or the input says in place of its defaults
    (ValueError for a value the rule refuses)."""
    import dataclasses

    from ..decision import DEFAULT_RULE

    rule = DEFAULT_RULE
    if k is not None:
        rule = dataclasses.replace(rule, distance=k)
    if similarity is not None:
        rule = dataclasses.replace(rule, similarity=similarity)
    if mode is not None:
        rule = dataclasses.replace(rule, mode=mode)
    return rule


def group_clusters(pages: list[Page], rule: Rule) -> list[Cluster]:
    """Connected components of ``rule``'s graph over ``pages`` (in age order: the original is the
    first that no member replaced, see :attr:`Page.replaces`), each member's distance (and similarity,
    where both have sketches) to its original filled in. In verified mode pages with sketches are
    paired by the sketches, pages without by simhash within the rule's distance, as ``dedupe`` pairs
    them."""
    from ..index.tables.batch import cluster_groups, clusters
    from ..warc.dedupe import rule_pairs

    hashed = [p for p in pages if p.simhash is not None]
    if len(hashed) < 2:
        return []
    hashes = [int(p.simhash) for p in hashed]  # type: ignore[arg-type]
    pairs = rule_pairs(hashes, [p.sketch for p in hashed], rule)
    out = []
    for number, group in enumerate(cluster_groups(clusters(pairs=pairs, n=len(hashed)))):
        members = [hashed[int(i)] for i in group]
        replaced = {m.replaces for m in members if m.replaces}
        first = next((m for m in members if m.key not in replaced), members[0])
        members = [first] + [m for m in members if m is not first]
        for i, member in enumerate(members):
            assert member.simhash is not None and first.simhash is not None  # hashed pages only
            verdict = rule.compare_values(member.simhash, first.simhash, member.sketch, first.sketch)
            member.distance = verdict.distance
            if verdict.similarity is not None:
                member.similarity = verdict.similarity
            member.original = i == 0
        out.append(Cluster(number, members))
    return out
