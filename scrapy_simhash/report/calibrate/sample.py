"""Pairs for a person to judge: sampled across bands of Hamming distance, equal counts per band, seeded.

Near bands (distance <= :data:`NEAR`) come from every pair within it (:func:`find_all` over the
pages); far bands from every pair of a seeded sample of :data:`FAR_SAMPLE` pages (pairs that far
apart are too many to list). Each pair carries the weight it stands for (pairs in its band / pairs
sampled from the band), so the scores estimate precision and recall over all pairs, not over the
sample. Texts and similarity come from the WARC records: the main text as the fingerprint saw it,
and the estimated Jaccard of the two pages' MinHash sketches.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..model import Page
from ..textdiff import side_by_side
from ..texts import Text, fetch_records, text_of

if TYPE_CHECKING:
    from ...extract import Extractor

BANDS: tuple[tuple[int, int], ...] = ((0, 0), (1, 2), (3, 4), (5, 6), (7, 9), (10, 14), (15, 24))
NEAR = 6
"""Bands up to here are sampled from all pairs (find_all within NEAR); beyond, from a page sample."""
FAR_SAMPLE = 4000
POOL = 200_000
"""Pages the pairs are drawn from (a seeded sample beyond this, so find_all stays cheap)."""


@dataclass
class JudgePair:
    number: int
    a: Page
    b: Page
    distance: int
    band: str
    weight: float
    similarity: float | None = None
    left: str | None = None
    right: str | None = None
    reason: str | None = None


def band_name(band: tuple[int, int]) -> str:
    return str(band[0]) if band[0] == band[1] else f"{band[0]}-{band[1]}"


def _distances(values: np.ndarray, pairs: np.ndarray) -> np.ndarray:
    from ...index.tables.batch import popcount64

    return popcount64(values[pairs[:, 0]] ^ values[pairs[:, 1]]).astype(np.int64)


def _far_pairs(values: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, float]:
    """Every pair of a page sample (as positions in ``values``), and how many pairs each stands for."""
    from ...index.tables.batch import popcount64

    n = values.shape[0]
    chosen = np.sort(rng.choice(n, size=min(n, FAR_SAMPLE), replace=False))
    m = chosen.size
    blocks = []
    for start in range(0, m, 512):
        rows = np.arange(start, min(m, start + 512))
        d = popcount64(values[chosen[rows]][:, None] ^ values[chosen][None, :])
        i, j = np.nonzero((d > NEAR) & (d <= BANDS[-1][1]))
        keep = rows[i] < j
        blocks.append(np.stack([chosen[rows[i][keep]], chosen[j[keep]]], axis=1))
    pairs = np.concatenate(blocks) if blocks else np.zeros((0, 2), dtype=np.int64)
    scale = (n * (n - 1)) / max(1, m * (m - 1))
    return pairs, scale


def sample_pairs(pages: list[Page], count: int, *, seed: int = 0) -> tuple[list[JudgePair], list[str]]:
    """``count`` pairs, as equal a share per band as the pages allow; notes say where a band ran short."""
    from ...index import find_all

    notes: list[str] = []
    usable = [p for p in pages if p.simhash is not None and p.file and p.offset is not None]
    if len(usable) < 2:
        raise ValueError(
            "calibrate needs pages with a fingerprint and their WARC record (file and offset), and these "
            f"inputs give {len(usable) or 'none'}. Archives carry fingerprints only in simhash "
            "metadata records: run `scrapy-simhash tag ARCHIVES` first and give the archives with "
            "their `.simhash.warc.gz` sidecars, or give a dedupe report, or an index written by "
            "`tag/dedupe --index`"
        )
    rng = np.random.default_rng(seed)
    if len(usable) > POOL:
        notes.append(f"pairs drawn from a sample of {POOL:,} of the {len(usable):,} pages")
        usable = [usable[i] for i in np.sort(rng.choice(len(usable), size=POOL, replace=False))]
    values = np.array([p.simhash for p in usable], dtype=np.uint64)
    near = find_all(values, NEAR)
    near_d = _distances(values, near)
    far, scale = _far_pairs(values, rng)
    far_d = _distances(values, far)
    share, extra = divmod(count, len(BANDS))
    out: list[JudgePair] = []
    for index, band in enumerate(BANDS):
        pairs, dist, weight_scale = (near, near_d, 1.0) if band[1] <= NEAR else (far, far_d, scale)
        in_band = np.flatnonzero((dist >= band[0]) & (dist <= band[1]))
        want = share + (1 if index < extra else 0)
        take = rng.choice(in_band, size=min(want, in_band.size), replace=False) if in_band.size else in_band
        if take.size < want:
            notes.append(f"distance {band_name(band)}: {take.size} pair(s) found, {want} wanted")
        weight = in_band.size * weight_scale / take.size if take.size else 0.0
        for position in take:
            i, j = (int(x) for x in pairs[position])
            a, b = (usable[i], usable[j]) if i < j else (usable[j], usable[i])
            out.append(JudgePair(0, a, b, int(dist[position]), band_name(band), weight))
    order = rng.permutation(len(out))  # judged in a random order: no anchoring on the distance
    shuffled = [out[i] for i in order]
    for number, pair in enumerate(shuffled):
        pair.number = number
    return shuffled, notes


Where = tuple[str | None, int | None]


def other_extractors(pages: list[Page], extractor: str) -> list[str]:
    """A note when the input's fingerprints were made by another extractor than the one the texts and
    similarities are made with: the pairs are sampled by the input's distances, judged on ours."""
    others = sorted({p.extractor for p in pages if p.extractor and p.extractor != extractor})
    if not others:
        return []
    return [
        f"the input's fingerprints were made by {', '.join(others)}; the texts and similarities here by "
        f"{extractor}: pass --extractor with the input's to judge what its fingerprints saw"
    ]


def read_pair_pages(
    pairs: list[JudgePair], *, backend: str = "auto", extractor: Extractor | None = None
) -> tuple[dict[Where, Text], dict]:
    """The main text and the minhash-doc/1 sketch of every page of ``pairs``, from its WARC record,
    by ``extractor`` (default: the default extractor)."""
    from ...extract import DEFAULT_EXTRACTOR
    from ...page import fingerprint_page
    from ...warc.read.payload import html_page

    extractor = extractor or DEFAULT_EXTRACTOR
    records = fetch_records([(p.file, p.offset) for pair in pairs for p in (pair.a, pair.b)], backend=backend)
    sketches: dict[Where, object] = {}
    texts: dict[Where, Text] = {}
    for where, found in records.items():
        if isinstance(found, Text):
            texts[where] = found
            continue
        texts[where] = text_of(found, extractor)
        page = html_page(found)
        if page is not None and not page.too_large:
            fingerprint = fingerprint_page(page.body, page.url, page.encoding, extractor=extractor)
            sketch = fingerprint.minhash
            if sketch is not None:
                sketches[where] = sketch
    return texts, sketches


def add_similarity(pairs: list[JudgePair], sketches: dict) -> None:
    """Each pair's estimated Jaccard similarity (``MinHash.jaccard``), where both pages have a sketch."""
    for pair in pairs:
        sa, sb = sketches.get((pair.a.file, pair.a.offset)), sketches.get((pair.b.file, pair.b.offset))
        if sa is not None and sb is not None:
            pair.similarity = round(float(sa.jaccard(sb)), 4)


def add_texts(
    pairs: list[JudgePair],
    *,
    backend: str = "auto",
    read: tuple | None = None,
    extractor: Extractor | None = None,
) -> None:
    """Each pair's two main texts (diffed) and MinHash similarity, from the WARC records, by
    ``extractor`` (default: the default extractor)."""
    texts, sketches = read or read_pair_pages(pairs, backend=backend, extractor=extractor)
    add_similarity(pairs, sketches)
    for pair in pairs:
        ta, tb = texts[(pair.a.file, pair.a.offset)], texts[(pair.b.file, pair.b.offset)]
        if ta.text is None or tb.text is None:
            pair.reason = "; ".join(
                f"{p.uri or p.key}: {t.reason}" for t, p in ((ta, pair.a), (tb, pair.b)) if t.text is None
            )
        else:
            pair.left, pair.right = side_by_side(ta.text, tb.text)


# -- by similarity -----------------------------------------------------------------------------------

SIMILARITY_BANDS: tuple[tuple[float, float], ...] = (
    (0.0, 0.2), (0.2, 0.4), (0.4, 0.6), (0.6, 0.7), (0.7, 0.8), (0.8, 0.9), (0.9, 1.0),
)  # fmt: skip
CANDIDATES_PER_PAIR = 4
"""``--by similarity`` sketches this many distance-sampled candidates per pair wanted."""


def similarity_band(value: float) -> int:
    """The band of ``value``: [low, high), the last band closed (1.0 is in it)."""
    for index, (_low, high) in enumerate(SIMILARITY_BANDS[:-1]):
        if value < high:
            return index
    return len(SIMILARITY_BANDS) - 1


def restratify(
    candidates: list[JudgePair], count: int, rng: np.random.Generator
) -> tuple[list[JudgePair], list[str]]:
    """Equal counts per similarity band from distance-sampled candidates (two-phase sampling).

    A candidate chosen with probability n/N within its similarity band stands for N/n times what it
    stood for, so each weight stays an unbiased count of the collection's pairs.
    """
    notes: list[str] = []
    by_band: dict[int, list[JudgePair]] = {}
    unsketched = 0
    for pair in candidates:
        if pair.similarity is None:
            unsketched += 1
            continue
        by_band.setdefault(similarity_band(pair.similarity), []).append(pair)
    if unsketched:
        notes.append(f"{unsketched} candidate pair(s) without a similarity (no sketch) left out")
    share, extra = divmod(count, len(SIMILARITY_BANDS))
    out: list[JudgePair] = []
    for index, (low, high) in enumerate(SIMILARITY_BANDS):
        found = by_band.get(index, [])
        want = share + (1 if index < extra else 0)
        take = [found[i] for i in sorted(rng.choice(len(found), size=min(want, len(found)), replace=False))]
        name = f"similarity {low:.1f}-{high:.1f}"
        if len(take) < want:
            notes.append(f"{name}: {len(take)} pair(s) found, {want} wanted")
        for pair in take:
            pair.weight *= len(found) / len(take)
            pair.band = f"{pair.band} / {name}"
            out.append(pair)
    order = rng.permutation(len(out))
    shuffled = [out[i] for i in order]
    for number, pair in enumerate(shuffled):
        pair.number = number
    return shuffled, notes


def sample_by_similarity(
    pages: list[Page],
    count: int,
    *,
    seed: int = 0,
    backend: str = "auto",
    extractor: Extractor | None = None,
) -> tuple[list[JudgePair], list[str]]:
    """``count`` pairs, equal counts per similarity band, with their texts and similarity (by
    ``extractor``, default: the default extractor)."""
    candidates, notes = sample_pairs(pages, count * CANDIDATES_PER_PAIR, seed=seed)
    texts, sketches = read_pair_pages(candidates, backend=backend, extractor=extractor)
    add_similarity(candidates, sketches)
    pairs, more = restratify(candidates, count, np.random.default_rng(seed + 1))
    add_texts(pairs, read=(texts, sketches))
    return pairs, notes + more
